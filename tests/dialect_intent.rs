//! Intent derivation: release removes exactly a job's intent, admission
//! displaces only what it must, plans are safely ordered, bad decisions are
//! refused, and running configurations that cannot be read are clear errors.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use vclos::decision::Decision;
use vclos::dialect::{all, dialect};
use vclos::intent::{baseline, build, job_items, IntentError, Item};
use vclos::plan::{plan, Action, PlanError, Running};
use vclos::topology::{self, Dialect, Role, Topology};

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn topo() -> Arc<Topology> {
    Arc::new(topology::load(&root().join("topologies/testbed-ocs.yaml")).unwrap())
}

fn decision(name: &str) -> Decision {
    let text =
        std::fs::read_to_string(root().join(format!("tests/golden/testbed-ocs/{name}.yaml")))
            .unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

#[test]
fn release_removes_exactly_its_intent() {
    let t = topo();
    let (j1, j2) = (decision("j1"), decision("j2"));
    let base = baseline(&t).unwrap();
    let both = build(&t, &[j1.clone(), j2.clone()]).unwrap();
    for (job, rest) in [(&j1, vec![j2.clone()]), (&j2, vec![j1.clone()])] {
        let without = build(&t, &rest).unwrap();
        let own = job_items(&t, job).unwrap();
        assert!(!own.is_empty());
        for (i, dev) in both.devices.iter().enumerate() {
            let other = &without.devices[i];
            let removed: BTreeSet<Item> = dev.items.difference(&other.items).cloned().collect();
            let restored: BTreeSet<Item> = other.items.difference(&dev.items).cloned().collect();
            let mine: BTreeSet<Item> = own
                .iter()
                .find(|(d, _)| d.index() == i)
                .map(|(_, s)| s.clone())
                .unwrap_or_default();
            assert_eq!(
                removed, mine,
                "{}: release of {} removes other items",
                dev.device, job.job
            );
            let base_items = &base.devices[i].items;
            assert!(
                restored.is_subset(base_items),
                "{}: release adds non-baseline items",
                dev.device
            );
            // What comes back is only what the job displaced: an address on a
            // port the job readdressed, or an OCS patch on a port it rewired.
            for r in &restored {
                match r {
                    Item::Address { port, .. } => assert!(
                        mine.iter().any(|m| matches!(m, Item::Address { port: p, .. } if p == port)),
                        "{}: {r} restored but the job did not readdress {port}", dev.device
                    ),
                    Item::Patch { a, b } => assert!(
                        mine.iter().any(|m| matches!(m, Item::Patch { a: x, b: y } if [x, y].contains(&a) || [x, y].contains(&b))),
                        "{}: {r} restored but the job did not rewire it", dev.device
                    ),
                    other => panic!("{}: unexpected restored item {other}", dev.device),
                }
            }
        }
    }
    // Releasing everything gives the baseline back.
    assert_eq!(build(&t, &[]).unwrap(), base);
}

#[test]
fn source_routes_skip_leaf_local_traffic_and_vrfs_are_per_logical_spine() {
    let t = topo();
    let i = build(&t, &[decision("j1")]).unwrap();
    let leaf1 = i.device("leaf1").unwrap();
    let redirects: Vec<&Item> = leaf1
        .items
        .iter()
        .filter(|x| matches!(x, Item::Redirect { .. }))
        .collect();
    assert_eq!(redirects.len(), 4);
    for r in redirects {
        let Item::Redirect { destinations, .. } = r else {
            unreachable!()
        };
        // leaf2's GPU prefix only; leaf1's own 10.128.0.0/24 is not matched.
        assert_eq!(
            destinations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["10.128.1.0/24"]
        );
    }
    let spine1 = i.device("spine1").unwrap();
    let vrfs: Vec<String> = spine1
        .items
        .iter()
        .filter_map(|x| match x {
            Item::Vrf { name } => Some(name.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(vrfs, ["Vrf-j1-1", "Vrf-j1-2", "Vrf-j1-3", "Vrf-j1-4"]);
    assert!(
        i.device("spine2").unwrap().items == baseline(&t).unwrap().device("spine2").unwrap().items
    );
}

#[test]
fn plans_are_in_safe_order() {
    let t = topo();
    let none = Running::new();
    let (j1, j2) = (decision("j1"), decision("j2"));
    // Admission of an OCS job: OCS first, then leaves.
    let p = plan(
        &t,
        std::slice::from_ref(&j1),
        &none,
        Action::Admit(j2.clone()),
    )
    .unwrap();
    let roles: Vec<Role> = p.devices.iter().map(|d| d.diff.role).collect();
    assert_eq!(roles, [Role::Ocs, Role::Leaf, Role::Leaf]);
    assert!(p.devices.windows(2).all(|w| w[0].stage <= w[1].stage));
    // Release: leaves first, OCS last.
    let p = plan(
        &t,
        &[j1.clone(), j2.clone()],
        &none,
        Action::Release(j2.job.clone()),
    )
    .unwrap();
    let roles: Vec<Role> = p.devices.iter().map(|d| d.diff.role).collect();
    assert_eq!(roles, [Role::Leaf, Role::Leaf, Role::Ocs]);
    // Spines come before leaves on admission and after them on release.
    let p = plan(&t, &[], &none, Action::Admit(j1.clone())).unwrap();
    let roles: Vec<Role> = p.devices.iter().map(|d| d.diff.role).collect();
    assert_eq!(roles, [Role::Spine, Role::Leaf, Role::Leaf]);
    let p = plan(
        &t,
        std::slice::from_ref(&j1),
        &none,
        Action::Release(j1.job.clone()),
    )
    .unwrap();
    let roles: Vec<Role> = p.devices.iter().map(|d| d.diff.role).collect();
    assert_eq!(roles, [Role::Leaf, Role::Leaf, Role::Spine]);
}

#[test]
fn bad_decisions_are_refused_before_rendering() {
    let t = topo();
    let none = Running::new();
    let mut d = decision("j1");
    d.vclos.links[0].uplink = "100GE1/0/99".into();
    let e = build(&t, &[d]).unwrap_err();
    assert!(
        e.to_string()
            .contains("\"100GE1/0/99\" is not an uplink of leaf1"),
        "{e}"
    );

    let mut d = decision("j1");
    d.vclos.links[0].peer_port = "100GE1/0/2".into();
    assert!(build(&t, &[d])
        .unwrap_err()
        .to_string()
        .contains("does not reach"));

    // Two jobs on the same ports: the fabric state refuses the second.
    let mut twin = decision("j1");
    twin.job = "twin".parse().unwrap();
    let e = plan(&t, &[decision("j1")], &none, Action::Admit(twin.clone())).unwrap_err();
    assert!(matches!(e, PlanError::State(_)), "{e}");
    // And intent alone refuses overlapping decisions too.
    assert!(matches!(
        build(&t, &[decision("j1"), twin]),
        Err(IntentError::Conflict { .. })
    ));

    let e = plan(&t, &[], &none, Action::Release("nope".parse().unwrap())).unwrap_err();
    assert!(matches!(e, PlanError::NotHeld(_)));
}

#[test]
fn malformed_running_configs_name_device_and_line() {
    let cases: [(Dialect, &str, usize); 8] = [
        (Dialect::HuaweiCe, "#\nsysname leaf1\n#\ninterface 100GE1/0/1\n ip address 10.0.0.300 31\n#\nreturn\n", 5),
        (Dialect::HuaweiCe, "interface 100GE1/0/1\n   description too deep\n", 2),
        (Dialect::HuaweiCe, "interface 100GE1/0/1\n traffic-policy v-j1-p1 inbound\n", 2),
        (Dialect::Tl1, "   ocs1 26-01-01 00:00:00\nM  1 COMPLD\n   \"1,33\"\n   \"2,\"\n;\n", 4),
        (Dialect::Tl1, "M  1 DENY\n   IIAC\n;\n", 1),
        (Dialect::Sonic, "{\n  \"VRF\": {\n    \"Vrf-a\": {}\n  ,\n}\n", 5),
        (Dialect::Sonic, "{\n  \"STATIC_ROUTE\": {\n    \"Vrf-a|10.0.0.0/24\": {\"nexthop\": \"x\"}\n  }\n}\n", 3),
        (Dialect::Openconfig, "<config>\n  <interfaces>\n    <interface><name>e1</name>\n  </interfaces>\n</config>\n", 4),
    ];
    for (id, text, line) in cases {
        let e = dialect(id).parse("dev7", text).unwrap_err();
        assert_eq!(e.device, "dev7");
        assert_eq!(e.line, Some(line), "{id}: {e}");
        assert!(
            e.to_string().starts_with(&format!("dev7: line {line}: ")),
            "{e}"
        );
    }
    // Unmanaged configuration is ignored, not an error.
    let real = "!Software Version V200R005C10\n#\nsysname leaf1\n#\naaa\n local-user admin password irreversible-cipher xyz\n#\ninterface MEth0/0/0\n ip address 192.168.1.10 255.255.255.0\n#\nreturn\n";
    let items = dialect(Dialect::HuaweiCe).parse("leaf1", real).unwrap();
    assert_eq!(items.len(), 2, "{items:?}");
    for d in all() {
        assert!(d.parse("dev", "").unwrap().is_empty(), "{:?}", d.id());
    }
}

#[test]
fn running_configs_from_files_drive_the_plan() {
    let t = topo();
    let dir = tempfile::tempdir().unwrap();
    let base = baseline(&t).unwrap();
    let huawei = dialect(Dialect::HuaweiCe);
    // spine1 runs the baseline plus a stale vclos VRF and an unmanaged port.
    let mut text = huawei.render(&base.device("spine1").unwrap().items);
    text = text.replace("return\n", "ip vpn-instance Vrf-stale\n ipv4-family\n#\ninterface MEth0/0/0\n description mgmt port (oob)\n ip address 192.168.0.2 24\n#\nreturn\n");
    std::fs::write(dir.path().join("spine1.cfg"), text).unwrap();
    let running = vclos::plan::load_running(&t, dir.path()).unwrap();
    let p = plan(&t, &[], &running, Action::Admit(decision("j1"))).unwrap();
    let spine = p
        .devices
        .iter()
        .find(|d| d.diff.device == "spine1")
        .unwrap();
    assert!(spine.running_from_file);
    assert!(spine
        .diff
        .commands
        .contains(&"undo ip vpn-instance Vrf-stale".to_string()));
    assert!(
        !spine.diff.commands.iter().any(|c| c.contains("MEth")),
        "{:#?}",
        spine.diff.commands
    );

    std::fs::write(
        dir.path().join("leaf1.cfg"),
        "interface 100GE1/0/1\n ip address 10.1.1.1\n",
    )
    .unwrap();
    let e = vclos::plan::load_running(&t, dir.path()).unwrap_err();
    assert!(e.to_string().contains("leaf1: line 2"), "{e}");
}
