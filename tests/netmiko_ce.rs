//! netmiko (the `huawei_vrpv8` device type, a real third-party SSH client)
//! drives the emulated Huawei CE switch: login and prompt detection,
//! `screen-length 0 temporary`, `send_config_set` in system view with the
//! two-stage `[*NAME]` prompt, `commit`, `display current-configuration`,
//! and an invalid command reported as an error. The client is
//! `tests/py/netmiko_ce.py`; the venv comes from `.ci/third-party.sh`
//! (skipped with a notice locally when absent, required in CI).
#![allow(clippy::unwrap_used)]

#[path = "interop/mod.rs"]
mod interop;

use std::sync::Arc;
use std::time::Duration;

use vclos::emulator::cli::SwitchDevice;
use vclos::emulator::faults::Faults;
use vclos::emulator::ssh::{serve, Login, Service};
use vclos::emulator::vrp::VrpConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netmiko_configures_commits_and_sees_errors() {
    let Some(py) = interop::python_with(&["netmiko"]) else {
        return;
    };
    let ports = (1..=4).map(|p| format!("100GE1/0/{p}"));
    let dev = SwitchDevice::with_interfaces(
        "LEAF1",
        VrpConfig::new("LEAF1"),
        Arc::new(Faults::new()),
        ports,
    );
    let srv = serve(Service::Cli(dev.clone()), Login::default())
        .await
        .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/netmiko_ce.py");
    let run = tokio::process::Command::new(py)
        .arg(script)
        .arg(srv.local_addr().port().to_string())
        .args(["admin", "admin"])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("netmiko finished within 120 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "netmiko failed:\n{stdout}\n{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));

    assert_eq!(v["base_prompt"], "LEAF1");
    // Uncommitted edits: the CE's `*` marker; after commit `~` again.
    assert_eq!(v["prompt_before_commit"], "[*LEAF1]", "{v:#}");
    assert_eq!(v["prompt_after_commit"], "<LEAF1>", "{v:#}");
    let running = v["running"].as_str().unwrap();
    assert!(
        running.contains("interface 100GE1/0/1\n description netmiko-was-here\n"),
        "{running}"
    );
    assert!(
        running.contains("traffic behavior nm-b1\n redirect nexthop 10.0.0.1\n"),
        "{running}"
    );
    // The device itself holds what netmiko committed.
    let dev_running = dev.running_config().render();
    assert!(dev_running.contains("description netmiko-was-here"));
    assert!(dev_running.contains("redirect nexthop 10.0.0.1"));
    // The invalid address is reported by netmiko as a configuration error
    // carrying the device's own message, and never reaches running.
    let invalid = v["invalid"].as_str().unwrap_or_else(|| panic!("{v:#}"));
    assert!(
        invalid.contains("ip address 10.0.0.300 31") && invalid.contains("matched error"),
        "{invalid}"
    );
    let reply = v["invalid_output"].as_str().unwrap();
    assert!(
        reply.contains("Error: Wrong parameter found at '^' position."),
        "{reply}"
    );
    assert!(!dev_running.contains("10.0.0.300"));
}
