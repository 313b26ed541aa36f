//! The waiting queue and its ordering policies.
//!
//! All three policies are strict priority orders with head-of-line blocking,
//! as in the paper's scheduler (Fig. 7, Section 9.7): the replay only ever
//! tries the job at the head; if it cannot be placed, nothing behind it
//! starts (unless `--backfill easy`, [`super::backfill`]). The policy only
//! decides who is at the head:
//!
//! * `fifo` — arrival order (the paper's default);
//! * `sf` — smallest first (the paper's "fewest GPU first", FF): fewest GPUs,
//!   ties by arrival;
//! * `edf` — earliest deadline first, ties by arrival; a job without a
//!   deadline is treated as due at `arrival + duration`.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::trace::Job;

/// Queue ordering policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueuePolicy {
    #[default]
    Fifo,
    Sf,
    Edf,
}

impl QueuePolicy {
    pub const ALL: [QueuePolicy; 3] = [QueuePolicy::Fifo, QueuePolicy::Sf, QueuePolicy::Edf];

    pub fn name(self) -> &'static str {
        match self {
            QueuePolicy::Fifo => "fifo",
            QueuePolicy::Sf => "sf",
            QueuePolicy::Edf => "edf",
        }
    }
}

impl fmt::Display for QueuePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QueuePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or_else(|| format!("unknown queue policy `{s}` (expected fifo, sf or edf)"))
    }
}

/// A priority key: a time or size, then the trace index (arrival order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Key(pub f64, pub usize);

impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

/// Waiting jobs, by trace index, ordered by the policy.
#[derive(Debug)]
pub(crate) struct Queue {
    policy: QueuePolicy,
    set: BTreeSet<Key>,
}

impl Queue {
    pub fn new(policy: QueuePolicy) -> Self {
        Self {
            policy,
            set: BTreeSet::new(),
        }
    }

    /// `idx` must be the job's index in the arrival-sorted trace.
    pub fn push(&mut self, idx: usize, job: &Job) {
        self.set.insert(self.key(idx, job));
    }

    fn key(&self, idx: usize, job: &Job) -> Key {
        let primary = match self.policy {
            QueuePolicy::Fifo => 0.0,
            QueuePolicy::Sf => f64::from(job.gpus),
            QueuePolicy::Edf => job.deadline_s.unwrap_or(job.arrival_s + job.duration_s),
        };
        Key(primary, idx)
    }

    /// Up to `n` waiting jobs behind the head, in queue order.
    pub fn behind_head(&self, n: usize) -> Vec<usize> {
        self.set.iter().skip(1).take(n).map(|k| k.1).collect()
    }

    /// Take job `idx` (pushed as `job`) out of the queue, wherever it is.
    pub fn remove(&mut self, idx: usize, job: &Job) -> bool {
        self.set.remove(&self.key(idx, job))
    }

    pub fn head(&self) -> Option<usize> {
        self.set.first().map(|k| k.1)
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }
}
