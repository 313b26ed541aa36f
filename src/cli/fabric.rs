//! What every device-facing command shares: `--topology`, `--state`,
//! `--init` and `--wait`; opening the managed fabric for a change (the
//! state lock, then crash recovery) or for reading; progress bars.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use vclos::controller::{Phase, Progress};
use vclos::jobs::{self, Fabric, Pending};
use vclos::names::JobId;
use vclos::state::store;
use vclos::topology;

#[derive(Debug, Clone, Args)]
pub struct FabricArgs {
    /// Topology file (device endpoints and credential references).
    #[arg(long)]
    pub topology: PathBuf,
    /// State directory (`DIR/state.json`, `DIR/journal.json`, `DIR/lock`);
    /// it must exist unless `--init` is given.
    #[arg(long, value_name = "DIR")]
    pub state: PathBuf,
    /// Create the state directory (no job held) if it does not exist yet; a
    /// directory holding anything else is refused.
    #[arg(long)]
    pub init: bool,
    /// Seconds to wait for the state lock while another command changes
    /// this fabric (then fail, naming the holder; 0: do not wait).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub wait: u64,
}

/// How the engine may shape a job (`--round-up`, `--partial-servers`):
/// shared by `job submit`, `plan` and `replay`.
#[derive(Debug, Clone, Copy, Args)]
pub struct SlicingArgs {
    /// vclos / ocs-vclos: when no slice of the job's size is free now,
    /// take up to this many more whole servers if that has one, holding
    /// their GPUs idle (reported as reserved idle GPUs); 0 (default) waits
    /// or refuses instead.
    #[arg(long, value_name = "SERVERS", default_value_t = 0)]
    pub round_up: u32,
    /// A job beyond one server takes exactly its GPUs, free GPUs on partly
    /// used servers first, instead of whole idle servers; each GPU still
    /// gets its own server port and uplink (isolation unchanged). Policies
    /// that always use partly used servers (titan, hived-like,
    /// tiresias-like) refuse it.
    #[arg(long)]
    pub partial_servers: bool,
    /// vclos / ocs-vclos: when no isolated slice exists, share links with
    /// jobs whose communication interleaves with this one's (Cassini) and
    /// give it a time shift; every job placed so opts in to being shared.
    /// titan (`replay`): when no candidate fits beside the held peaks,
    /// time-share links the same way (docs/titan.md 6.8). Off by default:
    /// isolation only.
    #[arg(long, value_enum, value_name = "MODE")]
    pub sharing: Option<SharingArg>,
    /// With `--sharing`: the lowest compatibility score (Cassini's Eq. 4.2,
    /// at most 1) a shared placement may have.
    #[arg(long, value_name = "SCORE", default_value_t = vclos::placement::shared::DEFAULT_MIN_SCORE,
          value_parser = min_score, requires = "sharing")]
    pub min_score: f64,
    /// With `--sharing` (`job submit`, `plan`): the job's iteration time,
    /// ms, for its Up-Down profile (default 250; `replay` reads each job's
    /// from the trace).
    #[arg(long, value_name = "MS", requires = "sharing",
          value_parser = clap::value_parser!(u32).range(1..=3_600_000))]
    pub iteration_ms: Option<u32>,
    /// With `--sharing` (`job submit`, `plan`): the share of the iteration
    /// the job communicates, 0 to 1 (default 0.3).
    #[arg(long, value_name = "SHARE", requires = "sharing", value_parser = share)]
    pub comm_fraction: Option<f64>,
}

fn share(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err("a share from 0 to 1".into());
    }
    Ok(v)
}

/// Sharing modes (`--sharing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SharingArg {
    /// Cassini (seed 001, Chapter 4): compatible jobs share links, each
    /// with a time shift.
    Cassini,
}

/// `--policy` of a command that places on a real fabric (`job submit`,
/// `plan`): vclos, ocs-vclos or titan ([`vclos::placement::fabric_placer`]).
pub fn fabric_policy(s: &str) -> Result<vclos::placement::Policy, String> {
    let p: vclos::placement::Policy = s.parse().map_err(|e| format!("{e}"))?;
    if !p.places_on_fabric() {
        return Err(vclos::placement::PlacementError::NotOnFabric(p).to_string());
    }
    Ok(p)
}

fn min_score(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if !v.is_finite() || v > 1.0 {
        return Err("a score is a finite number of at most 1".into());
    }
    Ok(v)
}

impl SlicingArgs {
    pub fn options(self) -> vclos::placement::SliceOptions {
        vclos::placement::SliceOptions {
            round_up: self.round_up,
            partial_servers: self.partial_servers,
            sharing: self
                .sharing
                .map(|SharingArg::Cassini| vclos::placement::SharingMode {
                    min_score: self.min_score,
                    iteration_ms: self.iteration_ms,
                    comm_fraction: self.comm_fraction,
                }),
        }
    }
}

impl FabricArgs {
    /// Load without touching any device or taking the state lock.
    pub fn load(&self) -> Result<Fabric> {
        let topo = Arc::new(topology::load(&self.topology)?);
        if self.init && store::init(&self.state, &topo.name)? {
            eprintln!("created state directory {}", self.state.display());
        }
        let mut f = Fabric::load(topo, &self.state)?;
        f.wait = Duration::from_secs(self.wait);
        Ok(f)
    }

    /// Load for a change: take the state lock for `operation` (waiting up to
    /// `--wait`), then settle a journal left by an interrupted run (printed).
    /// The lock is held until the fabric is dropped.
    pub async fn open(&self, operation: &str, job: Option<&JobId>) -> Result<Fabric> {
        settle(self.load()?, operation, job).await
    }
}

/// Take `f`'s writer lock for `operation`, then settle a journal left by an
/// interrupted run (printed). The lock is held until the fabric is dropped.
pub async fn settle(mut f: Fabric, operation: &str, job: Option<&JobId>) -> Result<Fabric> {
    f.lock(operation, job).await?;
    if let Some(r) = f
        .recover(&Bars::new())
        .await
        .context("recovering an interrupted operation")?
    {
        eprintln!("{r}");
        if let Some(rb) = &r.rollback {
            eprint!("{rb}");
        }
    }
    Ok(f)
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

/// One progress bar per phase / stage on a terminal; nothing otherwise.
#[derive(Debug)]
pub struct Bars {
    multi: MultiProgress,
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    pub fn new() -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Bars {
            multi: MultiProgress::with_draw_target(target),
            current: Mutex::new(None),
        }
    }
}

impl Progress for Bars {
    fn phase_started(&self, phase: Phase, stage: Option<u32>, devices: usize) {
        let pb = self.multi.add(ProgressBar::new(devices as u64));
        if let Ok(style) = ProgressStyle::with_template("{msg:>20} [{bar:30}] {pos}/{len}") {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_message(match stage {
            Some(s) => format!("{phase} stage {s}"),
            None => phase.to_string(),
        });
        if let Ok(mut c) = self.current.lock() {
            *c = Some(pb);
        }
    }

    fn device_done(&self, _phase: Phase, _device: &str, _ok: bool) {
        if let Ok(c) = self.current.lock() {
            if let Some(pb) = c.as_ref() {
                pb.inc(1);
            }
        }
    }

    fn phase_done(&self, _phase: Phase, _stage: Option<u32>, ok: bool) {
        if let Ok(mut c) = self.current.lock() {
            if let Some(pb) = c.take() {
                let m = pb.message();
                pb.finish_with_message(if ok { m } else { format!("{m} FAILED") });
            }
        }
    }
}

/// Tell a read-only command's user that a writer is at work in `dir`
/// (`what` may change when it finishes) or that a journal waits for
/// recovery (on stderr, so output stays parseable).
pub fn warn_pending(dir: &Path, what: &str) -> Result<()> {
    match jobs::pending(dir)? {
        Some(p @ Pending::InFlight(_)) => {
            eprintln!("note: {p}; {what} may change when it finishes");
        }
        Some(p @ Pending::Interrupted(_)) => {
            eprintln!("warning: {p} (the next `vclos reconcile` or change settles it)")
        }
        None => {}
    }
    Ok(())
}
