//! The controller: apply per-device changes as one transaction across the
//! fabric, holo-style (prepare everywhere, then commit everywhere, or undo).
//!
//! Input is a [`ChangeSet`] of text payloads already rendered in each
//! device's dialect, each with a commit `stage`; a [`DriverFactory`] gives the
//! controller a driver per device (real transports from the CLI, mocks in
//! tests). Output is an [`ApplyReport`]. The engine knows nothing about
//! intent or dialects.
//!
//! # The transaction
//!
//! 1. **Prepare** every device concurrently (at most
//!    [`ApplyOptions::max_parallel`] at once): open the session, snapshot the
//!    running configuration, load the candidate, and keep the device's own
//!    diff. Locking, where a platform has it, is the driver's job inside
//!    open/load (NETCONF `<lock>`). If *any* prepare fails, every candidate
//!    is discarded and nothing is committed anywhere (`Aborted`).
//!
//!    Why prepare everything first: most failures (unreachable device, wrong
//!    credentials, a candidate the device refuses) show up here, before the
//!    fabric has changed at all. Committing device by device would discover
//!    them half-way through, with half the fabric already changed.
//!
//!    Between prepare and the first commit the caller may hold the
//!    transaction on a gate ([`apply_gated`]): prepare changes no running
//!    configuration, so the job lifecycle lets its write-ahead journal reach
//!    the disk meanwhile and only has the commits wait for it. A [`Guard`]
//!    ([`apply_guarded`]) also sees the running configurations prepare read
//!    (the lifecycle checks them for foreign steering there, instead of
//!    reading the devices twice) and is asked again before every later
//!    commit stage and any rollback: a writer that lost its lock (a deposed
//!    leader, issue 18) stops touching devices ([`Outcome::Abandoned`]).
//! 2. **Commit stage by stage**, in the order the caller gave (admission:
//!    OCS rewiring, then spines, then leaves; release: the reverse). Devices
//!    of one stage commit concurrently; stage N+1 starts only after every
//!    device of stage N committed *and* its running configuration was read
//!    back and verified. A driver's `commit` returns once the change is in
//!    effect — for the OCS, after the switch has settled (50 ms) — so waiting
//!    for optical switching is implicit in the stage barrier.
//! 3. **Confirm**: devices with commit-confirm were committed with a revert
//!    timer ([`ApplyOptions::confirm_timeout`]); they are confirmed only after
//!    every stage is verified.
//! 4. On **any** failure after commits began (commit error, dropped
//!    connection, timeout, read-back mismatch, confirm error): **roll back**
//!    every device that was committed — or whose commit failed and may have
//!    half-applied — stage by stage in *reverse* order, and discard the rest.
//!    Reverse order mirrors the dependency the caller encoded in the stages
//!    (leaves stop steering traffic onto new uplinks before the spines and
//!    the OCS circuits under them go away). A rollback is judged by reading
//!    running back and comparing it with the prepare-time snapshot, not by
//!    the driver's word. A device that cannot be restored is reported as
//!    `RollbackFailed`, loudly, with what the operator must do.
//!
//! # What is and is not atomic
//!
//! Each device's commit is as atomic as the device makes it
//! ([`vclos_drivers::Capabilities::atomic`]); the TL1 OCS is not (a failed
//! commit may have run some cross-connects, which rollback undoes). Across
//! devices nothing is atomic: the transaction gives all-or-nothing *after
//! the fact* — devices briefly hold the new configuration before a later
//! failure reverts them — and only as long as rollbacks succeed.
//!
//! The snapshot comparison requires `get_config` to be deterministic (no
//! timestamps or counters); drivers strip volatile lines.
//!
//! # If the controller dies mid-transaction
//!
//! Devices committed with commit-confirm revert by themselves when the timer
//! expires, since no confirm comes. Devices without it (the TL1 OCS) keep
//! what was committed: as OCS rewiring is stage 0 on admission and only ever
//! moves idle links, a crash leaves spare circuits rewired but no job's
//! traffic affected; re-running the transaction converges. Dropping the
//! `apply` future has the same effect as a crash (its tasks are aborted).
//! The caller updates its state store only on `Outcome::Committed`.
//!
//! # Sessions across transactions
//!
//! A factory may lend open sessions instead of fresh drivers: a
//! [`SessionPool`] around the real drivers does, and the job lifecycle uses
//! one. The transaction is the same either way: `open` is then a health
//! check (reconnecting once if the session is stale), `close` returns the
//! session unless a call on it failed, and each borrowed driver has
//! forgotten earlier transactions ([`vclos_drivers::Driver::reuse`]), so
//! `rollback(None)` still means this transaction's commit.
//!
//! # Progress and tracing
//!
//! A [`Progress`] observer is told when phases and stages start and devices
//! finish (the CLI draws bars from it). Every device task runs in a `device`
//! span with `device`, `role`, `stage` and `phase` fields.

mod change;
mod factory;
pub(crate) mod fanout;
mod pool;
mod progress;
mod report;
mod transaction;

pub use change::{
    ApplyOptions, ChangeSet, ChangeSetError, DeviceChange, DriverFactory, Verify, VerifyFn,
};
pub use factory::TopologyDrivers;
pub use pool::{PoolOptions, PoolStats, SessionPool};
pub use progress::{NoProgress, Progress};
pub use report::{
    ApplyReport, DeviceError, DeviceReport, DeviceStatus, Outcome, Phase, StageTiming,
};
pub use transaction::{apply, apply_gated, apply_guarded, Guard};

#[cfg(test)]
mod tests;
