//! Jobs that share one link, run in time (issue 16, item 5): how much of
//! its communication demand each job is served once their periodic phases
//! meet, with fair sharing (plain congestion control), with Cassini's time
//! shifts, or with MLTCP.
//!
//! The fluid model of `crate::network::model` keeps every flow on its links
//! all the time: it cannot see phases, so two jobs that Cassini interleaves
//! perfectly look as slowed as two that collide every iteration. This
//! module plays the link out instead, in steps of `dt` ms:
//!
//! * each job walks its profile ([`super::profile`]): a phase of demand 0
//!   is computation and lasts its time; a phase of demand `d > 0` is
//!   communication of `d * ms` line-rate milliseconds of bytes, sent at up
//!   to `d` and finished when the bytes are (so a slowed job's iteration
//!   stretches and its later phases move: the dynamics MLTCP relies on);
//! * when the jobs communicating want more than the link's capacity, it is
//!   divided by weight with water-filling (no job above its own demand):
//!   equal weights for [`Division::Fair`] (TCP-like congestion control, and
//!   Cassini, which shares fairly and relies on the shifts to avoid
//!   meeting), `F(bytes_ratio)` for [`Division::Mltcp`] (seed 001,
//!   Section 1.2, Eq. 1.2: the congestion window grows by `F` times the
//!   additive increase, so under AIMD the throughput shares are in
//!   proportion to `F`; `bytes_ratio` is the share of the iteration's bytes
//!   already sent);
//! * each job starts at the phase it is given: Cassini's time shift from its
//!   decision, or for plain sharing and MLTCP its start time modulo its
//!   iteration (nobody aligns it).
//!
//! The result per job is the share of its demand it was served while
//! communicating, over the second half of a run of [`ITERATIONS`] of the
//! longest iteration (MLTCP "approximates an optimal interleaved schedule
//! after 30 training iterations", Section 1.2; the first half is its
//! convergence). 1 means it never waited on the link.
//!
//! **Ours (Chapter 5 is not in the seed):** `F(x) = MLTCP_INTERCEPT +
//! MLTCP_SLOPE * x`, linear and increasing as Eq. 1.2 requires; with 0.5 and
//! 1, a job about to finish its iteration's communication gets three times
//! the share of one just starting. `dt` is the longest iteration over
//! [`STEPS_PER_ITERATION`] (1 ms at least); a job whose iteration is
//! shorter than [`FLAT_STEPS`] steps is taken at its mean demand, which
//! bounds the work of any mix of iteration times.

/// Iterations of the longest job played out (half of them measured).
pub const ITERATIONS: u32 = 60;
/// Time steps per longest iteration, at most.
pub const STEPS_PER_ITERATION: u32 = 256;
/// A job whose iteration lasts fewer steps than this is a constant demand
/// (its mean), so a step never walks more than a few of its phases.
pub const FLAT_STEPS: f64 = 4.0;
/// MLTCP's `F(x) = intercept + slope * x` (module doc: our constants).
pub const MLTCP_INTERCEPT: f64 = 0.5;
pub const MLTCP_SLOPE: f64 = 1.0;

/// How a link divides its capacity among the jobs communicating on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Division {
    /// Equal weights (max-min fair).
    Fair,
    /// In proportion to MLTCP's `F(bytes_ratio)`.
    Mltcp,
}

/// One job on the link: its phases `(ms, demand)` and where in its
/// iteration it is at time 0, ms.
#[derive(Debug, Clone, PartialEq)]
pub struct OnLink {
    pub phases: Vec<(u32, f64)>,
    pub phase_ms: u32,
}

/// Where a job is in its iteration.
#[derive(Debug, Clone)]
struct Walker {
    /// Its mean demand, when its iteration is shorter than [`FLAT_STEPS`]
    /// steps: it is then a constant demand (a step would walk many of its
    /// iterations, unbounded work for a hostile trace's 1 ms job beside an
    /// hour-long one).
    flat: Option<f64>,
    phases: Vec<(f64, f64)>,
    /// Bytes (line-rate ms) per iteration.
    bytes: f64,
    at: usize,
    /// Time (compute) or bytes (communication) left in phase `at`.
    left: f64,
    sent_this_iteration: f64,
}

impl Walker {
    fn new(j: &OnLink, dt: f64) -> Self {
        let phases: Vec<(f64, f64)> = j
            .phases
            .iter()
            .map(|&(ms, d)| (f64::from(ms), d.max(0.0)))
            .collect();
        let bytes: f64 = phases.iter().map(|(ms, d)| ms * d).sum();
        let iter: f64 = phases.iter().map(|p| p.0).sum();
        let flat = (iter < FLAT_STEPS * dt).then(|| if iter > 0.0 { bytes / iter } else { 0.0 });
        let mut w = Walker {
            flat,
            phases,
            bytes,
            at: 0,
            left: 0.0,
            sent_this_iteration: 0.0,
        };
        w.enter(0);
        // Skip ahead to `phase_ms`, uncontended.
        let iter: f64 = w.phases.iter().map(|p| p.0).sum();
        let mut skip = if iter > 0.0 {
            f64::from(j.phase_ms) % iter
        } else {
            0.0
        };
        while skip > 0.0 {
            let d = w.phases[w.at].1;
            let time_left = if d > 0.0 { w.left / d } else { w.left };
            if skip < time_left {
                w.left -= if d > 0.0 { skip * d } else { skip };
                if d > 0.0 {
                    w.sent_this_iteration += skip * d;
                }
                break;
            }
            skip -= time_left;
            w.next();
        }
        w
    }

    fn enter(&mut self, at: usize) {
        self.at = at;
        let (ms, d) = self.phases[at];
        self.left = if d > 0.0 { ms * d } else { ms };
    }

    fn next(&mut self) {
        let at = (self.at + 1) % self.phases.len();
        if at == 0 {
            self.sent_this_iteration = 0.0;
        }
        self.enter(at);
    }

    /// The rate it wants now (0 while computing).
    fn demand(&self) -> f64 {
        self.flat.unwrap_or(self.phases[self.at].1)
    }

    fn weight(&self, division: Division) -> f64 {
        match division {
            Division::Fair => 1.0,
            Division::Mltcp => {
                let ratio = if self.bytes > 0.0 {
                    (self.sent_this_iteration / self.bytes).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                MLTCP_INTERCEPT + MLTCP_SLOPE * ratio
            }
        }
    }

    /// Advance `dt` ms at `rate` (communication) or computing.
    fn step(&mut self, mut dt: f64, mut rate: f64) {
        if self.flat.is_some() {
            return;
        }
        while dt > 1e-12 {
            let d = self.demand();
            if d > 0.0 {
                if rate <= 0.0 {
                    return;
                }
                let t = self.left / rate;
                if t > dt {
                    self.left -= rate * dt;
                    self.sent_this_iteration += rate * dt;
                    return;
                }
                self.sent_this_iteration += self.left;
                dt -= t;
            } else {
                if self.left > dt {
                    self.left -= dt;
                    return;
                }
                dt -= self.left;
            }
            self.next();
            // The rest of the step runs at the new phase's own demand
            // (re-divided at the next step).
            rate = self.demand();
        }
    }
}

/// Water-filling of `capacity` over `want` by `weight`: nobody above what
/// it wants.
fn divide(want: &[f64], weight: &[f64], capacity: f64) -> Vec<f64> {
    let mut rate = vec![0.0; want.len()];
    let mut open: Vec<usize> = (0..want.len()).filter(|&i| want[i] > 0.0).collect();
    let mut left = capacity;
    while !open.is_empty() && left > 1e-12 {
        let total: f64 = open.iter().map(|&i| weight[i]).sum();
        let capped: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| want[i] <= left * weight[i] / total)
            .collect();
        if capped.is_empty() {
            for &i in &open {
                rate[i] = left * weight[i] / total;
            }
            break;
        }
        for &i in &capped {
            rate[i] = want[i];
            left -= want[i];
        }
        open.retain(|i| !capped.contains(i));
    }
    rate
}

/// The share of its communication demand each of `jobs` is served on a
/// link of `capacity` (module doc), in `[0, 1]`; 1 for a job that never
/// communicates.
pub fn served(jobs: &[OnLink], capacity: f64, division: Division) -> Vec<f64> {
    let longest = jobs
        .iter()
        .map(|j| j.phases.iter().map(|p| u64::from(p.0)).sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let dt = (longest / f64::from(STEPS_PER_ITERATION)).max(1.0);
    let steps = (longest * f64::from(ITERATIONS) / dt).ceil() as u64;
    let mut walkers: Vec<Walker> = jobs.iter().map(|j| Walker::new(j, dt)).collect();
    let mut wanted = vec![0.0; jobs.len()];
    let mut got = vec![0.0; jobs.len()];
    for step in 0..steps {
        let want: Vec<f64> = walkers.iter().map(Walker::demand).collect();
        let rate = if want.iter().sum::<f64>() <= capacity {
            want.clone()
        } else {
            let weight: Vec<f64> = walkers.iter().map(|w| w.weight(division)).collect();
            divide(&want, &weight, capacity)
        };
        if step >= steps / 2 {
            for i in 0..jobs.len() {
                wanted[i] += want[i] * dt;
                got[i] += rate[i] * dt;
            }
        }
        for (w, &r) in walkers.iter_mut().zip(&rate) {
            w.step(dt, r);
        }
    }
    wanted
        .iter()
        .zip(&got)
        .map(|(&w, &g)| if w > 0.0 { (g / w).min(1.0) } else { 1.0 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Down 70% of 250 ms, then Up 30% (the trace default).
    fn job(phase_ms: u32) -> OnLink {
        OnLink {
            phases: vec![(175, 0.0), (75, 1.0)],
            phase_ms,
        }
    }

    #[test]
    fn a_job_alone_is_always_served() {
        assert_eq!(served(&[job(0)], 1.0, Division::Fair), vec![1.0]);
    }

    #[test]
    fn cassini_shifts_keep_compatible_jobs_apart() {
        // Up phases at 175..250 and (shifted by 125) 50..125: never meet.
        let s = served(&[job(0), job(125)], 1.0, Division::Fair);
        assert!(s.iter().all(|&x| x > 0.999), "{s:?}");
    }

    #[test]
    fn aligned_jobs_under_fair_sharing_stay_aligned_at_half_rate() {
        // Identical and in step: fair sharing keeps them symmetric, each
        // served half its demand, every iteration.
        let s = served(&[job(0), job(0)], 1.0, Division::Fair);
        assert!(s.iter().all(|&x| (x - 0.5).abs() < 0.01), "{s:?}");
    }

    #[test]
    fn mltcp_drifts_nearly_aligned_jobs_apart_where_fair_sharing_does_not() {
        // 10 ms apart: fair sharing pulls them back together each
        // iteration; MLTCP favours the one further into its bytes until
        // they interleave (seed 001, Section 1.2).
        let fair = served(&[job(0), job(10)], 1.0, Division::Fair);
        let mltcp = served(&[job(0), job(10)], 1.0, Division::Mltcp);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(mean(&mltcp) > 0.99, "mltcp {mltcp:?}");
        assert!(mean(&fair) < mean(&mltcp), "fair {fair:?} mltcp {mltcp:?}");
    }

    #[test]
    fn jobs_that_cannot_interleave_are_slowed_whatever_the_division() {
        // Up 60% each: 120% of the link on average.
        let heavy = |p| OnLink {
            phases: vec![(100, 0.0), (150, 1.0)],
            phase_ms: p,
        };
        for d in [Division::Fair, Division::Mltcp] {
            let s = served(&[heavy(0), heavy(125)], 1.0, d);
            assert!(s.iter().all(|&x| x < 0.95), "{d:?} {s:?}");
        }
    }

    #[test]
    fn a_tiny_iteration_beside_an_hour_long_one_is_bounded_work() {
        // 1 ms beside 3 600 000 ms (the trace's limits): the short job is
        // its mean demand (0.5 here), so a step walks none of its phases
        // (walked, this run would take ~10^10 phase steps).
        let tiny = OnLink {
            phases: vec![(1, 0.0), (1, 1.0)],
            phase_ms: 0,
        };
        let long = OnLink {
            phases: vec![(1_800_000, 0.0), (1_800_000, 1.0)],
            phase_ms: 0,
        };
        let s = served(&[tiny, long], 1.0, Division::Fair);
        // Together 1.5 of the link while the long one sends: fair shares
        // give the tiny one its 0.5, the long one the remaining 0.5.
        assert!(
            (s[0] - 1.0).abs() < 1e-9 && (s[1] - 0.5).abs() < 0.01,
            "{s:?}"
        );
    }

    #[test]
    fn water_filling_respects_demands_and_weights() {
        let r = divide(&[0.2, 1.0, 1.0], &[1.0, 1.0, 3.0], 1.0);
        assert!((r[0] - 0.2).abs() < 1e-12);
        assert!(
            (r[1] - 0.2).abs() < 1e-12 && (r[2] - 0.6).abs() < 1e-12,
            "{r:?}"
        );
    }
}
