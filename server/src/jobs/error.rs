//! Why a lifecycle operation could not run. Every variant says what to do or
//! names the device, job, file or port at fault; device-side failures of a
//! transaction are not errors here but the [`ApplyReport`](crate::controller::ApplyReport).

use thiserror::Error;

use super::foreign::ForeignConflict;
use crate::controller::ChangeSetError;
use crate::dialect::ParseError;
use crate::intent::IntentError;
use crate::names::JobId;
use crate::placement::PlacementError;
use crate::plan::PlanError;
use crate::state::lock::LockError;
use crate::state::store::StoreError;
use crate::state::StateError;
use vclos_drivers::DriverError;

#[derive(Debug, Error)]
pub enum JobsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    State(#[from] StateError),
    /// The stored state itself is invalid (every command refuses it).
    #[error("{file}: {error}")]
    InvalidState {
        file: String,
        error: Box<StateError>,
    },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error(transparent)]
    Intent(#[from] IntentError),
    #[error(transparent)]
    Name(#[from] crate::names::NameError),
    #[error("job `{job}` cannot be placed now: {why}")]
    Blocked { job: JobId, why: &'static str },
    /// A scheduler's allocation that cannot be isolated now
    /// ([`crate::placement::given`]); `suggested` servers could be.
    #[error(
        "job `{job}` cannot be placed on the servers it names: {why}{}",
        suggest(suggested)
    )]
    NotOnServers {
        job: JobId,
        why: String,
        suggested: Vec<String>,
    },
    #[error("change set refused: {0}")]
    ChangeSet(#[from] ChangeSetError),
    /// The defence-in-depth check: an OCS command would move a link the
    /// state says a job is using. Nothing was sent.
    #[error("refused before sending anything: {device}: `{command}` touches OCS port {port}, which job `{holder}` holds")]
    BusyLink {
        device: String,
        command: String,
        port: String,
        holder: JobId,
    },
    /// Ports the change must configure carry steering vclos did not write
    /// (each conflict names device, port and foreign policy). No device
    /// committed anything (a transaction's prepared candidates are
    /// discarded).
    #[error("refused before any device committed: {}", describe_foreign(.0))]
    ForeignSteering(Vec<ForeignConflict>),
    /// A change the controller will not send (unknown device or port, a
    /// command it cannot check). Nothing was sent.
    #[error("refused before sending anything: {device}: {message}")]
    Refused { device: String, message: String },
    /// The plan was not made against the current state.
    #[error("the plan is stale: {0}; plan again")]
    Stale(String),
    /// A conditional write lost the race: another writer changed the
    /// state after it was read (at `read`); nothing was written.
    #[error("{key}: another writer changed it since it was read at revision {read}; nothing was written{}", why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())]
    Conflict {
        key: String,
        read: i64,
        why: Option<String>,
    },
    /// The store outside the state directory (etcd) failed or refused.
    #[error(transparent)]
    Remote(#[from] crate::store::RemoteError),
    /// Only the lock holder sees this: its own rollback failed earlier.
    #[error("an interrupted operation left {0}; recover first (`vclos reconcile`, or open the fabric with recovery)")]
    PendingJournal(String),
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The devices committed, the state is not (fully) saved: says exactly
    /// what changed and what settles it.
    #[error("{action} job `{job}`: the devices COMMITTED the change ({}: {}) but {stage}: {cause}; \
             the journal is kept and the next command that takes the state lock (e.g. `vclos reconcile`) \
             adopts the change from the devices", plural(devices.len()), devices.join(", "))]
    NotSaved {
        job: JobId,
        action: &'static str,
        devices: Vec<String>,
        stage: String,
        cause: String,
    },
    #[error("journal {file}: {message}")]
    Journal { file: String, message: String },
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error("running configuration of {0}")]
    Parse(#[from] ParseError),
    #[error("unknown device `{0}`")]
    UnknownDevice(String),
}

fn plural(n: usize) -> String {
    if n == 1 {
        "1 device".into()
    } else {
        format!("{n} devices")
    }
}

fn suggest(servers: &[String]) -> String {
    if servers.is_empty() {
        "; no other set of servers has a free slice now".into()
    } else {
        format!("; these servers have one now: {}", servers.join(","))
    }
}

fn describe_foreign(c: &[ForeignConflict]) -> String {
    let mut s: Vec<String> = c.iter().map(ToString::to_string).collect();
    s.push("vclos never deletes or overwrites foreign configuration: remove it on the device, or choose other ports".into());
    s.join("; ")
}
