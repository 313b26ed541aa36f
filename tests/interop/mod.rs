//! Where the third-party parts of the test suite are, and what a test does
//! when one is missing.
//!
//! `.ci/third-party.sh` installs them (Debian and PyPI packages only) into
//! `$VCLOS_THIRD_PARTY`, by default `target/third-party` of this checkout:
//! a Python venv with ncclient and netmiko (`venv/bin/python`) and the
//! OpenConfig YANG models (`openconfig-yang/`). Locally a test whose part
//! is missing prints a `SKIPPED:` notice and passes; with
//! `VCLOS_REQUIRE_INTEROP=1` (set by `.ci/run`) it fails instead, so CI
//! can never skip them silently.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// The folder `.ci/third-party.sh` fills.
pub fn third_party() -> PathBuf {
    std::env::var_os("VCLOS_THIRD_PARTY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/third-party"))
}

/// Whether missing third-party parts fail the test (CI) or skip it.
pub fn required() -> bool {
    std::env::var_os("VCLOS_REQUIRE_INTEROP").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Report a missing part: panics under `VCLOS_REQUIRE_INTEROP`, otherwise
/// prints the skip notice. Returns `false` so callers can `return`.
pub fn missing(what: &str) -> bool {
    assert!(
        !required(),
        "{what} is required (VCLOS_REQUIRE_INTEROP is set): run `bash .ci/third-party.sh`"
    );
    eprintln!("SKIPPED: {what} not found (install with `bash .ci/third-party.sh`)");
    false
}

/// The venv's Python if it imports every module of `modules`.
pub fn python_with(modules: &[&str]) -> Option<PathBuf> {
    let py = third_party().join("venv/bin/python");
    let ok = py.is_file()
        && std::process::Command::new(&py)
            .arg("-c")
            .arg(format!("import {}", modules.join(", ")))
            .output()
            .is_ok_and(|o| o.status.success());
    if ok {
        Some(py)
    } else {
        missing(&format!("a Python venv with {}", modules.join(", ")));
        None
    }
}

/// The OpenConfig YANG models folder, if it is there.
pub fn openconfig_yang() -> Option<PathBuf> {
    let dir = third_party().join("openconfig-yang");
    if dir.join("openconfig-network-instance.yang").is_file() {
        Some(dir)
    } else {
        missing(&format!("OpenConfig YANG models in {}", dir.display()));
        None
    }
}

/// Whether `bin` is on PATH; reports it missing otherwise.
pub fn on_path(bin: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()));
    found || missing(&format!("`{bin}` on PATH"))
}

/// A loopback TCP port, free now, for a server a test starts in another
/// process (etcd, slurmctld, `openssl s_server`).
///
/// It is taken outside the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768-60999 by default): a port that
/// `bind(127.0.0.1:0)` hands out and the test releases can be taken again
/// by any outgoing connection or `:0` listener before the server binds it,
/// and that race once failed CI (etcd: "bind: address already in use").
/// Ports outside the range are only ever taken by an explicit bind. Within
/// one process no port is handed out twice.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (lo, hi) = outside_ephemeral();
    let span = u32::from(hi - lo) + 1;
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = lo + ((start + i) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {lo}-{hi}");
}

/// The widest run of ports outside the ephemeral range, from 10000 up.
fn outside_ephemeral() -> (u16, u16) {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|v| v.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999));
    let below = (10000, range.0.saturating_sub(1));
    let above = (range.1.saturating_add(1), u16::MAX);
    let width = |(a, b): (u16, u16)| b.saturating_sub(a);
    let pick = if width(below) >= width(above) {
        below
    } else {
        above
    };
    assert!(
        width(pick) >= 1000,
        "no room outside the ephemeral ports {range:?}"
    );
    pick
}
