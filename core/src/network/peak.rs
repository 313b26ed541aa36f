//! [`super::routes::Routing::Peak`]: each flow on the first equal-cost
//! path that keeps every link's per-phase peak within line rate, for
//! `titan` (issue 15).
//!
//! `titan`'s bandwidth check (Titan, seed 002, Section III, Eq. 1's
//! constraint; reading in docs/titan.md A4-A8) holds a job to the *peak*
//! over its phases that it puts on each link, added up over the jobs a
//! link carries, against the link's line rate. A router that balances by
//! merged load ([`super::routes::Routing::Balanced`]) sees neither: an hd
//! job merges to a third of a link but runs a phase at the full line rate
//! on it, so the least-loaded path by merged load can be one the held
//! peaks already fill while another path is free, and titan refuses the
//! candidate.
//!
//! This router is Hedera's **Global First Fit** (Al-Fares et al., "Hedera:
//! Dynamic Flow Scheduling for Data Center Networks", NSDI 2010, Section
//! 4.2: "linearly searches all possible paths to find one whose link
//! components can all accommodate that flow"), with Titan's phases in what
//! a link accommodates: a flow of phase `p` and rate `r` fits a path when
//! on each of its links `held + max(job, phase + r) <= 1`, with `held` the
//! routed jobs' peaks added up, `job` this job's peak on the link so far
//! and `phase` its rate there in phase `p` (so the phases of one job share
//! a link for free, being disjoint in time). Paths are searched in the
//! order of [`super::routes::Router`]'s equal-cost list (uplinks in
//! order), which packs jobs onto the first paths and keeps the last ones
//! whole for the flows of a full line rate. A strict router (titan's twin)
//! refuses a job with a flow that fits no path; a replay's router puts
//! such a flow on the first path (it never meets one: titan admitted what
//! it routes, on the same history).
//!
//! Measured against routing by merged load (docs/titan.md, section 6):
//! half the network blocks and 7-36% lower average JWT at load 0.9;
//! best fit by peak and balancing by peak were tried too (not kept).
//!
//! **Time-shared links** (`titan --sharing cassini`, docs/titan.md 6.8).
//! A flow that fits no path may be put, by a router in a sharing mode
//! ([`Peaks::lendable`]) or by a replay's router that routes what was placed,
//! on a path where the held peaks of *lendable* links are not counted, only
//! its own job's, the first in the order of the held peak on a path's
//! busier link, least first, so it meets the fewest jobs it must
//! interleave with ([`Peaks::first_fit_lent`]). Which links are
//! lendable is the placer's to say ([`Peaks::lendable`]: the links whose
//! holders' communication interleaves with the job's at its time shift,
//! Cassini, seed 001); the replay's router lends a job the links its
//! decision lists as time-shared, and none to a job whose decision lists
//! none. Strict fits come first in every run, so a job time-shares a link
//! only where no path has room for the flow.
//!
//! **Runs.** Within a run of flows of one leaf pair and one phase, sums
//! only grow, so a path that no longer fits never fits again: the first
//! fitting path's index never decreases. So a run takes the first fitting
//! path for as many flows as fit it ([`Peaks::take`]), then searches on
//! from the next path: the one-at-a-time search's choices, with the same
//! float adds, in `O(paths)` searches (tested against the search from the
//! first path per flow).

use super::routes::Path;
use super::traffic::Share;

/// Phases tracked per link: hd's distances `2^0 ..= 2^13` and its fold's
/// send and return (`traffic`'s phase numbers); a ring or all-to-all job
/// has one phase.
pub const PHASES: usize = 16;

/// A link counts as full within this.
pub const SLACK: f64 = 1e-9;

/// `phase`'s slot among [`PHASES`].
pub fn dense_phase(phase: u16) -> usize {
    match phase {
        u16::MAX => PHASES - 1,
        p if p == u16::MAX - 1 => PHASES - 2,
        p => usize::from(p).min(PHASES - 3),
    }
}

/// The peaks routed jobs hold on each link, and the job being routed.
#[derive(Debug, Clone)]
pub struct Peaks {
    /// Per directed link, the routed jobs' peaks added up.
    held: Vec<f64>,
    /// The job being routed: its rate per (link, phase) at
    /// `l * PHASES + p`, its peak per link, and the links it touched.
    phase: Vec<f64>,
    job: Vec<f64>,
    touched: Vec<usize>,
    /// The links whose held peaks a lent fit does not count (`None`: all,
    /// and a strict router lends none; module doc, "Time-shared links").
    lendable: Option<Vec<bool>>,
}

impl Peaks {
    pub fn new(links: usize) -> Self {
        Peaks {
            held: vec![0.0; links],
            phase: vec![0.0; links * PHASES],
            job: vec![0.0; links],
            touched: Vec::new(),
            lendable: None,
        }
    }

    /// Whether a strict route may time-share held links: only when it was
    /// given the links it may ([`Peaks::lendable`]).
    pub fn lending(&self) -> bool {
        self.lendable.is_some()
    }

    /// The links a lent fit may time-share, by link id (`None`: every
    /// link, for a router that is not strict; module doc).
    pub fn lendable(&mut self, links: Option<Vec<bool>>) {
        self.lendable = links;
    }

    /// Every link's held peaks (for tests and audits).
    pub fn held(&self) -> &[f64] {
        &self.held
    }

    /// Does one more flow of `s` on `p` keep each of its links within line
    /// rate in its phase?
    /// With `lent`, the held peaks of lendable links are not counted.
    fn fits(&self, p: &Path, s: &Share, lent: bool) -> bool {
        let ph = dense_phase(s.phase);
        p.links().iter().all(|&l| {
            let l = l as usize;
            let now = self.phase[l * PHASES + ph] + s.rate;
            self.held_by_others(l, lent) + self.job[l].max(now) <= 1.0 + SLACK
        })
    }

    /// The held peaks link `l`'s check counts (none when `lent` and the
    /// link is lendable).
    fn held_by_others(&self, l: usize, lent: bool) -> f64 {
        let lendable =
            || (self.lendable.as_ref()).is_none_or(|m| m.get(l).copied().unwrap_or(false));
        if lent && lendable() {
            0.0
        } else {
            self.held[l]
        }
    }

    /// How many flows of `rate` link `l` has room for beside the held
    /// peaks (none counted where a strict router may time-share it), at
    /// least: the count [`Peaks::take`] would take one after another, with
    /// a margin for the float adds, so the room is never under it.
    pub fn room(&self, l: usize, rate: f64) -> u32 {
        let free = 1.0 + SLACK - self.held_by_others(l, self.lending());
        whole(free / rate + 1e-9)
    }

    /// The first of `paths[from..]` one more flow of `s` fits (module doc).
    pub fn first_fit(&self, paths: &[Path], from: usize, s: &Share) -> Option<usize> {
        (from..paths.len()).find(|&i| self.fits(&paths[i], s, false))
    }

    /// Where `p` comes in the order lent fits are searched ("Time-shared
    /// links"): by the held peaks on its busier link, least first (fewest
    /// jobs to interleave with), ties by index `i`.
    fn lent_key(&self, p: &Path, i: usize) -> (f64, usize) {
        let busier = (p.links().iter()).fold(0.0f64, |m, &l| m.max(self.held[l as usize]));
        (busier, i)
    }

    /// The first path of `paths` after `after` in the order of
    /// `Peaks::lent_key` that one more flow of `s` fits when only its own
    /// job's peaks count ("Time-shared links"), with its key. The held
    /// peaks do not change while a job is routed, so neither does the
    /// order, and a run goes on after the path it last took: the least key
    /// past `after` among the paths that fit, found in one pass (no sort).
    pub fn first_fit_lent(
        &self,
        paths: &[Path],
        after: Option<(f64, usize)>,
        s: &Share,
    ) -> Option<(f64, usize)> {
        let before =
            |a: (f64, usize), b: (f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).is_lt();
        let mut best: Option<(f64, usize)> = None;
        for (i, p) in paths.iter().enumerate() {
            let key = self.lent_key(p, i);
            let later = after.is_none_or(|a| before(a, key));
            let sooner = best.is_none_or(|b| before(key, b));
            if later && sooner && self.fits(p, s, true) {
                best = Some(key);
            }
        }
        best
    }

    /// How many of `most` more flows of `s` fit `p` one after another,
    /// each counted as it would be one at a time: they are charged.
    ///
    /// A flow fits a link when `held + max(job, now + r) <= 1`; charging it
    /// makes the link's job peak `max(job, now + r)` and its phase rate
    /// `now + r`, so the next flow's test is the same expression with
    /// `now` one add further and the first `job`: per link a count of
    /// adds, and the path takes the least count of its links (which are
    /// distinct: one up, one down).
    /// With `lent`, the held peaks of lendable links are not counted.
    pub fn take(&mut self, p: &Path, s: &Share, most: u32, lent: bool) -> u32 {
        let ph = dense_phase(s.phase);
        let mut k = most;
        for &l in p.links() {
            let l = l as usize;
            let (held, job) = (self.held_by_others(l, lent), self.job[l]);
            let mut now = self.phase[l * PHASES + ph];
            let mut fit = 0;
            while fit < k && held + job.max(now + s.rate) <= 1.0 + SLACK {
                now += s.rate;
                fit += 1;
            }
            k = fit;
        }
        self.charge(p, s, k);
        k
    }

    /// Count `n` flows of `s` on `p` in the job's phase rates and peaks,
    /// one add per flow.
    pub fn charge(&mut self, p: &Path, s: &Share, n: u32) {
        let ph = dense_phase(s.phase);
        for &l in p.links() {
            let l = l as usize;
            let at = &mut self.phase[l * PHASES + ph];
            if self.job[l] == 0.0 && *at == 0.0 && n > 0 {
                self.touched.push(l);
            }
            for _ in 0..n {
                *at += s.rate;
            }
            self.job[l] = self.job[l].max(*at);
        }
    }

    /// The routed job's peak per link (links in order), its scratch
    /// cleared for the next.
    pub fn finish(&mut self) -> Vec<(usize, f64)> {
        self.touched.sort_unstable();
        let mut out = Vec::with_capacity(self.touched.len());
        for l in self.touched.drain(..) {
            out.push((l, std::mem::take(&mut self.job[l])));
            self.phase[l * PHASES..(l + 1) * PHASES].fill(0.0);
        }
        out
    }

    /// Add (`sign` 1) or take away (-1) a job's peaks.
    pub fn hold(&mut self, peaks: &[(usize, f64)], sign: f64) {
        for &(l, p) in peaks {
            self.held[l] += sign * p;
        }
    }
}

/// `x` rounded down to a whole count, 0 below 0 (a cast truncates toward
/// zero, which is the floor here: hot callers avoid `f64::floor`, a libm
/// call where the target lacks SSE4.1).
pub fn whole(x: f64) -> u32 {
    x.max(0.0) as u32
}
