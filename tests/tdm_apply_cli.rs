//! `vclos tdm apply` through the real binary against `vclos emu serve`
//! (testbed-ocs, 50 ms switching): the dry run changes nothing, a timed run
//! and a barrier run (stage numbers on stdin) end in the last stage's map
//! with JSON-line events, and a bad schedule fails before any device moves.
#![allow(clippy::unwrap_used)]

mod serve_common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serve_common::{emulated_fabric_switching, stderr, stdout, vclos, Kill};

/// Two stages: job a on 1~17, 2~18; job b on 3~19, 4~20; 9~41 (cabled)
/// stays in both.
const SCHEDULE: &str = r#"{"topology":"testbed-ocs","variant":"tdm","switch_ms":50,
 "round_s":0.2,"baseline_round_s":0.3,"reconfiguration_s":0.1,"stages":[
 {"jobs":["a"],"time_s":0.01,"ocs":{"ocs1":[{"a":"1","b":"17","jobs":["a"]},
   {"a":"2","b":"18","jobs":["a"]},{"a":"9","b":"41"}]}},
 {"jobs":["b"],"time_s":0.01,"ocs":{"ocs1":[{"a":"3","b":"19","jobs":["b"]},
   {"a":"4","b":"20","jobs":["b"]},{"a":"9","b":"41"}]}}]}"#;

fn emulator(dir: &Path) -> (Kill, String) {
    let (emu, topo) = emulated_fabric_switching(dir, 50);
    (emu, topo.to_str().unwrap().to_string())
}

/// `vclos tdm apply --topology TOPO --schedule SCHEDULE ARGS...`.
fn apply(topo: &str, schedule: &str, args: &[&str]) -> Output {
    let mut all = vec!["tdm", "apply", "--topology", topo, "--schedule", schedule];
    all.extend_from_slice(args);
    vclos(&all)
}

/// The OCS table as its driver reads it, sorted lines.
fn table(topo: &str) -> Vec<String> {
    let o = vclos(&["device", "get-config", "ocs1", "--topology", topo]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut v: Vec<String> = stdout(&o).lines().map(|l| l.trim().to_string()).collect();
    v.retain(|l| !l.is_empty());
    v.sort();
    v
}

fn lines(s: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = s.iter().map(|l| format!("\"{l}\"")).collect();
    v.sort();
    v
}

#[test]
fn dry_run_timed_and_barrier_runs_over_the_emulated_ocs() {
    let dir = tempfile::tempdir().unwrap();
    let (_emu, topo) = emulator(dir.path());
    let sched = dir.path().join("s.json");
    std::fs::write(&sched, SCHEDULE).unwrap();
    let s = sched.to_str().unwrap();
    let cabled = table(&topo);
    assert_eq!(cabled.len(), 32);

    let o = apply(&topo, s, &["--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains(
            "barrier 0->1:\n  ocs1:\n    DLT-PATCH::1&17&2&18:1;\n    ENT-PATCH::3&4,19&20:2;\n"
        ),
        "{text}"
    );
    assert!(text.contains("    ENT-PATCH::1&2,17&18:2;\n"), "{text}");
    assert!(!text.contains("&9&") && !text.contains("&41&"), "{text}");
    assert_eq!(table(&topo), cabled, "a dry run changes nothing");

    let events = dir.path().join("events.jsonl");
    let o = apply(
        &topo,
        s,
        &["--rounds", "2", "--events", events.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let kinds: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let k = v["event"].as_str().unwrap().to_string();
            match k.as_str() {
                "stage-begins" => format!("begin{}", v["stage"]),
                "switched" => {
                    assert_eq!(v["ocs"][0]["ports_touched"], 8, "{l}");
                    assert!(v["elapsed_ms"].as_f64().unwrap() >= 50.0, "{l}");
                    format!("switch{}", v["to"])
                }
                _ => k,
            }
        })
        .collect();
    let want = "installed begin0 barrier switch1 begin1 barrier switch0 begin0 barrier switch1 begin1 barrier finished";
    assert_eq!(kinds.join(" "), want);
    let last = lines(&["3,19", "4,20", "9,41"]);
    assert_eq!(table(&topo), last);

    // Barrier mode: the hosts' signals on stdin. From stage 1's map the
    // install switches to stage 0.
    let mut child = Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args([
            "tdm",
            "apply",
            "--topology",
            &topo,
            "--schedule",
            s,
            "--mode",
            "barrier",
        ])
        .env("VCLOS_EMU_PASSWORD", "admin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"0\n1\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with("installed stage 0 (8 ports changed)\n"),
        "{text}"
    );
    assert!(text.contains("switched 0->1: 8 ports changed"), "{text}");
    assert!(text.ends_with("finished after 1 round(s)\n"), "{text}");
    assert_eq!(table(&topo), last);
}

#[test]
fn a_bad_schedule_fails_before_any_device_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (_emu, topo) = emulator(dir.path());
    let cabled = table(&topo);
    let cases = [
        // Job a keeps communicating in stage 1, whose map drops its circuits.
        (
            SCHEDULE.replace(r#""jobs":["b"],"time_s""#, r#""jobs":["b","a"],"time_s""#),
            "bad.json: barrier 0->1: ocs1: circuit 1~17 would be cut while job `a` communicates across the barrier",
        ),
        (
            SCHEDULE.replace(r#""b":"20""#, r#""b":"65""#),
            "bad.json: stage 1: ocs1: port 65 does not exist",
        ),
        (
            SCHEDULE.replace(r#""b":"20""#, r#""b":"19""#),
            "bad.json: stage 1: ocs1: port 19 is in two circuits",
        ),
        (
            SCHEDULE.replace("\"ocs1\"", "\"ocs7\""),
            "bad.json: stage 0: `ocs7` is not an OCS of the topology",
        ),
    ];
    let bad = dir.path().join("bad.json");
    for (text, want) in cases {
        std::fs::write(&bad, text).unwrap();
        let o = apply(&topo, bad.to_str().unwrap(), &[]);
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(err.contains(want), "{err}");
        assert!(stdout(&o).is_empty(), "nothing was installed");
    }
    assert_eq!(table(&topo), cabled);
}
