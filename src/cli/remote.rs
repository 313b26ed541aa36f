//! `--server URL`: a command talking to a running `vclos serve` instead of
//! the state directory (`vclos::client`), and what the local and remote
//! forms of `job` and `status` share.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use vclos::client::{self, Client, ClientError};
use vclos::decision::Decision;

use super::fabric::FabricArgs;

/// How to reach the service.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Talk to a running `vclos serve` at URL (`http://host:port` or
    /// `https://...`) instead of the state directory. Several URLs,
    /// comma-separated: the instances of one fabric under leader election
    /// (docs/ha.md); requests go to the leader.
    #[arg(long, value_name = "URL,...", value_delimiter = ',')]
    pub server: Vec<String>,
    /// File holding the service's bearer token (trimmed; never printed).
    #[arg(long, value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA that signed an https service's certificate: only
    /// it is trusted (default: the system's trust store).
    #[arg(long, value_name = "FILE", requires = "server")]
    pub ca_file: Option<PathBuf>,
    /// Seconds to wait for the connection to the service.
    #[arg(long, value_name = "SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub connect_timeout: u64,
    /// Seconds one request may take in all (above the service's own
    /// request timeout, 120 s by default).
    #[arg(long, value_name = "SECONDS", default_value_t = 150,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
}

impl ServerArgs {
    /// The client of `--server`, or `None` without it.
    pub fn client(&self) -> Result<Option<Client>> {
        let Some((url, others)) = self.server.split_first() else {
            return Ok(None);
        };
        let options = client::Options {
            connect_timeout: Duration::from_secs(self.connect_timeout),
            timeout: Duration::from_secs(self.timeout),
            ..client::Options::default()
        };
        let client = Client::from_files(
            url,
            self.token_file.as_deref(),
            self.ca_file.as_deref(),
            options,
        )?;
        Ok(Some(client.with_servers(others)?))
    }
}

/// The state directory (`--topology`, `--state`, ...) or a service
/// (`--server`): one or the other.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Topology file (device endpoints and credential references).
    #[arg(long, required_unless_present = "server",
          conflicts_with_all = ["server", "token_file", "ca_file"])]
    pub topology: Option<PathBuf>,
    /// State directory (`DIR/state.json`, `DIR/journal.json`, `DIR/lock`);
    /// it must exist unless `--init` is given.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "server",
        conflicts_with = "server"
    )]
    pub state: Option<PathBuf>,
    /// Create the state directory (no job held) if it does not exist yet; a
    /// directory holding anything else is refused.
    #[arg(long, conflicts_with = "server")]
    pub init: bool,
    /// Seconds to wait for the state lock while another command changes
    /// this fabric (then fail, naming the holder; 0: do not wait).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60,
        conflicts_with = "server"
    )]
    pub wait: u64,
    #[command(flatten)]
    pub service: ServerArgs,
}

/// Where a command works.
#[derive(Debug)]
pub enum Target {
    Local(FabricArgs),
    Remote(Client),
}

impl TargetArgs {
    pub fn target(&self) -> Result<Target> {
        if let Some(c) = self.service.client()? {
            return Ok(Target::Remote(c));
        }
        match (&self.topology, &self.state) {
            (Some(topology), Some(state)) => Ok(Target::Local(FabricArgs {
                topology: topology.clone(),
                state: state.clone(),
                init: self.init,
                wait: self.wait,
            })),
            // clap requires both without --server.
            _ => bail!("give --topology and --state, or --server"),
        }
    }
}

/// A client error for the CLI's edge: a 502's transaction report is
/// printed first (what each device did), then the error itself is
/// returned to be printed as `error: ...` (status, title, the server's
/// detail, the field at fault).
pub fn failed(e: ClientError) -> anyhow::Error {
    if let Some(report) = e.problem().and_then(|p| p.report.as_ref()) {
        eprint!("{report}");
    }
    anyhow::Error::new(e)
}

/// One line per job, as `vclos job list` prints them.
pub fn job_line(d: &Decision) -> String {
    let reserved = match d.reserved_idle_gpus() {
        0 => String::new(),
        r => format!("  ({r} reserved_idle_gpus)"),
    };
    let shift = d.sharing.as_ref().map_or(String::new(), |s| {
        format!(
            "  time shift {} ms of {} ms, {} shared link(s)",
            s.time_shift_ms,
            s.iteration_ms(),
            s.links.len()
        )
    });
    format!(
        "{:<20} {:>5} GPUs  {:?}  leaves {}  spines {}  cross-connects {}{reserved}{shift}",
        d.job.to_string(),
        d.gpus.len(),
        d.stage,
        d.vclos.leaves.len(),
        d.vclos.spines.len(),
        d.vclos.cross_connects.len()
    )
}

/// The servers of a decision, in order, each once.
pub fn servers(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for g in &d.gpus {
        let s = g.server.to_string();
        if out.last() != Some(&s) && !out.contains(&s) {
            out.push(s);
        }
    }
    out
}
