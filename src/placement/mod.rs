//! Placement: deciding which GPUs and which slice of the fabric a job gets.
//!
//! A [`Placer`] owns its view of the fabric state and turns a
//! [`JobRequest`] into a [`Decision`] (and holds the resources), or says why
//! it could not ([`Blocked`]). The policies are vClos and OCS-vClos (the
//! paper's algorithms) and the baselines `best` and `sr`; the trace replay
//! drives any of them through this one trait.

use thiserror::Error;

use crate::decision::Decision;
use crate::names::JobId;

/// A job asking for GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRequest {
    pub id: JobId,
    pub gpus: u32,
}

/// Why a job could not be placed now (it may fit later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// Not enough free GPUs / idle servers to meet locality.
    Gpu,
    /// Enough idle servers, but no network resources for an isolated slice.
    Network,
}

/// Errors that are not "try again later".
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlacementError {
    #[error("job `{0}` already holds resources")]
    DuplicateJob(JobId),
    #[error("job `{0}` holds no resources")]
    UnknownJob(JobId),
    #[error("job `{job}` asks for {gpus} GPUs; the fabric has {total}")]
    TooLarge { job: JobId, gpus: u32, total: u32 },
    #[error("job `{0}` asks for 0 GPUs")]
    Empty(JobId),
}

/// The outcome of [`Placer::place`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Placed(Decision),
    Blocked(Blocked),
}

/// A placement policy with its own fabric state.
pub trait Placer {
    /// Short policy name (`vclos`, `ocs-vclos`, `best`, `sr`).
    fn name(&self) -> &'static str;
    /// Decide for `job` and hold what the decision uses.
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError>;
    /// Free exactly what `job`'s placement held.
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError>;
}
