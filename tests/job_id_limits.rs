//! Job ids are bounded by the names vclos derives from them: the longest
//! accepted id renders in every dialect at the largest port index, one
//! character more is refused at the id check (library, `vclos plan
//! --submit`, `vclos job submit`) with the maximum and the reason, and a
//! fabric whose devices hold shorter names (SONiC VRFs, IFNAMSIZ) bounds
//! ids further, before anything is placed.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

mod common;
use common::net;
use vclos::dialect::{all, claimed, max_name_len};
use vclos::intent::name::{check_job_id, job_id_limit, policy_name, vrf_name};
use vclos::intent::{Item, ItemKind, PortName};
use vclos::names::{JobId, MAX_JOB_ID, MAX_OBJECT_NAME, MAX_PORT_INDEX};
use vclos::topology::{self, Dialect};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn vclos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

/// The command failed with the fabric-independent id-length message.
fn refused_as_too_long(o: &Output) {
    assert!(!o.status.success());
    let err = text(&o.stderr);
    let want = format!("longer than {MAX_JOB_ID} characters");
    assert!(
        err.contains(&want) && err.contains("v-<id>-p65535"),
        "{err}"
    );
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The leaf redirect at the largest port index and the VRF of the largest
/// chassis member the dialect's name limit allows, for job `id`.
fn items(id: &JobId, vrf_id: &JobId, member: Option<usize>) -> BTreeSet<Item> {
    let p = |s: &str| PortName::new(s).unwrap();
    let vrf = vrf_name(vrf_id, member).unwrap();
    [
        Item::Vrf { name: vrf.clone() },
        Item::Address {
            port: p("Ethernet8"),
            vrf: None,
            net: net(0x0A00_0000, 31),
        },
        Item::Address {
            port: p("Ethernet4"),
            vrf: Some(vrf.clone()),
            net: net(0x0A00_0201, 31),
        },
        Item::Route {
            vrf,
            prefix: net(0x0A80_0100, 24),
            nexthop: std::net::Ipv4Addr::new(10, 0, 2, 0),
        },
        Item::Redirect {
            job: id.clone(),
            index: MAX_PORT_INDEX,
            port: p("Ethernet0"),
            uplink: p("Ethernet8"),
            destinations: vec![net(0x0A80_0100, 24)],
        },
    ]
    .into_iter()
    .collect()
}

#[test]
fn the_longest_id_renders_on_every_dialect_at_the_largest_port_index() {
    let id = JobId::new("j".repeat(MAX_JOB_ID)).unwrap();
    let policy = policy_name(&id, MAX_PORT_INDEX).unwrap();
    assert_eq!(policy.len(), MAX_OBJECT_NAME, "{policy}");
    for d in all() {
        // VRFs: the longest id and chassis member the dialect's limit takes
        // (`Vrf-<22>-9999` where names hold 31 characters, `Vrf-<11>` on
        // SONiC, whose VRFs are 15-character Linux interface names).
        let limit = max_name_len(d.id());
        let (vrf_id, member) = if limit >= MAX_OBJECT_NAME {
            (id.clone(), Some(9998))
        } else {
            (JobId::new("v".repeat(limit - "Vrf-".len())).unwrap(), None)
        };
        let set = claimed(d, &items(&id, &vrf_id, member));
        let rendered = d.render(&set);
        if d.claims(ItemKind::Redirect) {
            assert!(rendered.contains(&policy), "{:?}: {rendered}", d.id());
        }
        for i in &set {
            if let Item::Vrf { name } = i {
                assert_eq!(name.as_str().len(), limit, "{:?}", d.id());
                assert!(rendered.contains(name.as_str()), "{:?}: {rendered}", d.id());
            }
        }
        // And reads back as the same items: the names were not cut.
        assert_eq!(d.parse("dev", &rendered).unwrap(), set, "{:?}", d.id());
    }
}

#[test]
fn one_character_more_is_refused_at_the_id_check() {
    let e = JobId::new("j".repeat(MAX_JOB_ID + 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("longer than {MAX_JOB_ID} characters")),
        "{e}"
    );
    assert!(e.contains("v-<id>-p65535"), "{e}");
    assert!(e.contains("31 characters"), "{e}");
}

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");
const SONIC: &str = include_str!("../topologies/testbed-sonic.yaml");

/// testbed-sonic with its spine chassis on SONiC too.
fn sonic_spines() -> String {
    SONIC.replace("dialect: huawei-ce", "dialect: sonic")
}

#[test]
fn a_fabric_bounds_ids_by_its_own_devices() {
    let ce = topology::from_str("t.yaml", TESTBED).unwrap();
    let lim = job_id_limit(&ce);
    assert_eq!((lim.max, lim.device), (MAX_JOB_ID, None));
    check_job_id(&ce, &JobId::new("j".repeat(MAX_JOB_ID)).unwrap()).unwrap();

    let sonic = topology::from_str("t.yaml", &sonic_spines()).unwrap();
    assert!(sonic
        .devices
        .iter()
        .all(|d| d.mgmt.dialect == Dialect::Sonic || d.role == topology::Role::Ocs));
    // Eight logical spines per chassis: `Vrf-<id>-8` within 15.
    let lim = job_id_limit(&sonic);
    assert_eq!(lim.max, 15 - "Vrf--8".len(), "{lim:?}");
    assert_eq!(lim.name, "Vrf-<id>-8");
    check_job_id(&sonic, &JobId::new("j".repeat(lim.max)).unwrap()).unwrap();
    let e = check_job_id(&sonic, &JobId::new("j".repeat(lim.max + 1)).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("longer than 9 characters"), "{e}");
    assert!(
        e.contains("spine1 (sonic)") && e.contains("`Vrf-<id>-8`"),
        "{e}"
    );
    assert!(e.contains("15"), "{e}");
}

#[test]
fn plan_submit_takes_the_longest_id_and_refuses_one_more() {
    let long = "j".repeat(MAX_JOB_ID);
    // testbed: leaf policies and chassis VRFs (vClos); testbed-ocs: leaf
    // policies over OCS circuits (OCS-vClos).
    for (topo, name) in [
        ("topologies/testbed.yaml", format!("Vrf-{long}-8")),
        ("topologies/testbed-ocs.yaml", format!("v-{long}-p")),
    ] {
        let o = vclos(&[
            "plan",
            "--topology",
            topo,
            "--submit",
            &format!("{long}:24"),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.contains(&format!("v-{long}-p")), "{out}");
        assert!(out.contains(&name), "{out}");
    }
    let topo = "topologies/testbed-ocs.yaml";

    let o = vclos(&[
        "plan",
        "--topology",
        topo,
        "--submit",
        &format!("{long}x:24"),
    ]);
    refused_as_too_long(&o);
    assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
}

#[test]
fn plan_submit_on_sonic_spines_refuses_ids_their_vrfs_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sonic-spines.yaml");
    std::fs::write(&file, sonic_spines()).unwrap();
    let file = file.to_str().unwrap();
    let o = vclos(&["plan", "--topology", file, "--submit", "jjjjjjjjj:24"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // (Its VRF names are rendered in the dialect test above; this plan
    // steers over OCS circuits.)
    assert!(text(&o.stdout).contains("v-jjjjjjjjj-p"));
    let o = vclos(&["plan", "--topology", file, "--submit", "jjjjjjjjjj:24"]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("longer than 9 characters"), "{err}");
    assert!(err.contains("`Vrf-<id>-8`"), "{err}");
}

#[test]
fn job_submit_refuses_a_too_long_id_before_touching_anything() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let long = "j".repeat(MAX_JOB_ID + 1);
    let o = vclos(&[
        "job",
        "submit",
        "--topology",
        "topologies/testbed-ocs.yaml",
        "--state",
        state.to_str().unwrap(),
        "--id",
        &long,
        "--gpus",
        "8",
    ]);
    refused_as_too_long(&o);
    assert!(!state.exists(), "nothing was written");
}
