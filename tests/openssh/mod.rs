//! The standard OpenSSH client (`ssh` driven by `sshpass`) against an
//! emulated device, for interop tests; they skip, with a notice, when either
//! binary is not on PATH (CI installs `openssh-client sshpass`).
#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

#[path = "../interop/mod.rs"]
mod interop;

/// Whether `ssh` and `sshpass` are there; prints the skip notice if not
/// (fails instead under `VCLOS_REQUIRE_INTEROP`, as in CI).
pub fn available() -> bool {
    interop::on_path("ssh") && interop::on_path("sshpass")
}

/// Log in as admin/admin on 127.0.0.1:`port` (host key checked against
/// `known_hosts`), with a forced pty or none, type `input`, run `remote`
/// (a command or `-s subsystem`) if given; stdout with CRs removed.
pub async fn run(port: u16, known_hosts: &Path, tty: bool, input: &str, remote: &[&str]) -> String {
    let (text, status, stderr) = output(port, known_hosts, tty, input, remote).await;
    assert!(
        status.success(),
        "ssh failed: {status}\nstdout: {text}\nstderr: {stderr}"
    );
    text
}

/// As [`run`], whatever the exit status: stdout with CRs removed, the
/// status (OpenSSH exits with the remote command's), stderr.
pub async fn output(
    port: u16,
    known_hosts: &Path,
    tty: bool,
    input: &str,
    remote: &[&str],
) -> (String, std::process::ExitStatus, String) {
    let mut cmd = tokio::process::Command::new("sshpass");
    cmd.args(["-p", "admin", "ssh", if tty { "-tt" } else { "-T" }]);
    cmd.args([
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        &format!("UserKnownHostsFile={}", known_hosts.display()),
        "-o",
        "PubkeyAuthentication=no",
        "-o",
        "PreferredAuthentications=password",
        "-o",
        "ConnectTimeout=5",
        "-p",
        &port.to_string(),
        "admin@127.0.0.1",
    ]);
    cmd.args(remote)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (text, out.status, stderr)
}
