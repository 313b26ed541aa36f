//! `vclos serve` end to end: the binary serving the API over an emulated
//! fabric (`vclos emu serve`), driven by curl (a third-party HTTP client):
//! authentication, idempotent submission, problem responses naming the
//! field, bounds, concurrent clients, the state lock held for the
//! service's life, and shutdown on SIGTERM releasing it.
#![allow(clippy::unwrap_used)]

mod serve_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serve_common::{curl, service, service_switching, vclos, Kill, TOKEN};

/// `POST /v1/jobs` with `body` and the token.
fn post(url: &str, body: &str) -> (u16, serde_json::Value) {
    curl(url, "POST", "/v1/jobs", Some(body), Some(TOKEN))
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
    let (code, a) = post(url, r#"{"id": "a", "gpus": 8}"#);
    assert_eq!(code, 201, "{a}");
    assert_eq!(
        (&a["committed"], &a["decision"]["job"]),
        (&true.into(), &"a".into()),
        "{a}"
    );
    let t = |k: &str| a["timings"][k].as_f64().unwrap();
    assert!(t("total_ms") > 0.0 && t("transaction_ms") > 0.0, "{a}");
    assert_eq!(
        t("transaction_ms"),
        a["devices"]["duration_ms"].as_f64().unwrap()
    );
    assert!((t("total_ms") - t("transaction_ms") - t("outside_transaction_ms")).abs() < 1e-6);
    // The same request again: the held decision, nothing applied twice.
    let (code, again) = post(url, r#"{"id": "a", "gpus": 8}"#);
    assert_eq!((code, &again["existing"]), (200, &true.into()), "{again}");
    assert_eq!(again["decision"], a["decision"]);
    // A conflicting one: 409 naming the field.
    let (code, p) = post(url, r#"{"id": "a", "gpus": 16}"#);
    assert_eq!((code, &p["field"]), (409, &"gpus".into()), "{p}");
    // Bad requests: problem+json naming the field; oversized bodies refused.
    let (code, p) = post(url, r#"{"id": "b", "gpus": 8, "priority": 2}"#);
    assert_eq!((code, &p["field"]), (400, &"priority".into()), "{p}");
    let (code, p) = post(url, r#"{"id": "b"}"#);
    assert_eq!((code, &p["field"]), (400, &"gpus".into()), "{p}");
    let (code, p) = post(url, r#"{"id": "b c", "gpus": 8}"#);
    assert_eq!((code, &p["field"]), (422, &"id".into()), "{p}");
    let big = format!(
        r#"{{"id": "b", "gpus": 8, "pad": "{}"}}"#,
        "x".repeat(20_000)
    );
    assert_eq!(post(url, &big).0, 413);
    let (code, p) = post(url, r#"{"id": "huge", "gpus": 4096}"#);
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

/// The servers of a decision in the API's JSON, sorted.
fn servers_of(decision: &serde_json::Value) -> Vec<String> {
    let mut s: Vec<String> = (decision["gpus"].as_array().unwrap().iter())
        .map(|g| g["server"].as_str().unwrap().to_string())
        .collect();
    s.sort();
    s.dedup();
    s
}

#[test]
fn a_schedulers_allocation_is_isolated_exactly_or_refused_with_a_nearby_set() {
    // testbed-ocs: srv1-srv4 under leaf1, srv5-srv8 under leaf2, 4 GPUs each.
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    let url = svc.url.as_str();
    // Two servers under two leaves: a 2-leaf slice on exactly those.
    let (code, a) = post(url, r#"{"id": "s1", "servers": ["srv6", "srv2"]}"#);
    assert_eq!(code, 201, "{a}");
    assert_eq!(servers_of(&a["decision"]), ["srv2", "srv6"], "{a}");
    assert_eq!(a["decision"]["requested_gpus"], 8, "{a}");
    assert_eq!(
        a["decision"]["vclos"]["leaves"].as_array().unwrap().len(),
        2
    );
    // A retry is idempotent; other servers for the same id are a conflict.
    let (code, again) = post(url, r#"{"id": "s1", "servers": ["srv2", "srv6"]}"#);
    assert_eq!((code, &again["existing"]), (200, &true.into()), "{again}");
    let (code, p) = post(url, r#"{"id": "s1", "servers": ["srv2", "srv7"]}"#);
    assert_eq!((code, &p["field"]), (409, &"servers".into()), "{p}");
    // A busy server: refused, naming its holder.
    let (code, p) = post(url, r#"{"id": "s2", "servers": ["srv2", "srv5"]}"#);
    assert_eq!(code, 409, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("held by job `s1`"),
        "{p}"
    );
    // Unequal servers per leaf: refused with a set that fits, which does.
    let (code, p) = post(url, r#"{"id": "s3", "servers": ["srv1", "srv3", "srv5"]}"#);
    assert_eq!((code, &p["field"]), (409, &"servers".into()), "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("same number of servers"),
        "{p}"
    );
    let near = p["suggested_servers"].as_array().unwrap().clone();
    assert_eq!(near.len(), 3, "{p}");
    let (code, dry) = curl(
        url,
        "POST",
        "/v1/jobs",
        Some(&serde_json::json!({"id": "s3", "servers": near, "dry_run": true}).to_string()),
        Some(TOKEN),
    );
    assert_eq!((code, &dry["dry_run"]), (200, &true.into()), "{dry}");
    let body = serde_json::json!({"id": "s3", "servers": near}).to_string();
    let (code, b) = post(url, &body);
    assert_eq!(code, 201, "{b}");
    // Names are checked before placement; the entry is named.
    let (code, p) = post(url, r#"{"id": "s4", "servers": ["srv8", "nope"]}"#);
    assert_eq!((code, &p["field"]), (422, &"servers[1]".into()), "{p}");
    let (code, p) = post(
        url,
        r#"{"id": "s4", "gpus": 4, "servers": ["srv7", "srv8"]}"#,
    );
    assert_eq!((code, &p["field"]), (422, &"servers".into()), "{p}");
    // GPUs by index (a device plugin's choice): exactly those, two leaves
    // of 4 GPUs each, on servers partly left to other jobs.
    let (code, r) = curl(url, "DELETE", "/v1/jobs/s3", None, Some(TOKEN));
    assert_eq!((code, &r["committed"]), (200, &true.into()), "{r}");
    let body = r#"{"id": "g1", "gpus_on": {"srv3": [0, 1], "srv4": [0, 1], "srv7": [2, 3], "srv8": [2, 3]}}"#;
    let (code, g) = post(url, body);
    assert_eq!(code, 201, "{g}");
    let mut held: Vec<String> = (g["decision"]["gpus"].as_array().unwrap().iter())
        .map(|x| format!("{}:{}", x["server"].as_str().unwrap(), x["gpu"]))
        .collect();
    held.sort();
    let want = [
        "srv3:0", "srv3:1", "srv4:0", "srv4:1", "srv7:2", "srv7:3", "srv8:2", "srv8:3",
    ];
    assert_eq!(held, want, "{g}");
    let (code, again) = post(url, body);
    assert_eq!((code, &again["existing"]), (200, &true.into()), "{again}");
    let other = body.replace("\"srv8\": [2, 3]", "\"srv8\": [0, 1]");
    let (code, p) = post(url, &other);
    assert_eq!((code, &p["field"]), (409, &"gpus_on".into()), "{p}");
    let (code, p) = post(url, r#"{"id": "g2", "gpus_on": {"srv4": [1, 2]}}"#);
    assert_eq!(code, 409, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("held by job `g1`"),
        "{p}"
    );
    let (code, p) = post(url, r#"{"id": "g2", "gpus_on": {"srv4": [7]}}"#);
    assert_eq!((code, &p["field"]), (422, &"gpus_on.srv4[0]".into()), "{p}");
    let (code, p) = post(
        url,
        r#"{"id": "g2", "gpus_on": {"srv4": [2], "srv5": [0]}}"#,
    );
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("lives in one server"),
        "{code} {p}"
    );
    // The other GPUs of those servers still serve a small job.
    let (code, small) = post(url, r#"{"id": "g3", "gpus_on": {"srv4": [2, 3]}}"#);
    assert_eq!(code, 201, "{small}");
    for id in ["s1", "g1", "g3"] {
        let (code, r) = curl(url, "DELETE", &format!("/v1/jobs/{id}"), None, Some(TOKEN));
        assert_eq!((code, &r["committed"]), (200, &true.into()), "{r}");
    }
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
    // SIGTERM: the service stops and its lock is released, though an event
    // stream is open (it ends); the devices hold exactly the state's eight
    // jobs, each verified.
    let mut events = EventStream::open(&url);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = svc.serve.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert!(svc.serve.0.wait().unwrap().success());
    assert!(events.child.0.wait().unwrap().success(), "the stream ended");
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
fn reads_answer_as_of_the_last_change_without_waiting_for_one_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    // An OCS port switch takes 1.5 s, so a job that rewires the OCS (two
    // leaves, 24 GPUs) is in flight that long.
    let svc = service_switching(dir.path(), 1500);
    let url = svc.url.clone();
    assert_eq!(post(&url, r#"{"id": "a", "gpus": 1}"#).0, 201);
    let journal = svc.state.join("journal.json");
    let submit = {
        let url = url.clone();
        std::thread::spawn(move || post(&url, r#"{"id": "b", "gpus": 24}"#))
    };
    // In flight once its journal is written: under the lock, before any
    // device commits, and removed only when the change is over.
    let started = std::time::Instant::now();
    while !journal.exists() {
        assert!(!submit.is_finished(), "{:?}", submit.join().unwrap());
        assert!(started.elapsed().as_secs() < 60, "the change never started");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (code, a) = curl(&url, "GET", "/v1/jobs/a", None, Some(TOKEN));
    assert_eq!((code, &a["job"]), (200, &"a".into()), "{a}");
    let (code, b) = curl(&url, "GET", "/v1/jobs/b", None, Some(TOKEN));
    assert_eq!(code, 404, "{b}");
    let (code, list) = curl(&url, "GET", "/v1/jobs", None, Some(TOKEN));
    assert_eq!(
        (code, list.as_array().map(Vec::len)),
        (200, Some(1)),
        "{list}"
    );
    assert!(
        journal.exists(),
        "the reads were answered only once the change was over"
    );
    let (code, answer) = submit.join().unwrap();
    assert_eq!(code, 201, "{answer}");
    // Acknowledged, it is read at once, as the listing holds it.
    let (code, b) = curl(&url, "GET", "/v1/jobs/b", None, Some(TOKEN));
    assert_eq!((code, &b["job"]), (200, &"b".into()), "{b}");
    let (_, list) = curl(&url, "GET", "/v1/jobs", None, Some(TOKEN));
    assert_eq!(list.as_array().unwrap()[1], b, "{list}");
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

/// Lines of a server-sent event stream, read by `curl -N` in the background.
struct EventStream {
    child: Kill,
    lines: std::sync::mpsc::Receiver<String>,
}

impl EventStream {
    fn open(url: &str) -> EventStream {
        let mut child = Command::new("curl")
            .args(["-sS", "-N", "-H", &format!("Authorization: Bearer {TOKEN}")])
            .arg(format!("{url}/v1/events"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        EventStream {
            child: Kill(child),
            lines,
        }
    }

    /// The data of the next event of `kind`, within 10 s.
    fn next(&self, kind: &str) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut current = String::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no `{kind}` event"));
            if let Some(k) = line.strip_prefix("event: ") {
                current = k.to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                if current == kind {
                    return serde_json::from_str(d).unwrap();
                }
            }
        }
    }
}

#[test]
fn events_metrics_plan_and_status_report_what_changes() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    let url = svc.url.as_str();
    let tok = Some(TOKEN);
    let events = EventStream::open(url);
    // Give the subscription a moment to be registered before changing.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // A dry run (24 GPUs: two leaves): per-device changes, nothing applied.
    let (code, plan) = curl(
        url,
        "POST",
        "/v1/plan",
        Some(r#"{"submit": {"id": "p", "gpus": 24}}"#),
        tok,
    );
    assert_eq!((code, &plan["action"]), (200, &"admit".into()), "{plan}");
    assert!(!plan["devices"].as_array().unwrap().is_empty(), "{plan}");
    assert_eq!(
        curl(url, "GET", "/v1/jobs", None, tok).1,
        serde_json::json!([])
    );
    assert_eq!(
        curl(url, "POST", "/v1/plan", Some(r#"{"release": "zz"}"#), tok).0,
        404
    );
    assert_eq!(curl(url, "POST", "/v1/plan", Some("{}"), tok).0, 400);
    // Admitted, refused (too large), released: one event each, in order.
    assert_eq!(post(url, r#"{"id": "e1", "gpus": 8}"#).0, 201);
    let e = events.next("admitted");
    assert_eq!(e["job"], "e1", "{e}");
    let (code, _) = post(url, r#"{"id": "e2", "gpus": 4096}"#);
    assert!(code >= 400);
    let f = events.next("failed");
    assert_eq!(f["job"], "e2", "{f}");
    assert!(f["seq"].as_u64().unwrap() > e["seq"].as_u64().unwrap());
    assert_eq!(curl(url, "DELETE", "/v1/jobs/e1", None, tok).0, 200);
    assert_eq!(events.next("released")["job"], "e1");
    // Metrics count them, with latency histograms.
    let (code, m) = curl(url, "GET", "/metrics", None, tok);
    let m = m.as_str().unwrap().to_string();
    assert_eq!(code, 200);
    for line in [
        r#"vclos_changes_total{action="admit",outcome="committed"} 1"#,
        r#"vclos_changes_total{action="release",outcome="committed"} 1"#,
        r#"vclos_changes_total{action="admit",outcome="refused"} 1"#,
        r#"vclos_change_seconds_count{action="admit"} 2"#,
        "vclos_jobs 0",
    ] {
        assert!(m.lines().any(|l| l == line), "no `{line}` in\n{m}");
    }
    assert_eq!(curl(url, "GET", "/metrics", None, None).0, 401);
    // Status: every device read, none drifted.
    let (code, st) = curl(url, "GET", "/v1/status", None, tok);
    assert_eq!(code, 200, "{st}");
    let devices = st["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 5, "{st}");
    for d in devices {
        assert!(d["error"].is_null(), "{d}");
        assert!(d["drift"]["missing"].as_array().unwrap().is_empty(), "{d}");
    }
    drop(events.child);
}

#[test]
fn the_openapi_document_lists_every_endpoint_the_service_answers() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    let url = svc.url.as_str();
    let (code, doc) = curl(url, "GET", "/openapi.json", None, None);
    assert_eq!(code, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{doc}");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let paths = doc["paths"].as_object().unwrap();
    let mut documented = Vec::new();
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            documented.push(format!("{} {path}", method.to_uppercase()));
        }
    }
    documented.sort();
    assert_eq!(
        documented,
        [
            "DELETE /v1/jobs/{id}",
            "GET /leaderz",
            "GET /metrics",
            "GET /readyz",
            "GET /v1/events",
            "GET /v1/jobs",
            "GET /v1/jobs/{id}",
            "GET /v1/leader",
            "GET /v1/status",
            "POST /v1/jobs",
            "POST /v1/plan",
        ]
    );
    // Every documented operation is routed (none falls through to the
    // fallback's "no such endpoint"); the event stream is only listed.
    for op in documented.iter().filter(|o| !o.contains("events")) {
        let (method, path) = op.split_once(' ').unwrap();
        let path = path.replace("{id}", "zz");
        let body = (method == "POST").then_some("{}");
        let (code, v) = curl(url, method, &path, body, Some(TOKEN));
        assert!(
            code != 404 || v["detail"] != "no such endpoint",
            "{op}: {code} {v}"
        );
    }
    // Without leader election (a state directory) the one instance leads.
    assert_eq!(curl(url, "GET", "/leaderz", None, None).0, 200);
    let (_, v) = curl(url, "GET", "/v1/leader", None, Some(TOKEN));
    assert_eq!(v["role"], "leader", "{v}");
    let (code, v) = curl(url, "GET", "/v1/nothing", None, Some(TOKEN));
    assert_eq!((code, &v["detail"]), (404, &"no such endpoint".into()));
    // The request bodies' schemas come from the code.
    let submit = &doc["components"]["schemas"]["SubmitBody"];
    assert_eq!(submit["required"], serde_json::json!(["id"]), "{submit}");
    for field in ["gpus", "servers", "dry_run"] {
        assert!(submit["properties"][field].is_object(), "{field}: {submit}");
    }
}
