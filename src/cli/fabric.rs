//! What every device-facing command shares: `--topology` and `--state`,
//! opening the managed fabric (with crash recovery), progress bars.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use vclos::controller::{Phase, Progress};
use vclos::jobs::Fabric;
use vclos::topology;

#[derive(Debug, Clone, Args)]
pub struct FabricArgs {
    /// Topology file (device endpoints and credential references).
    #[arg(long)]
    pub topology: PathBuf,
    /// State directory (`DIR/state.json`, `DIR/journal.json`).
    #[arg(long, value_name = "DIR")]
    pub state: PathBuf,
}

impl FabricArgs {
    /// Load without touching any device.
    pub fn load(&self) -> Result<Fabric> {
        let topo = Arc::new(topology::load(&self.topology)?);
        Ok(Fabric::load(topo, &self.state)?)
    }

    /// Load and settle a journal left by an interrupted run (printed).
    pub async fn open(&self) -> Result<Fabric> {
        let mut f = self.load()?;
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
