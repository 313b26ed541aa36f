#![allow(clippy::unwrap_used)]
use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::tdm::schedule::Variant;
use crate::topology::testbed_ocs as testbed;

fn circuit(a: u32, b: u32, jobs: &[&str]) -> Circuit {
    Circuit {
        a: a.to_string(),
        b: b.to_string(),
        jobs: jobs.iter().map(|j| j.to_string()).collect(),
    }
}

fn stage(jobs: &[&str], circuits: Vec<Circuit>) -> Stage {
    Stage {
        jobs: jobs.iter().map(|j| j.to_string()).collect(),
        time_s: 0.5,
        ocs: BTreeMap::from([("ocs1".to_string(), circuits)]),
    }
}

fn schedule(stages: Vec<Stage>) -> Schedule {
    Schedule {
        topology: "testbed-ocs".into(),
        variant: Variant::Tdm,
        switch_ms: 50.0,
        round_s: 1.0,
        baseline_round_s: 1.5,
        reconfiguration_s: 0.1,
        stages,
    }
}

/// Two groups alternating (seed 003): job a on leaf1 uplinks 1-2 <-> leaf2
/// uplinks 17-18 in stage 0; job b on 3-4 <-> 19-20 in stage 1; circuit
/// 5~21 stays up in both.
fn two_groups() -> Schedule {
    schedule(vec![
        stage(
            &["a"],
            vec![
                circuit(1, 17, &["a"]),
                circuit(2, 18, &["a"]),
                circuit(5, 21, &[]),
            ],
        ),
        stage(
            &["b"],
            vec![
                circuit(3, 19, &["b"]),
                circuit(4, 20, &["b"]),
                circuit(21, 5, &[]),
            ],
        ),
    ])
}

fn pair(a: u32, b: u32) -> Pair {
    Pair::new(&a.to_string(), &b.to_string())
}

#[test]
fn barriers_touch_only_the_ports_that_change() {
    let v = validate(&two_groups(), &testbed()).unwrap();
    assert_eq!(v.ocs.keys().collect::<Vec<_>>(), vec!["ocs1"]);
    let m = &v.maps[0]["ocs1"];
    assert_eq!(
        (partner(m, "17"), partner(m, "1"), partner(m, "3")),
        (Some("1"), Some("17"), None)
    );
    assert_eq!(v.barriers.len(), 2);
    let b = &v.barriers[0];
    assert_eq!((b.from, b.to), (0, 1));
    let c = &b.changes["ocs1"];
    assert_eq!(c.disconnect, vec![pair(1, 17), pair(2, 18)]);
    assert_eq!(c.connect, vec![pair(3, 19), pair(4, 20)]);
    let touched: Vec<&str> = c.ports_touched().into_iter().collect();
    assert!(!touched.contains(&"5") && !touched.contains(&"21"));
    assert_eq!(touched.len(), 8);
    assert_eq!(
        c.tl1_commands(),
        vec!["DLT-PATCH::1&17&2&18:1;", "ENT-PATCH::3&4,19&20:2;"]
    );
    // The wrap barrier undoes it.
    let back = &v.barriers[1].changes["ocs1"];
    assert_eq!(back.disconnect, c.connect);
    assert_eq!(back.connect, c.disconnect);
}

#[test]
fn an_ocs_absent_from_a_stage_has_no_circuit_then() {
    let mut s = two_groups();
    s.stages[1].ocs.clear();
    let v = validate(&s, &testbed()).unwrap();
    assert!(v.maps[1]["ocs1"].is_empty());
    assert_eq!(v.barriers[0].changes["ocs1"].connect, vec![]);
    assert_eq!(v.barriers[0].changes["ocs1"].disconnect.len(), 3);
}

#[test]
fn bad_schedules_name_stage_ocs_and_port() {
    let topo = testbed();
    let err = |s: &Schedule| validate(s, &topo).unwrap_err().to_string();

    let mut s = two_groups();
    s.stages[1].ocs.insert("ocs9".into(), vec![]);
    assert_eq!(err(&s), "stage 1: `ocs9` is not an OCS of the topology");

    let mut s = two_groups();
    s.stages[1].ocs.get_mut("ocs1").unwrap()[0].b = "65".into();
    assert_eq!(err(&s), "stage 1: ocs1: port 65 does not exist");

    let mut s = two_groups();
    s.stages[0].ocs.get_mut("ocs1").unwrap()[1].a = "17".into();
    assert_eq!(err(&s), "stage 0: ocs1: port 17 is in two circuits");

    let mut s = two_groups();
    s.stages[0].ocs.get_mut("ocs1").unwrap()[1].a = "18".into();
    assert_eq!(err(&s), "stage 0: ocs1: port 18 is connected to itself");

    let mut s = two_groups();
    s.stages[1].ocs.get_mut("ocs1").unwrap()[0].jobs = vec!["a".into()];
    assert!(err(&s).starts_with(
        "stage 1: ocs1: circuit 3~19 carries job `a`, which does not communicate in stage 1"
    ));

    let mut s = two_groups();
    s.topology = "other".into();
    assert!(err(&s).contains("`other`, not `testbed-ocs`"));

    let mut s = two_groups();
    s.stages[1].time_s = f64::NAN;
    assert!(err(&s).starts_with("stages[1].time_s is NaN"));
    let mut s = two_groups();
    s.switch_ms = -1.0;
    assert!(err(&s).starts_with("switch_ms is -1"));

    assert_eq!(err(&schedule(vec![])), "the schedule has no stage");
}

#[test]
fn a_circuit_is_busy_at_a_barrier_only_for_a_job_communicating_across_it() {
    let topo = testbed();
    // Job a communicates in both stages and its circuit 1~17 is rewired.
    let mut s = two_groups();
    s.stages[1].jobs.push("a".into());
    assert_eq!(
        validate(&s, &topo).unwrap_err(),
        ScheduleError::BusyCut {
            from: 0,
            to: 1,
            ocs: "ocs1".into(),
            circuit: pair(1, 17),
            job: "a".into(),
        }
    );
    assert!(busy_at_barrier(&s, 0, 1)["ocs1"].contains_key(&pair(2, 18)));
    // Keeping a's circuits makes the barrier legal again.
    s.stages[1]
        .ocs
        .get_mut("ocs1")
        .unwrap()
        .extend([circuit(1, 17, &["a"]), circuit(2, 18, &["a"])]);
    let v = validate(&s, &topo).unwrap();
    assert!(v.barriers[0].changes["ocs1"].disconnect.is_empty());
    // The wrap barrier is checked too: b continuing into stage 0.
    let mut s = two_groups();
    s.stages[0].jobs.push("b".into());
    let e = validate(&s, &topo).unwrap_err().to_string();
    assert!(
        e.starts_with("barrier 1->0: ocs1: circuit 3~19 would be cut while job `b`"),
        "{e}"
    );
    // A job that finishes at the barrier frees its circuits.
    assert!(busy_at_barrier(&two_groups(), 0, 1).is_empty());
    assert_eq!(busy_during(&two_groups(), 0)["ocs1"].len(), 2);
}

/// A matching over ports 1..=n from a shuffled port list: consecutive
/// pairs, the first `k` of them.
fn matching(n: u32) -> impl Strategy<Value = Vec<(u32, u32)>> {
    (
        Just((1..=n).collect::<Vec<u32>>()).prop_shuffle(),
        0..=n / 2,
    )
        .prop_map(|(ports, k)| {
            ports
                .chunks(2)
                .take(k as usize)
                .map(|c| (c[0], c[1]))
                .collect()
        })
}

/// Stages of random matchings, each circuit carrying job `j{i}` or none.
fn random_schedule() -> impl Strategy<Value = Schedule> {
    let stage = (
        matching(12),
        proptest::collection::vec(proptest::option::of(0u8..3), 6),
        proptest::collection::vec(any::<bool>(), 3),
    )
        .prop_map(|(m, jobs, talking)| {
            let talks: Vec<String> = (0..3u8)
                .filter(|j| talking[usize::from(*j)])
                .map(|j| format!("j{j}"))
                .collect();
            let circuits = m
                .iter()
                .zip(&jobs)
                .map(|(&(a, b), j)| {
                    let job = j.map(|j| format!("j{j}")).filter(|j| talks.contains(j));
                    let jobs: Vec<&str> = job.iter().map(String::as_str).collect();
                    circuit(a, b, &jobs)
                })
                .collect();
            let talks: Vec<&str> = talks.iter().map(String::as_str).collect();
            stage(&talks, circuits)
        });
    proptest::collection::vec(stage, 1..5).prop_map(schedule)
}

fn map_of(s: &Stage) -> OcsMap {
    s.ocs["ocs1"]
        .iter()
        .map(|c| Pair::new(&c.a, &c.b))
        .collect()
}

proptest! {
    #[test]
    fn validation_agrees_with_the_idle_rule_and_changes_are_minimal(s in random_schedule()) {
        let topo = testbed();
        let n = s.stages.len();
        // Brute force: the first barrier cutting a circuit of a job listed
        // in both stages.
        let cut = (0..n).find(|&k| {
            let (now, next) = (&s.stages[k], &s.stages[(k + 1) % n]);
            now.ocs["ocs1"].iter().any(|c| {
                c.jobs.iter().any(|j| next.jobs.contains(j))
                    && !map_of(next).contains(&Pair::new(&c.a, &c.b))
            })
        });
        match (validate(&s, &topo), cut) {
            (Err(ScheduleError::BusyCut { from, .. }), Some(k)) => prop_assert_eq!(from, k),
            (Ok(v), None) => {
                for b in &v.barriers {
                    let (from, to) = (map_of(&s.stages[b.from]), map_of(&s.stages[b.to]));
                    let none = OcsChange::default();
                    let c = b.changes.get("ocs1").unwrap_or(&none);
                    // Applying the change yields the next map.
                    let mut m = from.clone();
                    for p in &c.disconnect { prop_assert!(m.remove(p)); }
                    for p in &c.connect { prop_assert!(m.insert(p.clone())); }
                    prop_assert_eq!(&m, &to);
                    // Touched ports are exactly those whose partner changes.
                    for port in (1..=12).map(|p| p.to_string()) {
                        let moved = partner(&from, &port) != partner(&to, &port);
                        prop_assert_eq!(moved, c.ports_touched().contains(port.as_str()), "port {}", port);
                    }
                }
            }
            (got, want) => prop_assert!(false, "validate {:?}, brute force {:?}", got, want),
        }
    }
}

#[test]
fn schedule_files_are_read_under_a_bound_and_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.json");
    std::fs::write(&p, serde_json::to_string(&two_groups()).unwrap()).unwrap();
    assert_eq!(load(&p).unwrap(), two_groups());
    std::fs::write(&p, "{\"topology\": \"t\",\n \"stagez\": []}").unwrap();
    let e = load(&p).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: unknown field `stagez`", p.display())),
        "{e}"
    );
    assert!(e.contains("line 2"), "{e}");
    std::fs::write(&p, vec![b' '; MAX_SCHEDULE_BYTES + 1]).unwrap();
    assert!(matches!(load(&p), Err(LoadError::TooLarge { .. })));
    let e = load(&dir.path().join("none.json")).unwrap_err().to_string();
    assert!(e.contains("none.json: "), "{e}");
}
