//! Command-line interface (clap). Each subcommand module parses its flags,
//! calls the library and prints; none holds domain logic.
//!
//! Conventions shared by every command (docs/cli-conventions.md):
//!
//! * **Exit status**: 0 on success, 1 on an error (printed on stderr as
//!   `error: ...`), 2 on a usage error (clap's own convention).
//! * **Broken pipes**: a reader that closes early (`vclos verify | head -1`)
//!   ends the command the way it ends coreutils: killed by `SIGPIPE`, which
//!   a shell reports as status 141 (128 + 13), with nothing on stderr.
//!   POSIX makes `SIGPIPE`'s default action "terminate the process"
//!   (POSIX.1-2017, `<signal.h>`; `write()`: "a SIGPIPE signal shall also be
//!   sent to the thread" on a pipe with no reader). The Rust runtime sets
//!   it to ignored before `main`, so writes fail with `EPIPE` and `println!`
//!   panics ("failed printing to stdout"); `sigpipe::reset()` (the `sigpipe`
//!   crate, docs.rs/sigpipe) puts the default action back first thing.
//!   Sockets are unaffected as long as they are written with `send`: the
//!   standard library's `TcpStream::write` (under tokio's and mio's) passes
//!   `MSG_NOSIGNAL` (Linux `send(2)`: "don't generate a SIGPIPE signal if
//!   the peer on a stream-oriented socket has closed the connection"), so a
//!   vanished SSH/Telnet/NETCONF peer is still an `EPIPE` error. Vectored
//!   writes are `writev(2)`, which has no such flag and would kill the
//!   process: clippy.toml forbids them (`disallowed-methods`).

mod apply;
mod demo;
mod device;
mod emu;
mod fabric;
mod job;
mod plan;
mod remote;
mod replay;
mod serve;
mod slurm;
mod status;
mod sweep;
mod tdm;
mod tdm_apply;
mod topology;
mod trace;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "vclos",
    version,
    about = "Control plane for isolated GPU-cluster fabrics (vClos / OCS-vClos)"
)]
struct Cli {
    /// Log filter for diagnostics on stderr (e.g. `info`, `vclos=debug`); also RUST_LOG.
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate, inspect and generate topology files.
    #[command(subcommand)]
    Topology(topology::TopologyCmd),
    /// The emulated fabric: every device of a topology on loopback.
    #[command(subcommand)]
    Emu(emu::EmuCmd),
    /// The main job on the embedded default fabric, end to end.
    Demo(demo::DemoArgs),
    /// Make and inspect job traces.
    #[command(subcommand)]
    Trace(trace::TraceCmd),
    /// Replay a job trace through a placement policy and report JWT/JCT/blocking.
    Replay(replay::ReplayArgs),
    /// Replay a grid (policies x loads x queues x seeds) in parallel; CSV and SVG charts.
    Sweep(sweep::SweepArgs),
    /// Dry run: what admitting or releasing a job changes on each device.
    Plan(plan::PlanArgs),
    /// Plan and apply a job change on the devices as one transaction.
    Apply(apply::ApplyArgs),
    /// Submit, release, list and show jobs (locally or `--server URL`).
    #[command(subcommand)]
    Job(job::JobCmd),
    /// Talk to one device through its driver.
    #[command(subcommand)]
    Device(device::DeviceCmd),
    /// Jobs, device reachability and drift, pending journal.
    Status(status::StatusArgs),
    /// Compare devices with the state's intent; `--fix` pushes the intent.
    Reconcile(status::ReconcileArgs),
    /// Verify every held job against the devices' running configurations.
    Verify(verify::VerifyArgs),
    /// The control plane as an HTTP service for schedulers (owns the state).
    Serve(serve::ServeArgs),
    /// Slurm's PrologSlurmctld / EpilogSlurmctld: admit and release a job
    /// through `vclos serve`.
    #[command(subcommand)]
    Slurm(slurm::SlurmCmd),
    /// TDM schedules of OCS circuits for pod groups (docs/tdm.md).
    #[command(subcommand)]
    Tdm(tdm::TdmCmd),
}

pub fn main() -> ExitCode {
    // Before anything can print (clap's `--help` included).
    sigpipe::reset();
    let cli = Cli::parse();
    init_tracing(cli.log.as_deref());
    let result = match cli.command {
        Command::Topology(cmd) => topology::run(cmd),
        Command::Emu(cmd) => emu::run(cmd),
        Command::Demo(args) => demo::run(args),
        Command::Trace(cmd) => trace::run(cmd),
        Command::Replay(args) => replay::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Apply(args) => apply::run(args),
        Command::Job(cmd) => job::run(cmd),
        Command::Device(cmd) => device::run(cmd),
        Command::Status(args) => status::status(args),
        Command::Reconcile(args) => status::reconcile(args),
        Command::Verify(args) => verify::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Slurm(cmd) => slurm::run(cmd),
        Command::Tdm(cmd) => tdm::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // Messages quote input files: no terminal escapes from them.
            let said = describe(&e);
            eprintln!("error: {}", vclos_core::names::escape_controls(&said, true));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-separated, each said once: many typed
/// errors already carry their cause in their own message.
fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn init_tracing(filter: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = filter
        .map(EnvFilter::new)
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
