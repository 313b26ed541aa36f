//! Synthetic jobs for a pod fabric: 003 Section IV-A's default scenario,
//! for the benchmark and the sweep (issue 19 items 3 and 5).
//!
//! Per pod group, `jobs_per_group` jobs, each with a type drawn from `ps`,
//! `rar`, `a2a`, a model from 003 Table III (1B, 3B, 8B, 90B) and a parallel
//! degree (its GPUs) drawn from 2 to 16 (Section IV-A), in units of 1 or 2
//! GPUs. Deployment (Section IV-B, simplified): every unit goes to the pod of
//! the group with the most free GPUs, which spreads each job's traffic
//! across the pods; a job that no longer fits is left out. The same seed
//! always gives the same jobs.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::job::{Defaults, Job, JobKind, Jobs, MODELS};
use super::plan::pod_groups;
use crate::topology::Topology;

/// The jobs of 003's default scenario on `t` (module doc), context
/// `tokens`.
pub fn synthetic(t: &Topology, jobs_per_group: usize, tokens: u64, seed: u64) -> Jobs {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut jobs = Vec::new();
    for (g, group) in pod_groups(t).iter().enumerate() {
        let mut free: Vec<u32> = group
            .pods
            .iter()
            .map(|&p| t.leaf(p).server_ports.len() as u32)
            .collect();
        for k in 0..jobs_per_group {
            let kind = [JobKind::Ps, JobKind::Rar, JobKind::A2a][rng.random_range(0..3)];
            let (_, model_gb, hidden) = MODELS[rng.random_range(0..4)];
            let unit: u32 = rng.random_range(1..=2);
            let degree: u32 = rng.random_range(2..=16u32).div_ceil(unit) * unit;
            let mut gpus = vec![0u32; free.len()];
            let mut left = free.clone();
            for _ in 0..degree / unit {
                let best = (0..left.len()).max_by_key(|&p| (left[p], std::cmp::Reverse(p)));
                match best {
                    Some(p) if left[p] >= unit => {
                        left[p] -= unit;
                        gpus[p] += unit;
                    }
                    _ => break,
                }
            }
            if gpus.iter().sum::<u32>() < degree {
                continue;
            }
            free = left;
            jobs.push(Job {
                name: format!("g{}-j{}", g + 1, k + 1),
                kind,
                model_gb,
                unit,
                pods: gpus
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(p, &n)| (t.leaf(group.pods[p]).name.to_string(), n))
                    .collect(),
                ps_pod: None,
                tokens,
                hidden,
                line: None,
            });
        }
    }
    Jobs {
        defaults: Defaults {
            tokens,
            ..Defaults::default()
        },
        jobs,
    }
}
