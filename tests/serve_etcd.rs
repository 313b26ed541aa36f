//! `vclos serve --store etcd` end to end: the binary serving the API over an
//! emulated fabric with its state in a real etcd (`etcd_common`), driven by
//! curl: submit and release through the API, a second instance refused
//! while the first holds the lock, and a restart after `kill -9` picking
//! the state back up from etcd once the dead writer's lease expired.
#![cfg(feature = "etcd")]
#![allow(clippy::unwrap_used)]

#[path = "etcd_common/mod.rs"]
mod etcd;

mod serve_common;

use std::process::Command;
use std::time::{Duration, Instant};

use serve_common::{emulated_fabric, start, Kill, BIN};

/// A request without a token (the service here listens on loopback only).
fn curl(url: &str, method: &str, path: &str, body: Option<&str>) -> (u16, serde_json::Value) {
    serve_common::curl(url, method, path, body, None)
}

fn serve(topo: &str, endpoint: &str, extra: &[&str]) -> (Kill, String) {
    let mut args = vec![
        "serve",
        "--topology",
        topo,
        "--store",
        "etcd",
        "--etcd-endpoints",
        endpoint,
        "--etcd-lease-ttl",
        "2",
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let (k, line) = start(&args);
    let url = line
        .trim()
        .rsplit_once(' ')
        .map(|(_, u)| u.to_string())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    (k, url)
}

fn jobs(url: &str) -> Vec<String> {
    let (code, v) = curl(url, "GET", "/v1/jobs", None);
    assert_eq!(code, 200, "{v}");
    let list = v.get("jobs").unwrap_or(&v).as_array().unwrap().clone();
    list.iter()
        .map(|j| {
            j.get("job")
                .or(j.get("id"))
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_its_state_in_etcd_across_a_kill() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_emu, topo) = emulated_fabric(dir.path());
    let t = topo.to_str().unwrap();
    // The devices at the empty state's intent (a scratch state directory).
    let scratch = dir.path().join("scratch");
    let o = Command::new(BIN)
        .args(["reconcile", "--fix", "--init", "--topology", t, "--state"])
        .arg(&scratch)
        .env("VCLOS_EMU_PASSWORD", "admin")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let (mut first, url) = serve(t, &e.endpoint, &["--init"]);
    let (code, a) = curl(&url, "POST", "/v1/jobs", Some(r#"{"id": "a", "gpus": 8}"#));
    assert_eq!(code, 201, "{a}");
    let (code, b) = curl(&url, "POST", "/v1/jobs", Some(r#"{"id": "b", "gpus": 4}"#));
    assert_eq!(code, 201, "{b}");
    assert_eq!(jobs(&url), ["a", "b"]);

    // A second instance cannot take the writer lock while the first lives.
    let o = Command::new(BIN)
        .args([
            "serve",
            "--topology",
            t,
            "--store",
            "etcd",
            "--etcd-endpoints",
            &e.endpoint,
        ])
        .args(["--wait", "0", "--listen", "127.0.0.1:0"])
        .env("VCLOS_EMU_PASSWORD", "admin")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("is locked by") && err.contains("serve"),
        "{err}"
    );

    // kill -9: the lease expires after its TTL (2 s); a new instance then
    // takes the lock and serves the state from etcd.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let t0 = Instant::now();
    let (_second, url) = serve(t, &e.endpoint, &["--wait", "20"]);
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    assert_eq!(jobs(&url), ["a", "b"]);
    let (code, r) = curl(&url, "DELETE", "/v1/jobs/a", None);
    assert_eq!(code, 200, "{r}");
    assert_eq!(jobs(&url), ["b"]);

    // Three transactions committed, each counted once.
    let name = vclos::topology::load(&topo).unwrap().name.to_string();
    let mut c = e.client().await;
    let txn = c.get(format!("/vclos/{name}/txn"), None).await.unwrap();
    assert_eq!(txn.kvs()[0].value_str().unwrap(), "3");
    let journal = c.get(format!("/vclos/{name}/journal"), None).await.unwrap();
    assert!(journal.kvs().is_empty());
}
