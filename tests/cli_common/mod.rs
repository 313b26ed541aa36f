//! Running the built `vclos` binary from the repository root.
#![allow(dead_code, clippy::unwrap_used)]

use std::process::{Command, Output};

pub fn vclos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
