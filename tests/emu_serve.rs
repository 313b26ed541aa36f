//! `vclos emu serve` through the real binary: the endpoint map on the first
//! stdout line, a written topology aimed at the emulator, a TL1 session over a
//! plain TCP connection, fault flags, and a clean stop on SIGTERM.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(args: &[&str]) -> (Serve, serde_json::Value) {
    serve_file("testbed-ocs.yaml", args)
}

/// `vclos emu serve` of `topologies/FILE`; the endpoint map it announces.
fn serve_file(file: &str, args: &[&str]) -> (Serve, serde_json::Value) {
    serve_env(file, args, &[])
}

/// [`serve_file`] with `envs` set for the emulator.
fn serve_env(file: &str, args: &[&str], envs: &[(&str, &str)]) -> (Serve, serde_json::Value) {
    let topology = format!("{}/topologies/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(["emu", "serve", "--topology", &topology])
        .args(args)
        .env_remove("VCLOS_EMU_PASSWORD")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let map = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first:?}"));
    (Serve(child), map)
}

/// Send TL1 lines over a plain TCP connection and read until `want` responses end.
fn tl1(port: u64, lines: &[&str]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for l in lines {
        s.write_all(format!("{l}\r\n").as_bytes()).unwrap();
    }
    let mut out = String::new();
    let mut buf = [0u8; 4096];
    while out.lines().filter(|l| l.trim() == ";").count() < lines.len() {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    out
}

#[test]
fn serves_the_ocs_and_writes_a_retargeted_topology() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emu.yaml");
    let (_srv, map) = serve(&[
        "--write-topology",
        out.to_str().unwrap(),
        "--user",
        "ops",
        "--password",
        "s3cret",
    ]);
    let ocs = &map["ocs1"];
    assert_eq!(ocs["protocol"], "telnet-tl1");
    assert_eq!(ocs["host"], "127.0.0.1");
    let port = ocs["port"].as_u64().unwrap();

    let reply = tl1(port, &["ACT-USER::ops:1::s3cret;", "RTRV-PATCH::1:2;"]);
    assert!(
        reply.contains("M  1 COMPLD") && reply.contains("\"1,33\""),
        "{reply}"
    );

    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        !written.contains("s3cret"),
        "the password must not be written"
    );
    let t = vclos::topology::from_str("emu.yaml", &written).unwrap();
    let m = &t.device(t.device_id("ocs1").unwrap()).mgmt;
    assert_eq!((m.host.as_str(), u64::from(m.port)), ("127.0.0.1", port));
    assert_eq!(t.credentials[&m.credential].username, "ops");
}

#[test]
fn the_password_can_come_from_the_environment_instead_of_the_command_line() {
    let env = [("VCLOS_EMU_PASSWORD", "fr0m-env")];
    let (srv, map) = serve_env("testbed-ocs.yaml", &[], &env);
    let port = map["ocs1"]["port"].as_u64().unwrap();
    let reply = tl1(port, &["ACT-USER::admin:1::admin;"]);
    assert!(reply.contains("DENY") && reply.contains("PIUI"), "{reply}");
    let reply = tl1(port, &["ACT-USER::admin:1::fr0m-env;"]);
    assert!(reply.contains("M  1 COMPLD"), "{reply}");
    // Not in the process's arguments, where `ps` would show it.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", srv.0.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("fr0m-env"));
}

#[test]
fn serves_sonic_leaves_that_vclos_reads_through_its_driver() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emu.yaml");
    let (_srv, map) = serve_file(
        "testbed-sonic.yaml",
        &["--write-topology", out.to_str().unwrap()],
    );
    assert_eq!(map["leaf1"]["protocol"], "ssh-cli");
    let got = Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args([
            "device",
            "get-config",
            "leaf1",
            "--topology",
            out.to_str().unwrap(),
        ])
        .env("VCLOS_EMU_PASSWORD", "admin")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&got.stdout);
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let db: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(db["DEVICE_METADATA"]["localhost"]["hostname"], "leaf1");
    assert_eq!(db["PORT"]["Ethernet0"]["description"], "srv1 gpu0");
}

#[test]
fn fault_flags_are_armed_and_bad_ones_rejected() {
    let (_srv, map) = serve(&["--fault", "ocs1:refuse-commit"]);
    let port = map["ocs1"]["port"].as_u64().unwrap();
    let reply = tl1(port, &["ACT-USER::admin:1::admin;", "DLT-PATCH::1:2;"]);
    assert!(reply.contains("M  2 DENY"), "{reply}");

    let out = Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args([
            "emu",
            "serve",
            "--topology",
            concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed-ocs.yaml"),
        ])
        .args(["--fault", "ocs9:drop"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown device `ocs9`"));
}

#[test]
fn stops_cleanly_on_sigterm() {
    let (mut srv, _) = serve(&[]);
    let pid = srv.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = srv.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

fn have(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn switches_serve_ssh_to_openssh_with_verified_host_keys() {
    if !(have("ssh") && have("sshpass")) {
        eprintln!("SKIPPED: ssh and sshpass are not installed (.ci/run installs them)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emu.yaml");
    let (_srv, map) = serve(&["--write-topology", out.to_str().unwrap()]);
    assert_eq!(map["spine1"]["protocol"], "ssh-cli");
    let port = map["leaf1"]["port"].as_u64().unwrap().to_string();
    let kh = dir.path().join("emu.known_hosts");
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.contains(&kh.display().to_string()),
        "topology must reference its known_hosts"
    );
    let ssh = |known_hosts: &str| {
        let mut child = Command::new("sshpass")
            .args([
                "-p",
                "admin",
                "ssh",
                "-tt",
                "-o",
                "BatchMode=no",
                "-o",
                "StrictHostKeyChecking=yes",
            ])
            .args([
                "-o",
                &format!("UserKnownHostsFile={known_hosts}"),
                "-p",
                &port,
                "admin@127.0.0.1",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"system-view\ninterface 100GE1/0/9\ndescription via-openssh\nquit\ncommit\nquit\ndisplay current-configuration\nquit\n")
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let ok = ssh(kh.to_str().unwrap());
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        text.contains("interface 100GE1/0/9\r\n description via-openssh")
            || text.contains("interface 100GE1/0/9\n description via-openssh"),
        "{text}"
    );
    // A known_hosts without the emulator's key is refused by OpenSSH.
    let empty = dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let refused = ssh(empty.to_str().unwrap());
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Host key verification failed"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// Whether the server closes a connection that sends nothing within `limit`.
fn closed_within(port: u64, limit: Duration) -> bool {
    let mut s = TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            // A read timeout (WouldBlock/TimedOut): still open.
            Err(_) => return false,
        }
    }
}

#[test]
fn session_timeout_flags_reach_every_endpoint() {
    let (_srv, map) = serve(&["--login-timeout-secs", "1", "--idle-timeout-secs", "1"]);
    for dev in ["ocs1", "leaf1"] {
        let port = map[dev]["port"].as_u64().unwrap();
        assert!(closed_within(port, Duration::from_secs(10)), "{dev}");
    }
    // An idle TL1 login is cancelled after a second.
    let port = map["ocs1"]["port"].as_u64().unwrap();
    let reply = tl1(port, &["ACT-USER::admin:1::admin;", "RTRV-HDR:::2;"]);
    assert!(reply.contains("M  2 COMPLD"), "{reply}");
    let mut s = TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
    s.write_all(b"ACT-USER::admin:1::admin;\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(all.contains("Session Timeout: admin"), "{all}");
    // The defaults keep a silent connection open for longer than that.
    let (_srv, map) = serve(&[]);
    let port = map["ocs1"]["port"].as_u64().unwrap();
    assert!(!closed_within(port, Duration::from_secs(2)));
}
