//! `vclos tdm apply`: run a TDM schedule on the topology's OCS (issue 19,
//! item 4; docs/tdm.md, "Applying a schedule").
//!
//! Everything that can be refused (the files, the schedule against the
//! topology, the idle-link rule at every barrier) is refused before any
//! device is contacted. `--dry-run` then only reads the OCS tables and
//! prints the TL1 commands each step would send. Barrier signals in
//! `--mode barrier` are stdin lines, each the number of the stage the hosts
//! have finished. Events go to `--events` as JSON lines.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use tokio::sync::mpsc;
use vclos::controller::TopologyDrivers;
use vclos::tdm::run::{self, BarrierSignal, Mode, RunOptions, TdmEvent};
use vclos::tdm::transition::{self, OcsChange, Validated};
use vclos::topology;

use super::fabric::runtime;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Each stage lasts its `time_s`.
    Timed,
    /// Each stage lasts until its number is read on stdin (one line per
    /// barrier: the stage the hosts have finished).
    Barrier,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Topology file: the OCS devices and their management endpoints.
    #[arg(long)]
    topology: PathBuf,
    /// Schedule file (JSON, as `vclos tdm plan` writes it).
    #[arg(long)]
    schedule: PathBuf,
    /// Rounds to run (every stage once per round).
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    #[arg(long, value_enum, default_value_t = ModeArg::Timed)]
    mode: ModeArg,
    /// Read the OCS tables and print, per step and OCS, the TL1 commands
    /// that would be sent; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Write events as JSON lines to FILE (`-`: stdout, instead of text).
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Bound on every device call, seconds.
    #[arg(long = "call-timeout-secs", default_value_t = 30)]
    call_timeout: u64,
    /// Bound on waiting for a barrier signal, seconds (default: none).
    #[arg(long = "barrier-timeout-secs")]
    barrier_timeout: Option<u64>,
    /// Switching delay waited after connecting, milliseconds (default: the
    /// schedule's `switch_ms`).
    #[arg(long = "switch-delay-ms")]
    switch_delay_ms: Option<u64>,
}

pub fn run(a: ApplyArgs) -> Result<ExitCode> {
    let topo = Arc::new(topology::load(&a.topology)?);
    let schedule = transition::load(&a.schedule)?;
    let v = transition::validate(&schedule, &topo)
        .with_context(|| format!("{}", a.schedule.display()))?;
    let mut opts = RunOptions::new(&schedule);
    opts.rounds = a.rounds;
    opts.call_timeout = Duration::from_secs(a.call_timeout);
    opts.barrier_timeout = a.barrier_timeout.map(Duration::from_secs);
    if let Some(ms) = a.switch_delay_ms {
        opts.switch_delay = Duration::from_millis(ms);
    }
    opts.mode = match a.mode {
        ModeArg::Timed => Mode::Timed,
        ModeArg::Barrier => Mode::Barrier,
    };
    let factory = TopologyDrivers::new(topo);
    let rt = runtime()?;
    if a.dry_run {
        let current = rt.block_on(run::current_tables(&v, &factory, opts.call_timeout))?;
        print!("{}", dry_run_text(&v, &run::install_changes(&v, &current)));
        return Ok(ExitCode::SUCCESS);
    }
    let mut sink = Sink::open(a.events.as_ref())?;
    let mut on_event = |e: &TdmEvent| sink.event(e);
    rt.block_on(async {
        let (tx, mut rx) = mpsc::channel(16);
        if opts.mode == Mode::Barrier {
            std::thread::spawn(move || stdin_barriers(tx));
        }
        run::run(&schedule, &v, &factory, &opts, Some(&mut rx), &mut on_event).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Forward stdin lines (stage numbers) as barrier signals; a bad line ends
/// the signals (the run then stops with "barrier signals stopped").
fn stdin_barriers(tx: mpsc::Sender<BarrierSignal>) {
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let Ok(line) = line else { return };
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let Ok(stage) = t.parse::<usize>() else {
            let shown: String = t.chars().take(40).collect();
            eprintln!(
                "error: stdin line {}: expected a stage number, got {shown:?}",
                n + 1
            );
            return;
        };
        if tx.blocking_send(BarrierSignal { stage }).is_err() {
            return;
        }
    }
}

/// Where events go: JSON lines to a file or stdout, or text on stdout.
enum Sink {
    Json(Box<dyn Write + Send>),
    Text,
}

impl Sink {
    fn open(events: Option<&PathBuf>) -> Result<Self> {
        Ok(match events {
            None => Sink::Text,
            Some(p) if p.as_os_str() == "-" => Sink::Json(Box::new(std::io::stdout())),
            Some(p) => Sink::Json(Box::new(
                std::fs::File::create(p)
                    .with_context(|| format!("cannot create {}", p.display()))?,
            )),
        })
    }

    fn event(&mut self, e: &TdmEvent) {
        match self {
            Sink::Json(w) => {
                // An event that cannot be written must not stop the OCS
                // mid-schedule; the run's own errors still surface.
                if let Ok(line) = serde_json::to_string(e) {
                    let _ = writeln!(w, "{line}");
                    let _ = w.flush();
                }
            }
            Sink::Text => println!("{}", event_text(e)),
        }
    }
}

fn event_text(e: &TdmEvent) -> String {
    let ports = |ocs: &[run::OcsReport]| -> usize { ocs.iter().map(|o| o.ports_touched).sum() };
    match e {
        TdmEvent::Installed { stage, ocs } => {
            format!("installed stage {stage} ({} ports changed)", ports(ocs))
        }
        TdmEvent::StageBegins { round, stage, jobs } => {
            format!(
                "round {round}: stage {stage} begins (communicating: {})",
                jobs.join(", ")
            )
        }
        TdmEvent::Barrier { round, from, to } => {
            format!("round {round}: barrier {from}->{to}")
        }
        TdmEvent::Switched {
            from,
            to,
            ocs,
            elapsed_ms,
            ..
        } => format!(
            "switched {from}->{to}: {} ports changed in {elapsed_ms:.1} ms",
            ports(ocs)
        ),
        TdmEvent::Finished { rounds } => format!("finished after {rounds} round(s)"),
    }
}

fn step_text(
    out: &mut String,
    title: &str,
    changes: &std::collections::BTreeMap<String, OcsChange>,
) {
    out.push_str(title);
    out.push('\n');
    for (ocs, c) in changes {
        out.push_str(&format!("  {ocs}:\n"));
        let cmds = c.tl1_commands();
        if cmds.is_empty() {
            out.push_str("    (no change)\n");
        }
        for cmd in cmds {
            out.push_str(&format!("    {cmd}\n"));
        }
    }
}

/// The dry run: install, then every barrier of one round.
fn dry_run_text(v: &Validated, install: &std::collections::BTreeMap<String, OcsChange>) -> String {
    let mut out = String::new();
    step_text(
        &mut out,
        "install stage 0 (from the current tables):",
        install,
    );
    for b in &v.barriers {
        let all = v
            .ocs
            .keys()
            .map(|o| (o.clone(), b.changes.get(o).cloned().unwrap_or_default()))
            .collect();
        step_text(&mut out, &format!("barrier {}->{}:", b.from, b.to), &all);
    }
    out
}
