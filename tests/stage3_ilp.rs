//! OCS-vClos's exact Stage 3 search against an independent solver: the
//! instances a real replay gives the search, solved again as an ILP of the
//! paper's Appendix A.3 by HiGHS (`tools/stage3_ilp.py`, PyPI `highspy` in
//! the third-party venv). Every `none` must be infeasible for the ILP (the
//! search's completeness, on instances no hand-made test would pick) and
//! every `slice` feasible (the ILP's own sanity). The search's brute-force
//! tests cover tiny fabrics; this covers the 512-GPU one under load.
//! Sizes that the counts of free units and ports rule out never reach the
//! search (`core/src/placement/ocs/counts.rs`), so every `none` here is
//! one the counts let through: 3000 jobs give a few dozen of them.

#![allow(clippy::unwrap_used)]

#[path = "interop/mod.rs"]
mod interop;

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use vclos::placement::{self, Policy, Stage3Outcome};
use vclos::replay::{self, ReplayOptions};
use vclos::trace::generate::{generate, Params, Sizes};

#[test]
fn the_ilp_agrees_with_every_answer_the_exact_search_settled() {
    let Some(py) = interop::python_with(&["highspy"]) else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let topo =
        Arc::new(vclos::topology::load(&root.join("topologies/cluster512-ocs.yaml")).unwrap());
    let params = Params {
        jobs: 3000,
        gpus: 512,
        load: 0.9,
        seed: 3,
        sizes: Sizes::Uniform { step: 8, max: 128 },
    };
    let trace = generate(&params).unwrap().jobs;
    let mut placer = placement::placer(Policy::OcsVclos, Arc::clone(&topo)).unwrap();
    placement::record_instances(true);
    replay::replay(placer.as_mut(), &trace, ReplayOptions::for_topology(&topo)).unwrap();
    let found = placement::record_instances(false);
    let count = |o| found.iter().filter(|i| i.outcome == o).count();
    let (none, slice) = (count(Stage3Outcome::None), count(Stage3Outcome::Slice));
    let rescued = count(Stage3Outcome::Rescued);
    eprintln!("{none} none, {slice} slices, {rescued} rescued");
    assert!(
        none >= 20 && slice >= 5,
        "too few settled searches to check: {none} none, {slice} slices"
    );

    let mut file = tempfile::NamedTempFile::new().unwrap();
    for inst in found.iter().filter(|i| i.outcome != Stage3Outcome::Cutoff) {
        serde_json::to_writer(&mut file, inst).unwrap();
        writeln!(file).unwrap();
    }
    file.flush().unwrap();
    let out = std::process::Command::new(py)
        .arg(root.join("tools/stage3_ilp.py"))
        .arg(file.path())
        .args(["--check", "--time-limit", "60"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The table's rows: every settled instance was solved, none timed out.
    let row = |what: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(what.split_whitespace()))
            .and_then(|l| l.split_whitespace().nth(2)?.parse::<usize>().ok())
            .unwrap_or(0)
    };
    assert_eq!(row("none kInfeasible"), none, "{stdout}");
    assert_eq!(row("slice kOptimal"), slice, "{stdout}");
    // A shape spines-first placed after the exact search was cut off has
    // a slice: the ILP must find one too.
    assert_eq!(row("rescued kOptimal"), rescued, "{stdout}");
}

/// The tool's error for a file whose lines are `lines`.
fn tool_error(py: &Path, lines: &[String]) -> String {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for l in lines {
        writeln!(file, "{l}").unwrap();
    }
    file.flush().unwrap();
    let out = std::process::Command::new(py)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tools/stage3_ilp.py"))
        .arg(file.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_ilp_tool_names_the_line_of_a_bad_instance() {
    let Some(py) = interop::python_with(&["highspy"]) else {
        return;
    };
    let ragged = r#"{"outcome":"none","l":2,"s":2,"problem":{"leaf_max":[1],"leaf_cap":[[1,1]],"spine_cap":[[1]],"direct":[[0]]}}"#;
    let err = tool_error(&py, &[ragged.to_string()]);
    assert!(
        err.contains(":1: field problem.leaf_cap: expected 1 rows of 1"),
        "{err}"
    );
    // A well-formed instance whose ILP would not fit in memory is refused
    // before a variable is made.
    let (nl, ns) = (4000, 100);
    let huge = serde_json::json!({"outcome": "cutoff", "l": 2, "s": 2, "problem": {
        "leaf_max": vec![1000; nl], "leaf_cap": vec![vec![1]; nl],
        "spine_cap": vec![vec![1]; ns], "direct": vec![vec![0; ns]; nl]}});
    let fine = ragged.replace("[[1,1]]", "[[1]]");
    let err = tool_error(&py, &[fine, huge.to_string()]);
    assert!(err.contains(":2: instance too large for the ILP"), "{err}");
}
