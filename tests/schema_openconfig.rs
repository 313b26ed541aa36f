//! What the OpenConfig dialect writes is what the OpenConfig models accept,
//! checked with libyang (`vclos::schema`, feature `yang`) against the
//! models `.ci/third-party.sh` installs: every edit-config payload of the
//! admissions and releases of the golden jobs on an all-OpenConfig
//! testbed, every full rendered configuration, and every emulated device's
//! running configuration after a two-leaf job went through the real
//! NETCONF driver. The negative checks show that the renderer's fixes
//! (prefixed identities, interface types, subinterface keys, no policy
//! `type`) are what makes them pass. Without `--features vclos/yang` or
//! the models the tests print SKIPPED (CI has both and fails instead).
#![allow(clippy::unwrap_used)]

#[path = "interop/mod.rs"]
mod interop;

#[path = "lifecycle_common/mod.rs"]
mod common;

#[path = "netconf_emu/mod.rs"]
mod netconf_emu;

use std::sync::Arc;
use std::time::Duration;

use vclos::controller::NoProgress;
use vclos::decision::Decision;
use vclos::dialect::{claimed, dialect};
use vclos::intent::build;
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::plan::{plan, Action, Running};
use vclos::schema::{ErrorTag, Schema};
use vclos::topology::{self, Dialect, Role, Topology};

/// testbed-ocs with every switch speaking OpenConfig over NETCONF.
fn all_openconfig() -> String {
    let text = common::TESTBED.replace(
        "port: 22, protocol: ssh-cli, dialect: huawei-ce",
        "port: 830, protocol: netconf, dialect: openconfig",
    );
    assert_eq!(text.matches("dialect: openconfig").count(), 4);
    text
}

fn schema() -> Option<Schema> {
    if !cfg!(feature = "yang") {
        interop::missing("libyang (build with --features vclos/yang)");
        return None;
    }
    let dir = interop::openconfig_yang()?;
    Some(Schema::openconfig(&dir).unwrap())
}

fn decision(name: &str) -> Decision {
    let path = format!(
        "{}/tests/golden/testbed-ocs/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn topo() -> Arc<Topology> {
    Arc::new(topology::from_str("oc.yaml", &all_openconfig()).unwrap())
}

/// The full rendered OpenConfig configuration of every switch when `held`
/// are the held jobs.
fn rendered(t: &Topology, held: &[Decision]) -> Vec<(String, String)> {
    build(t, held)
        .unwrap()
        .devices
        .iter()
        .filter(|d| d.dialect == Dialect::Openconfig)
        .map(|d| {
            let oc = dialect(d.dialect);
            (d.device.clone(), oc.render(&claimed(oc, &d.items)))
        })
        .collect()
}

#[test]
fn every_payload_and_rendered_config_of_admission_and_release_is_valid() {
    let Some(s) = schema() else { return };
    let t = topo();
    let (j1, j2) = (decision("j1"), decision("j2"));
    let steps: Vec<(Vec<Decision>, Action)> = vec![
        (vec![], Action::Admit(j1.clone())),
        (vec![j1.clone()], Action::Admit(j2.clone())),
        (
            vec![j1.clone(), j2.clone()],
            Action::Release(j1.job.clone()),
        ),
        (vec![j2.clone()], Action::Release(j2.job.clone())),
    ];
    let (mut payloads, mut policies, mut statics) = (0, 0, 0);
    for (held, action) in &steps {
        let p = plan(&t, held, &Running::new(), action.clone()).unwrap();
        for d in &p.devices {
            if d.diff.role == Role::Ocs {
                continue;
            }
            for c in &d.diff.commands {
                payloads += 1;
                policies += usize::from(c.contains("<policy-forwarding>"));
                statics += usize::from(c.contains("<static-routes>"));
                s.validate_edit(c)
                    .unwrap_or_else(|v| panic!("{} {}: {v}\n{c}", p.action, d.diff.device));
            }
        }
    }
    eprintln!("{payloads} edit-config payloads valid ({policies} policy-forwarding, {statics} static routes)");
    // Every kind of construct went through the check.
    assert!(
        payloads > 100 && policies > 0 && statics > 0,
        "{payloads} {policies} {statics}"
    );
    for held in [vec![], vec![j1.clone()], vec![j1, j2.clone()], vec![j2]] {
        for (dev, text) in rendered(&t, &held) {
            s.validate_config(&text)
                .unwrap_or_else(|v| panic!("{dev} with {} jobs: {v}", held.len()));
        }
    }
}

/// leaf1 and spine1 rendered with both golden jobs held.
fn leaf_and_spine() -> (String, String) {
    let all = rendered(&topo(), &[decision("j1"), decision("j2")]);
    let get = |n: &str| all.iter().find(|(d, _)| d == n).unwrap().1.clone();
    (get("leaf1"), get("spine1"))
}

#[test]
fn the_model_refuses_what_the_renderer_no_longer_writes() {
    let Some(s) = schema() else { return };
    let (leaf, spine) = leaf_and_spine();
    s.validate_config(&leaf).unwrap();
    s.validate_config(&spine).unwrap();
    let refused = |text: &str, from: &str, to: &str| {
        assert!(text.contains(from), "{from}");
        s.validate_config(&text.replace(from, to)).unwrap_err()
    };
    let ift = "<type xmlns:ianaift=\"urn:ietf:params:xml:ns:yang:iana-if-type\">ianaift:ethernetCsmacd</type>";
    // Unprefixed identities (what vclos wrote before).
    let ni = "<type xmlns:oc-ni-types=\"http://openconfig.net/yang/network-instance-types\">oc-ni-types:";
    assert_eq!(refused(&leaf, ni, "<type>").tag, ErrorTag::InvalidValue);
    assert_eq!(refused(&spine, ni, "<type>").tag, ErrorTag::InvalidValue);
    let pol =
        "<identifier xmlns:oc-pol-types=\"http://openconfig.net/yang/policy-types\">oc-pol-types:";
    assert_eq!(
        refused(&spine, pol, "<identifier>").tag,
        ErrorTag::InvalidValue
    );
    assert_eq!(
        refused(&leaf, ift, "<type>ethernetCsmacd</type>").tag,
        ErrorTag::InvalidValue
    );
    // The mandatory interface type, missing.
    assert_eq!(refused(&leaf, ift, "").tag, ErrorTag::MissingElement);
    // The policy `type` of later revisions is no node of 0.2.1.
    let pid = "<policy-id>v-j1-p1</policy-id>\n            </config>";
    let typed = "<policy-id>v-j1-p1</policy-id><type>PBR_POLICY</type></config>";
    assert_eq!(refused(&leaf, pid, typed).tag, ErrorTag::UnknownElement);
    // A binding to a policy that is not there.
    let apply = "<apply-forwarding-policy>v-j1-p1</apply-forwarding-policy>";
    let other = "<apply-forwarding-policy>v-j1-p99</apply-forwarding-policy>";
    assert_eq!(refused(&leaf, apply, other).tag, ErrorTag::DataMissing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_leaf_job_leaves_every_running_config_valid() {
    let Some(s) = schema() else { return };
    let emu = common::emu_on(&all_openconfig(), Duration::ZERO).await;
    let f = emu.fabric().await;
    let check = |configs: &std::collections::BTreeMap<String, String>, when: &str| {
        let mut switches = 0;
        for d in &emu.topo.devices {
            if d.mgmt.dialect != Dialect::Openconfig {
                continue;
            }
            switches += 1;
            s.validate_config(&configs[&d.name])
                .unwrap_or_else(|v| panic!("{} {when}: {v}\n{}", d.name, configs[&d.name]));
        }
        assert_eq!(switches, 4);
    };
    check(&emu.configs(&f).await, "at the baseline");
    let mut f = f.with_policy(Policy::Vclos);
    let job = JobId::new("two").unwrap();
    let done = f.submit(&job, 24, &NoProgress).await.unwrap();
    assert!(done.report.is_committed(), "{}", done.report);
    assert_eq!(done.plan.decision.vclos.leaves.len(), 2);
    let configs = emu.configs(&f).await;
    assert!(
        configs["leaf1"].contains("apply-forwarding-policy")
            && configs["spine1"].contains("static-routes"),
        "the job's source routes and VRF routes are on the devices"
    );
    check(&configs, "with the job");
    let gone = f.release(&job, &NoProgress).await.unwrap();
    assert!(gone.report.is_committed(), "{}", gone.report);
    check(&emu.configs(&f).await, "after the release");
}

/// A shared link's sub-interface (openconfig-vlan 1.0.2 tag, if-ip
/// address, VRF binding of the subinterface): every change payload and
/// the full rendering are valid; a tag outside `vlan-id` (1..4094) or a
/// binding of a subinterface that is not there is refused.
#[test]
fn subinterface_config_is_valid_and_bad_tags_are_refused() {
    let Some(s) = schema() else { return };
    let oc = dialect(Dialect::Openconfig);
    let spine = netconf_emu::shared_spine();
    let none = std::collections::BTreeSet::new();
    for c in oc
        .changes(&none, &spine)
        .iter()
        .chain(&oc.changes(&spine, &none))
    {
        s.validate_edit(c).unwrap_or_else(|v| panic!("{v}\n{c}"));
    }
    let text = oc.render(&spine);
    s.validate_config(&text).unwrap();
    let tag = "<vlan-id>101</vlan-id>";
    assert!(text.contains(tag), "{text}");
    for bad in ["0", "4095", "x"] {
        let v = s
            .validate_config(&text.replace(tag, &format!("<vlan-id>{bad}</vlan-id>")))
            .unwrap_err();
        assert_eq!(v.tag, ErrorTag::InvalidValue, "{bad}: {v}");
    }
    let bound = "<subinterface>101</subinterface>";
    assert!(text.contains(bound), "{text}");
    let v = s
        .validate_config(&text.replace(bound, "<subinterface>102</subinterface>"))
        .unwrap_err();
    assert_eq!(v.tag, ErrorTag::DataMissing, "{v}");
}

#[test]
fn route_distinguishers_the_model_refused_before_the_fold_pass() {
    // The model's digit-wise route-distinguisher pattern refuses most
    // numbers from 4e9 up; VRF names hashing there (FNV-1a) are folded
    // (`vclos::intent::route_distinguisher`). Pick two job names with such
    // a VRF on testbed-ocs's chassis spines (`Vrf-<job>-<n>`).
    let Some(s) = schema() else { return };
    let fnv = |n: &str| {
        n.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
    };
    let high = |job: &str| (1..=8).any(|m| fnv(&format!("Vrf-{job}-{m}")) >= 4_000_000_000);
    let names: Vec<String> = (0..1000)
        .map(|i| format!("r{i}"))
        .filter(|j| high(j))
        .take(2)
        .collect();
    assert_eq!(names.len(), 2);
    let t = topo();
    let mut held = Vec::new();
    for (golden, name) in ["j1", "j2"].into_iter().zip(&names) {
        let mut d = decision(golden);
        d.job = vclos::names::JobId::new(name.as_str()).unwrap();
        held.push(d);
    }
    let mut vrfs = 0;
    for (dev, text) in rendered(&t, &held) {
        vrfs += text.matches("<route-distinguisher>").count();
        s.validate_config(&text)
            .unwrap_or_else(|v| panic!("{dev}: {v}"));
    }
    assert!(vrfs > 0);
}
