//! Applying a TDM schedule (issue 19, item 4) on the emulated testbed-ocs
//! fabric, over real Telnet/TL1 sockets through the real `Tl1Driver`: the
//! tables read back at every stage equal the stage maps, only changed
//! ports are named by commands, the switching delay passes before hosts are
//! told a stage begins, and the emulated OCS itself refuses a transition
//! that cuts a link a communicating job uses.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use vclos::controller::{DriverFactory, TopologyDrivers};
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::emulator::ocs::{LinkState, OcsModel};
use vclos::tdm::run::{self, BarrierSignal, Mode, RunError, RunOptions, TdmEvent};
use vclos::tdm::transition::{self, busy_at_barrier, busy_during, partner, port_ids, OcsMap, Pair};
use vclos::tdm::{Circuit, Schedule, Stage, Variant};
use vclos::topology::{self, OcsId, Topology};
use vclos_drivers::{ErrorKind, LoadMode};

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");
const CLUSTER512: &str = include_str!("../topologies/cluster512-ocs.yaml");
const PW_VAR: &str = "VCLOS_TEST_TDM_PW";

/// The testbed fabric (50 ms MEMS switching) and the topology aimed at it.
async fn fabric(dir: &tempfile::TempDir) -> (EmulatedFabric, Arc<Topology>) {
    fabric_of(dir, TESTBED).await
}

async fn fabric_of(dir: &tempfile::TempDir, yaml: &str) -> (EmulatedFabric, Arc<Topology>) {
    std::env::set_var(PW_VAR, "admin");
    let topo = Arc::new(topology::from_str("topology.yaml", yaml).unwrap());
    let fab = EmulatedFabric::start(topo, FabricOptions::default())
        .await
        .unwrap();
    let text = fab
        .aim("t", yaml, &dir.path().join("known_hosts"), PW_VAR)
        .unwrap();
    (
        fab,
        Arc::new(topology::from_str("emu.yaml", &text).unwrap()),
    )
}

fn circuit(a: u32, b: u32, jobs: &[&str]) -> Circuit {
    Circuit {
        a: a.to_string(),
        b: b.to_string(),
        jobs: jobs.iter().map(|j| j.to_string()).collect(),
    }
}

fn stage(jobs: &[&str], time_s: f64, circuits: Vec<Circuit>) -> Stage {
    Stage {
        jobs: jobs.iter().map(|j| j.to_string()).collect(),
        time_s,
        ocs: BTreeMap::from([("ocs1".to_string(), circuits)]),
    }
}

/// Three stages over leaf1 uplinks (OCS ports 1-16) and leaf2 uplinks
/// (17-32). Job a talks in stages 2 and 0 (across the wrap barrier, so its
/// circuits stay), b in stage 1, c in stage 2. Circuits 5~21 and 9~41 (the
/// latter from the cabled table) stay up, unused, throughout.
fn three_stages() -> Schedule {
    let keep = || vec![circuit(5, 21, &[]), circuit(9, 41, &[])];
    let with = |mut v: Vec<Circuit>| {
        v.extend(keep());
        v
    };
    Schedule {
        topology: "testbed-ocs".into(),
        variant: Variant::Tdm,
        switch_ms: 50.0,
        round_s: 0.3,
        baseline_round_s: 0.4,
        reconfiguration_s: 0.15,
        stages: vec![
            stage(
                &["a"],
                0.02,
                with(vec![circuit(1, 17, &["a"]), circuit(2, 18, &["a"])]),
            ),
            stage(
                &["b"],
                0.02,
                with(vec![circuit(3, 19, &["b"]), circuit(4, 20, &["b"])]),
            ),
            stage(
                &["a", "c"],
                0.02,
                with(vec![
                    circuit(1, 17, &["a"]),
                    circuit(2, 18, &["a"]),
                    circuit(6, 22, &["c"]),
                ]),
            ),
        ],
    }
}

fn names(model: &OcsModel, table: &[(u16, u16)]) -> OcsMap {
    table
        .iter()
        .map(|&(a, b)| Pair::new(&model.port_name(a), &model.port_name(b)))
        .collect()
}

/// Port numbers named by TL1 change commands (`DLT-PATCH::1&17:1;`,
/// `ENT-PATCH::3&4,19&20:2;`).
fn ports_in(commands: &[String]) -> BTreeSet<String> {
    commands
        .iter()
        .flat_map(|c| {
            let aid = c.split(':').nth(2).unwrap().to_string();
            aid.split(['&', ','])
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What the hosts saw at one "stage begins".
struct Seen {
    stage: usize,
    table: OcsMap,
    all_lit: bool,
}

#[tokio::test]
async fn a_three_stage_schedule_switches_only_changed_ports_at_host_barriers() {
    let dir = tempfile::tempdir().unwrap();
    let (fab, topo) = fabric(&dir).await;
    let s = three_stages();
    let v = transition::validate(&s, &topo).unwrap();
    let model = fab.ocs(OcsId(0)).clone();
    let before = names(&model, &model.patches());

    // The hosts: at "stage k begins" they communicate over stage k's busy
    // circuits; when done they keep busy only what crosses the barrier,
    // then signal it.
    let (tx, mut rx) = mpsc::channel(4);
    let (begun_tx, mut begun) = mpsc::unbounded_channel::<usize>();
    let stage_busy = fab.stage_busy().clone();
    let (hs, htopo) = (s.clone(), topo.clone());
    let hosts = tokio::spawn(async move {
        while let Some(k) = begun.recv().await {
            let to = (k + 1) % hs.stages.len();
            let busy = busy_at_barrier(&hs, k, to);
            let circuits = busy
                .iter()
                .flat_map(|(o, m)| m.keys().map(move |p| (o.as_str(), p)));
            stage_busy.set(port_ids(&htopo, circuits));
            if tx.send(BarrierSignal { stage: k }).await.is_err() {
                break;
            }
        }
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (ev, sn, m, busy, btopo, bs) = (
        events.clone(),
        seen.clone(),
        model.clone(),
        fab.stage_busy().clone(),
        topo.clone(),
        s.clone(),
    );
    let mut on_event = move |e: &TdmEvent| {
        if let TdmEvent::StageBegins { stage, .. } = e {
            let table = m.patches();
            let all_lit = table
                .iter()
                .all(|&(a, b)| [a, b].iter().all(|&p| m.link_state(p).unwrap().is_lit()));
            sn.lock().unwrap().push(Seen {
                stage: *stage,
                table: names(&m, &table),
                all_lit,
            });
            let during = busy_during(&bs, *stage);
            let circuits = during
                .iter()
                .flat_map(|(o, ps)| ps.iter().map(move |p| (o.as_str(), p)));
            busy.set(port_ids(&btopo, circuits));
            let _ = begun_tx.send(*stage);
        }
        ev.lock()
            .unwrap()
            .push((std::time::Instant::now(), e.clone()));
    };
    let opts = RunOptions {
        rounds: 2,
        mode: Mode::Barrier,
        call_timeout: Duration::from_secs(10),
        barrier_timeout: Some(Duration::from_secs(30)),
        ..RunOptions::new(&s)
    };
    let factory = TopologyDrivers::new(topo.clone());
    run::run(&s, &v, &factory, &opts, Some(&mut rx), &mut on_event)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop(on_event);
    hosts.await.unwrap();

    // Every stage of both rounds, in order, each table equal to its map
    // and fully lit (switched and settled) when the hosts heard of it.
    let seen = seen.lock().unwrap();
    let order: Vec<usize> = seen.iter().map(|x| x.stage).collect();
    assert_eq!(order, vec![0, 1, 2, 0, 1, 2]);
    for x in seen.iter() {
        assert_eq!(x.table, v.maps[x.stage]["ocs1"], "stage {}", x.stage);
        assert!(x.all_lit, "stage {} began while a port was dark", x.stage);
    }
    // The run ends in the last stage's map.
    assert_eq!(names(&model, &model.patches()), v.maps[2]["ocs1"]);

    let events = events.lock().unwrap();
    let installed = events
        .iter()
        .find_map(|(_, e)| match e {
            TdmEvent::Installed { ocs, .. } => Some(ocs[0].clone()),
            _ => None,
        })
        .unwrap();
    // The install left 9~41 (cabled, and in the map) alone.
    let install_ports = ports_in(&installed.commands);
    assert!(!install_ports.contains("9") && !install_ports.contains("41"));
    let moved = |from: &OcsMap, to: &OcsMap| -> BTreeSet<String> {
        (1..=64)
            .map(|p| p.to_string())
            .filter(|p| partner(from, p) != partner(to, p))
            .collect()
    };
    assert_eq!(install_ports, moved(&before, &v.maps[0]["ocs1"]));

    let mut switches = 0;
    for (i, (at, e)) in events.iter().enumerate() {
        let TdmEvent::Switched {
            from,
            to,
            ocs,
            elapsed_ms,
            ..
        } = e
        else {
            continue;
        };
        switches += 1;
        // Exactly the ports whose cross-connect changes are named.
        let touched = ports_in(&ocs[0].commands);
        let want = moved(&v.maps[*from]["ocs1"], &v.maps[*to]["ocs1"]);
        assert_eq!(touched, want, "barrier {from}->{to}");
        assert_eq!(ocs[0].ports_touched, want.len());
        for kept in ["5", "21", "9", "41"] {
            assert!(!touched.contains(kept), "{kept} touched at {from}->{to}");
        }
        // The barrier came first, and a switch connecting circuits took at
        // least the switching delay (a lower bound: never flaky). A
        // disconnection alone is immediate (2->0 only drops c's circuit).
        let (bat, barrier) = &events[i - 1];
        assert!(
            matches!(barrier, TdmEvent::Barrier { from: f, to: t, .. } if f == from && t == to)
        );
        let connects = ocs[0].commands.iter().any(|c| c.starts_with("ENT-PATCH"));
        assert_eq!(connects, *to != 0, "{:?}", ocs[0].commands);
        if connects {
            assert!(at.duration_since(*bat) >= Duration::from_millis(50));
            assert!(*elapsed_ms >= 50.0, "{elapsed_ms}");
        }
    }
    // Two rounds of three stages: five barriers switch (the last ends the run).
    assert_eq!(switches, 5);
    assert!(matches!(
        events.last().unwrap().1,
        TdmEvent::Finished { rounds: 2 }
    ));
}

#[tokio::test]
async fn a_bad_schedule_is_refused_before_any_device_is_contacted() {
    let dir = tempfile::tempdir().unwrap();
    let (fab, topo) = fabric(&dir).await;
    let model = fab.ocs(OcsId(0)).clone();
    let before = model.patches();
    let logins = fab.faults("ocs1").unwrap().logins();
    let mut busy_cut = three_stages();
    busy_cut.stages[1].jobs.push("a".into());
    let mut unknown = three_stages();
    unknown.stages[2].ocs.get_mut("ocs1").unwrap()[0].a = "99".into();
    let mut repeated = three_stages();
    repeated.stages[1].ocs.get_mut("ocs1").unwrap()[0].b = "20".into();
    let cases = [
        (
            busy_cut,
            "barrier 0->1: ocs1: circuit 1~17 would be cut while job `a`",
        ),
        (unknown, "stage 2: ocs1: port 99 does not exist"),
        (repeated, "stage 1: ocs1: port 20 is in two circuits"),
    ];
    for (s, want) in cases {
        let e = transition::validate(&s, &topo).unwrap_err().to_string();
        assert!(e.starts_with(want), "{e}");
    }
    assert_eq!(model.patches(), before);
    assert_eq!(fab.faults("ocs1").unwrap().logins(), logins);
    // A barrier-mode run without a signal source stops at the first barrier
    // with a clear error, after installing stage 0.
    let s = three_stages();
    let v = transition::validate(&s, &topo).unwrap();
    let opts = RunOptions {
        mode: Mode::Barrier,
        ..RunOptions::new(&s)
    };
    let e = run::run(
        &s,
        &v,
        &TopologyDrivers::new(topo),
        &opts,
        None,
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(matches!(e, RunError::BarrierClosed { stage: 0 }), "{e}");
}

#[tokio::test]
async fn the_emulated_ocs_itself_refuses_a_transition_cutting_a_busy_link() {
    let dir = tempfile::tempdir().unwrap();
    let (fab, topo) = fabric(&dir).await;
    // Job a communicates in stages 0 and 1, but stage 1 rewires its
    // circuits: our pre-check refuses it ...
    let mut s = three_stages();
    s.stages[1].jobs.push("a".into());
    assert!(transition::validate(&s, &topo).is_err());
    // ... so bypass it: install stage 0 and send the barrier's commands
    // through the real TL1 driver, while the hosts hold a's links busy.
    let map = |k: usize| -> OcsMap {
        s.stages[k].ocs["ocs1"]
            .iter()
            .map(|c| Pair::new(&c.a, &c.b))
            .collect()
    };
    let mut drv = TopologyDrivers::new(topo.clone()).driver("ocs1").unwrap();
    let table: String = map(0)
        .iter()
        .map(|p| format!("{},{}\n", p.0, p.1))
        .collect();
    drv.load_candidate(&table, LoadMode::Replace).await.unwrap();
    drv.commit(None).await.unwrap();
    let model = fab.ocs(OcsId(0)).clone();
    let installed = model.patches();
    assert_eq!(names(&model, &installed), map(0));

    let busy = busy_at_barrier(&s, 0, 1);
    assert!(busy["ocs1"].contains_key(&Pair::new("1", "17")));
    let circuits = busy
        .iter()
        .flat_map(|(o, m)| m.keys().map(move |p| (o.as_str(), p)));
    fab.stage_busy().set(port_ids(&topo, circuits));

    let change = transition::diff(&map(0), &map(1));
    drv.load_candidate(&change.tl1_commands().join("\n"), LoadMode::Merge)
        .await
        .unwrap();
    let e = drv.commit(None).await.unwrap_err();
    match &e.kind {
        ErrorKind::Rejected(m) => assert!(
            m.starts_with("SARB") && m.contains("busy; only idle links may be rewired"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    // Refused whole: nothing moved, nothing went dark.
    assert_eq!(model.patches(), installed);
    for &(a, b) in &installed {
        assert_eq!(model.link_state(a).unwrap(), LinkState::Lit { peer: b });
    }
    // Once the hosts release the links (a's stage really ended), the same
    // commands pass.
    fab.stage_busy().clear();
    drv.load_candidate(&change.tl1_commands().join("\n"), LoadMode::Merge)
        .await
        .unwrap();
    drv.commit(None).await.unwrap();
    assert_eq!(names(&model, &model.patches()), map(1));
    drv.close().await.unwrap();
}

#[tokio::test]
async fn several_ocs_switch_at_one_barrier_and_only_those_that_change_get_commands() {
    let dir = tempfile::tempdir().unwrap();
    let (fab, topo) = fabric_of(&dir, CLUSTER512).await;
    // ocs1 and ocs2 rewire at the barrier, ocs3 keeps its map, ocs4 is not
    // in the schedule.
    let map = |pairs: &[(u32, u32)], job: &str| -> Vec<Circuit> {
        pairs.iter().map(|&(a, b)| circuit(a, b, &[job])).collect()
    };
    let stage_of = |job: &str, rewired: &[(u32, u32)]| Stage {
        jobs: vec![job.to_string()],
        time_s: 0.01,
        ocs: BTreeMap::from([
            ("ocs1".to_string(), map(rewired, job)),
            ("ocs2".to_string(), map(rewired, job)),
            ("ocs3".to_string(), map(&[(1, 2), (3, 4)], job)),
        ]),
    };
    let s = Schedule {
        topology: "cluster512-ocs".into(),
        stages: vec![
            stage_of("a", &[(1, 5), (2, 6)]),
            stage_of("b", &[(1, 6), (2, 5)]),
        ],
        ..three_stages()
    };
    // ocs3's circuits carry a in stage 0 and b in stage 1: neither job
    // crosses the barrier, and the circuits stay anyway.
    let v = transition::validate(&s, &topo).unwrap();
    let ocs4 = topo.ocs_id("ocs4").unwrap();
    let ocs4_before = fab.ocs(ocs4).patches();
    let mut events = Vec::new();
    let factory = TopologyDrivers::new(topo.clone());
    let mut on_event = |e: &TdmEvent| events.push(e.clone());
    run::run(&s, &v, &factory, &RunOptions::new(&s), None, &mut on_event)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let switched: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            TdmEvent::Switched { ocs, .. } => Some(ocs.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(switched.len(), 1);
    let by_name: BTreeMap<&str, _> = switched[0].iter().map(|r| (r.ocs.as_str(), r)).collect();
    assert_eq!(
        by_name.keys().copied().collect::<Vec<_>>(),
        ["ocs1", "ocs2", "ocs3"]
    );
    for o in ["ocs1", "ocs2"] {
        assert_eq!(ports_in(&by_name[o].commands).len(), 4, "{o}");
        let m = fab.ocs(topo.ocs_id(o).unwrap());
        assert_eq!(names(m, &m.patches()), v.maps[1][o]);
    }
    assert!(by_name["ocs3"].commands.is_empty());
    let m3 = fab.ocs(topo.ocs_id("ocs3").unwrap());
    assert_eq!(names(m3, &m3.patches()), v.maps[1]["ocs3"]);
    // The OCS outside the schedule was never logged in to, nor changed.
    assert_eq!(fab.faults("ocs4").unwrap().logins(), 0);
    assert_eq!(fab.ocs(ocs4).patches(), ocs4_before);
}
