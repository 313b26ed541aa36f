//! Why a decision cannot be admitted (or a job released).
//!
//! Every error names the job and, where there is one, the device and port,
//! because these errors are read by people fixing hand-written decisions.

use thiserror::Error;

use crate::names::JobId;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    #[error("job `{0}` is already admitted")]
    DuplicateJob(JobId),
    #[error("job `{0}` is not admitted")]
    UnknownJob(JobId),
    #[error("job `{job}`: unknown {kind} `{name}`")]
    UnknownDevice {
        job: JobId,
        kind: &'static str,
        name: String,
    },
    #[error("job `{job}`: {device} has no {kind} `{port}`")]
    UnknownPort {
        job: JobId,
        device: String,
        kind: &'static str,
        port: String,
    },
    #[error("job `{job}`: {device}:{port} is held by job `{holder}`")]
    Busy {
        job: JobId,
        device: String,
        port: String,
        holder: JobId,
    },
    /// The decision's shape does not fit where its GPUs are; `field` is the
    /// decision key at fault (`stage`, `gpus`, `vclos`, `vclos.spines`,
    /// `source_routes`, ...).
    #[error("job `{job}`: `{field}`: {reason}")]
    Shape {
        job: JobId,
        field: &'static str,
        reason: String,
    },
    #[error("job `{job}`: {device}:{port}: {reason}")]
    Invalid {
        job: JobId,
        device: String,
        port: String,
        reason: String,
    },
}
