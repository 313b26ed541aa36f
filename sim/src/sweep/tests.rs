#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

fn cluster512() -> Arc<Topology> {
    let text = include_str!("../../../topologies/cluster512-ocs.yaml");
    Arc::new(crate::topology::from_str("cluster512-ocs.yaml", text).unwrap())
}

fn grid() -> Grid {
    Grid {
        backfill: Default::default(),
        round_up: 0,
        policies: vec![
            Policy::Vclos.into(),
            Policy::Best.into(),
            Policy::Ecmp.into(),
        ],
        loads: vec![0.6, 0.9],
        queues: vec![QueuePolicy::Fifo],
        seeds: vec![1, 2],
        jobs: 150,
        sizes: Sizes::Helios,
        fair_share: true,
    }
}

#[test]
fn every_cell_runs_once_in_grid_order_and_threads_do_not_change_a_byte() {
    let topo = cluster512();
    let g = grid();
    let calls = AtomicUsize::new(0);
    let two = run(&topo, &g, 2, &|| {
        calls.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 12);
    assert_eq!(two.len(), 12);
    let order: Vec<(f64, u64, Policy)> = two
        .iter()
        .map(|r| (r.load, r.seed, r.policy.policy))
        .collect();
    assert_eq!(order[0], (0.6, 1, Policy::Vclos));
    assert_eq!(order[2], (0.6, 1, Policy::Ecmp));
    assert_eq!(order[3], (0.6, 2, Policy::Vclos));
    assert_eq!(order[11], (0.9, 2, Policy::Ecmp));
    let one = run(&topo, &g, 1, &|| {}).unwrap();
    assert_eq!(csv(&one), csv(&two));
    // The same trace for every policy of a cell: the same jobs complete.
    for cell in two.chunks(3) {
        assert!(cell.iter().all(|r| r.report.jobs == 150));
        let best = &cell[1].report;
        assert_eq!(best.avg_slowdown, 1.0);
        assert!(cell[0].report.avg_jct_s >= best.avg_jct_s - 1e-6);
    }
}

#[test]
fn csv_has_a_row_per_replay_and_the_documented_columns() {
    let topo = cluster512();
    let mut g = grid();
    g.policies = vec![Policy::Sr.into()];
    g.loads = vec![0.8];
    g.seeds = vec![3];
    let rows = run(&topo, &g, 1, &|| {}).unwrap();
    let text = csv(&rows);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0], COLUMNS.join(","));
    let cells: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(cells.len(), COLUMNS.len());
    assert_eq!(&cells[..5], ["sr", "0.8", "fifo", "3", "fair-share"]);
    assert_eq!(cells[6], rows[0].report.completed.to_string());
    // Titan's figures are filled in (the fabric's GPUs are known).
    let col = |name: &str| -> f64 {
        let i = COLUMNS.iter().position(|c| *c == name).unwrap();
        cells[i].parse().unwrap()
    };
    assert!(col("avg_used_servers") > 0.0);
    assert!(col("cross_server_traffic") > 0.0);
    let frag = col("gpu_fragmentation");
    assert!(frag > 0.0 && frag < 1.0, "{frag}");
    // The wait, split by the head's cause, adds up (to the 3 decimals).
    let split = col("avg_jwt_gpu_s") + col("avg_jwt_network_s");
    assert!((split - col("avg_jwt_s")).abs() < 0.002, "{split}");
}

#[test]
fn charts_draw_every_policy_and_are_deterministic() {
    let topo = cluster512();
    let g = grid();
    let rows = run(&topo, &g, 2, &|| {}).unwrap();
    let a = chart::jct_vs_load(&rows, &g).unwrap();
    assert!(a.starts_with("<svg"));
    for p in &g.policies {
        assert!(a.contains(p.policy.name()), "{p}");
    }
    assert_eq!(a, chart::jct_vs_load(&rows, &g).unwrap());
    let b = chart::times(&rows, &g).unwrap();
    for label in ["avg JWT", "avg JRT", "avg JCT", "load 0.9"] {
        assert!(b.contains(label), "{label}");
    }
    // One bar per (policy, time): 9 filled rectangles beyond the legend's.
    assert!(b.matches("<rect").count() >= 9);
}

#[test]
fn empty_and_oversized_grids_are_refused() {
    let topo = cluster512();
    let mut g = grid();
    g.seeds.clear();
    assert!(matches!(run(&topo, &g, 1, &|| {}), Err(SweepError::Empty)));
    let mut g = grid();
    g.seeds = (0..2000).collect();
    assert!(matches!(
        run(&topo, &g, 1, &|| {}),
        Err(SweepError::TooLarge(12000))
    ));
    // A trace the generator refuses names its load and seed.
    let mut g = grid();
    g.loads = vec![-1.0];
    let e = run(&topo, &g, 1, &|| {}).unwrap_err().to_string();
    assert!(e.contains("load -1") && e.contains("seed 1"), "{e}");
}

#[test]
fn partial_variants_parse_run_and_are_labelled() {
    let v: Variant = "vclos+partial".parse().unwrap();
    assert_eq!(
        (v.policy, v.partial_servers, v.to_string().as_str()),
        (Policy::Vclos, true, "vclos+partial")
    );
    assert_eq!("best".parse::<Variant>().unwrap(), Policy::Best.into());
    let e = "titan+partial".parse::<Variant>().unwrap_err();
    assert!(e.contains("always"), "{e}");
    let e = "vclo+partial".parse::<Variant>().unwrap_err();
    assert!(e.contains("unknown placement policy `vclo`"), "{e}");
    // In a grid: its own rows, its own label, the same trace as `vclos`.
    let topo = cluster512();
    let mut g = grid();
    g.policies = vec![Policy::Vclos.into(), v];
    g.loads = vec![0.9];
    g.seeds = vec![1];
    g.sizes = Sizes::Uniform { step: 2, max: 64 };
    let rows = run(&topo, &g, 1, &|| {}).unwrap();
    let text = csv(&rows);
    assert!(
        text.lines()
            .nth(2)
            .unwrap()
            .starts_with("vclos+partial,0.9,"),
        "{text}"
    );
    assert_eq!(rows[0].report.jobs, rows[1].report.jobs);
    assert_eq!(rows[0].report.partial_server_jobs, 0);
    assert!(
        rows[1].report.partial_server_jobs > 0,
        "{:?}",
        rows[1].report
    );
    assert!(chart::jct_vs_load(&rows, &g)
        .unwrap()
        .contains("vclos+partial"));
}

#[test]
fn fabric_variants_parse_run_isolated_and_are_labelled() {
    let v: Variant = "titan+fabric".parse().unwrap();
    assert_eq!(
        (v.policy, v.on_fabric, v.to_string().as_str()),
        (Policy::Titan, true, "titan+fabric")
    );
    let w: Variant = "vclos+partial+fabric+cassini".parse().unwrap();
    assert_eq!(w.to_string(), "vclos+partial+fabric+cassini");
    assert!(w.partial_servers && w.on_fabric && w.sharing.is_some());
    let e = "best+fabric".parse::<Variant>().unwrap_err();
    assert!(e.contains("simulation baseline"), "{e}");
    let topo = cluster512();
    let mut g = grid();
    g.policies = vec![Policy::Titan.into(), v];
    g.loads = vec![0.9];
    g.seeds = vec![1];
    g.sizes = Sizes::Uniform { step: 2, max: 64 };
    let rows = run(&topo, &g, 1, &|| {}).unwrap();
    assert!(csv(&rows)
        .lines()
        .nth(2)
        .unwrap()
        .starts_with("titan+fabric,0.9,"));
    let (sim, fab) = (&rows[0].report, &rows[1].report);
    assert_eq!(
        (fab.jobs, fab.isolation_violations, fab.contended_jobs),
        (sim.jobs, 0, 0)
    );
    assert!(fab.partial_server_jobs > 0, "{fab:?}");
    // Placed as on a fabric, not with titan's own routes.
    assert_ne!(sim.avg_jwt_s, fab.avg_jwt_s);
}

#[test]
fn sharing_variants_parse_run_and_model_their_congestion() {
    use crate::network::model::Congestion;
    let v: Variant = "vclos+partial+mltcp".parse().unwrap();
    assert_eq!(
        (v.partial_servers, v.sharing, v.to_string().as_str()),
        (true, Some(Congestion::Mltcp), "vclos+partial+mltcp")
    );
    let e = "best+cassini".parse::<Variant>().unwrap_err();
    assert!(e.contains("vclos, ocs-vclos and titan"), "{e}");
    assert!("titan+cassini".parse::<Variant>().is_ok());
    let topo = cluster512();
    let mut g = grid();
    g.policies = ["vclos", "vclos+cassini", "vclos+random", "titan+cassini"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    g.loads = vec![0.9];
    g.seeds = vec![1];
    g.jobs = 300;
    g.sizes = Sizes::Uniform { step: 8, max: 128 };
    let rows = run(&topo, &g, 1, &|| {}).unwrap();
    let r: Vec<&Report> = rows.iter().map(|r| &r.report).collect();
    assert_eq!(r[0].shared_jobs, 0);
    assert!(r[1].shared_jobs > 0, "{:?}", r[1]);
    assert_eq!(
        (r[1].congestion.as_str(), r[2].congestion.as_str()),
        ("cassini", "random")
    );
    assert_eq!(r[1].isolation_violations + r[2].isolation_violations, 0);
    // Titan time-shares at a perfect score: shared, and nobody slowed.
    assert!(r[3].shared_jobs > 0, "{:?}", r[3]);
    assert_eq!(r[3].p99_slowdown, 1.0, "{:?}", r[3]);
    assert!(csv(&rows)
        .lines()
        .nth(2)
        .unwrap()
        .starts_with("vclos+cassini,0.9,"));
}
