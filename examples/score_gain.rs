//! Compatibility score against the gain of Cassini's time shifts (issue 16,
//! item 6; the trend of the thesis's Table 4.3: gains vanish as the score
//! falls towards 0.6).
//!
//! Random groups of 2-3 jobs share one link (iterations of 100-400 ms in
//! 10 ms steps, Up at line rate for 10-60% of each). For each group:
//! the score and shifts of `circle::fit`; the iteration time of every job
//! played out on the link (`sharing::periodic`, fair division) at those
//! shifts, and at random phases (the mean over 8 draws, sharing without
//! shifts). The gain is the mean iteration time at random phases over the
//! one at Cassini's shifts, per score bucket.
//!
//! ```sh
//! cargo run --release --example score_gain [GROUPS] [SEED]
//! ```

use rand::{RngExt, SeedableRng};
use vclos::sharing::circle::{fit, OnLink};
use vclos::sharing::periodic::{self, Division};
use vclos::sharing::profile::Profile;

/// Mean iteration time of `jobs` (profiles) at `phases` (ms into their
/// iteration at time 0), from the share of demand each is served.
fn mean_iteration(profiles: &[Profile], phases: &[u32]) -> f64 {
    let on: Vec<periodic::OnLink> = profiles
        .iter()
        .zip(phases)
        .map(|(p, &phase_ms)| periodic::OnLink {
            phases: p.phases().iter().map(|ph| (ph.ms, ph.demand)).collect(),
            phase_ms,
        })
        .collect();
    let served = periodic::served(&on, 1.0, Division::Fair);
    let total: f64 = profiles
        .iter()
        .zip(&served)
        .map(|(p, s)| {
            let comm: f64 = p
                .phases()
                .iter()
                .filter(|ph| ph.demand > 0.0)
                .map(|ph| f64::from(ph.ms))
                .sum();
            f64::from(p.iteration_ms()) - comm + comm / s.max(1e-9)
        })
        .sum();
    total / profiles.len() as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let groups: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(400);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    // (lower bound of the bucket, groups, sum of gains)
    let mut buckets: Vec<(f64, usize, f64)> = [1.0, 0.9, 0.8, 0.7, 0.6, 0.0, f64::NEG_INFINITY]
        .iter()
        .map(|&b| (b, 0, 0.0))
        .collect();
    for _ in 0..groups {
        let n = rng.random_range(2..=3);
        let profiles: Vec<Profile> = (0..n)
            .map(|_| {
                let iter = 10 * rng.random_range(10..=40);
                Profile::up_down(iter, rng.random_range(0.1..0.6))
            })
            .collect();
        let f = fit(&OnLink::at_full_load(&profiles), 1.0);
        // A shift delays a job: at time 0 it is `iter - shift` into it.
        let shifted: Vec<u32> = profiles
            .iter()
            .zip(&f.shifts_ms)
            .map(|(p, &s)| (p.iteration_ms() - s) % p.iteration_ms())
            .collect();
        let cassini = mean_iteration(&profiles, &shifted);
        let random: f64 = (0..8)
            .map(|_| {
                let phases: Vec<u32> = profiles
                    .iter()
                    .map(|p| rng.random_range(0..p.iteration_ms()))
                    .collect();
                mean_iteration(&profiles, &phases)
            })
            .sum::<f64>()
            / 8.0;
        let b = buckets
            .iter_mut()
            .find(|b| f.score >= b.0 - 1e-12)
            .expect("the last bucket takes every score");
        b.1 += 1;
        b.2 += random / cassini;
    }
    println!("| score | groups | gain of the shifts (mean iteration, random phases / shifted) |");
    println!("|---|---:|---:|");
    let mut upper = "1".to_string();
    for (low, n, sum) in buckets {
        let range = if low >= 1.0 {
            "1".to_string()
        } else if low.is_finite() {
            format!("[{low:.1}, {upper})")
        } else {
            format!("< {upper}")
        };
        if n > 0 {
            println!("| {range} | {n} | {:.3} |", sum / n as f64);
        }
        if low.is_finite() {
            upper = format!("{low:.1}");
        }
    }
}
