//! Applying a TDM schedule to the OCS (issue 19, item 4): install stage 0,
//! then at every stage barrier switch only the ports that change, wait out
//! the switching delay, read the patch tables back, and tell the hosts the
//! next stage begins.
//!
//! This is seed 003's time-division multiplexing (Section II.C: jobs split in
//! groups; one group communicates over circuits tailored to it while the
//! other computes; the OXC topology is reconfigured after each stage's
//! communication) and 004's multi-stage form, with the MEMS OCS's 50 ms
//! switching time (`Schedule::switch_ms`).
//!
//! **Devices.** Every OCS the schedule names is driven through its real
//! driver (a [`DriverFactory`], in practice the TL1 driver over Telnet:
//! plaintext, logins cross the wire in clear, as for every TL1 OCS). One
//! session per OCS is opened at the start and kept for the whole run. A
//! barrier's change is loaded as merge commands and committed: the driver
//! sends `DLT-PATCH` for the circuits to remove, then one multi-pair
//! `ENT-PATCH` for those to add (Polatis-style TL1, as `vclos_drivers::tl1`
//! and `crate::dialect::tl1` cite), so unchanged circuits are named by no
//! command and never go dark. All OCS switch concurrently. Every device
//! call is bounded by [`RunOptions::call_timeout`].
//!
//! **Settling.** After the commands, the runner waits until the switching
//! delay has passed since they were sent (the emulated OCS answers
//! `ENT-PATCH` only once switched; a real one may answer first), then reads
//! every patch table back (`RTRV-PATCH`) and requires it to equal the stage
//! map. Only then is "stage begins" emitted.
//!
//! **Barriers.** In [`Mode::Timed`] stage `k` ends `stages[k].time_s` after
//! it began. In [`Mode::Barrier`] it ends when the hosts send a
//! [`BarrierSignal`] for stage `k` on the channel given to [`run`] (a signal
//! for another stage is an error, as is the channel closing). The run ends
//! at the barrier closing the last stage of the last round: the OCS keep
//! that stage's map.
//!
//! **Events** for hosts go to a callback ([`TdmEvent`], serialisable as one
//! JSON object per line, which is what `vclos tdm apply --events` writes):
//! `installed`, then per stage `stage-begins`, `barrier`, `switched`, and
//! `finished`. The callback runs on the runner's task: it must not block.
//!
//! **Failures.** The whole schedule is validated, idle-link rule included
//! ([`super::transition::validate`]), before any device is contacted. A
//! device error, a timeout or a read-back mismatch stops the run at once,
//! without a "stage begins": the hosts must not communicate over a map that
//! is not known to be in place. Nothing is rolled back (undoing a switch is
//! itself a switch, which may cut a link now in use); the error names the
//! OCS and the stage.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures_util::future::join_all;
use serde::Serialize;
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;
use vclos_drivers::{Driver, DriverError, LoadMode};

use super::schedule::Schedule;
use super::transition::{diff, OcsChange, OcsMap, Pair, ScheduleError, Validated};
use crate::controller::DriverFactory;
use crate::dialect::tl1::Tl1;
use crate::dialect::Dialect as _;
use crate::intent::Item;

/// What ends a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Each stage lasts its `time_s`.
    Timed,
    /// Each stage lasts until the hosts signal its barrier.
    Barrier,
}

/// How to run a schedule.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Rounds to run (every stage once per round); at least 1.
    pub rounds: u32,
    pub mode: Mode,
    /// Bound on every device call (open, load, commit, read back, close).
    pub call_timeout: Duration,
    /// Bound on waiting for a barrier signal (`None`: as long as it takes).
    pub barrier_timeout: Option<Duration>,
    /// The switching delay waited after connecting circuits.
    pub switch_delay: Duration,
}

impl RunOptions {
    /// One round, timed, 30 s per device call, the schedule's switching delay.
    pub fn new(schedule: &Schedule) -> Self {
        RunOptions {
            rounds: 1,
            mode: Mode::Timed,
            call_timeout: Duration::from_secs(30),
            barrier_timeout: None,
            switch_delay: Duration::from_secs_f64(schedule.switch_ms.max(0.0) / 1000.0),
        }
    }
}

/// The hosts have finished stage `stage` (its barrier is reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierSignal {
    pub stage: usize,
}

/// What one OCS did in one switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OcsReport {
    pub ocs: String,
    /// The TL1 change commands sent (empty: nothing changed on this OCS).
    pub commands: Vec<String>,
    /// Ports whose cross-connect changed.
    pub ports_touched: usize,
}

/// An event for the hosts (and logs). Serialises as `{"event": "...", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum TdmEvent {
    /// The OCS hold stage `stage`'s map, installed from their tables.
    Installed { stage: usize, ocs: Vec<OcsReport> },
    /// Stage `stage` begins: its jobs may communicate over its circuits.
    StageBegins {
        round: u32,
        stage: usize,
        jobs: Vec<String>,
    },
    /// Stage `from` has ended (timer or hosts' signal).
    Barrier { round: u32, from: usize, to: usize },
    /// The OCS switched from stage `from` to `to` and read back `to`'s map;
    /// `elapsed_ms` runs from the barrier to the read-back.
    Switched {
        round: u32,
        from: usize,
        to: usize,
        ocs: Vec<OcsReport>,
        elapsed_ms: f64,
    },
    /// The run ended after `rounds` rounds.
    Finished { rounds: u32 },
}

/// Why a run stopped.
#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("--rounds must be at least 1")]
    NoRounds,
    #[error("stage {stage}: {source}")]
    Device {
        stage: usize,
        #[source]
        source: DriverError,
    },
    #[error("{ocs}: stage {stage}: {step} took longer than {after:?}")]
    Timeout {
        ocs: String,
        stage: usize,
        step: &'static str,
        after: Duration,
    },
    #[error("{ocs}: stage {stage}: the patch table read back is not the stage map (missing: {missing}; unexpected: {extra})")]
    Mismatch {
        ocs: String,
        stage: usize,
        missing: String,
        extra: String,
    },
    #[error("{ocs}: stage {stage}: the patch table read back does not parse: {message}")]
    ReadBack {
        ocs: String,
        stage: usize,
        message: String,
    },
    #[error("a barrier signal for stage {got} arrived while stage {expected} runs")]
    UnexpectedBarrier { expected: usize, got: usize },
    #[error("the barrier signals stopped (channel closed) while stage {stage} runs")]
    BarrierClosed { stage: usize },
    #[error("no barrier signal for stage {stage} within {after:?}")]
    BarrierTimeout { stage: usize, after: Duration },
}

/// One open session per managed OCS.
struct Devices {
    drivers: Vec<(String, Box<dyn Driver>)>,
    timeout: Duration,
}

/// Run a device call under the timeout.
async fn bounded<T>(
    ocs: &str,
    stage: usize,
    step: &'static str,
    after: Duration,
    call: impl Future<Output = Result<T, DriverError>>,
) -> Result<T, RunError> {
    match tokio::time::timeout(after, call).await {
        Ok(r) => r.map_err(|source| RunError::Device { stage, source }),
        Err(_) => Err(RunError::Timeout {
            ocs: ocs.to_string(),
            stage,
            step,
            after,
        }),
    }
}

/// Parse a TL1 patch table (the driver's `get_config` text).
fn parse_table(ocs: &str, stage: usize, text: &str) -> Result<OcsMap, RunError> {
    let items = Tl1.parse(ocs, text).map_err(|e| RunError::ReadBack {
        ocs: ocs.to_string(),
        stage,
        message: e.to_string(),
    })?;
    Ok(items
        .iter()
        .filter_map(|i| match i {
            Item::Patch { a, b } => Some(Pair::new(a.as_str(), b.as_str())),
            _ => None,
        })
        .collect())
}

fn list(pairs: impl Iterator<Item = Pair>) -> String {
    let v: Vec<String> = pairs.map(|p| p.to_string()).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Send one OCS's change, wait out the switch, read the table back and
/// require `want`.
async fn switch_one(
    ocs: &str,
    drv: &mut dyn Driver,
    stage: usize,
    change: &OcsChange,
    want: &OcsMap,
    opts: &RunOptions,
) -> Result<OcsReport, RunError> {
    let t = opts.call_timeout;
    let commands = change.tl1_commands();
    if !commands.is_empty() {
        let sent = Instant::now();
        let text = commands.join("\n");
        bounded(
            ocs,
            stage,
            "load",
            t,
            drv.load_candidate(&text, LoadMode::Merge),
        )
        .await?;
        bounded(ocs, stage, "commit", t, drv.commit(None)).await?;
        // A deadline already past gets no timer (tokio would still round
        // the wait up to its next millisecond tick).
        let settled = sent + opts.switch_delay;
        if !change.connect.is_empty() && settled > Instant::now() {
            tokio::time::sleep_until(settled).await;
        }
    }
    let text = bounded(ocs, stage, "read back", t, drv.get_config()).await?;
    let got = parse_table(ocs, stage, &text)?;
    if &got != want {
        return Err(RunError::Mismatch {
            ocs: ocs.to_string(),
            stage,
            missing: list(want.difference(&got).cloned()),
            extra: list(got.difference(want).cloned()),
        });
    }
    Ok(OcsReport {
        ocs: ocs.to_string(),
        ports_touched: change.ports_touched().len(),
        commands,
    })
}

impl Devices {
    async fn open(
        factory: &dyn DriverFactory,
        v: &Validated,
        timeout: Duration,
    ) -> Result<Self, RunError> {
        let mut drivers = Vec::new();
        for name in v.ocs.keys() {
            let mut d = factory
                .driver(name)
                .map_err(|source| RunError::Device { stage: 0, source })?;
            bounded(name, 0, "open", timeout, d.open()).await?;
            drivers.push((name.clone(), d));
        }
        Ok(Devices { drivers, timeout })
    }

    /// Every managed OCS's current table.
    async fn tables(&mut self, stage: usize) -> Result<BTreeMap<String, OcsMap>, RunError> {
        let t = self.timeout;
        let reads = self.drivers.iter_mut().map(|(name, d)| async move {
            let text = bounded(name, stage, "read", t, d.get_config()).await?;
            Ok::<_, RunError>((name.clone(), parse_table(name, stage, &text)?))
        });
        join_all(reads).await.into_iter().collect()
    }

    /// Switch every OCS to `maps` (stage `stage`) concurrently.
    async fn switch(
        &mut self,
        stage: usize,
        changes: &BTreeMap<String, OcsChange>,
        maps: &BTreeMap<String, OcsMap>,
        opts: &RunOptions,
    ) -> Result<Vec<OcsReport>, RunError> {
        let none = OcsChange::default();
        let empty = OcsMap::new();
        let work = self.drivers.iter_mut().map(|(name, d)| {
            let change = changes.get(name).unwrap_or(&none);
            let want = maps.get(name).unwrap_or(&empty);
            let span = tracing::info_span!("tdm-switch", device = %name, stage);
            switch_one(name, d.as_mut(), stage, change, want, opts).instrument(span)
        });
        join_all(work).await.into_iter().collect()
    }

    async fn close(mut self) {
        for (_, d) in &mut self.drivers {
            let _ = tokio::time::timeout(self.timeout, d.close()).await;
        }
    }
}

/// Per managed OCS, the change from its current table to stage 0's map.
pub fn install_changes(
    v: &Validated,
    current: &BTreeMap<String, OcsMap>,
) -> BTreeMap<String, OcsChange> {
    let empty = OcsMap::new();
    v.maps[0]
        .iter()
        .map(|(name, want)| {
            (
                name.clone(),
                diff(current.get(name).unwrap_or(&empty), want),
            )
        })
        .collect()
}

/// Read every managed OCS's current table (read-only; for a dry run).
pub async fn current_tables(
    v: &Validated,
    factory: &dyn DriverFactory,
    call_timeout: Duration,
) -> Result<BTreeMap<String, OcsMap>, RunError> {
    let mut devs = Devices::open(factory, v, call_timeout).await?;
    let tables = devs.tables(0).await;
    devs.close().await;
    tables
}

/// Wait for the end of stage `stage`.
async fn barrier(
    schedule: &Schedule,
    stage: usize,
    opts: &RunOptions,
    signals: &mut Option<&mut mpsc::Receiver<BarrierSignal>>,
) -> Result<(), RunError> {
    if opts.mode == Mode::Timed {
        let s = schedule.stages.get(stage).map_or(0.0, |s| s.time_s);
        tokio::time::sleep(Duration::from_secs_f64(s.max(0.0))).await;
        return Ok(());
    }
    let Some(rx) = signals.as_deref_mut() else {
        return Err(RunError::BarrierClosed { stage });
    };
    let got = match opts.barrier_timeout {
        Some(after) => tokio::time::timeout(after, rx.recv())
            .await
            .map_err(|_| RunError::BarrierTimeout { stage, after })?,
        None => rx.recv().await,
    };
    match got {
        None => Err(RunError::BarrierClosed { stage }),
        Some(s) if s.stage != stage => Err(RunError::UnexpectedBarrier {
            expected: stage,
            got: s.stage,
        }),
        Some(_) => Ok(()),
    }
}

/// Run `schedule` (validated as `v`) on the OCS made by `factory`: install
/// stage 0, then `opts.rounds` rounds of stages and barriers (module doc).
/// In [`Mode::Barrier`], `signals` carries the hosts' barrier signals.
pub async fn run(
    schedule: &Schedule,
    v: &Validated,
    factory: &dyn DriverFactory,
    opts: &RunOptions,
    mut signals: Option<&mut mpsc::Receiver<BarrierSignal>>,
    on_event: &mut (dyn FnMut(&TdmEvent) + Send),
) -> Result<(), RunError> {
    if opts.rounds == 0 {
        return Err(RunError::NoRounds);
    }
    let mut devs = Devices::open(factory, v, opts.call_timeout).await?;
    let result = async {
        let current = devs.tables(0).await?;
        let ocs = devs
            .switch(0, &install_changes(v, &current), &v.maps[0], opts)
            .await?;
        on_event(&TdmEvent::Installed { stage: 0, ocs });
        let n = v.maps.len();
        for round in 0..opts.rounds {
            for (k, b) in v.barriers.iter().enumerate() {
                on_event(&TdmEvent::StageBegins {
                    round,
                    stage: k,
                    jobs: schedule.stages[k].jobs.clone(),
                });
                barrier(schedule, k, opts, &mut signals).await?;
                let (from, to) = (b.from, b.to);
                on_event(&TdmEvent::Barrier { round, from, to });
                if round + 1 == opts.rounds && k + 1 == n {
                    break;
                }
                let start = Instant::now();
                let ocs = devs.switch(to, &b.changes, &v.maps[to], opts).await?;
                let elapsed_ms = start.elapsed().as_secs_f64() * 1000.0;
                let round = if to == 0 { round + 1 } else { round };
                on_event(&TdmEvent::Switched {
                    round,
                    from,
                    to,
                    ocs,
                    elapsed_ms,
                });
            }
        }
        on_event(&TdmEvent::Finished {
            rounds: opts.rounds,
        });
        Ok(())
    }
    .await;
    devs.close().await;
    result
}
