//! The checker: a pure function over an operation history and the state
//! observed after the run, in the manner of Jepsen's register and set
//! checkers (Kingsbury, "Jepsen: knossos / set checker", jepsen.io): an
//! operation whose outcome is unknown (the client was killed or timed out)
//! may have taken effect or not; an acknowledged one must have, a refused
//! one must not have.
//!
//! Every submission uses a fresh job id, so a job's history is one
//! submission and any releases issued after it. The rules, per job:
//!
//! - **lost**: its admission was acknowledged, no release of it was
//!   acknowledged or left unknown, and it is not held at the end;
//! - **resurrected**: a release of it was acknowledged and it is held at
//!   the end;
//! - **phantom**: it is held at the end but was never submitted, or its
//!   only submission was refused.
//!
//! Then, over the final decisions alone (read from state.json, not through
//! the library's state validation): no GPU, leaf or spine port, or OCS port
//! is held by two jobs, and no job is listed twice (**double-booked**). What
//! the devices hold is compared by the caller (`vclos reconcile` drift and
//! `vclos verify`) and passed in as `device_problems`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use vclos::decision::Decision;

/// What an operation asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Submit { gpus: u32 },
    Release,
}

/// How an operation ended, as its client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged: exit 0 and the report says committed.
    Ok,
    /// Refused or undone with nothing changed (the reason).
    Failed(String),
    /// Killed, timed out, or an error that does not say whether it took
    /// effect (the reason).
    Unknown(String),
}

/// One operation of the history.
#[derive(Debug, Clone)]
pub struct Op {
    /// Worker (process slot or task) that issued it.
    pub worker: usize,
    pub kind: Kind,
    pub job: String,
    /// Since the start of the run.
    pub invoked: Duration,
    pub completed: Duration,
    pub outcome: Outcome,
}

/// What was observed once the run was over and settled.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The decisions in state.json, in file order.
    pub decisions: Vec<Decision>,
    /// Anything by which the devices differ from state.json's intent, a
    /// journal still pending, or a failed verification.
    pub device_problems: Vec<String>,
}

/// The checker's findings; [`Verdict::ok`] when all are empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub lost: Vec<String>,
    pub resurrected: Vec<String>,
    pub phantom: Vec<String>,
    /// One line per resource (or job id) held twice, naming the holders.
    pub double_booked: Vec<String>,
    pub device_problems: Vec<String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.lost.is_empty()
            && self.resurrected.is_empty()
            && self.phantom.is_empty()
            && self.double_booked.is_empty()
            && self.device_problems.is_empty()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, list) in [
            ("lost", &self.lost),
            ("resurrected", &self.resurrected),
            ("phantom", &self.phantom),
            ("double-booked", &self.double_booked),
            ("device problems", &self.device_problems),
        ] {
            writeln!(f, "{what}: {}", list.len())?;
            for x in list.iter().take(20) {
                writeln!(f, "  {x}")?;
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct JobOps {
    acked_submit: bool,
    possible_submit: bool,
    acked_release: bool,
    possible_release: bool,
}

/// Check `history` against what was `observed`.
pub fn check(history: &[Op], observed: &Observed) -> Verdict {
    let mut jobs: BTreeMap<&str, JobOps> = BTreeMap::new();
    for op in history {
        let j = jobs.entry(op.job.as_str()).or_default();
        let (acked, possible) = match &op.outcome {
            Outcome::Ok => (true, true),
            Outcome::Unknown(_) => (false, true),
            Outcome::Failed(_) => (false, false),
        };
        match op.kind {
            Kind::Submit { .. } => {
                j.acked_submit |= acked;
                j.possible_submit |= possible;
            }
            Kind::Release => {
                j.acked_release |= acked;
                j.possible_release |= possible;
            }
        }
    }
    let held: BTreeSet<&str> = observed.decisions.iter().map(|d| d.job.as_str()).collect();
    let mut v = Verdict {
        device_problems: observed.device_problems.clone(),
        double_booked: double_booked(&observed.decisions),
        ..Verdict::default()
    };
    for (job, ops) in &jobs {
        let is_held = held.contains(job);
        if is_held && ops.acked_release {
            v.resurrected
                .push(format!("{job}: release acknowledged, still held"));
        }
        if !is_held && ops.acked_submit && !ops.possible_release {
            v.lost.push(format!(
                "{job}: admission acknowledged, never released, not held"
            ));
        }
        if is_held && !ops.possible_submit {
            v.phantom
                .push(format!("{job}: held, but its submission was refused"));
        }
    }
    for job in &held {
        if !jobs.contains_key(job) {
            v.phantom.push(format!("{job}: held, never submitted"));
        }
    }
    v
}

/// Everything one decision holds exclusively, as labels ("GPU srv1/0",
/// "port leaf1:100GE1/0/17", "OCS port ocs1:3").
pub fn resources(d: &Decision) -> BTreeSet<String> {
    let mut r = BTreeSet::new();
    for g in &d.gpus {
        r.insert(format!("GPU {}/{}", g.server, g.gpu));
    }
    for l in &d.vclos.leaves {
        for p in &l.server_ports {
            r.insert(format!("port {}:{p}", l.leaf));
        }
    }
    for l in &d.vclos.links {
        r.insert(format!("port {}:{}", l.leaf, l.uplink));
        r.insert(format!("port {}:{}", l.peer, l.peer_port));
        if let Some(h) = &l.via {
            r.insert(format!("OCS port {}:{}", h.ocs, h.leaf_side));
            r.insert(format!("OCS port {}:{}", h.ocs, h.far_side));
        }
    }
    for c in &d.vclos.cross_connects {
        r.insert(format!("OCS port {}:{}", c.ocs, c.a));
        r.insert(format!("OCS port {}:{}", c.ocs, c.b));
    }
    for s in &d.source_routes {
        r.insert(format!("port {}:{}", s.leaf, s.server_port));
        r.insert(format!("port {}:{}", s.leaf, s.uplink));
    }
    r
}

/// Resources (and job ids) held by more than one decision.
pub fn double_booked(decisions: &[Decision]) -> Vec<String> {
    let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in decisions {
        holders
            .entry(format!("job id {}", d.job))
            .or_default()
            .push(d.job.to_string());
        for r in resources(d) {
            holders.entry(r).or_default().push(d.job.to_string());
        }
    }
    holders
        .into_iter()
        .filter(|(_, h)| h.len() > 1)
        .map(|(r, h)| format!("{r} held by {}", h.join(", ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use vclos::decision::{CrossConnect, GpuRef, Stage, VirtualClos};
    use vclos::names::JobId;

    fn op(kind: Kind, job: &str, t: u64, outcome: Outcome) -> Op {
        Op {
            worker: 0,
            kind,
            job: job.into(),
            invoked: Duration::from_millis(t),
            completed: Duration::from_millis(t + 5),
            outcome,
        }
    }

    fn submit(job: &str, t: u64, o: Outcome) -> Op {
        op(Kind::Submit { gpus: 4 }, job, t, o)
    }

    fn release(job: &str, t: u64, o: Outcome) -> Op {
        op(Kind::Release, job, t, o)
    }

    fn decision(job: &str, gpus: &[(&str, u16)]) -> Decision {
        Decision {
            requested_gpus: None,
            sharing: None,
            job: JobId::new(job).unwrap(),
            stage: Stage::Server,
            gpus: gpus
                .iter()
                .map(|(s, g)| GpuRef {
                    server: (*s).into(),
                    gpu: *g,
                })
                .collect(),
            vclos: VirtualClos::default(),
            source_routes: vec![],
        }
    }

    fn observed(decisions: Vec<Decision>) -> Observed {
        Observed {
            decisions,
            device_problems: vec![],
        }
    }

    fn killed() -> Outcome {
        Outcome::Unknown("killed".into())
    }

    #[test]
    fn a_consistent_history_passes() {
        let h = [
            submit("a", 0, Outcome::Ok),
            submit("b", 1, Outcome::Ok),
            release("a", 10, Outcome::Ok),
            submit("c", 11, Outcome::Failed("blocked".into())),
            // Unknown outcomes may go either way.
            submit("d", 12, killed()),
            submit("e", 13, killed()),
            submit("f", 14, Outcome::Ok),
            release("f", 20, killed()),
        ];
        let v = check(
            &h,
            &observed(vec![
                decision("b", &[("srv1", 0)]),
                decision("d", &[("srv1", 1)]),
            ]),
        );
        assert!(v.ok(), "{v}");
    }

    #[test]
    fn a_lost_acknowledged_admission_is_rejected() {
        let h = [
            submit("a", 0, Outcome::Ok),
            submit("b", 1, Outcome::Ok),
            // A refused release does not excuse its absence.
            release("b", 5, Outcome::Failed("stale".into())),
        ];
        let v = check(&h, &observed(vec![decision("a", &[("srv1", 0)])]));
        assert_eq!(v.lost.len(), 1, "{v}");
        assert!(v.lost[0].starts_with("b:"), "{v}");
        assert!(!v.ok());
    }

    #[test]
    fn a_resurrected_release_is_rejected() {
        let h = [
            submit("a", 0, Outcome::Ok),
            release("a", 5, Outcome::Ok),
            submit("b", 6, Outcome::Ok),
            release("b", 9, Outcome::Ok),
        ];
        let v = check(&h, &observed(vec![decision("a", &[("srv1", 0)])]));
        assert_eq!(v.resurrected.len(), 1, "{v}");
        assert!(v.resurrected[0].starts_with("a:"), "{v}");
        assert!(v.lost.is_empty() && v.phantom.is_empty(), "{v}");
    }

    #[test]
    fn a_phantom_job_is_rejected() {
        let h = [submit("a", 0, Outcome::Failed("blocked".into()))];
        let v = check(
            &h,
            &observed(vec![
                decision("a", &[("srv1", 0)]),
                decision("z", &[("srv2", 0)]),
            ]),
        );
        assert_eq!(v.phantom.len(), 2, "{v}");
    }

    #[test]
    fn a_double_booked_gpu_is_rejected() {
        let h = [submit("a", 0, Outcome::Ok), submit("b", 1, Outcome::Ok)];
        let v = check(
            &h,
            &observed(vec![
                decision("a", &[("srv1", 0), ("srv1", 1)]),
                decision("b", &[("srv1", 1)]),
            ]),
        );
        assert_eq!(v.double_booked, ["GPU srv1/1 held by a, b"], "{v}");
        assert!(v.lost.is_empty(), "{v}");
    }

    #[test]
    fn a_double_booked_ocs_port_and_a_duplicate_job_are_rejected() {
        let mut a = decision("a", &[("srv1", 0)]);
        a.vclos.cross_connects = vec![CrossConnect {
            ocs: "ocs1".into(),
            a: "1".into(),
            b: "40".into(),
        }];
        let mut b = decision("b", &[("srv5", 0)]);
        b.vclos.cross_connects = vec![CrossConnect {
            ocs: "ocs1".into(),
            a: "17".into(),
            b: "40".into(),
        }];
        let twice = decision("a", &[("srv2", 0)]);
        let h = [submit("a", 0, Outcome::Ok), submit("b", 1, Outcome::Ok)];
        let v = check(&h, &observed(vec![a, b, twice]));
        assert_eq!(
            v.double_booked,
            ["OCS port ocs1:40 held by a, b", "job id a held by a, a"],
            "{v}"
        );
    }

    #[test]
    fn a_device_state_mismatch_is_rejected() {
        let h = [submit("a", 0, Outcome::Ok)];
        let mut o = observed(vec![decision("a", &[("srv1", 0)])]);
        o.device_problems = vec!["leaf2: drift: 3 missing, 0 unexpected".into()];
        let v = check(&h, &o);
        assert!(!v.ok());
        assert!(v.lost.is_empty() && v.double_booked.is_empty(), "{v}");
    }
}
