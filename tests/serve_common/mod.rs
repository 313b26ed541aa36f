//! `vclos serve` on the emulated fabric for end-to-end tests: the emulator
//! (`vclos emu serve` on testbed-ocs: leaf1 holds srv1-4, leaf2 srv5-8, four
//! GPUs each), an initialised state directory and the service with a
//! token file, each killed when dropped.
#![allow(clippy::unwrap_used, dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_vclos");
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A child process killed and reaped when dropped.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `args` and return it with the first line it prints.
pub fn start(args: &[&str]) -> (Kill, String) {
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

/// Run the binary to completion.
pub fn vclos(args: &[&str]) -> Output {
    vclos_env(args, &[])
}

/// Run the binary with extra environment variables (and no SLURM_* from
/// the caller's environment).
pub fn vclos_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("VCLOS_EMU_PASSWORD", "admin")
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_JOB_NODELIST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `curl` a request; returns (status, body as JSON or text).
pub fn curl(
    url: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, serde_json::Value) {
    let (code, v, _) = curl_with(&[], &format!("{url}{path}"), method, body, token);
    (code, v)
}

/// `curl` with `extra` arguments (e.g. `--cacert FILE`) on a whole URL;
/// (status, body as JSON or text, curl's exit code). Status 0: no answer.
pub fn curl_with(
    extra: &[&str],
    url: &str,
    method: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, serde_json::Value, i32) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "30", "-o", "-", "-w", "\n%{http_code}"])
        .args(["-X", method])
        .args(extra)
        .arg(url);
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
    (code.parse().unwrap(), v, o.status.code().unwrap_or(-1))
}

pub struct Service {
    pub _emu: Kill,
    pub serve: Kill,
    pub url: String,
    pub topo: PathBuf,
    pub state: PathBuf,
    /// The file holding [`TOKEN`].
    pub token: PathBuf,
}

/// The emulated testbed-ocs fabric (OCS switching at 0 ms) and the
/// topology file it wrote (`dir/emu.yaml`), which names its endpoints.
pub fn emulated_fabric(dir: &Path) -> (Kill, PathBuf) {
    emulated_fabric_switching(dir, 0)
}

/// The same with the OCS switching in `switch_ms` milliseconds.
pub fn emulated_fabric_switching(dir: &Path, switch_ms: u32) -> (Kill, PathBuf) {
    let topo = dir.join("emu.yaml");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/testbed-ocs.yaml");
    let (emu, line) = start(&[
        "emu",
        "serve",
        "--topology",
        source,
        "--switch-delay-ms",
        &switch_ms.to_string(),
        "--write-topology",
        topo.to_str().unwrap(),
    ]);
    assert!(line.contains("leaf1"), "{line}");
    (emu, topo)
}

/// The emulated fabric, a fresh state and `vclos serve` with a token,
/// all under `dir`.
pub fn service(dir: &Path) -> Service {
    service_switching(dir, 0)
}

/// The same with the OCS switching in `switch_ms` milliseconds.
pub fn service_switching(dir: &Path, switch_ms: u32) -> Service {
    let (emu, topo) = emulated_fabric_switching(dir, switch_ms);
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
    assert!(o.status.success(), "{}", stderr(&o));
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
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
        token,
    }
}
