//! The device-facing CLI through the binary against `vclos emu serve`:
//! injection attempts refused before any device is contacted, the job
//! verbs, a real `kill -9` in the middle of an apply, recovered by the
//! next command, commands waiting for a running transaction (the state
//! lock) and a mistyped `--state`.
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
    let testbed = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/topologies/testbed-ocs.yaml"
    ));
    serve_topology(dir, testbed, faults)
}

/// `vclos emu serve` of `source` with `faults`; returns the written topology.
fn serve_topology(dir: &Path, source: &Path, faults: &[String]) -> (Serve, PathBuf) {
    let topo = dir.join("emu.yaml");
    let mut cmd = Command::new(BIN);
    cmd.args(["emu", "serve", "--topology"])
        .arg(source)
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

/// `vclos status` succeeds and reports every device in sync.
fn assert_in_sync(topo: &Path, state: &Path) {
    let o = vclos(topo, state, &["status"]);
    assert!(
        o.status.success() && text(&o).contains("in sync"),
        "{}",
        text(&o)
    );
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
    let o = vclos(&topo, &state, &["reconcile", "--fix", "--init"]);
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
    assert_in_sync(&topo, &state);
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
    let o = vclos(&topo, &state, &["verify"]);
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

/// `vclos ARGS` started in the background (stdout and stderr captured).
fn spawn(topo: &Path, state: &Path, args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .arg("--topology")
        .arg(topo)
        .arg("--state")
        .arg(state)
        .env("VCLOS_EMU_PASSWORD", "admin")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Held job ids, from `job list --json`.
fn held(topo: &Path, state: &Path) -> Vec<String> {
    job_list(topo, state)
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["job"].as_str().unwrap().to_string())
        .collect()
}

/// Wait until `state` holds a journal (an apply is mid-transaction).
fn await_journal(state: &Path) {
    let t0 = Instant::now();
    while !state.join("journal.json").exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no journal");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The issue's reproduction: a slow apply in flight, then `reconcile` and
/// another `job submit`. Before the state lock, reconcile "recovered" the
/// live apply and rolled leaf1 back under it (state.json ended empty while
/// three devices carried the job). Now both wait for it, and `--wait 0`
/// fails naming the holder.
#[test]
fn commands_wait_for_a_running_transaction_instead_of_recovering_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (_emu, topo) = serve(dir.path(), &["leaf1:delay=40".to_string()]);
    let o = vclos(&topo, &state, &["reconcile", "--fix", "--init"]);
    assert!(o.status.success(), "{}", text(&o));

    let apply = spawn(&topo, &state, &["apply", "--submit", "j1:24", "--yes"]);
    await_journal(&state);
    let o = vclos(
        &topo,
        &state,
        &["job", "submit", "--id", "j2", "--gpus", "8", "--wait", "0"],
    );
    assert!(!o.status.success(), "{}", text(&o));
    let pid = apply.id();
    for want in [
        format!("pid {pid}"),
        "apply of job `j1`".into(),
        "nothing was changed".into(),
    ] {
        assert!(text(&o).contains(&want), "{want}: {}", text(&o));
    }
    let o = vclos(&topo, &state, &["status"]);
    assert!(
        text(&o).contains("in flight") && !text(&o).contains("pending recovery"),
        "{}",
        text(&o)
    );
    let o = vclos(&topo, &state, &["verify"]);
    assert!(
        !o.status.success() && text(&o).contains("in flight"),
        "{}",
        text(&o)
    );
    // Waits for the apply, then finds nothing to recover.
    let reconcile = spawn(&topo, &state, &["reconcile"]);
    let submit = spawn(
        &topo,
        &state,
        &["job", "submit", "--id", "j2", "--gpus", "8"],
    );
    let apply = apply.wait_with_output().unwrap();
    assert!(apply.status.success(), "{}", text(&apply));
    let reconcile = reconcile.wait_with_output().unwrap();
    assert!(reconcile.status.success(), "{}", text(&reconcile));
    assert!(
        !text(&reconcile).contains("recovered"),
        "{}",
        text(&reconcile)
    );
    let submit = submit.wait_with_output().unwrap();
    assert!(submit.status.success(), "{}", text(&submit));

    let mut jobs = held(&topo, &state);
    jobs.sort();
    assert_eq!(jobs, ["j1", "j2"]);
    let o = vclos(&topo, &state, &["verify"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Two submits and two releases at once: each acknowledged change is in
/// the state, on disjoint GPUs, and a released job never comes back.
#[test]
fn concurrent_submits_and_releases_are_all_kept() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (_emu, topo) = serve(dir.path(), &["ocs1:delay=100".to_string()]);
    let o = vclos(&topo, &state, &["reconcile", "--fix", "--init"]);
    assert!(o.status.success(), "{}", text(&o));
    let submits: Vec<Child> = ["a", "b", "c"]
        .iter()
        .map(|id| spawn(&topo, &state, &["job", "submit", "--id", id, "--gpus", "8"]))
        .collect();
    for c in submits {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = vclos(&topo, &state, &["job", "list", "--json"]);
    let jobs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut gpus = std::collections::BTreeSet::new();
    for d in jobs.as_array().unwrap() {
        for g in d["gpus"].as_array().unwrap() {
            assert!(gpus.insert(g.to_string()), "GPU {g} held twice");
        }
    }
    assert_eq!(gpus.len(), 24);
    let releases: Vec<Child> = ["a", "b"]
        .iter()
        .map(|id| spawn(&topo, &state, &["job", "release", "--id", id]))
        .collect();
    for c in releases {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    assert_eq!(held(&topo, &state), ["c"]);
    let o = vclos(&topo, &state, &["verify"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A mistyped `--state` is an error that changes nothing, never an empty
/// fabric whose "fix" removes every held job's configuration.
#[test]
fn a_mistyped_state_directory_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (_emu, topo) = serve(dir.path(), &[]);
    let o = vclos(
        &topo,
        &state,
        &["job", "submit", "--id", "a", "--gpus", "8"],
    );
    assert!(
        !o.status.success() && text(&o).contains("not a vclos state directory"),
        "{}",
        text(&o)
    );
    let o = vclos(&topo, &state, &["reconcile", "--fix", "--init"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = vclos(
        &topo,
        &state,
        &["job", "submit", "--id", "a", "--gpus", "24"],
    );
    assert!(o.status.success(), "{}", text(&o));

    let typo = dir.path().join("stat");
    for args in [
        &["reconcile", "--fix"][..],
        &["job", "list"],
        &["status"],
        &["verify"],
        &["job", "release", "--id", "a"],
    ] {
        let o = vclos(&topo, &typo, args);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("stat: not a vclos state directory"),
            "{args:?}: {}",
            text(&o)
        );
    }
    assert!(!typo.exists());
    // --init refuses a directory holding something else.
    let o = vclos(&topo, dir.path(), &["reconcile", "--fix", "--init"]);
    assert!(
        !o.status.success() && text(&o).contains("refusing to create a state directory"),
        "{}",
        text(&o)
    );
    assert_eq!(held(&topo, &state), ["a"]);
    let o = vclos(&topo, &state, &["verify"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A state every other command refuses (here: one job held twice) is not
/// verified as OK; no device is contacted for it.
#[test]
fn verify_refuses_a_state_other_commands_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let topo = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/topologies/testbed-ocs.yaml"
    ));
    let d = r#"{"job":"a","stage":"server","gpus":[{"server":"srv1","gpu":0}]}"#;
    std::fs::create_dir(&state).unwrap();
    std::fs::write(
        state.join("state.json"),
        format!(r#"{{"version":1,"topology":"testbed-ocs","decisions":[{d},{d}]}}"#),
    )
    .unwrap();
    for args in [
        &["verify"][..],
        &["job", "submit", "--id", "b", "--gpus", "4"],
    ] {
        let o = vclos(topo, &state, args);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("state.json") && text(&o).contains("job `a` is already admitted"),
            "{args:?}: {}",
            text(&o)
        );
    }
}

/// Issue 13: a size with no slice shape on this fabric is placed in the
/// smallest larger one, and the plan says how many GPUs that holds idle;
/// "not now" stays a refusal a scheduler may retry.
#[test]
fn a_size_without_a_slice_shape_is_rounded_up_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let topo = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/topologies/testbed.yaml"
    ));
    let plan = |id: &str, gpus: &str| {
        vclos(
            topo,
            &state,
            &[
                "job",
                "submit",
                "--init",
                "--dry-run",
                "--id",
                id,
                "--gpus",
                gpus,
            ],
        )
    };
    let o = plan("wide", "20");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("asked for 20 GPUs and holds 24: 4 reserved_idle_gpus"),
        "{}",
        text(&o)
    );
    assert!(plan("w24", "24").status.success());
    // 16 GPUs held: 24 does not fit now, but it is not "never".
    let d = r#"{"job":"a","stage":"leaf","gpus":[
        {"server":"srv1","gpu":0},{"server":"srv1","gpu":1},{"server":"srv1","gpu":2},{"server":"srv1","gpu":3},
        {"server":"srv2","gpu":0},{"server":"srv2","gpu":1},{"server":"srv2","gpu":2},{"server":"srv2","gpu":3},
        {"server":"srv3","gpu":0},{"server":"srv3","gpu":1},{"server":"srv3","gpu":2},{"server":"srv3","gpu":3},
        {"server":"srv4","gpu":0},{"server":"srv4","gpu":1},{"server":"srv4","gpu":2},{"server":"srv4","gpu":3}]}"#;
    std::fs::write(
        state.join("state.json"),
        format!(r#"{{"version":1,"topology":"testbed","decisions":[{d}]}}"#),
    )
    .unwrap();
    let o = plan("w24", "24");
    assert!(
        !o.status.success() && text(&o).contains("cannot be placed now"),
        "{}",
        text(&o)
    );
    // `job list` says which held GPUs were never asked for.
    let rounded = d.replacen(
        r#""stage":"leaf","#,
        r#""stage":"leaf","requested_gpus":14,"#,
        1,
    );
    std::fs::write(
        state.join("state.json"),
        format!(r#"{{"version":1,"topology":"testbed","decisions":[{rounded}]}}"#),
    )
    .unwrap();
    let o = vclos(topo, &state, &["job", "list"]);
    assert!(
        o.status.success()
            && text(&o).contains("16 GPUs")
            && text(&o).contains("(2 reserved_idle_gpus)"),
        "{}",
        text(&o)
    );
}

#[test]
fn partial_servers_configure_a_slice_on_partly_used_servers() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (_emu, topo) = serve(dir.path(), &[]);
    let o = vclos(&topo, &state, &["reconcile", "--fix", "--init"]);
    assert!(o.status.success(), "{}", text(&o));
    // Eight 3-GPU jobs: one per server (stage 0), one GPU of each free.
    for i in 1..=8 {
        let id = format!("h{i}");
        let o = vclos(
            &topo,
            &state,
            &["job", "submit", "--id", &id, "--gpus", "3"],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    let submit = |extra: &[&str]| {
        let mut args = vec!["job", "submit", "--id", "p", "--gpus", "8"];
        args.extend_from_slice(extra);
        vclos(&topo, &state, &args)
    };
    // Whole servers: none is idle.
    let o = submit(&[]);
    assert!(
        !o.status.success() && text(&o).contains("cannot be placed now"),
        "{}",
        text(&o)
    );
    // Partial servers: the free GPU of every server, isolated on the
    // devices (leaf source routes, OCS circuits), verified from their
    // running configurations. Placed in the sharing mode (issue 16), it
    // shares nothing here and configures as any isolated job, its phase in
    // the decision for the scheduler.
    let o = submit(&[&["--partial-servers", "--json"], &SHARING[..]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let p = &listed_job(&topo, &state, "p");
    let gpus = p["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 8, "{p}");
    let servers: std::collections::HashSet<_> = gpus.iter().map(|g| &g["server"]).collect();
    assert_eq!(servers.len(), 8, "one GPU on each server: {p}");
    assert_eq!(p["source_routes"].as_array().unwrap().len(), 8, "{p}");
    assert_eq!(p["sharing"]["time_shift_ms"], 0, "{p}");
    // Its profile as stated: Down 300 ms, then Up 100 ms at line rate.
    assert_eq!(
        p["sharing"]["profile"],
        serde_json::json!([{"ms": 300, "demand": 0.0}, {"ms": 100, "demand": 1.0}]),
        "{p}"
    );
    assert!(p["sharing"].get("links").is_none(), "{p}");
    let o = vclos(&topo, &state, &["job", "list"]);
    assert!(
        text(&o).contains("time shift 0 ms of 400 ms, 0 shared link(s)"),
        "{}",
        text(&o)
    );
    let o = vclos(&topo, &state, &["verify"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_in_sync(&topo, &state);
    let o = vclos(&topo, &state, &["job", "release", "--id", "p"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_in_sync(&topo, &state);
}

/// `--policy titan` on the emulated fabric (issue 15 item 1): a job
/// across leaves takes the free GPUs of partly used servers, where the
/// fabric's own policy takes idle servers, and is isolated on the devices
/// by that policy's slice (leaf source routes, verified from the running
/// configurations); a job that fits one leaf fills a partly used server
/// with nothing to configure. `plan` places as `job submit` and `apply`
/// do; the simulation's baselines and titan on named GPUs are refused.
#[test]
fn titan_fills_partly_used_servers_and_isolates_jobs_across_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (_emu, topo) = serve(dir.path(), &[]);
    // A command that must succeed: its output.
    let ok = |args: &[&str]| {
        let o = vclos(&topo, &state, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        o
    };
    // A command refused before any device, with `why` in its message.
    let refused = |args: &[&str], why: &str| {
        let o = vclos(&topo, &state, args);
        assert!(
            !o.status.success() && text(&o).contains(why),
            "{}",
            text(&o)
        );
    };
    let decision = |o: Output| {
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["decision"].clone()
    };
    let verified = || {
        ok(&["verify"]);
        assert_in_sync(&topo, &state);
    };
    ok(&["reconcile", "--fix", "--init"]);
    // Two GPUs held on srv1, srv2 (leaf1) and srv5, srv6 (leaf2).
    for s in ["srv1", "srv2", "srv5", "srv6"] {
        ok(&["job", "submit", "--id", s, "--gpus-on", &format!("{s}=0,1")]);
    }
    let servers_of = |d: &serde_json::Value| -> Vec<String> {
        let mut v: Vec<String> = (d["gpus"].as_array().unwrap().iter())
            .map(|g| g["server"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    // The fabric's own policy takes two idle servers for 8 GPUs.
    let dry = |extra: &[&str]| {
        let args = [
            "job",
            "submit",
            "--id",
            "t",
            "--gpus",
            "8",
            "--dry-run",
            "--json",
        ];
        decision(ok(&[&args[..], extra].concat()))
    };
    let own = dry(&[]);
    assert!(
        servers_of(&own)
            .iter()
            .all(|s| !["srv1", "srv2", "srv5", "srv6"].contains(&s.as_str())),
        "{own}"
    );
    // titan: GPUs 2 and 3 of the four partly used servers, as `plan` says.
    let planned = decision(ok(&[
        "plan", "--submit", "t:8", "--policy", "titan", "--json",
    ]));
    assert_eq!(dry(&["--policy", "titan"]), planned);
    ok(&[
        "job", "submit", "--id", "t", "--gpus", "8", "--policy", "titan",
    ]);
    let t = listed_job(&topo, &state, "t");
    assert_eq!(t, planned);
    assert_eq!(servers_of(&t), ["srv1", "srv2", "srv5", "srv6"], "{t}");
    assert!(
        t["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["gpu"] == 2 || g["gpu"] == 3),
        "{t}"
    );
    assert_eq!(t["source_routes"].as_array().unwrap().len(), 8, "{t}");
    verified();
    // One leaf: srv3's three free GPUs and one idle server, 7 GPUs held,
    // nothing configured (the fabric's own policy holds two idle servers).
    ok(&["job", "submit", "--id", "h", "--gpus-on", "srv3=0"]);
    // Through `apply`, which places as `plan` shows (Terraform's plan/apply).
    let planned = decision(ok(&[
        "plan", "--submit", "u:7", "--policy", "titan", "--json",
    ]));
    ok(&["apply", "--submit", "u:7", "--policy", "titan", "--yes"]);
    let u = listed_job(&topo, &state, "u");
    assert_eq!(u, planned);
    assert_eq!(
        (u["stage"].as_str(), u["gpus"].as_array().unwrap().len()),
        (Some("leaf"), 7),
        "{u}"
    );
    assert_eq!(servers_of(&u), ["srv3", "srv4"], "{u}");
    assert!(
        u.get("source_routes")
            .is_none_or(|r| r.as_array().unwrap().is_empty()),
        "{u}"
    );
    verified();
    // Refused before any device: a baseline, and titan on named GPUs.
    let best = [
        "job", "submit", "--id", "b", "--gpus", "4", "--policy", "best",
    ];
    refused(&best, "simulation baseline");
    let named = [
        "job",
        "submit",
        "--id",
        "b",
        "--gpus-on",
        "srv7=0",
        "--policy",
        "titan",
    ];
    refused(&named, "titan chooses a job's GPUs itself");
    for j in ["t", "u"] {
        ok(&["job", "release", "--id", j]);
    }
    assert_in_sync(&topo, &state);
}

/// The sharing mode with a stated profile (400 ms iterations, 25% Up).
const SHARING: [&str; 6] = [
    "--sharing",
    "cassini",
    "--iteration-ms",
    "400",
    "--comm-fraction",
    "0.25",
];

/// `job list --json`.
fn job_list(topo: &Path, state: &Path) -> serde_json::Value {
    let o = vclos(topo, state, &["job", "list", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Job `id` as `job list --json` shows it.
fn listed_job(topo: &Path, state: &Path, id: &str) -> serde_json::Value {
    let jobs = job_list(topo, state);
    let job = jobs.as_array().unwrap().iter().find(|j| j["job"] == id);
    job.cloned()
        .unwrap_or_else(|| panic!("no job {id} in {jobs}"))
}

/// The job holding each server, from `job list --json`.
fn server_holders(topo: &Path, state: &Path) -> std::collections::BTreeMap<String, String> {
    let jobs = job_list(topo, state);
    let mut out = std::collections::BTreeMap::new();
    for j in jobs.as_array().unwrap() {
        for g in j["gpus"].as_array().unwrap() {
            out.insert(
                g["server"].as_str().unwrap().to_string(),
                j["job"].as_str().unwrap().to_string(),
            );
        }
    }
    out
}

#[test]
fn a_shared_link_is_configured_as_one_subinterface_per_joining_job_and_verified() {
    // 3 leaves x 2 servers x 4 GPUs, 4 uplinks per leaf (2:1), Huawei CE.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("narrow.yaml");
    let o = Command::new(BIN)
        .args(["topology", "generate", "--leaves", "3", "--spines", "4"])
        .args(["--gpus-per-server", "4", "--servers-per-leaf", "2"])
        .arg("--allow-oversubscription")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(&source, &o.stdout).unwrap();
    let state = dir.path().join("state");
    let (_emu, topo) = serve_topology(dir.path(), &source, &[]);
    let o = vclos(&topo, &state, &["reconcile", "--fix", "--init"]);
    assert!(o.status.success(), "{}", text(&o));
    let submit = |id: &str, gpus: &str, extra: &[&str]| {
        let mut args = vec!["job", "submit", "--id", id, "--gpus", gpus];
        args.extend_from_slice(extra);
        let o = vclos(&topo, &state, &args);
        assert!(o.status.success(), "{id}: {}", text(&o));
    };
    let release = |id: &str| {
        let o = vclos(&topo, &state, &["job", "release", "--id", id]);
        assert!(o.status.success(), "{id}: {}", text(&o));
    };
    // Fill every server, then free the first server of leaves 1 and 2:
    // `a` takes them and every uplink of both leaves.
    for i in 1..=6 {
        submit(&format!("s{i}"), "4", &[]);
    }
    let holder = server_holders(&topo, &state);
    release(&holder["srv1-1"]);
    release(&holder["srv2-1"]);
    submit("a", "8", &SHARING);
    // Free the second server of leaf 1 and one of leaf 3: `b` has idle
    // servers but no free uplink on leaf 1, so it shares a's four links
    // there, each on its own sub-interface (VLAN 101) at both ends.
    release(&holder["srv1-2"]);
    release(&holder["srv3-1"]);
    submit("b", "8", &SHARING);
    let b = &listed_job(&topo, &state, "b");
    let links = b["sharing"]["links"]
        .as_array()
        .unwrap_or_else(|| panic!("{b}"));
    assert_eq!(links.len(), 4, "{b}");
    for l in links {
        assert_eq!(
            (&l["leaf"], &l["with"], &l["vlan"]),
            (&"leaf1".into(), &serde_json::json!(["a"]), &101.into()),
            "{b}"
        );
    }
    // The leaf's running configuration holds b's sub-interfaces and its
    // source routes through them; every flow of every job is verified from
    // the devices' own configurations.
    let o = vclos(&topo, &state, &["device", "get-config", "leaf1"]);
    let running = text(&o);
    assert!(o.status.success(), "{running}");
    assert!(
        running.contains("interface 100GE1/0/9.101")
            && running.contains("dot1q termination vid 101"),
        "{running}"
    );
    let o = vclos(&topo, &state, &["verify"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_in_sync(&topo, &state);
    // Either may leave first; the other keeps its interfaces, in sync.
    release("a");
    let o = vclos(&topo, &state, &["verify"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_in_sync(&topo, &state);
    release("b");
    assert_in_sync(&topo, &state);
    let o = vclos(&topo, &state, &["device", "get-config", "leaf1"]);
    assert!(!text(&o).contains(".101"), "{}", text(&o));
}

/// Issue 17 item 2 from the CLI: `job submit --servers` plans a slice on
/// exactly the named servers (`--gpus` then defaults to all of theirs),
/// and an allocation that cannot be isolated is refused with a set that
/// can, before any device is contacted (the dry run reads no device).
#[test]
fn job_submit_on_named_servers_plans_exactly_those_or_names_a_set_that_fits() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let topo = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/topologies/testbed.yaml"
    ));
    let submit = |servers: &str| {
        let args = [
            "job",
            "submit",
            "--init",
            "--dry-run",
            "--json",
            "--id",
            "s",
        ];
        vclos(topo, &state, &[&args[..], &["--servers", servers]].concat())
    };
    let o = submit("srv7,srv3");
    assert!(o.status.success(), "{}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut servers: Vec<&str> = (plan["decision"]["gpus"].as_array().unwrap().iter())
        .map(|g| g["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers.len(), 8, "{}", plan["decision"]);
    servers.sort();
    servers.dedup();
    assert_eq!(servers, ["srv3", "srv7"], "{plan}");
    let o = submit("srv1,srv2,srv5");
    assert!(!o.status.success());
    assert!(
        text(&o).contains("same number of servers")
            && text(&o).contains("these servers have one now"),
        "{}",
        text(&o)
    );
    let o = submit("srv1,ghost");
    assert!(!o.status.success());
    assert!(text(&o).contains("servers[1]: `ghost`"), "{}", text(&o));
}
