//! TDM multi-stage optical schedules for pod groups interconnected only
//! through OCS devices (issue 19; seeds 003 and 004). docs/tdm.md tells the
//! whole model with its section and equation references.
//!
//! [`schedule`] is the document the planner emits and the OCS controller
//! installs. The planner is pure: [`job`] (the jobs file, Eq. 8),
//! [`traffic`] (Eq. 4-5), [`ring`] (Algorithm 3), [`circuits`] (Algorithm 2,
//! Eq. 2 and 6), [`grouping`] (Eq. 1-3, Algorithm 1) and [`plan`](mod@plan)
//! (pod groups, cross-connect ports, the [`Schedule`] documents). Applying one:
//! [`transition`] checks a schedule against a topology and computes each
//! stage barrier's minimal OCS change under the idle-link rule; [`run`]
//! installs the schedule on the OCS through their TL1 drivers and switches
//! at every barrier.

pub mod circuits;
pub mod grouping;
pub mod job;
pub mod plan;
pub mod replay;
pub mod ring;
pub mod run;
pub mod schedule;
pub mod sweep;
pub mod synth;
pub mod traffic;
pub mod transition;

pub use job::{JobKind, Jobs};
pub use plan::{plan, PlanError, Settings};
pub use schedule::{Circuit, Schedule, Stage, Variant};

#[cfg(test)]
mod tests;
