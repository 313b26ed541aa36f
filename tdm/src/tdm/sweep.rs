//! `vclos sweep --tdm`: round time against the number of jobs and the
//! context length, TDM against the non-TDM baseline (issue 19 item 5; the
//! axes of 003 Section IV-C: "comparison of single-round training times
//! with varying numbers of jobs and different context lengths").
//!
//! Each grid point (jobs per pod group x context x seed) draws 003's default
//! job mix on the pod fabric ([`super::synth`]), plans every pod group
//! ([`super::plan::plan_groups`]) and replays both the plan and its baseline
//! on the network model ([`super::replay`]). A row holds means over the pod
//! groups; points run in parallel (rayon), rows come back in grid order and
//! carry no timings (same grid, same bytes).

use rayon::prelude::*;

use super::grouping::Evaluation;
use super::plan::{plan_groups, PlanError, Planned, PodGroup, Settings};
use super::{replay, synth};
use crate::topology::Topology;

/// The grid.
#[derive(Debug, Clone, PartialEq)]
pub struct TdmGrid {
    pub jobs_per_group: Vec<usize>,
    pub contexts: Vec<u64>,
    pub seeds: Vec<u64>,
    pub settings: Settings,
}

/// One grid point: means over the pod groups with jobs, seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TdmRow {
    pub jobs_per_group: usize,
    pub tokens: u64,
    pub seed: u64,
    /// Jobs placed (a drawn job that no longer fits its group is left out).
    pub jobs: usize,
    pub groups: usize,
    /// The planner's rounds (Eq. 2-3 + reconfiguration).
    pub round_s: f64,
    pub baseline_round_s: f64,
    /// The same schedules replayed on the network model.
    pub replay_round_s: f64,
    pub replay_baseline_s: f64,
}

/// Every point of `grid` on `t`.
pub fn run(t: &Topology, grid: &TdmGrid) -> Result<Vec<TdmRow>, PlanError> {
    let points: Vec<(usize, u64, u64)> = grid
        .jobs_per_group
        .iter()
        .flat_map(|&j| {
            grid.contexts
                .iter()
                .flat_map(move |&c| grid.seeds.iter().map(move |&s| (j, c, s)))
        })
        .collect();
    points
        .into_par_iter()
        .map(|(j, tokens, seed)| point(t, grid.settings, j, tokens, seed))
        .collect()
}

fn point(t: &Topology, s: Settings, j: usize, tokens: u64, seed: u64) -> Result<TdmRow, PlanError> {
    let jobs = synth::synthetic(t, j, tokens, seed);
    let (groups, planned) = plan_groups(t, &jobs, "synthetic", s)?;
    let n = planned.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Planned) -> f64| planned.iter().map(f).sum::<f64>() / n;
    let replayed = |p: &Planned, e: &Evaluation, g: &[PodGroup]| replay::round(&p.ctx(g, s), e).0;
    Ok(TdmRow {
        jobs_per_group: j,
        tokens,
        seed,
        jobs: jobs.jobs.len(),
        groups: planned.len(),
        round_s: mean(&|p| p.outcome.plan.round_s),
        baseline_round_s: mean(&|p| p.outcome.baseline.round_s),
        replay_round_s: mean(&|p| replayed(p, &p.outcome.plan, &groups)),
        replay_baseline_s: mean(&|p| replayed(p, &p.outcome.baseline, &groups)),
    })
}

/// The rows as CSV (header first).
pub fn csv(rows: &[TdmRow]) -> String {
    let mut out = String::from(
        "jobs_per_group,tokens,seed,jobs,groups,round_s,baseline_round_s,replay_round_s,replay_baseline_s\n",
    );
    for r in rows {
        out += &format!(
            "{},{},{},{},{},{:.6},{:.6},{:.6},{:.6}\n",
            r.jobs_per_group,
            r.tokens,
            r.seed,
            r.jobs,
            r.groups,
            r.round_s,
            r.baseline_round_s,
            r.replay_round_s,
            r.replay_baseline_s
        );
    }
    out
}

/// A figure of a row.
pub type RowMetric = fn(&TdmRow) -> f64;

/// The x axis of a chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Jobs per pod group, at the grid's first context.
    Jobs,
    /// Context length, at the grid's last jobs-per-group.
    Context,
}

/// Chart lines along `axis` (mean over seeds): TDM and the baseline,
/// replayed on the network model.
pub fn lines(rows: &[TdmRow], grid: &TdmGrid, axis: Axis) -> Vec<(String, Vec<(f64, f64)>)> {
    let fixed_tokens = grid.contexts.first().copied().unwrap_or(0);
    let fixed_jobs = grid.jobs_per_group.last().copied().unwrap_or(0);
    let xs: Vec<f64> = match axis {
        Axis::Jobs => grid.jobs_per_group.iter().map(|&j| j as f64).collect(),
        Axis::Context => grid.contexts.iter().map(|&c| c as f64).collect(),
    };
    let at = |x: f64, metric: RowMetric| {
        let sel: Vec<f64> = rows
            .iter()
            .filter(|r| match axis {
                Axis::Jobs => r.tokens == fixed_tokens && r.jobs_per_group as f64 == x,
                Axis::Context => r.jobs_per_group == fixed_jobs && r.tokens as f64 == x,
            })
            .map(metric)
            .collect();
        sel.iter().sum::<f64>() / sel.len().max(1) as f64
    };
    let series: [(&str, RowMetric); 2] = [
        ("TDM", |r| r.replay_round_s),
        ("non-TDM baseline", |r| r.replay_baseline_s),
    ];
    series
        .iter()
        .map(|(name, m)| {
            (
                name.to_string(),
                xs.iter().map(|&x| (x, at(x, *m))).collect(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_gives_one_row_per_point_and_tdm_never_loses() {
        let t = crate::topology::generate::pod_topology(16);
        let grid = TdmGrid {
            jobs_per_group: vec![2, 8],
            contexts: vec![64, 8192],
            seeds: vec![1, 2],
            settings: Settings::default(),
        };
        let rows = run(&t, &grid).unwrap();
        assert_eq!(rows.len(), 8);
        assert_eq!(
            (rows[0].jobs_per_group, rows[0].tokens, rows[0].seed),
            (2, 64, 1)
        );
        for r in &rows {
            assert_eq!(r.groups, 2);
            assert!(r.round_s <= r.baseline_round_s);
            assert!(r.replay_round_s >= r.round_s * (1.0 - 1e-9));
            assert!(r.replay_baseline_s >= r.baseline_round_s * (1.0 - 1e-9));
        }
        // Longer contexts, longer training: the baseline's round grows.
        let at = |tokens| {
            rows.iter()
                .find(|r| r.tokens == tokens && r.jobs_per_group == 8)
                .unwrap()
        };
        assert!(at(8192).baseline_round_s > at(64).baseline_round_s);
        assert_eq!(csv(&rows).lines().count(), 9);
        let l = lines(&rows, &grid, Axis::Context);
        assert_eq!(l.len(), 2);
        assert_eq!(
            l[0].1.iter().map(|p| p.0).collect::<Vec<_>>(),
            [64.0, 8192.0]
        );
    }
}
