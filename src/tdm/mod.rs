//! TDM multi-stage optical schedules for pod groups interconnected only
//! through OCS devices (issue 19; seeds 003 and 004).
//!
//! [`schedule`] is the document the planner emits and the OCS controller
//! installs; [`transition`] checks a schedule against a topology and
//! computes each stage barrier's minimal OCS change under the idle-link
//! rule; [`run`] installs the schedule on the OCS through their TL1 drivers
//! and switches at every barrier.

pub mod run;
pub mod schedule;
pub mod transition;

pub use schedule::{Circuit, Schedule, Stage, Variant};
