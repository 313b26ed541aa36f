//! TDM multi-stage optical schedules for pod groups interconnected only
//! through OCS devices (issue 19; seeds 003 and 004).
//!
//! [`schedule`] is the document the planner emits and the OCS controller
//! installs.

pub mod schedule;

pub use schedule::{Circuit, Schedule, Stage, Variant};
