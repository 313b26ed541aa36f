//! A synthetic, Helios-like trace generator (documented in docs/traces.md).
//!
//! The paper replays 5000 jobs "based on Helios" with Poisson arrivals; the
//! dataset itself is not published with it, so this module draws a trace
//! with the same shape from an explicit, seeded model:
//!
//! * sizes ([`Sizes::Helios`], the default) from a fixed categorical table:
//!   mostly 1-8 GPUs (one server), a tail of multi-server jobs up to 512
//!   including non-powers-of-two (24, 40, 72, 104, ...), conditioned on
//!   `size <= gpus`; or ([`Sizes::Uniform`], `--sizes uniform`) uniform
//!   over the multiples of a step (default 8, one server of 8 GPUs) up to a
//!   maximum (default a quarter of the cluster): the hard traces of issue
//!   13, where most sizes are awkward (no power of two, often no even split
//!   over leaves);
//! * run times log-normal (heavy tail), median growing slowly with size;
//! * Poisson arrivals whose rate makes the offered load
//!   `sum(gpus * duration) / (G * arrival window)` equal to `load`;
//! * deadlines `arrival + k * duration`, `k ~ U[1.5, 5]`, for EDF;
//! * what each job does on the network (model, collective, comm_fraction)
//!   from the mix of [`super::workload::MIX`] (its module doc says where the
//!   numbers come from), from a second PCG stream so that the columns above
//!   are the same as before the workload columns existed.
//!
//! Everything comes from PCG streams seeded explicitly, so a (params,
//! seed) pair always yields the same trace on every platform. Normal and
//! exponential draws are done here from uniforms (Box-Muller, inverse CDF)
//! rather than through a distributions crate, so the numbers cannot change
//! under a dependency upgrade.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use thiserror::Error;

use super::{workload, Job};
use crate::names::JobId;

/// Job-size table: (GPUs, relative weight). Sums to 1.0 over all rows.
pub const SIZES: &[(u32, f64)] = &[
    (1, 0.401),
    (2, 0.12),
    (4, 0.12),
    (8, 0.14),
    (16, 0.07),
    (24, 0.025),
    (32, 0.04),
    (40, 0.01),
    (48, 0.01),
    (64, 0.025),
    (72, 0.005),
    (96, 0.01),
    (104, 0.005),
    (128, 0.01),
    (160, 0.005),
    (256, 0.004),
];

/// Median run time of a 1-GPU job; a job of `g` GPUs has median `MEDIAN_S * g^SIZE_EXP`.
pub const MEDIAN_S: f64 = 1200.0;
pub const SIZE_EXP: f64 = 0.1;
/// Log-normal shape (standard deviation of ln(duration)).
pub const SIGMA: f64 = 1.2;
/// Run times are clamped to [MIN_S, MAX_S] so replays stay bounded.
pub const MIN_S: f64 = 1.0;
pub const MAX_S: f64 = 2.0 * 24.0 * 3600.0;
/// Deadline slack factor range.
pub const SLACK: (f64, f64) = (1.5, 5.0);
/// Mixed into the seed of the workload stream (any fixed constant: the
/// golden ratio's 64-bit fraction, a common choice for such offsets).
const WORKLOAD_STREAM: u64 = 0x9E37_79B9_7F4A_7C15;

/// Generator inputs.
/// Most job sizes `--sizes uniform` draws from (one table entry each): a
/// table of every multiple of 1 GPU up to a billion would take gigabytes.
pub const MAX_UNIFORM_SIZES: u32 = 1 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub jobs: u32,
    /// GPUs in the target cluster: caps job sizes and sets the arrival rate.
    pub gpus: u32,
    /// Offered load (0 < load); 0.9 keeps a 512-GPU cluster queueing.
    pub load: f64,
    pub seed: u64,
    pub sizes: Sizes,
}

/// How job sizes are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sizes {
    /// The Helios-like table [`SIZES`].
    #[default]
    Helios,
    /// Uniform over `step, 2*step, ..` up to `max` GPUs (and the cluster).
    Uniform { step: u32, max: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GenError {
    #[error("--jobs must be at least 1")]
    NoJobs,
    #[error("--gpus must be at least 1")]
    NoGpus,
    #[error("--load must be a finite number greater than 0 (got {0})")]
    BadLoad(String),
    #[error("uniform sizes need 0 < step <= max, and step <= --gpus (got step {step}, max {max})")]
    BadSizes { step: u32, max: u32 },
    #[error(
        "uniform sizes up to {max} GPUs in steps of {step} are {sizes} sizes, more than \
         {MAX_UNIFORM_SIZES}: raise --size-step or lower --max-gpus"
    )]
    TooManySizes { step: u32, max: u32, sizes: u32 },
    #[error("--jobs must be at most {} (the limit of a trace)", super::MAX_JOBS)]
    TooManyJobs,
    #[error(
        "arrivals would reach {last_s} s, beyond the trace limit of {:.0} s (10 years): \
         raise --load or lower --jobs",
        super::MAX_SECONDS
    )]
    TooLong { last_s: u64 },
}

/// A generated trace and the figures it was built to.
#[derive(Debug, Clone)]
pub struct Generated {
    pub jobs: Vec<Job>,
    /// Mean inter-arrival time used (the paper's lambda, in seconds).
    pub mean_interarrival_s: f64,
    /// `sum(gpus * duration) / (G * last arrival)`: the realised offered load.
    pub realised_load: f64,
}

impl Generated {
    /// A `#` comment line recording how the trace was made.
    pub fn comment(&self, p: &Params) -> String {
        let sizes = match p.sizes {
            Sizes::Helios => String::new(),
            Sizes::Uniform { step, max } => {
                format!(" --sizes uniform --size-step {step} --max-gpus {max}")
            }
        };
        format!(
            "# vclos trace generate --jobs {} --gpus {} --load {} --seed {}{sizes} \
             (mean inter-arrival {:.1} s, realised load {:.3}; model: docs/traces.md)",
            p.jobs, p.gpus, p.load, p.seed, self.mean_interarrival_s, self.realised_load
        )
    }
}

/// Draw a trace.
pub fn generate(p: &Params) -> Result<Generated, GenError> {
    if p.jobs == 0 {
        return Err(GenError::NoJobs);
    }
    if p.jobs as usize > super::MAX_JOBS {
        return Err(GenError::TooManyJobs);
    }
    if p.gpus == 0 {
        return Err(GenError::NoGpus);
    }
    if !(p.load.is_finite() && p.load > 0.0) {
        return Err(GenError::BadLoad(p.load.to_string()));
    }
    if let Sizes::Uniform { step, max } = p.sizes {
        if step == 0 || step > max || step > p.gpus {
            return Err(GenError::BadSizes { step, max });
        }
        let sizes = max.min(p.gpus) / step;
        if sizes > MAX_UNIFORM_SIZES {
            return Err(GenError::TooManySizes { step, max, sizes });
        }
    }
    let mut rng = Pcg64Mcg::seed_from_u64(p.seed);
    let table: Vec<(u32, f64)> = match p.sizes {
        Sizes::Helios => SIZES
            .iter()
            .copied()
            .filter(|(g, _)| *g <= p.gpus)
            .collect(),
        // Every multiple of `step` up to the cap, equally likely.
        Sizes::Uniform { step, max } => (1..=max.min(p.gpus) / step)
            .map(|k| (k * step, 1.0))
            .collect(),
    };
    let total_weight: f64 = table.iter().map(|(_, w)| w).sum();

    let mut sized = Vec::with_capacity(p.jobs as usize);
    let mut work = 0.0;
    for _ in 0..p.jobs {
        let gpus = pick(&table, total_weight, unit(&mut rng));
        let median = MEDIAN_S * f64::from(gpus).powf(SIZE_EXP);
        let duration = (median * (SIGMA * normal(&mut rng)).exp()).clamp(MIN_S, MAX_S);
        // Round now so that the CSV (millisecond precision) is the trace.
        let duration = round_ms(duration);
        work += f64::from(gpus) * duration;
        sized.push((gpus, duration));
    }

    let window = work / (f64::from(p.gpus) * p.load);
    let mean_gap = window / f64::from(p.jobs);
    let width = p.jobs.to_string().len();
    let mut t = 0.0;
    let mut jobs = Vec::with_capacity(sized.len());
    let mut wrng = Pcg64Mcg::seed_from_u64(p.seed ^ WORKLOAD_STREAM);
    for (i, (gpus, duration_s)) in sized.into_iter().enumerate() {
        t += -(unit_open(&mut rng)).ln() * mean_gap;
        let arrival_s = round_ms(t);
        let slack = SLACK.0 + (SLACK.1 - SLACK.0) * unit(&mut rng);
        let id = JobId::new(format!("j{:0width$}", i + 1)).map_err(|_| GenError::NoJobs)?; // unreachable: ids are "j" + digits
        jobs.push(Job {
            id,
            arrival_s,
            gpus,
            duration_s,
            deadline_s: Some(round_ms(arrival_s + slack * duration_s)),
            workload: workload::draw(unit(&mut wrng), unit(&mut wrng), unit(&mut wrng)),
        });
    }
    let last = jobs.last().map_or(0.0, |j| j.arrival_s);
    // What the parser would refuse is never written (durations are at most
    // MAX_S and deadlines arrival + 5 * MAX_S, both well inside the limits).
    if last > super::MAX_SECONDS {
        // `as` saturates; the value is only shown.
        return Err(GenError::TooLong {
            last_s: last.ceil() as u64,
        });
    }
    let realised_load = if last > 0.0 {
        work / (f64::from(p.gpus) * last)
    } else {
        f64::INFINITY
    };
    Ok(Generated {
        jobs,
        mean_interarrival_s: mean_gap,
        realised_load,
    })
}

fn round_ms(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Uniform in [0, 1).
fn unit(rng: &mut Pcg64Mcg) -> f64 {
    rng.random::<f64>()
}

/// Uniform in (0, 1]: safe to take the logarithm of.
fn unit_open(rng: &mut Pcg64Mcg) -> f64 {
    1.0 - unit(rng)
}

/// Standard normal (Box-Muller, one of the pair).
fn normal(rng: &mut Pcg64Mcg) -> f64 {
    let r = (-2.0 * unit_open(rng).ln()).sqrt();
    r * (std::f64::consts::TAU * unit(rng)).cos()
}

fn pick(table: &[(u32, f64)], total: f64, u: f64) -> u32 {
    let mut x = u * total;
    for (g, w) in table {
        if x < *w {
            return *g;
        }
        x -= w;
    }
    // Rounding left a sliver past the last row.
    table.last().map_or(1, |(g, _)| *g)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn params(jobs: u32, gpus: u32, load: f64, seed: u64) -> Params {
        Params {
            sizes: Sizes::Helios,
            jobs,
            gpus,
            load,
            seed,
        }
    }

    #[test]
    fn table_weights_sum_to_one() {
        let s: f64 = SIZES.iter().map(|(_, w)| w).sum();
        assert!((s - 1.0).abs() < 1e-9, "{s}");
    }

    #[test]
    fn same_seed_same_trace_other_seed_other_trace() {
        let a = generate(&params(500, 512, 0.9, 7)).unwrap().jobs;
        let b = generate(&params(500, 512, 0.9, 7)).unwrap().jobs;
        let c = generate(&params(500, 512, 0.9, 8)).unwrap().jobs;
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn sizes_look_like_the_paper_workload() {
        let jobs = generate(&params(5000, 512, 0.9, 1)).unwrap().jobs;
        let n = jobs.len() as f64;
        let small = jobs.iter().filter(|j| j.gpus <= 8).count() as f64 / n;
        assert!((0.74..0.82).contains(&small), "single-server share {small}");
        assert!(jobs.iter().all(|j| j.gpus <= 512));
        for odd in [24, 40, 72, 104] {
            assert!(jobs.iter().any(|j| j.gpus == odd), "no {odd}-GPU job");
        }
        assert!(jobs.iter().any(|j| j.gpus >= 256));
    }

    #[test]
    fn uniform_sizes_cover_every_multiple_of_the_step_up_to_the_cap() {
        let mut p = params(5000, 8192, 0.9, 4);
        p.sizes = Sizes::Uniform { step: 8, max: 2048 };
        let g = generate(&p).unwrap();
        let sizes: std::collections::BTreeSet<u32> = g.jobs.iter().map(|j| j.gpus).collect();
        assert!(g.jobs.iter().all(|j| j.gpus % 8 == 0 && j.gpus <= 2048));
        // 256 sizes, 5000 draws: nearly all appear, awkward ones included.
        assert!(sizes.len() > 240, "{}", sizes.len());
        assert!(sizes.contains(&1448) || sizes.contains(&1464), "{sizes:?}");
        assert!(g
            .comment(&p)
            .contains("--sizes uniform --size-step 8 --max-gpus 2048"));
        // The default model is unchanged by the option's existence.
        assert_eq!(generate(&params(50, 512, 0.9, 4)).unwrap().jobs.len(), 50);
        for (step, max) in [(0, 8), (16, 8), (16, 16)] {
            p.gpus = 8;
            p.sizes = Sizes::Uniform { step, max };
            assert!(
                matches!(generate(&p), Err(GenError::BadSizes { .. })),
                "{step} {max}"
            );
        }
    }

    #[test]
    fn a_uniform_size_table_is_bounded() {
        let mut p = params(3, u32::MAX, 0.9, 1);
        p.sizes = Sizes::Uniform {
            step: 1,
            max: u32::MAX / 4,
        };
        let e = generate(&p).unwrap_err();
        assert!(matches!(e, GenError::TooManySizes { .. }), "{e}");
        p.sizes = Sizes::Uniform {
            step: 8,
            max: 8 * MAX_UNIFORM_SIZES,
        };
        assert_eq!(generate(&p).unwrap().jobs.len(), 3);
    }

    #[test]
    fn sizes_are_capped_at_the_cluster() {
        let jobs = generate(&params(2000, 64, 0.9, 3)).unwrap().jobs;
        assert!(jobs.iter().all(|j| j.gpus <= 64));
        assert!(jobs.iter().any(|j| j.gpus == 64));
        let tiny = generate(&params(100, 1, 0.5, 3)).unwrap().jobs;
        assert!(tiny.iter().all(|j| j.gpus == 1));
    }

    #[test]
    fn durations_are_heavy_tailed() {
        let jobs = generate(&params(5000, 512, 0.9, 2)).unwrap().jobs;
        let mut d: Vec<f64> = jobs.iter().map(|j| j.duration_s).collect();
        d.sort_by(f64::total_cmp);
        let median = d[d.len() / 2];
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let p99 = d[d.len() * 99 / 100];
        assert!(mean > 1.5 * median, "mean {mean} median {median}");
        // Log-normal with sigma 1.2: p99/median = exp(1.2 * 2.33) ~ 16.
        assert!(p99 > 10.0 * median, "p99 {p99} median {median}");
        assert!(d[0] >= MIN_S && d[d.len() - 1] <= MAX_S);
    }

    #[test]
    fn offered_load_matches_the_request() {
        for load in [0.5, 0.9, 1.2] {
            let g = generate(&params(5000, 512, load, 4)).unwrap();
            let work: f64 = g
                .jobs
                .iter()
                .map(|j| f64::from(j.gpus) * j.duration_s)
                .sum();
            let last = g.jobs.last().unwrap().arrival_s;
            let measured = work / (512.0 * last);
            assert!(
                (measured - load).abs() < 0.05 * load,
                "{load} -> {measured}"
            );
            assert!((g.realised_load - measured).abs() < 1e-9);
        }
    }

    #[test]
    fn arrivals_are_sorted_and_deadlines_follow_arrival() {
        let jobs = generate(&params(1000, 512, 0.9, 5)).unwrap().jobs;
        assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        for j in &jobs {
            let d = j.deadline_s.unwrap();
            assert!(d >= j.arrival_s + 1.49 * j.duration_s);
            assert!(d <= j.arrival_s + 5.01 * j.duration_s);
        }
    }

    #[test]
    fn bad_params_are_errors() {
        assert_eq!(
            generate(&params(0, 8, 0.9, 1)).unwrap_err(),
            GenError::NoJobs
        );
        assert_eq!(
            generate(&params(1, 0, 0.9, 1)).unwrap_err(),
            GenError::NoGpus
        );
        assert!(generate(&params(1, 8, 0.0, 1)).is_err());
        assert!(generate(&params(1, 8, f64::NAN, 1)).is_err());
        assert_eq!(
            generate(&params(super::super::MAX_JOBS as u32 + 1, 8, 0.9, 1)).unwrap_err(),
            GenError::TooManyJobs
        );
    }

    /// A load so small that arrivals would run past the parser's 10-year
    /// limit is refused, instead of writing a trace `replay` refuses.
    #[test]
    fn arrivals_past_the_trace_limit_are_refused() {
        let e = generate(&params(100, 8, 1e-6, 1)).unwrap_err();
        assert!(
            matches!(e, GenError::TooLong { last_s } if last_s > 315_360_000),
            "{e:?}"
        );
        assert!(e.to_string().contains("raise --load"), "{e}");
        // The same jobs at a sane load: written and read back.
        let g = generate(&params(100, 8, 0.9, 1)).unwrap();
        let mut csv = Vec::new();
        super::super::write_csv(&mut csv, &g.jobs).unwrap();
        assert_eq!(super::super::parse("g.csv", &csv).unwrap().len(), 100);
    }
}
