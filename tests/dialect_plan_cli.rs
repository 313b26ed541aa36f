//! `vclos plan` end to end through the binary: text and JSON shapes,
//! state and running directories, and clear failures.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

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

const TOPO: &str = "topologies/testbed-ocs.yaml";
const J1: &str = "tests/golden/testbed-ocs/j1.yaml";
const J2: &str = "tests/golden/testbed-ocs/j2.yaml";

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn text_plan_for_a_decision() {
    let o = vclos(&["plan", "--topology", TOPO, "--decision", J1]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("plan: admit job j1 (3 devices change)"),
        "{out}"
    );
    let spine = out.find("== stage 1: spine1 (spine, huawei-ce)").unwrap();
    let leaf = out.find("== stage 2: leaf1 (leaf, huawei-ce)").unwrap();
    assert!(spine < leaf);
    assert!(out.contains("+ vrf Vrf-j1-1"));
    assert!(out.contains("+ip route-static vpn-instance Vrf-j1-1 10.128.1.0 24 10.0.2.0"));
    assert!(out.contains("  traffic-policy v-j1-p1 inbound"));
    assert!(!out.contains('\x1b'), "colour when piped");
}

#[test]
fn json_plan_shape() {
    let o = vclos(&["plan", "--topology", TOPO, "--decision", J2, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["job"], "j2");
    assert_eq!(v["decision"]["stage"], "ocs-two-leaf");
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 3);
    for d in devices {
        assert!(d["device"].is_string());
        assert!(["leaf", "spine", "ocs"].contains(&d["role"].as_str().unwrap()));
        assert!(d["stage"].is_u64());
        assert!(d["commands"]
            .as_array()
            .unwrap()
            .iter()
            .all(Value::is_string));
        assert!(d["diff"].is_string() && d["added"].is_array() && d["removed"].is_array());
    }
    assert_eq!(devices[0]["device"], "ocs1");
    assert_eq!(devices[0]["stage"], 0);
    // One batched DLT-PATCH of both ends of every old patch, then one ENT-PATCH.
    assert_eq!(
        devices[0]["commands"][0],
        "DLT-PATCH::5&37&6&38&21&53&22&54:1;"
    );
    assert_eq!(devices[0]["commands"][1], "ENT-PATCH::5&6,21&22:2;");
    assert_eq!(devices[1]["stage"], 2);
}

#[test]
fn release_from_a_state_dir_and_submit_through_the_placer() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    let j1: vclos::decision::Decision =
        serde_yaml_ng::from_str(&std::fs::read_to_string(root().join(J1)).unwrap()).unwrap();
    vclos::state::store::save(dir.path(), "testbed-ocs", &[j1]).unwrap();
    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--state",
        state,
        "--release",
        "j1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let roles: Vec<&str> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["leaf", "leaf", "spine"]);
    let spine = &v["devices"][2]["commands"];
    assert!(spine
        .as_array()
        .unwrap()
        .contains(&Value::from("undo ip vpn-instance Vrf-j1-1")));

    // Submitting places next to the held job; the plan never reuses j1's ports.
    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--state",
        state,
        "--submit",
        "j9:24",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["job"], "j9");
    let devices = v["devices"].as_array().unwrap();
    assert!(!devices.is_empty());
    for d in devices {
        for c in d["commands"].as_array().unwrap() {
            assert!(
                !c.as_str().unwrap().contains("j1"),
                "j9's plan touches j1: {c}"
            );
        }
    }

    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--state",
        state,
        "--release",
        "j7",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("job `j7` is not held"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_input_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let evil = dir.path().join("evil.json");
    std::fs::write(
        &evil,
        r#"{"job": "j1;reload", "stage": "manual", "gpus": []}"#,
    )
    .unwrap();
    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--decision",
        evil.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("';' is not allowed"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());

    let o = vclos(&["plan", "--topology", TOPO, "--submit", "big:999"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("999"), "{}", stderr(&o));

    let o = vclos(&["plan", "--topology", TOPO, "--submit", "j1\nreboot:8"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("invalid job id"), "{}", stderr(&o));

    let running = dir.path().join("running");
    std::fs::create_dir(&running).unwrap();
    std::fs::write(
        running.join("ocs1.cfg"),
        "M  1 COMPLD\n   \"1,33\"\n   \"2\"\n;\n",
    )
    .unwrap();
    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--running",
        running.to_str().unwrap(),
        "--decision",
        J2,
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("ocs1: line 3"), "{}", stderr(&o));

    // A running OCS table that differs from the intent is corrected too.
    std::fs::write(running.join("ocs1.cfg"), "   \"1,33\"\n   \"5,37\"\n").unwrap();
    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--running",
        running.to_str().unwrap(),
        "--decision",
        J2,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cmds = v["devices"][0]["commands"].as_array().unwrap();
    assert_eq!(cmds[0], "DLT-PATCH::5&37:1;");
    // The missing baseline patch 2~34 is restored by an ENT-PATCH whose
    // element-wise lists pair 2 with 34.
    let pairs = |c: &str| -> Vec<(String, String)> {
        let aid = c
            .trim_start_matches("ENT-PATCH::")
            .split(':')
            .next()
            .unwrap_or("");
        let (a, b) = aid.split_once(',').unwrap_or(("", ""));
        a.split('&')
            .map(String::from)
            .zip(b.split('&').map(String::from))
            .collect()
    };
    assert!(
        cmds.iter()
            .filter_map(Value::as_str)
            .filter(|c| c.starts_with("ENT-PATCH::"))
            .any(|c| pairs(c).contains(&("2".into(), "34".into()))),
        "{cmds:?}"
    );
}

#[test]
fn several_submits_plan_in_sequence() {
    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--submit",
        "j1:24",
        "--submit",
        "j2:8",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["jobs"], serde_json::json!(["j1", "j2"]));
    let plans = v["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 2);
    // The second job is placed on what the first leaves: no GPU twice.
    let gpus = |p: &Value| -> Vec<String> {
        p["decision"]["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| format!("{}/{}", g["server"], g["gpu"]))
            .collect()
    };
    let (a, b) = (gpus(&plans[0]), gpus(&plans[1]));
    assert!(b.iter().all(|g| !a.contains(g)), "{a:?} {b:?}");
    // One devices array in apply order, each entry naming its job.
    let devices = v["devices"].as_array().unwrap();
    let stages: Vec<u64> = devices
        .iter()
        .map(|d| d["stage"].as_u64().unwrap())
        .collect();
    assert!(stages.windows(2).all(|w| w[0] <= w[1]), "{stages:?}");
    assert!(
        devices.iter().any(|d| d["job"] == "j2")
            && devices.iter().all(|d| d["commands"].is_array())
    );
}
