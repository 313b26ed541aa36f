//! `vclos serve` end to end: the binary serving the API over an emulated
//! fabric (`vclos emu serve`), driven by curl (a third-party HTTP client):
//! authentication, idempotent submission, problem responses naming the
//! field, bounds, concurrent clients, the state lock held for the
//! service's life, and shutdown on SIGTERM releasing it.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_vclos");
const TOKEN: &str = "test-token-0123456789abcdef";

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `args` and return it with the first line it prints.
fn start(args: &[&str]) -> (Kill, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("VCLOS_EMU_PASSWORD", "admin")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (Kill(child), line)
}

fn vclos(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("VCLOS_EMU_PASSWORD", "admin")
        .output()
        .unwrap()
}

/// `curl` a request; returns (status, body as JSON or text).
fn curl(
    url: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method])
        .arg(format!("{url}{path}"));
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if let Some(b) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary", b]);
    }
    let o = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap();
    let v = serde_json::from_str(body).unwrap_or(serde_json::Value::String(body.to_string()));
    (code.parse().unwrap(), v)
}

struct Service {
    _emu: Kill,
    serve: Kill,
    url: String,
    topo: PathBuf,
    state: PathBuf,
}

fn service(dir: &Path) -> Service {
    let topo = dir.join("emu.yaml");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed-ocs.yaml");
    let (emu, line) = start(&[
        "emu",
        "serve",
        "--topology",
        source,
        "--switch-delay-ms",
        "0",
        "--write-topology",
        topo.to_str().unwrap(),
    ]);
    assert!(line.contains("leaf1"), "{line}");
    let state = dir.join("state");
    let t = topo.to_str().unwrap();
    let s = state.to_str().unwrap();
    let o = vclos(&[
        "reconcile",
        "--fix",
        "--init",
        "--topology",
        t,
        "--state",
        s,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let (serve, line) = start(&[
        "serve",
        "--topology",
        t,
        "--state",
        s,
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        token.to_str().unwrap(),
    ]);
    let url = line
        .trim()
        .rsplit_once(' ')
        .map(|(_, u)| u.to_string())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    Service {
        _emu: emu,
        serve,
        url,
        topo,
        state,
    }
}

#[test]
fn jobs_through_the_api_are_authenticated_idempotent_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    let url = svc.url.as_str();
    let tok = Some(TOKEN);
    // Health needs no token; the API does.
    assert_eq!(curl(url, "GET", "/healthz", None, None).0, 200);
    assert_eq!(curl(url, "GET", "/readyz", None, None).0, 200);
    let (code, p) = curl(url, "GET", "/v1/jobs", None, None);
    assert_eq!((code, &p["status"]), (401, &401.into()), "{p}");
    assert_eq!(
        curl(url, "GET", "/v1/jobs", None, Some("wrong-token-0123456789")).0,
        401
    );
    // Submit: committed on the devices, the decision returned.
    let (code, a) = curl(
        url,
        "POST",
        "/v1/jobs",
        Some(r#"{"id": "a", "gpus": 8}"#),
        tok,
    );
    assert_eq!(code, 201, "{a}");
    assert_eq!(
        (&a["committed"], &a["decision"]["job"]),
        (&true.into(), &"a".into()),
        "{a}"
    );
    assert!(a["timings"]["total_ms"].as_f64().unwrap() > 0.0, "{a}");
    // The same request again: the held decision, nothing applied twice.
    let (code, again) = curl(
        url,
        "POST",
        "/v1/jobs",
        Some(r#"{"id": "a", "gpus": 8}"#),
        tok,
    );
    assert_eq!((code, &again["existing"]), (200, &true.into()), "{again}");
    assert_eq!(again["decision"], a["decision"]);
    // A conflicting one: 409 naming the field.
    let (code, p) = curl(
        url,
        "POST",
        "/v1/jobs",
        Some(r#"{"id": "a", "gpus": 16}"#),
        tok,
    );
    assert_eq!((code, &p["field"]), (409, &"gpus".into()), "{p}");
    // Bad requests: problem+json naming the field; oversized bodies refused.
    let (code, p) = curl(
        url,
        "POST",
        "/v1/jobs",
        Some(r#"{"id": "b", "gpus": 8, "servers": ["srv1"]}"#),
        tok,
    );
    assert_eq!((code, &p["field"]), (400, &"servers".into()), "{p}");
    let (code, p) = curl(
        url,
        "POST",
        "/v1/jobs",
        Some(r#"{"id": "b c", "gpus": 8}"#),
        tok,
    );
    assert_eq!((code, &p["field"]), (422, &"id".into()), "{p}");
    let big = format!(
        r#"{{"id": "b", "gpus": 8, "pad": "{}"}}"#,
        "x".repeat(20_000)
    );
    assert_eq!(curl(url, "POST", "/v1/jobs", Some(&big), tok).0, 413);
    let (code, p) = curl(
        url,
        "POST",
        "/v1/jobs",
        Some(r#"{"id": "huge", "gpus": 4096}"#),
        tok,
    );
    assert!(code == 409 || code == 422, "{code} {p}");
    // Reads.
    let (code, list) = curl(url, "GET", "/v1/jobs", None, tok);
    assert_eq!((code, list.as_array().unwrap().len()), (200, 1), "{list}");
    let (code, one) = curl(url, "GET", "/v1/jobs/a", None, tok);
    assert_eq!((code, &one["job"]), (200, &"a".into()), "{one}");
    assert_eq!(curl(url, "GET", "/v1/jobs/zz", None, tok).0, 404);
    // The service owns the state: a CLI writer is refused, naming it.
    let (t, s) = (svc.topo.to_str().unwrap(), svc.state.to_str().unwrap());
    let o = vclos(&[
        "job",
        "submit",
        "--id",
        "x",
        "--gpus",
        "4",
        "--wait",
        "0",
        "--topology",
        t,
        "--state",
        s,
    ]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success() && err.contains("serve"), "{err}");
    // Release; releasing again is 404 (a retry finds it done).
    let (code, r) = curl(url, "DELETE", "/v1/jobs/a", None, tok);
    assert_eq!((code, &r["committed"]), (200, &true.into()), "{r}");
    assert_eq!(curl(url, "DELETE", "/v1/jobs/a", None, tok).0, 404);
}

#[test]
fn concurrent_clients_each_get_one_answer_and_shutdown_frees_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut svc = service(dir.path());
    let url = svc.url.clone();
    // Eight clients at once, each submitting its own 4-GPU job twice.
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                let body = format!(r#"{{"id": "c{i}", "gpus": 4}}"#);
                let first = curl(&url, "POST", "/v1/jobs", Some(&body), Some(TOKEN));
                let second = curl(&url, "POST", "/v1/jobs", Some(&body), Some(TOKEN));
                (first.0, second.0, second.1["existing"].clone())
            })
        })
        .collect();
    for c in clients {
        let (first, second, existing) = c.join().unwrap();
        assert_eq!((first, second, existing), (201, 200, true.into()));
    }
    let (_, list) = curl(&url, "GET", "/v1/jobs", None, Some(TOKEN));
    assert_eq!(list.as_array().unwrap().len(), 8, "{list}");
    // SIGTERM: the service stops and its lock is released; the devices
    // hold exactly the state's eight jobs, each verified.
    let pid = svc.serve.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert!(svc.serve.0.wait().unwrap().success());
    let (t, s) = (svc.topo.to_str().unwrap(), svc.state.to_str().unwrap());
    let o = vclos(&["verify", "--topology", t, "--state", s]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = vclos(&["status", "--topology", t, "--state", s]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success() && out.contains("in sync") && !out.contains("DRIFT"),
        "{out}"
    );
}

#[test]
fn without_a_token_it_listens_on_loopback_only() {
    let dir = tempfile::tempdir().unwrap();
    let topo = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed-ocs.yaml");
    let s = dir.path().join("state");
    let o = vclos(&[
        "serve",
        "--topology",
        topo,
        "--state",
        s.to_str().unwrap(),
        "--init",
        "--listen",
        "0.0.0.0:0",
    ]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        !o.status.success() && err.contains("without --token-file"),
        "{err}"
    );
    // Nothing was created or locked.
    assert!(!s.exists());
}
