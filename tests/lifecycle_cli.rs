//! The device-facing CLI through the binary against `vclos emu serve`:
//! injection attempts refused before any device is contacted, the job
//! verbs, and a real `kill -9` in the middle of an apply, recovered by the
//! next command.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vclos");
const DEVICES: [&str; 5] = ["leaf1", "leaf2", "spine1", "spine2", "ocs1"];

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `vclos emu serve` of testbed-ocs with `faults`; returns the written topology.
fn serve(dir: &Path, faults: &[String]) -> (Serve, PathBuf) {
    let topo = dir.join("emu.yaml");
    let mut cmd = Command::new(BIN);
    cmd.args(["emu", "serve", "--topology"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/topologies/testbed-ocs.yaml"
        ))
        .args(["--switch-delay-ms", "0", "--write-topology"])
        .arg(&topo);
    for f in faults {
        cmd.args(["--fault", f]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("leaf1"), "{line}");
    (Serve(child), topo)
}

fn vclos(topo: &Path, state: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env("VCLOS_EMU_PASSWORD", "admin");
    if args[0] == "device" {
        cmd.arg("--topology").arg(topo);
    } else {
        cmd.arg("--topology").arg(topo).arg("--state").arg(state);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn injection_through_a_job_id_is_refused_before_any_device_is_contacted() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // Canaries: every device drops the connection at its next command.
    let faults: Vec<String> = DEVICES.iter().map(|d| format!("{d}:drop")).collect();
    let (_emu, topo) = serve(dir.path(), &faults);
    let decision = dir.path().join("d.yaml");
    std::fs::write(
        &decision,
        "job: \"j1;reload\"\nstage: manual\ngpus: [{server: srv1-1, gpu: 0}]\n",
    )
    .unwrap();
    let d = decision.to_str().unwrap();
    for args in [
        vec!["apply", "--submit", "j1;reload:4", "--yes"],
        vec!["apply", "--submit", "j1\nreboot:4", "--yes"],
        vec!["apply", "--decision", d, "--yes"],
        vec!["job", "submit", "--id", "j1\nreboot", "--gpus", "4"],
        vec!["job", "release", "--id", "j1;reload"],
    ] {
        let o = vclos(&topo, &state, &args);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("error"), "{args:?}: {}", text(&o));
    }
    assert!(!state.join("journal.json").exists());
    assert!(!state.join("state.json").exists());
    // Every canary is still armed: the first contact now fails, the next works.
    for dev in DEVICES {
        let o = vclos(&topo, &state, &["device", "get-config", dev]);
        assert!(
            !o.status.success(),
            "{dev} was contacted before: {}",
            text(&o)
        );
        let o = vclos(&topo, &state, &["device", "get-config", dev]);
        assert!(o.status.success(), "{dev}: {}", text(&o));
    }
}

#[test]
fn job_verbs_and_a_real_kill_9_mid_apply() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // The OCS answers slowly, holding the apply in its first stage.
    let (_emu, topo) = serve(dir.path(), &["ocs1:delay=150".to_string()]);
    let o = vclos(&topo, &state, &["reconcile", "--fix"]);
    assert!(o.status.success(), "{}", text(&o));

    // A whole-leaf job (no device change), listed; status in sync.
    let o = vclos(
        &topo,
        &state,
        &["job", "submit", "--id", "a", "--gpus", "12"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = vclos(&topo, &state, &["job", "list"]);
    assert!(
        text(&o).contains("1 job(s)") && text(&o).starts_with('a'),
        "{}",
        text(&o)
    );
    let o = vclos(&topo, &state, &["status"]);
    assert!(
        o.status.success() && text(&o).contains("in sync"),
        "{}",
        text(&o)
    );
    let o = vclos(&topo, &state, &["job", "release", "--id", "a"]);
    assert!(o.status.success(), "{}", text(&o));
    let before = std::fs::read(state.join("state.json")).unwrap();

    // kill -9 the apply as soon as its journal exists.
    let mut child = Command::new(BIN)
        .args(["apply", "--submit", "j1:24", "--yes", "--topology"])
        .arg(&topo)
        .arg("--state")
        .arg(&state)
        .env("VCLOS_EMU_PASSWORD", "admin")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !state.join("journal.json").exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no journal");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(state.join("journal.json").exists());
    assert_eq!(std::fs::read(state.join("state.json")).unwrap(), before);

    let o = vclos(&topo, &state, &["status"]);
    assert!(
        !o.status.success() && text(&o).contains("pending recovery"),
        "{}",
        text(&o)
    );
    let o = vclos(&topo, &state, &["reconcile"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("recovered an interrupted admission of job `j1`"),
        "{}",
        text(&o)
    );
    assert!(!state.join("journal.json").exists());
    let o = vclos(&topo, &state, &["job", "list", "--json"]);
    let jobs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = jobs.as_array().unwrap().len();
    // Either the admission was undone or it had fully committed; never half.
    let o = vclos(&topo, &state, &["status"]);
    assert!(
        o.status.success() && !text(&o).contains("DRIFT"),
        "{n}: {}",
        text(&o)
    );
}
