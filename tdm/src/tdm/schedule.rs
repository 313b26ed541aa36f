//! A TDM optical schedule: what the planner emits and what the OCS
//! controller installs (issue 19; seeds 003 and 004).
//!
//! A schedule is a **cycle of stages**. In stage `k` the jobs in
//! `stages[k].jobs` communicate over the circuits of `stages[k].ocs` while
//! the other jobs of the group compute; at the barrier that ends stage `k`
//! the OCS devices switch to the circuits of stage `k + 1` (after the last
//! stage, back to stage 0). This is 003 Section III (two groups alternating
//! computation and communication) and 004's multi-stage generalisation.
//!
//! The document is the contract between the pure planner (`vclos tdm plan`)
//! and the side that applies it to devices, so it names everything by the
//! topology's names (OCS devices and their port names) and is checked against
//! a topology before use. Unknown keys are refused at every level.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which of the drafts' schemes produced the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// 003: two (or more) groups, half-duplex port constraint (Eq. 6).
    Tdm,
    /// 004: bi-stage with in-network aggregation at the ToR, full duplex
    /// with symmetric circuits.
    BiStage,
}

/// One cross-connect of one OCS during one stage.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Circuit {
    /// Port names on that OCS, as the topology names them.
    pub a: String,
    pub b: String,
    /// The jobs whose traffic this circuit carries in this stage (empty: a
    /// circuit left up but unused). A circuit used by a job is busy for the
    /// whole stage; only at a barrier, and only if no job communicating in
    /// the stage being left uses it, may it be rewired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<String>,
}

/// One stage of the cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Jobs that communicate during this stage (the others compute).
    pub jobs: Vec<String>,
    /// The stage's duration in seconds (Eq. 2-3), reconfiguration excluded.
    pub time_s: f64,
    /// Per OCS name, the complete cross-connect map during this stage.
    /// An OCS absent here has no circuits during the stage.
    pub ocs: BTreeMap<String, Vec<Circuit>>,
}

/// A planned cyclic schedule for one pod group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The topology's `name` the schedule was planned for.
    pub topology: String,
    pub variant: Variant,
    /// One OCS reconfiguration, in milliseconds (50 for MEMS).
    pub switch_ms: f64,
    /// One round (every stage once), reconfiguration included.
    pub round_s: f64,
    /// The non-TDM baseline's round: all jobs in one group, one static
    /// circuit map.
    pub baseline_round_s: f64,
    /// The reconfiguration time included in `round_s`.
    pub reconfiguration_s: f64,
    pub stages: Vec<Stage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_round_trips_and_refuses_unknown_keys() {
        let text = r#"{"topology":"pods","variant":"bi-stage","switch_ms":50.0,
            "round_s":1.5,"baseline_round_s":2.0,"reconfiguration_s":0.1,
            "stages":[{"jobs":["j1"],"time_s":0.7,
              "ocs":{"ocs1":[{"a":"1","b":"2","jobs":["j1"]},{"a":"3","b":"4"}]}}]}"#;
        let s: Schedule = serde_json::from_str(text).unwrap();
        assert_eq!(s.variant, Variant::BiStage);
        assert_eq!(s.stages[0].ocs["ocs1"][1].jobs, Vec::<String>::new());
        let back: Schedule = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let bad = text.replace("\"time_s\"", "\"time_s\":0.1,\"extra\"");
        let err = serde_json::from_str::<Schedule>(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("extra"), "{err}");
    }
}
