//! Command-line edges through the built binary (docs/cli-conventions.md):
//! broken pipes, numeric flags and trace values, `--running` paths.
#![allow(clippy::unwrap_used)]

mod cli_common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};

use cli_common::{stderr, vclos};

/// `SIGPIPE` on Linux (signal(7)).
const SIGPIPE: i32 = 13;

/// Run `vclos args` with stdout a pipe whose reader takes one line and
/// closes it (as `| head -1` does); return the status and stderr.
fn closed_after_one_line(args: &[&str]) -> (ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert!(!first.is_empty(), "no first line from {args:?}");
    drop(reader); // the read end closes: later writes get EPIPE / SIGPIPE
    let out = child.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 12: `topology generate | head -1` and `trace generate | head -1`
/// panicked ("failed printing to stdout: Broken pipe", status 101). Both
/// print far more than a pipe buffer (64 KiB), so they are still writing
/// when the reader goes: they must end as coreutils do, killed by SIGPIPE
/// (a shell shows 141), with nothing on stderr.
#[test]
fn a_reader_that_closes_early_ends_the_command_quietly() {
    for args in [
        &[
            "topology",
            "generate",
            "--leaves",
            "64",
            "--spines",
            "64",
            "--gpus-per-server",
            "8",
        ][..],
        &["trace", "generate", "--jobs", "300000", "--gpus", "512"][..],
    ] {
        let (status, err) = closed_after_one_line(args);
        assert_eq!(
            status.signal(),
            Some(SIGPIPE),
            "{args:?}: {status:?}, stderr: {err}"
        );
        assert_eq!(err, "", "{args:?}");
    }
}

fn assert_usage_error(args: &[&str], expect: &str) {
    let o = vclos(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(stderr(&o).contains(expect), "{args:?}: {}", stderr(&o));
}

/// Numeric flags are refused by clap (status 2, naming the flag) before
/// anything runs.
#[test]
fn numeric_flags_of_trace_commands_are_checked() {
    for (flag, v) in [
        ("--load", "nan"),
        ("--load", "inf"),
        ("--load", "-1"),
        ("--load", "0"),
        ("--load", "1e999"),
        ("--jobs", "0"),
        ("--jobs", "10000001"),
        ("--jobs", "-3"),
        ("--gpus", "0"),
    ] {
        // `--flag=value`, so that clap reads `-1` as a value.
        let set = format!("{flag}={v}");
        let mut args = vec!["trace", "generate", "--jobs=10", "--gpus=8"];
        args.retain(|a| !a.starts_with(flag));
        args.push(&set);
        assert_usage_error(&args, &format!("invalid value '{v}' for '{flag}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "job_id,arrival_s,gpus,duration_s\nj,0,1,1\n").unwrap();
    assert_usage_error(
        &["trace", "stats", csv.to_str().unwrap(), "--gpus", "0"],
        "--gpus",
    );
    // A load whose arrivals would pass the 10-year limit: a clear error.
    let o = vclos(&[
        "trace", "generate", "--jobs", "100", "--gpus", "8", "--load", "1e-6",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("beyond the trace limit"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

/// Issue 12: `duration_s=1e308` gave `utilisation NaN%` and `arrival_s=1e308`
/// a wrong average. Replay now refuses the trace, naming file:line:column.
#[test]
fn replay_refuses_out_of_range_times_naming_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(
        &csv,
        "job_id,arrival_s,gpus,duration_s\na,0,8,1e308\nb,1e308,8,10\nc,1,8,10\n",
    )
    .unwrap();
    let o = vclos(&[
        "replay",
        "--topology",
        "topologies/cluster512.yaml",
        "--trace",
        csv.to_str().unwrap(),
        "--policy",
        "vclos",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let name = csv.display().to_string();
    assert!(
        err.contains(&format!("{name}:2:7: duration_s 1e308 is more than")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{name}:3:3: arrival_s 1e308 is more than")),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

fn plan_with_running(running: &Path) -> Output {
    vclos(&[
        "plan",
        "--topology",
        "topologies/testbed-ocs.yaml",
        "--running",
        running.to_str().unwrap(),
        "--decision",
        "tests/golden/testbed-ocs/j2.yaml",
    ])
}

/// Issue 12: `plan --running /nonexistent` was silently an empty set of
/// running configurations. A missing path, a file, or a directory with no
/// device's file is an error naming the path.
#[test]
fn plan_running_must_name_a_directory_of_device_configs() {
    let refused = |running: &Path, expect: &str| {
        let o = plan_with_running(running);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains(expect), "{}", stderr(&o));
    };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nonexistent");
    refused(
        &missing,
        &format!("running configurations {}: No such file", missing.display()),
    );
    let file = dir.path().join("leaf1.cfg");
    std::fs::write(&file, "").unwrap();
    refused(&file, "leaf1.cfg: not a directory");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("leaf9.cfg"), "").unwrap();
    refused(&empty, "no `<device>.cfg` file for any device of topology");
    // The documented use still works: one device's file is enough.
    std::fs::rename(empty.join("leaf9.cfg"), empty.join("leaf1.cfg")).unwrap();
    let o = plan_with_running(&empty);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// An error whose cause is already in its message prints the cause once.
#[test]
fn an_error_says_its_cause_once() {
    let o = vclos(&[
        "plan",
        "--topology",
        "topologies/testbed.yaml",
        "--decision",
        "/nonexistent/decision.yaml",
    ]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains("/nonexistent/decision.yaml"), "{err}");
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

/// `trace generate --sizes uniform`: every size a multiple of the step up
/// to a quarter of the cluster, recorded in the comment; bad steps refused.
#[test]
fn trace_generate_draws_uniform_sizes_on_request() {
    let o = vclos(&[
        "trace", "generate", "--jobs", "400", "--gpus", "8192", "--sizes", "uniform",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("# ") && text.contains("--sizes uniform --size-step 8 --max-gpus 2048")
    );
    let sizes: Vec<u32> = text
        .lines()
        .skip(2)
        .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(sizes.len(), 400);
    assert!(sizes.iter().all(|g| g % 8 == 0 && *g <= 2048), "{sizes:?}");
    assert!(sizes.iter().any(|g| *g > 1024), "{sizes:?}");
    let o = vclos(&[
        "trace",
        "generate",
        "--jobs",
        "4",
        "--gpus",
        "8",
        "--sizes",
        "uniform",
        "--max-gpus",
        "4",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("step"), "{}", stderr(&o));
}
