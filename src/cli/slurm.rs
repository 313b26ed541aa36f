//! `vclos slurm prolog|epilog`: Slurm's `PrologSlurmctld` and
//! `EpilogSlurmctld` (the environment, hostlists and node names are
//! `vclos::slurm`; the requests `vclos::client`).
//!
//! Contract (a wrapper script in slurm.conf calls exactly this):
//! `vclos slurm prolog --server URL --token-file FILE [--ca-file FILE]
//! [--node-map FILE] [--job-prefix slurm-]`, and the same for `epilog`.
//! Each call prints one line on stderr (slurmctld logs it) and exits 0
//! when the job is admitted / released (or already was), 1 otherwise: a
//! failed PrologSlurmctld gets the job requeued, a failed EpilogSlurmctld
//! is only logged (Slurm's Prolog and Epilog Guide).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use vclos::placement::given::Named;

use anyhow::Result;
use clap::{ArgGroup, Args, Subcommand};
use vclos::client::{ClientError, Submitted};
use vclos::names::JobId;
use vclos::slurm::{self, NodeMap};

use super::remote::{servers, ServerArgs};

#[derive(Debug, Subcommand)]
pub enum SlurmCmd {
    /// PrologSlurmctld: admit job $SLURM_JOB_ID on the servers of
    /// $SLURM_JOB_NODELIST through `vclos serve`; exit 0 when admitted or
    /// already held with the same servers, 1 when refused (Slurm requeues).
    Prolog(SlurmArgs),
    /// EpilogSlurmctld: release job $SLURM_JOB_ID through `vclos serve`;
    /// exit 0 when released or not held (already released).
    Epilog(SlurmArgs),
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("service-url").args(["server"]).required(true)))]
#[command(group(ArgGroup::new("service-token").args(["token_file"]).required(true)))]
pub struct SlurmArgs {
    #[command(flatten)]
    service: ServerArgs,
    /// File of `slurm-node server` lines (`#` comments) naming each Slurm
    /// node's topology server; default: the same name (as `vclos topology
    /// export --format slurm` names nodes). A node missing from it is an
    /// error.
    #[arg(long, value_name = "FILE")]
    node_map: Option<PathBuf>,
    /// Prefix of the vclos job id: `<PREFIX><SLURM_JOB_ID>`.
    #[arg(long, value_name = "PREFIX", default_value = "slurm-")]
    job_prefix: String,
}

/// Shown servers in a log line, at most.
const SHOWN: usize = 16;

pub fn run(cmd: SlurmCmd) -> Result<ExitCode> {
    let (what, a) = match &cmd {
        SlurmCmd::Prolog(a) => ("prolog", a),
        SlurmCmd::Epilog(a) => ("epilog", a),
    };
    let env = |k: &str| std::env::var(k).ok();
    let job = match slurm::job_id(&a.job_prefix, env("SLURM_JOB_ID").as_deref()) {
        Ok(j) => j,
        Err(e) => return Ok(log(what, "?", &format!("ERROR: {e}"), false)),
    };
    let outcome = match cmd {
        SlurmCmd::Prolog(ref a) => prolog(a, &job, env("SLURM_JOB_NODELIST").as_deref()),
        SlurmCmd::Epilog(ref a) => epilog(a, &job),
    };
    Ok(match outcome {
        Ok(line) => log(what, job.as_str(), &line, true),
        Err(line) => log(what, job.as_str(), &line, false),
    })
}

/// The one line of a call, on stderr; its exit status.
fn log(what: &str, job: &str, line: &str, ok: bool) -> ExitCode {
    eprintln!("vclos slurm {what}: job {job}: {line}");
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn prolog(a: &SlurmArgs, job: &JobId, nodelist: Option<&str>) -> Result<String, String> {
    let map = match &a.node_map {
        Some(p) => NodeMap::read(p).map_err(|e| format!("ERROR: --node-map {e}"))?,
        None => NodeMap::identity(),
    };
    let servers_asked = slurm::job_servers(nodelist, &map).map_err(|e| format!("ERROR: {e}"))?;
    let on = shown(&servers_asked);
    let client = a
        .service
        .client()
        .map_err(|e| format!("ERROR: {e:#}"))?
        .ok_or_else(|| "ERROR: --server is required".to_string())?;
    let started = Instant::now();
    let named = Named::Servers(servers_asked.clone());
    match client.submit(job, None, Some(&named), false) {
        Ok(Submitted::Committed(done)) => Ok(format!(
            "on {on}: admitted ({} GPUs, {} leaves, {} spines) in {} ms",
            done.decision.gpus.len(),
            done.decision.vclos.leaves.len(),
            done.decision.vclos.spines.len(),
            started.elapsed().as_millis()
        )),
        Ok(Submitted::Existing(held)) => Ok(format!(
            "on {on}: already held with this request ({} GPUs on {}); nothing changed",
            held.decision.gpus.len(),
            shown(&servers(&held.decision))
        )),
        Ok(Submitted::DryRun(_)) => Err(format!("on {on}: ERROR: the service answered a dry run")),
        // The service's answer (409 no slice, 422 unknown server, ...), or
        // no answer at all.
        Err(e) if e.problem().is_some() => Err(format!("on {on}: REFUSED: {}", reason(&e))),
        Err(e) => Err(format!("on {on}: ERROR: {}", reason(&e))),
    }
}

fn epilog(a: &SlurmArgs, job: &JobId) -> Result<String, String> {
    let client = a
        .service
        .client()
        .map_err(|e| format!("ERROR: {e:#}"))?
        .ok_or_else(|| "ERROR: --server is required".to_string())?;
    let started = Instant::now();
    match client.release(job) {
        Ok(done) => Ok(format!(
            "released ({} GPUs) in {} ms",
            done.decision.gpus.len(),
            started.elapsed().as_millis()
        )),
        Err(e) if e.status() == Some(404) => Ok("not held (already released); done".into()),
        Err(e) => Err(format!("ERROR: {}", reason(&e))),
    }
}

/// What went wrong, on one line (the server's text is already cleaned).
fn reason(e: &ClientError) -> String {
    e.to_string().replace(['\n', '\r'], " ")
}

/// `a,b,c` or the first [`SHOWN`] and the count.
fn shown(servers: &[String]) -> String {
    if servers.len() <= SHOWN {
        servers.join(",")
    } else {
        format!(
            "{},... ({} servers)",
            servers[..SHOWN].join(","),
            servers.len()
        )
    }
}
