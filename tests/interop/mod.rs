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

use std::path::PathBuf;

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
