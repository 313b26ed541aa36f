//! Compatibility of jobs on one link: Cassini's geometric abstraction
//! (seed 001, Section 4.3 and Table 4.1; issue 16, item 2).
//!
//! Each job's periodic demand ([`super::profile`]) is drawn around a
//! *unified circle* whose perimeter is the LCM of the iteration times of
//! the jobs on the link (Section 4.3.2: 40 ms and 60 ms jobs on a 120
//! unit circle, three and two periods). Rotating a job's circle delays its
//! iterations; the rotations sought minimise the demand above the link's
//! capacity `C`, summed over the circle:
//!
//! * Eq. 4.3: `demand(a) = sum_j bw_j(a - s_j)` at each angle `a`;
//! * Eq. 4.1: `Excess(a) = demand(a) - C` if positive, else 0;
//! * Eq. 4.2: `score = 1 - sum_a Excess(a) / (|A| C)`: 1 when the jobs
//!   never need more than the link has (fully compatible), negative when
//!   they are badly incompatible;
//! * Eq. 4.4: a job's rotation stays within its first iteration
//!   (`0 <= s_j < iter_j`): more would repeat a pattern already tried;
//! * Eq. 4.5: its time shift is the rotation in milliseconds, modulo its
//!   iteration time.
//!
//! **Discretisation (ours; the thesis names no solver).** Angles are
//! slots of `q` ms. Every iteration time is rounded to whole slots, and
//! `q` starts at the largest power of two that still gives the longest
//! iteration [`SLOTS_PER_ITERATION`] slots or more (1 ms for iterations
//! under 256 ms) and doubles until the circle (the LCM of the
//! rounded iterations, in slots) has at most [`MAX_SLOTS`] slots, so
//! near-equal iteration times (255 and 250 ms) share one coarse circle
//! instead of a 12 750-slot one, and the work per link is bounded. A
//! job's demand in a slot is its profile's mean over that slot (phases
//! integrated exactly), times its load on the link (the share of the
//! link one of its communication phases fills, from the network model).
//!
//! **Solver (ours).** The first job is the reference (`s = 0`: rotating
//! every job together changes nothing). If trying every combination of
//! the other jobs' rotations costs at most [`EXHAUSTIVE_WORK`] slot sums,
//! all are tried (optimal on the grid); otherwise a greedy insertion (each
//! job at its best rotation against the jobs before it) is refined by
//! coordinate descent (each job's best rotation against all others, in
//! turn) until a round changes nothing or [`DESCENT_ROUNDS`] rounds. Ties
//! go to the smallest rotation, so the result is deterministic.

use super::profile::Profile;

/// Most slots on one unified circle.
pub const MAX_SLOTS: u64 = 1024;
/// Finest resolution: the longest iteration in at most this many slots.
pub const SLOTS_PER_ITERATION: u32 = 128;
/// Slot sums the exhaustive search may spend on one link.
pub const EXHAUSTIVE_WORK: u64 = 1 << 18;
/// Coordinate-descent rounds, at most.
pub const DESCENT_ROUNDS: usize = 8;

/// A job on a link: its profile and the load it puts on the link at full
/// demand (share of the link's capacity).
#[derive(Debug, Clone, Copy)]
pub struct OnLink<'a> {
    pub profile: &'a Profile,
    pub load: f64,
}

impl<'a> OnLink<'a> {
    /// Each of `profiles` at full load on the link (one flow at line rate).
    pub fn at_full_load(profiles: &'a [Profile]) -> Vec<OnLink<'a>> {
        profiles
            .iter()
            .map(|profile| OnLink { profile, load: 1.0 })
            .collect()
    }
}

/// The best rotation found for the jobs of one link.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Eq. 4.2, on the slotted circle.
    pub score: f64,
    /// Slot length, ms.
    pub quantum_ms: u32,
    /// Slots on the unified circle.
    pub slots: u64,
    /// Each job's time shift (Eq. 4.5), ms, `< iteration_ms`; the first
    /// job's is 0.
    pub shifts_ms: Vec<u32>,
}

/// The slot length for jobs of these iteration times, and each one's
/// length in slots (module doc).
pub fn quantum(iterations_ms: &[u32]) -> (u32, Vec<u64>) {
    let longest = iterations_ms.iter().copied().max().unwrap_or(1);
    let mut q: u32 = 1;
    while q.saturating_mul(2) <= longest / SLOTS_PER_ITERATION {
        q *= 2;
    }
    loop {
        let n: Vec<u64> = iterations_ms
            .iter()
            .map(|&i| ((f64::from(i) / f64::from(q)).round() as u64).max(1))
            .collect();
        if lcm_within(&n, MAX_SLOTS).is_some() {
            return (q, n);
        }
        q = q.saturating_mul(2);
    }
}

/// The LCM of `n`, if at most `most`.
fn lcm_within(n: &[u64], most: u64) -> Option<u64> {
    n.iter().try_fold(1u64, |acc, &x| {
        let l = acc / gcd(acc, x) * x;
        (l <= most).then_some(l)
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The jobs of a link on their unified circle.
struct Circle {
    /// Per job, its demand per slot over one iteration.
    patterns: Vec<Vec<f64>>,
    slots: usize,
    capacity: f64,
}

impl Circle {
    fn new(jobs: &[OnLink], capacity: f64) -> (Self, u32) {
        let iters: Vec<u32> = jobs.iter().map(|j| j.profile.iteration_ms()).collect();
        let (q, n) = quantum(&iters);
        let slots = lcm_within(&n, MAX_SLOTS).unwrap_or(1) as usize;
        let patterns = jobs
            .iter()
            .zip(&n)
            .map(|(j, &n)| {
                let it = f64::from(j.profile.iteration_ms());
                (0..n)
                    .map(|i| {
                        let (a, b) = (i as f64 * it / n as f64, (i + 1) as f64 * it / n as f64);
                        j.profile.mean_demand(a, b) * j.load
                    })
                    .collect()
            })
            .collect();
        (
            Circle {
                patterns,
                slots,
                capacity,
            },
            q,
        )
    }

    /// Add (`sign` 1) or remove (-1) job `j` at rotation `s` to `sum`.
    fn add(&self, sum: &mut [f64], j: usize, s: usize, sign: f64) {
        let p = &self.patterns[j];
        for (a, v) in sum.iter_mut().enumerate() {
            *v += sign * p[(a + p.len() - s % p.len()) % p.len()];
        }
    }

    /// Eq. 4.1 summed over the circle with job `j` at rotation `s` on top
    /// of `others`.
    fn excess_with(&self, others: &[f64], j: usize, s: usize) -> f64 {
        let p = &self.patterns[j];
        let n = p.len();
        let mut i = (n - s % n) % n;
        let mut e = 0.0;
        for &o in others {
            e += (o + p[i] - self.capacity).max(0.0);
            i += 1;
            if i == n {
                i = 0;
            }
        }
        e
    }

    fn excess(&self, sum: &[f64]) -> f64 {
        sum.iter().map(|&d| (d - self.capacity).max(0.0)).sum()
    }

    /// Job `j`'s best rotation against `others` (smallest on ties).
    fn best_response(&self, others: &[f64], j: usize) -> (usize, f64) {
        (0..self.patterns[j].len())
            .map(|s| (s, self.excess_with(others, j, s)))
            .fold(
                (0, f64::INFINITY),
                |b, c| if c.1 < b.1 - 1e-12 { c } else { b },
            )
    }

    fn score(&self, excess: f64) -> f64 {
        if self.capacity <= 0.0 {
            return f64::NEG_INFINITY;
        }
        1.0 - excess / (self.slots as f64 * self.capacity)
    }

    /// The demand of the first `shifts.len()` jobs at those rotations.
    fn sum_at(&self, shifts: &[usize]) -> Vec<f64> {
        let mut sum = vec![0.0; self.slots];
        for (j, &s) in shifts.iter().enumerate() {
            self.add(&mut sum, j, s, 1.0);
        }
        sum
    }

    /// Slot sums [`Circle::exhaustive`] would spend: per combination of
    /// the middle jobs, their sum and the last job's best response.
    fn exhaustive_work(&self) -> Option<u64> {
        let m = self.patterns.len();
        let middle = self.patterns[1..m.saturating_sub(1).max(1)]
            .iter()
            .try_fold(1u64, |acc, p| acc.checked_mul(p.len() as u64));
        let per = (self.slots * (m + self.patterns[m - 1].len())) as u64;
        middle.and_then(|x| x.checked_mul(per))
    }

    /// Every rotation of jobs `1..m-1` (a mixed-radix counter), the last
    /// job at its best rotation against them: the grid optimum.
    fn exhaustive(&self) -> Vec<usize> {
        let m = self.patterns.len();
        if m == 1 {
            return vec![0];
        }
        let mut shifts = vec![0usize; m];
        let mut best = (f64::INFINITY, shifts.clone());
        loop {
            let others = self.sum_at(&shifts[..m - 1]);
            let (s, e) = self.best_response(&others, m - 1);
            if e < best.0 - 1e-12 {
                shifts[m - 1] = s;
                best = (e, shifts.clone());
            }
            let mut j = 1;
            while j < m - 1 {
                shifts[j] += 1;
                if shifts[j] < self.patterns[j].len() {
                    break;
                }
                shifts[j] = 0;
                j += 1;
            }
            if j >= m - 1 {
                return best.1;
            }
        }
    }

    fn descent(&self) -> Vec<usize> {
        let m = self.patterns.len();
        let mut shifts = vec![0usize; m];
        let mut sum = vec![0.0; self.slots];
        self.add(&mut sum, 0, 0, 1.0);
        for (j, s) in shifts.iter_mut().enumerate().skip(1) {
            *s = self.best_response(&sum, j).0;
            self.add(&mut sum, j, *s, 1.0);
        }
        for _ in 0..DESCENT_ROUNDS {
            let mut changed = false;
            for (j, s) in shifts.iter_mut().enumerate().skip(1) {
                self.add(&mut sum, j, *s, -1.0);
                let now = self.excess_with(&sum, j, *s);
                let (best, e) = self.best_response(&sum, j);
                if e < now - 1e-12 {
                    *s = best;
                    changed = true;
                }
                self.add(&mut sum, j, *s, 1.0);
            }
            if !changed {
                break;
            }
        }
        shifts
    }
}

/// The best rotation of `jobs` sharing a link of `capacity` (module doc).
pub fn fit(jobs: &[OnLink], capacity: f64) -> Fit {
    if jobs.is_empty() {
        return Fit {
            score: 1.0,
            quantum_ms: 1,
            slots: 1,
            shifts_ms: vec![],
        };
    }
    let (c, q) = Circle::new(jobs, capacity);
    let shifts = match c.exhaustive_work() {
        Some(w) if w <= EXHAUSTIVE_WORK => c.exhaustive(),
        _ => c.descent(),
    };
    let score = c.score(c.excess(&c.sum_at(&shifts)));
    let shifts_ms = jobs
        .iter()
        .zip(&shifts)
        .zip(&c.patterns)
        .map(|((j, &s), p)| slot_to_ms(s, p.len(), j.profile.iteration_ms()))
        .collect();
    Fit {
        score,
        quantum_ms: q,
        slots: c.slots as u64,
        shifts_ms,
    }
}

/// The score of `jobs` on a link of `capacity` with each delayed by
/// `shifts_ms` (Eq. 4.2 on the same slotted circle [`fit`] uses).
pub fn score_at(jobs: &[OnLink], capacity: f64, shifts_ms: &[u32]) -> f64 {
    if jobs.is_empty() {
        return 1.0;
    }
    let (c, _) = Circle::new(jobs, capacity);
    let shifts: Vec<usize> = jobs
        .iter()
        .zip(shifts_ms)
        .zip(&c.patterns)
        .map(|((j, &t), p)| ms_to_slot(t, p.len(), j.profile.iteration_ms()))
        .collect();
    c.score(c.excess(&c.sum_at(&shifts)))
}

/// Eq. 4.2 for `new` joining the jobs `fixed` on a link of `capacity`,
/// at each of `new`'s shifts in `shifts_ms`; each fixed job stays at its
/// own shift (ms). The placer's sharing mode never moves a running job
/// (`crate::placement::shared`), so only the newcomer's rotation is
/// searched; the circle and the fixed jobs' demand are built once.
pub fn scores_joining(
    fixed: &[(OnLink, u32)],
    new: OnLink,
    capacity: f64,
    shifts_ms: &[u32],
) -> Vec<f64> {
    let jobs: Vec<OnLink> = fixed.iter().map(|f| f.0).chain([new]).collect();
    let (c, _) = Circle::new(&jobs, capacity);
    let mut sum = vec![0.0; c.slots];
    for (j, (f, t)) in fixed.iter().enumerate() {
        let n = c.patterns[j].len();
        c.add(
            &mut sum,
            j,
            ms_to_slot(*t, n, f.profile.iteration_ms()),
            1.0,
        );
    }
    let last = jobs.len() - 1;
    let n = c.patterns[last].len();
    let iter = new.profile.iteration_ms();
    shifts_ms
        .iter()
        .map(|&t| c.score(c.excess_with(&sum, last, ms_to_slot(t, n, iter))))
        .collect()
}

/// Rotation `s` of `n` slots per iteration, in ms of an `iter` ms
/// iteration (Eq. 4.5: modulo the iteration time).
fn slot_to_ms(s: usize, n: usize, iter: u32) -> u32 {
    let ms = (s as f64 * f64::from(iter) / n as f64).round() as u32;
    ms % iter.max(1)
}

/// The slot of a shift of `t` ms (the inverse of [`slot_to_ms`]).
fn ms_to_slot(t: u32, n: usize, iter: u32) -> usize {
    let s = (f64::from(t % iter.max(1)) * n as f64 / f64::from(iter.max(1))).round() as usize;
    s % n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharing::profile::Phase;

    fn up_down(iter: u32, up: u32) -> Profile {
        Profile::new(vec![
            Phase {
                ms: iter - up,
                demand: 0.0,
            },
            Phase {
                ms: up,
                demand: 1.0,
            },
        ])
        .unwrap()
    }

    #[test]
    fn fig_4_5_two_jobs_of_40_and_60_ms_interleave_on_a_120_ms_circle() {
        let (a, b) = (up_down(40, 10), up_down(60, 10));
        let (q, n) = quantum(&[40, 60]);
        assert_eq!((q, lcm_within(&n, MAX_SLOTS)), (1, Some(120)));
        let jobs = [
            OnLink {
                profile: &a,
                load: 1.0,
            },
            OnLink {
                profile: &b,
                load: 1.0,
            },
        ];
        // Unrotated, their Up phases overlap: not fully compatible.
        assert!(score_at(&jobs, 1.0, &[0, 0]) < 1.0);
        let f = fit(&jobs, 1.0);
        assert_eq!(f.slots, 120);
        assert_eq!(f.score, 1.0, "{f:?}");
        assert_eq!(f.shifts_ms[0], 0);
        assert!(f.shifts_ms[1] < 60);
        assert_eq!(score_at(&jobs, 1.0, &f.shifts_ms), 1.0);
    }

    #[test]
    fn joining_scores_agree_with_score_at_and_find_the_gap() {
        // A 40 ms job fixed at shift 5 (Up 35..40, 75..80, 115..120 on the
        // 120 ms circle); a 60 ms newcomer with 10 ms Up.
        let (a, b) = (up_down(40, 10), up_down(60, 10));
        let on = |profile| OnLink { profile, load: 1.0 };
        let shifts: Vec<u32> = (0..60).collect();
        let got = scores_joining(&[(on(&a), 5)], on(&b), 1.0, &shifts);
        for (&t, &g) in shifts.iter().zip(&got) {
            let want = score_at(&[on(&a), on(&b)], 1.0, &[5, t]);
            assert!((g - want).abs() < 1e-12, "shift {t}: {g} vs {want}");
        }
        // Some shift interleaves them fully, and not every shift does.
        assert!(got.contains(&1.0));
        assert!(got.iter().any(|&g| g < 1.0));
    }

    #[test]
    fn score_is_one_minus_mean_excess_over_capacity() {
        // Two always-on jobs on a link: demand 2, capacity 1, excess 1
        // everywhere: score 0. Three: -1 (Eq. 4.2 can go negative).
        let on = Profile::up_down(100, 1.0);
        let j = OnLink {
            profile: &on,
            load: 1.0,
        };
        assert!((fit(&[j, j], 1.0).score - 0.0).abs() < 1e-12);
        assert!((fit(&[j, j, j], 1.0).score + 1.0).abs() < 1e-12);
        // Half-duty jobs: two fit exactly, a third cannot.
        let half = Profile::up_down(100, 0.5);
        let h = OnLink {
            profile: &half,
            load: 1.0,
        };
        assert_eq!(fit(&[h, h], 1.0).score, 1.0);
        let three = fit(&[h, h, h], 1.0);
        assert!((three.score - 0.5).abs() < 1e-9, "{three:?}");
    }

    #[test]
    fn near_equal_iterations_share_a_coarse_circle_and_work_stays_bounded() {
        let (q, n) = quantum(&[255, 250]);
        assert!(lcm_within(&n, MAX_SLOTS).is_some());
        assert!(q > 1, "{q} {n:?}");
        let (q, n) = quantum(&[997, 991, 983]);
        let slots = lcm_within(&n, MAX_SLOTS).unwrap();
        assert!(slots <= MAX_SLOTS, "{q} {n:?}");
    }

    #[test]
    fn descent_is_near_the_exhaustive_optimum_and_never_worse_than_no_shift() {
        let mut rng = crate::placement::Rng(17);
        let mut equal = 0;
        for _ in 0..30 {
            let m = 2 + rng.below(3) as usize;
            let profiles: Vec<Profile> = (0..m)
                .map(|_| {
                    let iter = [20u32, 30, 40, 60][rng.below(4) as usize];
                    Profile::up_down(iter, rng.below(60) as f64 / 100.0)
                })
                .collect();
            let jobs = OnLink::at_full_load(&profiles);
            let (c, _) = Circle::new(&jobs, 1.0);
            let ex = c.score(c.excess(&c.sum_at(&c.exhaustive())));
            let de = c.score(c.excess(&c.sum_at(&c.descent())));
            let none = score_at(&jobs, 1.0, &vec![0; m]);
            assert!(de <= ex + 1e-9, "descent beat the exhaustive optimum");
            assert!(de >= none - 1e-9, "descent worse than no shift");
            let exhaustive = c.exhaustive_work().is_some_and(|w| w <= EXHAUSTIVE_WORK);
            assert_eq!(fit(&jobs, 1.0).score, if exhaustive { ex } else { de });
            equal += usize::from((de - ex).abs() < 1e-9);
        }
        assert!(equal >= 24, "descent optimal in only {equal} of 30");
    }
}
