//! Decisions validated completely, end to end: `vclos plan --decision FILE`
//! through the built binary refuses each kind of incomplete or mistyped
//! decision with a non-zero exit and an error naming the key, GPU or port
//! (rules: docs/decisions.md), plans the correct one, and the stored forms
//! (state.json, journal.json) refuse unknown keys the same way.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

mod common;
use common::{root, vclos};
use vclos::decision::Decision;

const TOPO: &str = "topologies/testbed-ocs.yaml";
/// A correct two-leaf vClos decision (8 GPUs on srv1 and srv5).
const J1: &str = "tests/golden/testbed-ocs/j1.yaml";

fn j1_text() -> String {
    std::fs::read_to_string(root().join(J1)).unwrap()
}

fn plan_decision(file: &Path) -> Output {
    vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--decision",
        file.to_str().unwrap(),
    ])
}

/// `text` changed by `edit`, which must change it.
fn edited(text: &str, edit: impl Fn(&str) -> String) -> String {
    let out = edit(text);
    assert_ne!(out, text, "the edit changed nothing");
    out
}

#[test]
fn the_correct_hand_written_decision_plans() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("j1.yaml");
    std::fs::write(&file, j1_text()).unwrap();
    let o = plan_decision(&file);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("plan: admit job j1 (3 devices change)"),
        "{out}"
    );
}

#[test]
fn each_bad_decision_fails_naming_what_is_wrong() {
    let j1 = j1_text();
    let vclos_at = j1.find("\nvclos:").unwrap();
    let routes_at = j1.find("\nsource_routes:").unwrap();
    let json: serde_json::Value = serde_yaml_ng::from_str(&j1).unwrap();
    let mut with_priority = json.clone();
    with_priority["priority"] = serde_json::Value::from(1);
    let cases: Vec<(&str, String, &[&str])> = vec![
        (
            // The reproduction: committed on 0 devices before.
            "no-network.yaml",
            j1[..vclos_at + 1].to_string(),
            &["job `j1`: `vclos`:", "under 2 leaves (leaf1, leaf2)"],
        ),
        (
            "no-routes.yaml",
            j1[..routes_at + 1].to_string(),
            &["job `j1`: `source_routes`:", "missing or empty"],
        ),
        (
            "misspelt-section.yaml",
            edited(&j1, |t| t.replace("\nvclos:", "\nvclso:")),
            &["unknown field `vclso`"],
        ),
        (
            "misspelt-routes.yaml",
            edited(&j1, |t| t.replace("\nsource_routes:", "\nsource_route:")),
            &["unknown field `source_route`"],
        ),
        (
            "unknown-link-key.yaml",
            edited(&j1, |t| {
                t.replacen("peer: spine1-1,", "peer: spine1-1, speed: 100,", 1)
            }),
            &["unknown field `speed`"],
        ),
        (
            "unknown-key.json",
            serde_json::to_string_pretty(&with_priority).unwrap(),
            &["unknown field `priority`"],
        ),
        (
            "server-stage.yaml",
            edited(&j1, |t| t.replace("stage: vclos", "stage: server")),
            &[
                "job `j1`: `stage`:",
                "`server` means one server, but the GPUs are on 2 servers (srv1, srv5)",
            ],
        ),
        (
            "leaf-stage.yaml",
            edited(&j1, |t| t.replace("stage: vclos", "stage: leaf")),
            &["job `j1`: `stage`:", "under 2 leaves (leaf1, leaf2)"],
        ),
        (
            "unrouted-port.yaml",
            edited(&j1, |t| {
                t.replace(
                    "  - {leaf: leaf2, server_port: \"100GE1/0/4\", uplink: \"100GE1/0/20\"}\n",
                    "",
                )
            }),
            &["job `j1`: leaf2:100GE1/0/4: server port has no source route"],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, text, says) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let o = plan_decision(&file);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name} was accepted");
        for s in says {
            assert!(err.contains(s), "{name}: no {s:?} in {err}");
        }
        // Every refusal names the file it is about.
        assert!(err.contains(name), "{name}: the file is not named in {err}");
        assert!(o.stdout.is_empty(), "{name}: a plan was printed");
    }
}

#[test]
fn a_state_file_with_an_unknown_key_in_a_held_decision_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let j1: Decision = serde_yaml_ng::from_str(&j1_text()).unwrap();
    vclos::state::store::save(dir.path(), "testbed-ocs", &[j1]).unwrap();
    let file = vclos::state::store::state_path(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        edited(&text, |t| t.replacen("\"uplink\"", "\"up_link\"", 1)),
    )
    .unwrap();
    let state = dir.path().to_str().unwrap();
    let o = vclos(&[
        "plan",
        "--topology",
        TOPO,
        "--state",
        state,
        "--release",
        "j1",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "accepted");
    assert!(err.contains("unknown field `up_link`"), "{err}");
}

#[test]
fn a_journal_with_an_unknown_key_in_a_decision_is_refused() {
    use vclos::jobs::journal::{self, Journal, Operation};
    let dir = tempfile::tempdir().unwrap();
    let j1: Decision = serde_yaml_ng::from_str(&j1_text()).unwrap();
    let j = Journal::new(
        "testbed-ocs",
        Operation::Admit,
        j1.clone(),
        vec![],
        vec![j1],
        vec!["leaf1".into()],
    );
    journal::create(dir.path(), &j).unwrap();
    assert_eq!(journal::read(dir.path()).unwrap(), Some(j));
    let file = journal::journal_path(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        edited(&text, |t| t.replacen("\"server\"", "\"sever\"", 1)),
    )
    .unwrap();
    let e = journal::read(dir.path()).unwrap_err().to_string();
    assert!(e.contains("unknown field `sever`"), "{e}");
}
