//! `vclos serve --tls-cert --tls-key` end to end: a self-signed certificate
//! made at test time by the `openssl` CLI, the binary serving HTTPS over an
//! emulated fabric, driven by curl trusting only that certificate
//! (`--cacert`): the API works over HTTPS with the token, plain HTTP to the
//! TLS port gets no answer, SIGTERM lets a transaction in flight finish, and
//! a wrong certificate or key file stops startup with an error naming it.
#![allow(clippy::unwrap_used)]

mod serve_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serve_common::{start, vclos};

const TOKEN: &str = "tls-test-token-0123456789";
const TOPOLOGY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed-ocs.yaml");

/// Whether the `openssl` and `curl` CLIs are there (`.ci/third-party.sh`
/// installs them); without them a test prints `SKIPPED:` and passes.
fn tools() -> bool {
    let found = |tool: &str, arg: &str| {
        Command::new(tool)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let ok = found("openssl", "version") && found("curl", "--version");
    if !ok {
        eprintln!("SKIPPED: the openssl and curl CLIs are needed");
    }
    ok
}

/// A self-signed certificate for 127.0.0.1 and localhost: (cert, key).
fn self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let o = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=localhost", "-addext"])
        .arg("subjectAltName=IP:127.0.0.1,DNS:localhost")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (cert, key)
}

/// `curl` over HTTPS trusting `cacert` only: (HTTP status, body as JSON or
/// text, curl's exit code). Status 0: no HTTP answer.
fn curl(
    cacert: &Path,
    url: &str,
    method: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, serde_json::Value, i32) {
    let cacert = cacert.to_str().unwrap();
    serve_common::curl_with(&["--cacert", cacert], url, method, body, token)
}

#[test]
fn https_serves_the_api_refuses_plain_http_and_shuts_down_gracefully() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path(), "server");
    // The emulated testbed; an OCS port switch takes 1.5 s, so a job that
    // rewires the OCS is still in flight when SIGTERM comes.
    let topo = dir.path().join("emu.yaml");
    let (_emu, line) = start(&[
        "emu",
        "serve",
        "--topology",
        TOPOLOGY,
        "--switch-delay-ms",
        "1500",
        "--write-topology",
        topo.to_str().unwrap(),
    ]);
    assert!(line.contains("leaf1"), "{line}");
    let (t, state) = (topo.to_str().unwrap(), dir.path().join("state"));
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
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let (mut serve, line) = start(&[
        "serve",
        "--topology",
        t,
        "--state",
        s,
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        token.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let url = line.trim().rsplit_once(' ').unwrap().1.to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{line}");
    let jobs = format!("{url}/v1/jobs");
    // HTTPS with the token works; without it, 401 as over HTTP.
    let (code, list, _) = curl(&cert, &jobs, "GET", None, Some(TOKEN));
    assert_eq!((code, list), (200, serde_json::json!([])));
    assert_eq!(curl(&cert, &jobs, "GET", None, None).0, 401);
    let health = format!("{url}/healthz");
    assert_eq!(curl(&cert, &health, "GET", None, None).0, 200);
    // The certificate is checked: one curl does not trust is refused.
    let (other, _) = self_signed(dir.path(), "other");
    let (code, _, exit) = curl(&other, &health, "GET", None, None);
    assert!(code == 0 && exit != 0, "{code} {exit}");
    // Plain HTTP to the TLS port gets no HTTP answer.
    let plain = health.replacen("https://", "http://", 1);
    let (code, _, exit) = curl(&cert, &plain, "GET", None, None);
    assert!(code == 0 && exit != 0, "{code} {exit}");
    // The service still answers over HTTPS after that.
    assert_eq!(curl(&cert, &health, "GET", None, None).0, 200);
    // A 24-GPU job (two leaves, an OCS rewire) in flight when SIGTERM comes:
    // it is committed and answered, then the service exits.
    let submit = {
        let (cert, jobs) = (cert.clone(), jobs.clone());
        std::thread::spawn(move || {
            let body = r#"{"id": "t1", "gpus": 24}"#;
            let answer = curl(&cert, &jobs, "POST", Some(body), Some(TOKEN));
            (answer, std::time::Instant::now())
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    let pid = serve.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let killed = std::time::Instant::now();
    let ((code, answer, _), answered) = submit.join().unwrap();
    assert!(answered > killed, "the job was answered before SIGTERM");
    assert_eq!(
        (code, &answer["committed"]),
        (201, &true.into()),
        "{answer}"
    );
    assert!(serve.0.wait().unwrap().success());
    // The devices hold exactly what the state says.
    let o = vclos(&["verify", "--topology", t, "--state", s]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let held = std::fs::read_to_string(state.join("state.json")).unwrap();
    assert!(held.contains("\"t1\""), "{held}");
}

#[test]
fn a_wrong_certificate_or_key_file_stops_startup_naming_it() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path(), "server");
    let (_, other_key) = self_signed(dir.path(), "other");
    let missing = dir.path().join("missing.pem");
    let state = dir.path().join("state");
    let run = |cert: &Path, key: &Path| {
        let o = vclos(&[
            "serve",
            "--topology",
            TOPOLOGY,
            "--state",
            state.to_str().unwrap(),
            "--init",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ]);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let named = |err: &str, what: &str, file: &Path| {
        let needle = format!("{what} {}", file.display());
        assert!(err.contains(&needle), "no `{needle}` in: {err}");
    };
    // A key as the certificate, a certificate as the key.
    named(&run(&key, &key), "TLS certificate file", &key);
    named(&run(&cert, &cert), "TLS key file", &cert);
    // Another certificate's key.
    let err = run(&cert, &other_key);
    named(&err, "TLS key file", &other_key);
    assert!(err.contains("does not belong to the certificate"), "{err}");
    // A file that is not there.
    named(&run(&missing, &key), "TLS certificate file", &missing);
    named(&run(&cert, &missing), "TLS key file", &missing);
    // Half of the pair is refused by the command line.
    let o = vclos(&[
        "serve",
        "--topology",
        TOPOLOGY,
        "--state",
        state.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success() && err.contains("--tls-key"), "{err}");
    // Refused before the state was touched; the key never printed.
    assert!(!state.exists());
    let key_text = std::fs::read_to_string(&key).unwrap();
    let body = key_text.lines().nth(1).unwrap();
    assert!(!run(&cert, &other_key).contains(body));
}

#[test]
fn tls_without_a_token_still_listens_on_loopback_only() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path(), "server");
    let state = dir.path().join("state");
    let o = vclos(&[
        "serve",
        "--topology",
        TOPOLOGY,
        "--state",
        state.to_str().unwrap(),
        "--init",
        "--listen",
        "0.0.0.0:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        !o.status.success() && err.contains("without --token-file"),
        "{err}"
    );
    assert!(!state.exists());
}
