//! Planner properties over random pod fabrics and jobs (issue 19 targets):
//! every schedule respects the ports (no OCS port twice in a stage, every
//! circuit between ports of two pods of the group on one OCS, no pod above
//! its uplinks), carries every demand, gives each RAR job one ring over its
//! pods, and never rounds above the baseline.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;

use super::job::{JobKind, Jobs};
use super::plan::{plan, PlanError, Settings};
use super::schedule::{Schedule, Variant};
use crate::topology::{self, PortRef, Topology};

/// `pods` pods of `uplinks` uplinks, uplink j of every pod on OCS `j % ocs`;
/// 64 GPUs per pod.
fn fabric(pods: usize, uplinks: usize, ocs: usize) -> Topology {
    use std::fmt::Write as _;
    let per_ocs = uplinks.div_ceil(ocs);
    let mut y = String::from(
        "name: prop\ngpus_per_server: 8\nallow_oversubscription: true\n\
         credentials:\n  lab: {username: admin, password_env: X}\nleaves:\n",
    );
    let m = "{host: 127.0.0.1, protocol: ssh-cli, dialect: huawei-ce, credential: lab}";
    for p in 1..=pods {
        let _ = writeln!(
            y,
            "  - {{name: pod{p}, mgmt: {m}, server_ports: \"s[1-64]\", uplink_ports: \"u[1-{uplinks}]\"}}"
        );
    }
    y.push_str("ocs:\n");
    for o in 1..=ocs {
        let _ = writeln!(
            y,
            "  - {{name: ocs{o}, mgmt: {{host: 127.0.0.1, protocol: telnet-tl1, dialect: tl1, credential: lab}}, ports: \"[1-{}]\"}}",
            pods * per_ocs
        );
    }
    y.push_str("servers:\n");
    for p in 1..=pods {
        for s in 0..8 {
            let _ = writeln!(
                y,
                "  - {{name: srv{p}-{s}, leaf: pod{p}, ports: \"s[{}-{}]\"}}",
                s * 8 + 1,
                s * 8 + 8
            );
        }
    }
    y.push_str("links:\n");
    let mut next = vec![0; ocs];
    for p in 1..=pods {
        for j in 0..uplinks {
            let o = j % ocs;
            next[o] += 1;
            let _ = writeln!(
                y,
                "  - [\"pod{p}:u{}\", \"ocs{}:{}\"]",
                j + 1,
                o + 1,
                next[o]
            );
        }
    }
    #[allow(clippy::unwrap_used)]
    topology::from_str("prop.yaml", &y).unwrap()
}

/// A random job: (kind, model, unit, pods with 1 or 2 units each).
type RandomJob = (u8, u8, u8, Vec<(usize, u8)>);
/// (pods, uplinks, OCS, tokens, jobs).
type Case = (usize, usize, usize, u64, Vec<RandomJob>);

fn jobs_text(tokens: u64, jobs: &[RandomJob]) -> String {
    use std::fmt::Write as _;
    let mut y = format!("defaults:\n  tokens: {tokens}\njobs:\n");
    for (n, (kind, model, unit, pods)) in jobs.iter().enumerate() {
        let kind = ["ps", "rar", "a2a"][*kind as usize % 3];
        let model = ["1B", "3B", "8B", "90B"][*model as usize % 4];
        let unit = 1u32 << (*unit % 3);
        let pods: BTreeMap<usize, u32> = pods
            .iter()
            .map(|&(p, k)| (p, unit * u32::from(1 + k % 2)))
            .collect();
        let pods: Vec<String> = pods
            .iter()
            .map(|(p, g)| format!("pod{}: {g}", p + 1))
            .collect();
        let _ = writeln!(
            y,
            "  - {{name: j{n}, type: {kind}, model: {model}, unit: {unit}, pods: {{{}}}}}",
            pods.join(", ")
        );
    }
    y
}

/// Every structural property of one schedule (module doc).
fn check(t: &Topology, jobs: &Jobs, s: &Schedule) -> Result<(), TestCaseError> {
    let pod_of = |ocs: &str, port: &str| -> Option<usize> {
        let o = t.ocs_id(ocs)?;
        let dev = t.ocs_dev(o);
        let i = dev.ports.iter().position(|p| &**p == port)?;
        match dev.port_peer[i] {
            Some(PortRef::Leaf(l, _)) => Some(l.index()),
            _ => None,
        }
    };
    let train: HashMap<&str, f64> = jobs
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.train_s(&jobs.defaults)))
        .collect();
    let mut sum = 0.0;
    for st in &s.stages {
        sum += st.time_s;
        let mut per_pod: HashMap<usize, usize> = HashMap::new();
        let mut carried: HashMap<&str, BTreeSet<(usize, usize)>> = HashMap::new();
        for (ocs, circuits) in &st.ocs {
            let mut used = BTreeSet::new();
            for c in circuits {
                prop_assert!(
                    used.insert(&c.a) && used.insert(&c.b),
                    "port twice on {}",
                    ocs
                );
                let (Some(pa), Some(pb)) = (pod_of(ocs, &c.a), pod_of(ocs, &c.b)) else {
                    return Err(TestCaseError::fail(format!("{ocs}: {c:?} not pod ports")));
                };
                prop_assert_ne!(pa, pb);
                *per_pod.entry(pa).or_default() += 1;
                *per_pod.entry(pb).or_default() += 1;
                for j in &c.jobs {
                    prop_assert!(st.jobs.contains(j), "{} carries idle {}", ocs, j);
                    carried
                        .entry(j)
                        .or_default()
                        .insert((pa.min(pb), pa.max(pb)));
                }
            }
        }
        for (p, n) in per_pod {
            prop_assert!(
                n <= t.leaves[p].uplinks.len(),
                "pod {} has {} circuits",
                p,
                n
            );
        }
        for job in &jobs.jobs {
            let pods: BTreeSet<usize> = job
                .pods
                .iter()
                .filter_map(|p| t.leaf_id(&p.0))
                .map(|l| l.index())
                .collect();
            if !st.jobs.contains(&job.name) {
                prop_assert!(st.time_s + 1e-12 >= train[job.name.as_str()]);
                continue;
            }
            let pairs = carried.get(job.name.as_str()).cloned().unwrap_or_default();
            prop_assert!(pairs
                .iter()
                .all(|(a, b)| pods.contains(a) && pods.contains(b)));
            let m = pods.len();
            match job.kind {
                JobKind::Rar if m >= 2 => {
                    // One ring over the job's pods (Eq. 7): m pairs (1 for
                    // two pods), degree 2 each, connected.
                    prop_assert_eq!(pairs.len(), if m == 2 { 1 } else { m }, "{:?}", pairs);
                    let mut deg: HashMap<usize, usize> = HashMap::new();
                    for (a, b) in &pairs {
                        *deg.entry(*a).or_default() += 1;
                        *deg.entry(*b).or_default() += 1;
                    }
                    prop_assert!(m == 2 || deg.values().all(|&d| d == 2), "{:?}", pairs);
                    prop_assert!(connected(&pods, &pairs));
                }
                JobKind::A2a => prop_assert_eq!(pairs.len(), m * (m - 1) / 2),
                JobKind::Ps => prop_assert_eq!(pairs.len(), m - 1),
                JobKind::Rar => prop_assert!(pairs.is_empty()),
            }
        }
    }
    let switches = (0..s.stages.len())
        .filter(|&k| {
            let next = &s.stages[(k + 1) % s.stages.len()];
            s.stages.len() > 1 && ports(&s.stages[k]) != ports(next)
        })
        .count();
    prop_assert!((s.reconfiguration_s - switches as f64 * s.switch_ms / 1000.0).abs() < 1e-9);
    prop_assert!((s.round_s - (sum + s.reconfiguration_s)).abs() < 1e-9 * s.round_s.max(1.0));
    prop_assert!(
        s.round_s <= s.baseline_round_s,
        "{} > {}",
        s.round_s,
        s.baseline_round_s
    );
    Ok(())
}

fn ports(st: &super::schedule::Stage) -> BTreeMap<&String, BTreeSet<(&String, &String)>> {
    st.ocs
        .iter()
        .map(|(o, c)| (o, c.iter().map(|c| (&c.a, &c.b)).collect()))
        .collect()
}

fn connected(pods: &BTreeSet<usize>, pairs: &BTreeSet<(usize, usize)>) -> bool {
    let Some(&first) = pods.iter().next() else {
        return true;
    };
    let mut seen = BTreeSet::from([first]);
    let mut stack = vec![first];
    while let Some(x) = stack.pop() {
        for &(a, b) in pairs {
            for (p, q) in [(a, b), (b, a)] {
                if p == x && seen.insert(q) {
                    stack.push(q);
                }
            }
        }
    }
    seen.len() == pods.len()
}

fn job_strategy(pods: usize) -> impl Strategy<Value = RandomJob> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        proptest::collection::vec((0..pods, any::<u8>()), 1..=pods.min(5)),
    )
}

fn case() -> impl Strategy<Value = Case> {
    (
        2usize..=8,
        6usize..=16,
        1usize..=2,
        prop_oneof![4u64..128, 128u64..8192],
    )
        .prop_flat_map(|(p, u, o, tok)| {
            (
                Just(p),
                Just(u),
                Just(o),
                Just(tok),
                proptest::collection::vec(job_strategy(p), 1..=8),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_schedule_respects_ports_rings_and_the_baseline(
        (pods, uplinks, ocs, tokens, jobs) in case(),
        bi in any::<bool>(),
        switch_ms in prop_oneof![Just(0.0), Just(50.0), 0.0f64..500.0],
    ) {
        let t = fabric(pods, uplinks, ocs);
        let jobs = Jobs::from_text("jobs.yaml", &jobs_text(tokens, &jobs)).unwrap();
        let variant = if bi { Variant::BiStage } else { Variant::Tdm };
        let s = Settings { variant, switch_ms, port_gbps: 150.0 };
        match plan(&t, &jobs, "jobs.yaml", s) {
            Ok(schedules) => {
                prop_assert_eq!(schedules.len(), 1);
                prop_assert_eq!(schedules[0].stages.len(), if bi { 2 } else { 4 });
                check(&t, &jobs, &schedules[0])?;
            }
            // Only a baseline that cannot fit the ports may fail.
            Err(e) => prop_assert!(matches!(e, PlanError::Ports { .. }), "{}", e),
        }
    }
}

#[test]
fn the_shipped_example_plans_and_short_contexts_gain() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let t = topology::load(&repo.join("topologies/pods8.yaml")).unwrap();
    let text = std::fs::read_to_string(repo.join("docs/tdm/jobs8.yaml")).unwrap();
    for (tokens, gains) in [(32, true), (8192, false)] {
        let text = text.replace("tokens: 1024", &format!("tokens: {tokens}"));
        let jobs = Jobs::from_text("jobs8.yaml", &text).unwrap();
        let s = plan(&t, &jobs, "jobs8.yaml", Settings::default()).unwrap();
        check(&t, &jobs, &s[0]).unwrap();
        // Long contexts: training dominates and the baseline stays; short
        // ones: overlapping one group's communication with the other's
        // training pays for the four reconfigurations.
        assert_eq!(s[0].round_s < s[0].baseline_round_s, gains, "{tokens}");
        assert_eq!(s[0].reconfiguration_s > 0.0, gains);
    }
}

#[test]
fn pod_groups_are_planned_apart_and_bad_jobs_are_named() {
    let t = crate::topology::generate::pod_topology(16);
    let two = "jobs:\n  - {name: a, type: rar, model: 1B, pods: {pod1: 8, pod2: 8}}\n  - {name: b, type: a2a, model: 1B, pods: {pod9: 8, pod16: 8}}\n";
    let jobs = Jobs::from_text("j.yaml", two).unwrap();
    let s = plan(&t, &jobs, "j.yaml", Settings::default()).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].stages[0].ocs.keys().collect::<Vec<_>>(), ["ocs1"]);
    assert_eq!(s[1].stages[0].ocs.keys().collect::<Vec<_>>(), ["ocs2"]);
    let mut many = String::from("jobs:\n");
    for k in 0..=super::plan::MAX_GROUP_JOBS {
        many += &format!(
            "  - {{name: m{k}, type: rar, model: 1B, pods: {{pod{}: 1}}}}\n",
            k % 8 + 1
        );
    }
    let three = format!("{two}  - {{name: c, type: ps, model: 1B, pods: {{pod1: 16}}}}\n");
    for (bad, want) in [
        (
            two.replace("pod16", "pod1"),
            "j.yaml:3: job `b`: pod `pod9` is in another pod group",
        ),
        (
            two.replace("pod16", "pod17"),
            "j.yaml:3: job `b`: pod `pod17` is not a leaf",
        ),
        (
            three,
            "pod `pod1`: its jobs hold 24 GPUs but it has 16 (a, c)",
        ),
        (
            many,
            "pod group of ocs1: 129 jobs; at most 128 per pod group",
        ),
    ] {
        let jobs = Jobs::from_text("j.yaml", &bad).unwrap();
        let err = plan(&t, &jobs, "j.yaml", Settings::default()).unwrap_err();
        assert!(err.to_string().contains(want), "{want}: {err}");
    }
}
