//! `vclos tdm plan` and `vclos topology generate --spines 0` through the
//! built binary (issue 19).
#![allow(clippy::unwrap_used)]

mod cli_common;

use cli_common::{stderr, stdout, vclos};
use vclos::tdm::{Schedule, Variant};

const TOPO: &str = "topologies/pods8.yaml";
const JOBS: &str = "docs/tdm/jobs8.yaml";

/// `vclos tdm plan --topology topo --jobs jobs` and `extra`.
fn plan(topo: &str, jobs: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["tdm", "plan", "--topology", topo, "--jobs", jobs];
    args.extend_from_slice(extra);
    vclos(&args)
}

#[test]
fn plan_prints_json_schedules_and_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let extra = [
        "--json",
        "--variant",
        "bi-stage",
        "--switch-ms",
        "10",
        "--out",
    ];
    let o = plan(TOPO, JOBS, &[&extra[..], &[out.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let s: Vec<Schedule> = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].variant, s[0].switch_ms, s[0].stages.len()),
        (Variant::BiStage, 10.0, 2)
    );
    assert!(s[0].round_s <= s[0].baseline_round_s);
    // --out: the same schedule, one file per pod group, named by its OCS.
    let file: Schedule =
        serde_json::from_str(&std::fs::read_to_string(out.join("ocs1.json")).unwrap()).unwrap();
    assert_eq!(file, s[0]);

    let o = plan(TOPO, JOBS, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("pod group 1 (ocs1): round "), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.contains("  stage ")).count(),
        4,
        "{text}"
    );
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.yaml");
    std::fs::write(
        &jobs,
        "jobs:\n  - {name: a, type: rar, model: 1B, pods: {leaf1: 1}}\n",
    )
    .unwrap();
    let jobs = jobs.to_str().unwrap();
    // Each: topology, jobs, extra flags, what stderr must say.
    let cases: [(&str, &str, &[&str], &str); 3] = [
        (
            TOPO,
            jobs,
            &[],
            "jobs.yaml:2: job `a`: pod `leaf1` is not a leaf",
        ),
        (TOPO, JOBS, &["--switch-ms=-1"], "--switch-ms -1"),
        // A Leaf-Spine fabric has no pods: the job's pod is refused by name.
        (
            "topologies/testbed.yaml",
            jobs,
            &[],
            "`leaf1` has no uplink cabled to an OCS",
        ),
    ];
    for (topo, jobs, extra, want) in cases {
        let o = plan(topo, jobs, extra);
        assert_eq!(o.status.code(), Some(1), "{want}");
        assert!(stderr(&o).contains(want), "{want}: {}", stderr(&o));
    }
}

#[test]
fn generate_spines_0_makes_the_shipped_pod_fabric() {
    let pods = [
        "topology",
        "generate",
        "--spines",
        "0",
        "--gpus-per-server",
        "8",
    ];
    let o = vclos(
        &[
            &pods[..],
            &["--pods", "8", "--pod-uplinks", "16", "--name", "pods8"],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), std::fs::read_to_string(TOPO).unwrap());
    let o = vclos(&[&pods[..], &["--leaves", "8"]].concat());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("pass --pod-uplinks"), "{}", stderr(&o));
}

#[test]
fn sweep_tdm_writes_the_csv_and_both_charts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = vclos(&[
        "sweep",
        "--tdm",
        "--topology",
        TOPO,
        "--out",
        out,
        "--tdm-jobs",
        "2,4",
        "--contexts",
        "128,1024",
        "--seeds",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("tdm.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv.starts_with("jobs_per_group,tokens,seed,"), "{csv}");
    for svg in ["round_vs_jobs.svg", "round_vs_context.svg"] {
        let text = std::fs::read_to_string(dir.path().join(svg)).unwrap();
        assert!(
            text.starts_with("<svg") && text.contains("non-TDM baseline"),
            "{svg}"
        );
    }
}
