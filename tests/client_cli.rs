//! The CLI as a client of a running `vclos serve` (`--server URL`), and
//! `vclos slurm prolog|epilog` as slurmctld runs them (the job's
//! environment), end to end: the real service on the emulated fabric,
//! the real binary as its client.
#![allow(clippy::unwrap_used)]

mod interop;
mod serve_common;

use serve_common::{curl, service, stderr, stdout, vclos, vclos_env, TOKEN};

/// `--server URL --token-file FILE` for `svc`.
fn remote<'a>(svc: &'a serve_common::Service, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend([
        "--server",
        svc.url.as_str(),
        "--token-file",
        svc.token.to_str().unwrap(),
    ]);
    v
}

/// Nothing the binary printed shows the token or a panic.
fn clean(o: &std::process::Output) {
    let all = format!("{}{}", stdout(o), stderr(o));
    assert!(!all.contains(TOKEN), "the token was printed:\n{all}");
    assert!(!all.contains("panicked"), "{all}");
}

#[test]
fn job_and_status_commands_work_through_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    // Submit: committed, the report and summary printed as locally.
    let o = vclos(&remote(
        &svc,
        &["job", "submit", "--id", "a", "--gpus", "8"],
    ));
    clean(&o);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(
        out.contains("apply: COMMITTED") && out.contains("admit job a: done"),
        "{out}"
    );
    // Again: the held decision, nothing changed; --json is the answer.
    let o = vclos(&remote(
        &svc,
        &["job", "submit", "--id", "a", "--gpus", "8", "--json"],
    ));
    clean(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let held: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(held["existing"], true, "{held}");
    let (_, on_server) = curl(&svc.url, "GET", "/v1/jobs/a", None, Some(TOKEN));
    assert_eq!(held["decision"], on_server);
    // Another size for the same id: the server's 409, naming the field.
    let o = vclos(&remote(
        &svc,
        &["job", "submit", "--id", "a", "--gpus", "16"],
    ));
    clean(&o);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("409 Conflict")
            && err.contains("held with 8 GPUs")
            && err.contains("field `gpus`"),
        "{err}"
    );
    // Too large: refused with the server's reason.
    let o = vclos(&remote(
        &svc,
        &["job", "submit", "--id", "big", "--gpus", "4096"],
    ));
    clean(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("error: POST http://127.0.0.1:"),
        "{}",
        stderr(&o)
    );
    // A dry run changes nothing.
    let o = vclos(&remote(
        &svc,
        &["job", "submit", "--id", "p", "--gpus", "8", "--dry-run"],
    ));
    clean(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("dry run: admit job p: 8 GPU(s)"),
        "{}",
        stdout(&o)
    );
    // List and show: the same lines as the local commands.
    let o = vclos(&remote(&svc, &["job", "list"]));
    clean(&o);
    let listed = stdout(&o);
    assert!(
        o.status.success() && listed.ends_with("1 job(s)\n"),
        "{listed}"
    );
    let (t, s) = (svc.topo.to_str().unwrap(), svc.state.to_str().unwrap());
    let local = vclos(&["job", "list", "--topology", t, "--state", s]);
    assert_eq!(stdout(&local), listed);
    let o = vclos(&remote(&svc, &["job", "list", "--json"]));
    let jobs: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(jobs.as_array().unwrap().len(), 1);
    assert_eq!(jobs[0], on_server);
    let o = vclos(&remote(&svc, &["job", "show", "--id", "a"]));
    clean(&o);
    let shown = stdout(&o);
    assert!(
        o.status.success() && shown.contains("servers: srv"),
        "{shown}"
    );
    let local = vclos(&["job", "show", "--id", "a", "--topology", t, "--state", s]);
    assert_eq!(stdout(&local), shown);
    let o = vclos(&remote(&svc, &["job", "show", "--id", "zz"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("404 Not Found: job `zz` is not held"),
        "{}",
        stderr(&o)
    );
    let o = vclos(&["job", "show", "--id", "zz", "--topology", t, "--state", s]);
    assert!(
        stderr(&o).contains("job `zz` is not held"),
        "{}",
        stderr(&o)
    );
    // Status: every device read by the service, printed as locally.
    let o = vclos(&remote(&svc, &["status"]));
    clean(&o);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(
        out.contains(": 1 job(s)") && out.contains("reachable, in sync") && !out.contains("DRIFT"),
        "{out}"
    );
    let o = vclos(&remote(&svc, &["status", "--json"]));
    let st: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(st["devices"].as_array().unwrap().len(), 5, "{st}");
    // Release, then release again: 404 from the service, non-zero here.
    let o = vclos(&remote(&svc, &["job", "release", "--id", "a"]));
    clean(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("release job a: done"), "{}", stdout(&o));
    let o = vclos(&remote(&svc, &["job", "release", "--id", "a"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("404"), "{}", stderr(&o));
    // No token: the service's 401, said plainly.
    let o = vclos(&["job", "list", "--server", &svc.url]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("401 Unauthorized") && err.contains("Bearer"),
        "{err}"
    );
    let missing = dir.path().join("no-such-token");
    let o = vclos(&[
        "job",
        "list",
        "--server",
        &svc.url,
        "--token-file",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("token file") && stderr(&o).contains("no-such-token"));
    // A wrong token is refused and not echoed.
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "wrong-token-0123456789\n").unwrap();
    let o = vclos(&[
        "status",
        "--server",
        &svc.url,
        "--token-file",
        wrong.to_str().unwrap(),
    ]);
    assert!(
        stderr(&o).contains("401") && !stderr(&o).contains("wrong-token"),
        "{}",
        stderr(&o)
    );
    // Nothing listening: a transport error naming the URL.
    let o = vclos(&["job", "list", "--server", "http://127.0.0.1:9"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("GET http://127.0.0.1:9/v1/jobs"),
        "{}",
        stderr(&o)
    );
}

/// `job submit --policy titan --server`: the service places with titan
/// for this request (its `policy` field), a job across leaves on the free
/// GPUs of partly used servers, isolated by the fabric's own policy; the
/// API names the field of a bad or unusable policy, and `POST /v1/plan`
/// takes it too.
#[test]
fn titan_is_a_policy_of_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    for s in ["srv1", "srv2", "srv5", "srv6"] {
        let on = format!("{s}=0,1");
        let o = vclos(&remote(
            &svc,
            &["job", "submit", "--id", s, "--gpus-on", &on],
        ));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let (code, plan) = curl(
        &svc.url,
        "POST",
        "/v1/plan",
        Some(r#"{"submit": {"id": "t", "gpus": 8, "policy": "titan"}}"#),
        Some(TOKEN),
    );
    assert_eq!(code, 200, "{plan}");
    let o = vclos(&remote(
        &svc,
        &[
            "job", "submit", "--id", "t", "--gpus", "8", "--policy", "titan", "--json",
        ],
    ));
    clean(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let done: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(done["decision"], plan["decision"], "{done}");
    let gpus = done["decision"]["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 8, "{done}");
    for g in gpus {
        assert!(
            ["srv1", "srv2", "srv5", "srv6"].contains(&g["server"].as_str().unwrap())
                && (g["gpu"] == 2 || g["gpu"] == 3),
            "{done}"
        );
    }
    assert_eq!(
        done["decision"]["source_routes"].as_array().unwrap().len(),
        8
    );
    // Bad policies, each naming the field.
    for (body, status, field) in [
        (r#"{"id": "b", "gpus": 4, "policy": "nope"}"#, 400, "policy"),
        (r#"{"id": "b", "gpus": 4, "policy": "best"}"#, 422, "policy"),
        (
            r#"{"id": "b", "servers": ["srv7"], "policy": "titan"}"#,
            422,
            "policy",
        ),
        (
            r#"{"submit": {"id": "b", "gpus": 4, "policy": "x"}}"#,
            400,
            "submit.policy",
        ),
    ] {
        let path = if body.contains("submit") {
            "/v1/plan"
        } else {
            "/v1/jobs"
        };
        let (code, p) = curl(&svc.url, "POST", path, Some(body), Some(TOKEN));
        assert_eq!(
            (code, p["field"].as_str()),
            (status, Some(field)),
            "{body}: {p}"
        );
    }
    let o = vclos(&remote(
        &svc,
        &[
            "job", "submit", "--id", "b", "--gpus", "4", "--policy", "sr",
        ],
    ));
    assert!(
        !o.status.success() && stderr(&o).contains("simulation baseline"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn server_and_local_flags_exclude_each_other() {
    let topo = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed-ocs.yaml");
    for args in [
        &[
            "job",
            "list",
            "--server",
            "http://127.0.0.1:9",
            "--topology",
            topo,
        ][..],
        &[
            "status",
            "--server",
            "http://127.0.0.1:9",
            "--state",
            "/tmp",
        ],
        &[
            "job",
            "release",
            "--id",
            "a",
            "--server",
            "http://127.0.0.1:9",
            "--wait",
            "3",
        ],
    ] {
        let o = vclos(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    }
    // Neither: the local flags are required, as before.
    let o = vclos(&["job", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--topology"), "{}", stderr(&o));
    // Remote-only flags need --server.
    for args in [
        &[
            "job",
            "list",
            "--token-file",
            "x",
            "--topology",
            topo,
            "--state",
            "/tmp",
        ][..],
        &[
            "job",
            "show",
            "--id",
            "a",
            "--ca-file",
            "x",
            "--state",
            "/tmp",
        ],
    ] {
        let o = vclos(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    // Local placement options are refused with --server, before any request.
    let o = vclos(&[
        "job",
        "submit",
        "--id",
        "a",
        "--gpus",
        "4",
        "--round-up",
        "1",
        "--server",
        "http://127.0.0.1:9",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--round-up"), "{}", stderr(&o));
}

/// `vclos slurm <what> --server URL --token-file FILE [extra]` with `env`.
fn slurm(
    svc: &serve_common::Service,
    what: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> std::process::Output {
    let mut args = remote(svc, &["slurm", what]);
    args.extend(extra);
    let o = vclos_env(&args, env);
    clean(&o);
    // One line per call.
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).starts_with(&format!("vclos slurm {what}: job ")));
    o
}

#[test]
fn slurm_prolog_and_epilog_admit_and_release_through_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    // A job on four servers over two leaves (srv3-4 on leaf1, srv5-6 on leaf2).
    let env = [("SLURM_JOB_ID", "42"), ("SLURM_JOB_NODELIST", "srv[3-6]")];
    let o = slurm(&svc, "prolog", &env, &[]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("job slurm-42: on srv3,srv4,srv5,srv6: admitted (16 GPUs, 2 leaves"),
        "{err}"
    );
    let (code, held) = curl(&svc.url, "GET", "/v1/jobs/slurm-42", None, Some(TOKEN));
    assert_eq!(code, 200, "{held}");
    let mut on: Vec<&str> = held["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["server"].as_str().unwrap())
        .collect();
    on.dedup();
    assert_eq!(on, ["srv3", "srv4", "srv5", "srv6"], "{held}");
    // Slurm runs the prolog again: exit 0, the same decision, nothing changed.
    let o = slurm(&svc, "prolog", &env, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("already held with this request"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        curl(&svc.url, "GET", "/v1/jobs/slurm-42", None, Some(TOKEN)).1,
        held
    );
    // Another job on servers the first holds: refused, exit 1, the reason.
    let o = slurm(
        &svc,
        "prolog",
        &[("SLURM_JOB_ID", "43"), ("SLURM_JOB_NODELIST", "srv[4-5]")],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("REFUSED: POST"), "{}", stderr(&o));
    assert!(stderr(&o).contains("409 Conflict"), "{}", stderr(&o));
    // ... and the service's suggestion, a set free now (not srv3-6).
    let err = stderr(&o);
    let suggested = err
        .split("suggested servers: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no suggestion: {err}"))
        .trim();
    assert_eq!(suggested.split(',').count(), 2, "{err}");
    for s in suggested.split(',') {
        assert!(!["srv3", "srv4", "srv5", "srv6"].contains(&s), "{err}");
    }
    // A single-node job is admitted within its server.
    let o = slurm(
        &svc,
        "prolog",
        &[("SLURM_JOB_ID", "44"), ("SLURM_JOB_NODELIST", "srv1")],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // Node names mapped to servers by a file.
    let map = dir.path().join("nodes.map");
    std::fs::write(
        &map,
        "# slurm node -> server\ngpu07 srv7\ngpu08 srv8 # last\n",
    )
    .unwrap();
    let map = map.to_str().unwrap();
    let mapped = [("SLURM_JOB_ID", "45"), ("SLURM_JOB_NODELIST", "gpu[07-08]")];
    let o = slurm(&svc, "prolog", &mapped, &["--node-map", map]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("on srv7,srv8: admitted"),
        "{}",
        stderr(&o)
    );
    let o = slurm(
        &svc,
        "prolog",
        &[("SLURM_JOB_ID", "46"), ("SLURM_JOB_NODELIST", "gpu09")],
        &["--node-map", map],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("\"gpu09\"") && stderr(&o).contains("nodes.map"));
    // Epilog twice: released, then already released; 0 both times.
    let o = slurm(&svc, "epilog", &env, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("job slurm-42: released"),
        "{}",
        stderr(&o)
    );
    let o = slurm(&svc, "epilog", &env, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("already released"), "{}", stderr(&o));
    assert_eq!(
        curl(&svc.url, "GET", "/v1/jobs/slurm-42", None, Some(TOKEN)).0,
        404
    );
    // The job prefix is the caller's.
    let o = slurm(
        &svc,
        "epilog",
        &[("SLURM_JOB_ID", "44")],
        &["--job-prefix", "other-"],
    );
    assert!(
        stderr(&o).contains("job other-44: not held"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn slurm_commands_refuse_bad_input_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path());
    let huge = "n".repeat(70 * 1024);
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("SLURM_JOB_NODELIST", "srv1")], "SLURM_JOB_ID is not set"),
        (
            &[("SLURM_JOB_ID", "4;reboot"), ("SLURM_JOB_NODELIST", "srv1")],
            "digits only",
        ),
        (&[("SLURM_JOB_ID", "50")], "SLURM_JOB_NODELIST is not set"),
        (
            &[
                ("SLURM_JOB_ID", "50"),
                ("SLURM_JOB_NODELIST", "srv[1-99999999]"),
            ],
            "SLURM_JOB_NODELIST: expands to more than 65536 names",
        ),
        (
            &[("SLURM_JOB_ID", "50"), ("SLURM_JOB_NODELIST", "srv[1-")],
            "SLURM_JOB_NODELIST: unmatched `[`",
        ),
        (
            &[("SLURM_JOB_ID", "50"), ("SLURM_JOB_NODELIST", "srv1\nsrv2")],
            "SLURM_JOB_NODELIST: character '\\n'",
        ),
        (
            &[("SLURM_JOB_ID", "50"), ("SLURM_JOB_NODELIST", &huge)],
            "SLURM_JOB_NODELIST: 71680 bytes, over the 65536-byte limit",
        ),
        (
            &[("SLURM_JOB_ID", "50"), ("SLURM_JOB_NODELIST", "srv1,srv1")],
            "appears more than once",
        ),
    ];
    for (env, want) in cases {
        let o = slurm(&svc, "prolog", env, &[]);
        assert_eq!(o.status.code(), Some(1), "{env:?}");
        assert!(stderr(&o).contains(want), "{env:?}: {}", stderr(&o));
    }
    // A server the topology does not have: the service's refusal.
    let o = slurm(
        &svc,
        "prolog",
        &[
            ("SLURM_JOB_ID", "51"),
            ("SLURM_JOB_NODELIST", "nosuch[1-2]"),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // Token problems: no flag (usage, 2), no file, the wrong token (1).
    let env = [("SLURM_JOB_ID", "52"), ("SLURM_JOB_NODELIST", "srv1")];
    let o = vclos_env(&["slurm", "prolog", "--server", &svc.url], &env);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--token-file"), "{}", stderr(&o));
    let o = vclos_env(
        &[
            "slurm",
            "prolog",
            "--server",
            &svc.url,
            "--token-file",
            "/nonexistent/token",
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("token file /nonexistent/token"),
        "{}",
        stderr(&o)
    );
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "wrong-token-0123456789\n").unwrap();
    let o = vclos_env(
        &[
            "slurm",
            "epilog",
            "--server",
            &svc.url,
            "--token-file",
            wrong.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("401 Unauthorized"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("wrong-token"));
    // No service there: an error, not a refusal; exit 1, the URL named.
    let o = vclos_env(
        &[
            "slurm",
            "prolog",
            "--server",
            "http://127.0.0.1:9",
            "--token-file",
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(2), "a flag without its value");
    let token = svc.token.to_str().unwrap();
    let o = vclos_env(
        &[
            "slurm",
            "prolog",
            "--server",
            "http://127.0.0.1:9",
            "--token-file",
            token,
        ],
        &env,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("on srv1: ERROR: POST http://127.0.0.1:9/v1/jobs") && !err.contains("REFUSED"),
        "{err}"
    );
    // Nothing was admitted by any of it.
    assert_eq!(
        curl(&svc.url, "GET", "/v1/jobs", None, Some(TOKEN)).1,
        serde_json::json!([])
    );
}

/// `openssl` with `args` in `dir`, which must succeed.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let o = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "openssl {args:?}: {}", stderr(&o));
}

/// A CA (`NAME.pem`, `NAME.key`) made with openssl.
fn ca(dir: &std::path::Path, name: &str) {
    let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ],
    );
}

#[test]
fn ca_file_trusts_a_private_ca_and_nothing_else() {
    // An https server (openssl s_server -www: an HTML status page) with a
    // certificate for 127.0.0.1 from a private CA.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ca(d, "private-ca");
    ca(d, "other-ca");
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        d.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "private-ca.pem",
            "-CAkey",
            "private-ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    let port = interop::free_port();
    let server = std::process::Command::new("openssl")
        .args([
            "s_server", "-quiet", "-www", "-cert", "srv.pem", "-key", "srv.key",
        ])
        .args(["-accept", &format!("127.0.0.1:{port}")])
        .current_dir(d)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _server = serve_common::Kill(server);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "s_server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = format!("https://127.0.0.1:{port}");
    let list = |ca: Option<&str>| {
        let mut args = vec!["job", "list", "--server", url.as_str()];
        let path;
        if let Some(name) = ca {
            path = d.join(name).to_str().unwrap().to_string();
            args.extend(["--ca-file", path.as_str()]);
        }
        let o = vclos(&args);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        stderr(&o)
    };
    // Trusting the private CA: the TLS session is made and the HTML page
    // read (not the API, so a bad response, but past TLS).
    let err = list(Some("private-ca.pem"));
    assert!(err.contains("bad response (HTTP 200)"), "{err}");
    // The bundled public roots, or another CA: the certificate is refused.
    for err in [list(None), list(Some("other-ca.pem"))] {
        assert!(
            err.contains(&format!("GET {url}/v1/jobs")) && !err.contains("bad response"),
            "{err}"
        );
        assert!(err.to_lowercase().contains("certificate"), "{err}");
    }
    // Without --ca-file the system's trust store is read: one holding the
    // private CA (SSL_CERT_FILE, as rustls-native-certs reads it) trusts it.
    let store = d.join("private-ca.pem");
    let o = vclos_env(
        &["job", "list", "--server", url.as_str()],
        &[("SSL_CERT_FILE", store.to_str().unwrap())],
    );
    assert!(
        stderr(&o).contains("bad response (HTTP 200)"),
        "{}",
        stderr(&o)
    );
    // A CA file that holds no certificate is named.
    let err = list(Some("srv.key"));
    assert!(
        err.contains("srv.key") && err.contains("no PEM certificate"),
        "{err}"
    );
}
