//! The isolation [`Ledger`] on a thread of its own, beside the replay.
//!
//! The ledger is an independent audit (its module doc): it reads the
//! decisions and nothing else, and the replay reads its counters once, at
//! the end. So it need not run in the replay's loop: the replay sends it
//! every start and finish, in order, over one bounded channel, and a
//! worker thread applies them to the ledger exactly as the loop did, so
//! the counters are the same (one sender, one receiver: the messages
//! arrive in the order they were sent). At the end the channel is closed
//! and the worker hands back the ledger's [`Audit`].
//!
//! Why (issue 13): on the 8192-GPU hard traces the audit was 17% of a
//! `--backfill slices` replay's wall (it interns every port of every
//! decision by name). The worker only reads the decisions: it drops its
//! reference once a start is counted, and the replay's thread keeps
//! dropping the finished jobs' decisions. Dropping them on the worker
//! too (a large job's decision names thousands of ports) gained no wall
//! and cost CPU: the two threads then take turns on the reference counts
//! of the topology's shared names. On one core the replay costs what it
//! did plus a channel message per batch of events (docs/performance.md,
//! "The audit beside the replay").
//!
//! A replay that stops on an error drops its auditor: the worker applies
//! what it was sent and ends, and nobody reads its counters.
//!
//! Events go in batches of [`BATCH`]: one message, and at most one
//! wake-up of the worker, per batch rather than per event. The channel
//! holds at most [`DEPTH`] batches: a replay that outran the audit waits
//! for it rather than queueing decisions without bound.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::ledger::{Audit, Ledger};
use crate::decision::Decision;

/// Events per message to the worker.
const BATCH: usize = 256;
/// Batches the channel holds before the replay waits for the audit.
const DEPTH: usize = 16;

/// One event for the ledger, in replay order.
#[derive(Debug)]
enum Event {
    /// Trace job `usize` started (or, after a finish, moved) under this
    /// decision.
    Start(usize, Arc<Decision>),
    /// Trace job `usize` ended (or is about to move).
    Finish(usize),
}

/// The replay's handle on the audit worker (module doc).
#[derive(Debug)]
pub(super) struct Auditor {
    events: SyncSender<Vec<Event>>,
    /// Events not yet sent, in order.
    batch: Vec<Event>,
    worker: JoinHandle<Ledger>,
}

/// The audit worker stopped before the replay ended: a bug in the ledger.
#[derive(Debug, thiserror::Error)]
#[error("the isolation audit failed")]
pub struct AuditFailed;

impl Auditor {
    /// Start the worker on `ledger`.
    pub(super) fn spawn(mut ledger: Ledger) -> std::io::Result<Self> {
        let (events, inbox) = sync_channel(DEPTH);
        let worker = std::thread::Builder::new()
            .name("vclos-audit".into())
            .spawn(move || {
                for event in inbox.into_iter().flatten() {
                    match event {
                        Event::Start(job, d) => ledger.start(job, &d),
                        Event::Finish(job) => ledger.finish(job),
                    }
                }
                ledger
            })?;
        Ok(Auditor {
            events,
            batch: Vec::with_capacity(BATCH),
            worker,
        })
    }

    /// Trace job `job` started under `d`.
    pub(super) fn start(&mut self, job: usize, d: &Arc<Decision>) {
        self.send(Event::Start(job, Arc::clone(d)));
    }

    /// Trace job `job` ended.
    pub(super) fn finish(&mut self, job: usize) {
        self.send(Event::Finish(job));
    }

    /// Queue `event`, and send the batch once it is full.
    fn send(&mut self, event: Event) {
        self.batch.push(event);
        if self.batch.len() == BATCH {
            self.flush();
        }
    }

    /// A send fails only once the worker has stopped, which
    /// [`Auditor::ledger`] reports.
    fn flush(&mut self) {
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        let _ = self.events.send(batch);
    }

    /// Every event applied: the ledger's counters.
    pub(super) fn audit(self) -> Result<Audit, AuditFailed> {
        self.ledger().map(|l| l.audit())
    }

    /// Every event applied: the ledger.
    pub(super) fn ledger(mut self) -> Result<Ledger, AuditFailed> {
        self.flush();
        drop(self.events);
        self.worker.join().map_err(|_| AuditFailed)
    }
}
