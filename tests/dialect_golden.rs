//! Golden files for a small scenario on topologies/testbed-ocs.yaml: job j1
//! (two leaves through four logical spines of chassis spine1) and job j2
//! (two leaves joined directly through the OCS). Regenerate with
//! `VCLOS_UPDATE_GOLDEN=1 cargo test --test dialect_golden`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use vclos::decision::Decision;
use vclos::dialect::{claimed, dialect};
use vclos::intent::build;
use vclos::plan::{plan, Action, Plan, Running};
use vclos::topology::{self, Dialect, Topology};

mod common;
use common::golden;

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

fn plan_text(p: &Plan) -> String {
    let mut out = format!("{} {}\n", p.action, p.job);
    for d in &p.devices {
        out.push_str(&format!(
            "== stage {}: {} ({})\n",
            d.stage, d.diff.device, d.diff.role
        ));
        for c in &d.diff.commands {
            out.push_str(c);
            out.push('\n');
        }
    }
    out
}

#[test]
fn rendered_configs_per_dialect() {
    let t = topo();
    let all = build(&t, &[decision("j1"), decision("j2")]).unwrap();
    let ext = |d: Dialect| match d {
        Dialect::HuaweiCe => "cfg",
        Dialect::Sonic => "json",
        Dialect::Openconfig => "xml",
        Dialect::Tl1 => "tl1",
    };
    for dev in ["leaf1", "leaf2", "spine1", "ocs1"] {
        let i = all.device(dev).unwrap();
        let ids: &[Dialect] = if dev == "ocs1" {
            &[Dialect::Tl1]
        } else {
            &[Dialect::HuaweiCe, Dialect::Sonic, Dialect::Openconfig]
        };
        for id in ids {
            let d = dialect(*id);
            let text = d.render(&claimed(d, &i.items));
            golden(&format!("testbed-ocs/{id}/{dev}.{}", ext(*id)), &text);
            // And the golden text reads back to the intent.
            assert_eq!(
                d.parse(dev, &text).unwrap(),
                claimed(d, &i.items),
                "{id} {dev}"
            );
        }
    }
}

#[test]
fn plans_for_admission_and_release() {
    let t = topo();
    let none = Running::new();
    let (j1, j2) = (decision("j1"), decision("j2"));
    let p = plan(&t, &[], &none, Action::Admit(j1.clone())).unwrap();
    golden("testbed-ocs/plan-admit-j1.txt", &plan_text(&p));
    let p = plan(
        &t,
        std::slice::from_ref(&j1),
        &none,
        Action::Admit(j2.clone()),
    )
    .unwrap();
    golden("testbed-ocs/plan-admit-j2.txt", &plan_text(&p));
    let p = plan(
        &t,
        &[j1.clone(), j2.clone()],
        &none,
        Action::Release(j1.job.clone()),
    )
    .unwrap();
    golden("testbed-ocs/plan-release-j1.txt", &plan_text(&p));
    let p = plan(
        &t,
        &[j1, j2.clone()],
        &none,
        Action::Release(j2.job.clone()),
    )
    .unwrap();
    golden("testbed-ocs/plan-release-j2.txt", &plan_text(&p));
}
