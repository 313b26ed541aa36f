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
//!
//! **Without scanning.** Where a leaf pair's path `i` is uplink `i` at
//! both ends, which paths one more flow fits is read from bit masks per
//! leaf side and phase ([`super::masks`]: the same per-link test, kept up
//! to date as peaks and rates change), so a search is a word AND, not a
//! test per path; and the many adds of one rate that an all-to-all job's
//! flows make are looked up in a table of the same adds
//! ([`super::sums`]). Both give the scan's and the loop's answers to the
//! bit (tested against the one-flow-at-a-time search, which scans and
//! loops, with and without lent links).

use super::masks::Masks;
use super::routes::{Path, Paths};
use super::sums::Sums;
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
    v: Loads,
    /// The links the job being routed touched.
    touched: Vec<usize>,
    /// Which paths fit, by leaf side ([`Peaks::mask_sides`]; `None`:
    /// every search scans).
    masks: Option<Masks>,
    /// Repeated adds of a rate ([`Sums`]).
    sums: Sums,
    /// When kept ([`Peaks::keep_undo`]): each charge of the run being
    /// searched, as (link, slot, its rate there, its peak) before it.
    undo: Option<Vec<(usize, usize, f64, f64)>>,
    /// Counts the changes of the held peaks.
    version: u64,
}

/// A routed job's rates and peaks part way ([`Peaks::snapshot`]).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    links: Vec<(usize, f64, [f64; PHASES])>,
}

/// What a link's fit reads.
#[derive(Debug, Clone)]
struct Loads {
    /// Per directed link, the routed jobs' peaks added up.
    held: Vec<f64>,
    /// The job being routed: its rate per (link, phase) at
    /// `l * PHASES + p`, and its peak per link.
    phase: Vec<f64>,
    job: Vec<f64>,
    /// The links whose held peaks a lent fit does not count (`None`: all,
    /// and a strict router lends none; module doc, "Time-shared links").
    lendable: Option<Vec<usize>>,
    /// Per link, whether it is among `lendable`'s.
    lent_link: Vec<bool>,
}

impl Loads {
    /// The held peaks link `l`'s check counts (none when `lent` and the
    /// link is lendable).
    fn held_by_others(&self, l: usize, lent: bool) -> f64 {
        if lent && self.is_lendable(l) {
            0.0
        } else {
            self.held[l]
        }
    }

    /// Whether a lent fit does not count link `l`'s held peaks.
    fn is_lendable(&self, l: usize) -> bool {
        self.lendable.is_none() || self.lent_link[l]
    }

    /// Does one more flow of `rate` in phase slot `ph` fit link `l`?
    fn fits(&self, l: usize, ph: usize, rate: f64, lent: bool) -> bool {
        let now = self.phase[l * PHASES + ph];
        link_fits(self.held_by_others(l, lent), self.job[l], now, rate)
    }

    /// The same with no job being routed (its rates and peak 0).
    fn fits_alone(&self, l: usize, rate: f64, lent: bool) -> bool {
        link_fits(self.held_by_others(l, lent), 0.0, 0.0, rate)
    }
}

/// [`Peaks::fits`]'s test of one link: held peaks `held`, the job's peak
/// `job` and its rate `now` in the phase, and one more flow of `rate`.
fn link_fits(held: f64, job: f64, now: f64, rate: f64) -> bool {
    held + job.max(now + rate) <= 1.0 + SLACK
}

impl Peaks {
    pub fn new(links: usize) -> Self {
        Peaks {
            v: Loads {
                held: vec![0.0; links],
                phase: vec![0.0; links * PHASES],
                job: vec![0.0; links],
                lendable: None,
                lent_link: vec![false; links],
            },
            touched: Vec::new(),
            masks: None,
            sums: Sums::default(),
            undo: None,
            version: 0,
        }
    }

    /// Index each link `l` as bit `at[l].1` of leaf side `at[l].0` (`2 l`
    /// up, `2 l + 1` down), so that searches given a path's sides
    /// ([`Peaks::first_fit`]) read which paths fit from [`Masks`].
    pub fn mask_sides(&mut self, at: Vec<(u32, u32)>) {
        self.masks = Some(Masks::new(at));
    }

    /// A route of flows of `rate` in the phase slots `phases` (bit per
    /// slot) over the leaf `sides` starts, lending or not: the masks are
    /// made for them. With a job being routed they stay as they are.
    pub fn mask_route(&mut self, rate: f64, phases: u32, lend: bool, sides: &[usize]) {
        let (Some(m), v) = (&mut self.masks, &self.v) else {
            return;
        };
        if self.touched.is_empty() {
            m.set_rate(rate, phases, lend, sides, |l, lent| {
                v.fits_alone(l, rate, lent)
            });
        }
    }

    /// Link `l`'s mask bits again after its held peaks or the job's rates
    /// on it changed (in slot `ph`; in every slot when `all`), with a job
    /// being routed (`routing`) or not.
    fn remask(&mut self, l: usize, ph: usize, all: bool, routing: bool) {
        let (Some(m), v) = (&mut self.masks, &self.v) else {
            return;
        };
        let rate = m.rate();
        if routing {
            m.charged(l, ph, all, |p, lent| v.fits(l, p, rate, lent));
        } else {
            m.set_base(l, v.fits_alone(l, rate, false), v.fits_alone(l, rate, true));
        }
    }

    /// Keep an undo log of each run's charges (for [`Peaks::undo_run`]).
    pub fn keep_undo(&mut self, on: bool) {
        match (&mut self.undo, on) {
            (Some(log), true) => log.clear(),
            (undo, on) => *undo = on.then(Vec::new),
        }
    }

    /// A run is searched: its undo log starts empty.
    pub fn run_starts(&mut self) {
        if let Some(u) = &mut self.undo {
            u.clear();
        }
    }

    /// The charges of the run being searched taken back (the undo log
    /// must be kept): the job as it was when the run started.
    pub fn undo_run(&mut self) {
        let Some(mut log) = self.undo.take() else {
            return;
        };
        while let Some((l, ph, now, peak)) = log.pop() {
            self.v.phase[l * PHASES + ph] = now;
            self.v.job[l] = peak;
            if peak == 0.0 {
                // First charged in this run: no longer touched.
                if let Some(i) = self.touched.iter().rposition(|&x| x == l) {
                    self.touched.swap_remove(i);
                }
            }
            self.remask(l, ph, true, true);
        }
        self.undo = Some(log);
    }

    /// The job being routed, its rates and peaks so far.
    pub fn snapshot(&self) -> Snapshot {
        let links = (self.touched.iter())
            .map(|&l| {
                let mut rates = [0.0; PHASES];
                rates.copy_from_slice(&self.v.phase[l * PHASES..(l + 1) * PHASES]);
                (l, self.v.job[l], rates)
            })
            .collect();
        Snapshot { links }
    }

    /// Route on from `snap` (with no job being routed, after
    /// [`Peaks::mask_route`]).
    pub fn restore(&mut self, snap: &Snapshot) {
        for &(l, peak, rates) in &snap.links {
            self.v.job[l] = peak;
            self.v.phase[l * PHASES..(l + 1) * PHASES].copy_from_slice(&rates);
            self.touched.push(l);
        }
        for &(l, ..) in &snap.links {
            self.remask(l, 0, true, true);
        }
    }

    /// Counts the changes of the held peaks: a snapshot taken at one
    /// count is of a route on the held peaks of that count.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether a strict route may time-share held links: only when it was
    /// given the links it may ([`Peaks::lendable`]).
    pub fn lending(&self) -> bool {
        self.v.lendable.is_some()
    }

    /// The links a lent fit may time-share, by link id (`None`: every
    /// link, for a router that is not strict; module doc). Ids out of
    /// range are ignored.
    pub fn lendable(&mut self, links: Option<Vec<usize>>) {
        let v = &mut self.v;
        for &l in v.lendable.iter().flatten() {
            v.lent_link[l] = false;
        }
        v.lendable = links.map(|mut ids| {
            ids.retain(|&l| l < v.lent_link.len());
            ids.iter().for_each(|&l| v.lent_link[l] = true);
            ids
        });
        let (Some(m), v) = (&mut self.masks, &self.v) else {
            return;
        };
        let rate = m.rate();
        m.lend(v.lendable.as_deref(), link_fits(0.0, 0.0, 0.0, rate));
        if !self.touched.is_empty() {
            for l in 0..v.held.len() {
                m.charged(l, 0, true, |p, lent| v.fits(l, p, rate, lent));
            }
        }
    }

    /// Every link's held peaks (for tests and audits).
    pub fn held(&self) -> &[f64] {
        &self.v.held
    }

    /// Does one more flow of `s` on `p` keep each of its links within line
    /// rate in its phase?
    /// With `lent`, the held peaks of lendable links are not counted.
    fn fits(&self, p: &Path, s: &Share, lent: bool) -> bool {
        let ph = dense_phase(s.phase);
        (p.links().iter()).all(|&l| self.v.fits(l as usize, ph, s.rate, lent))
    }

    /// How many flows of `rate` link `l` has room for beside the held
    /// peaks (none counted where a strict router may time-share it), at
    /// least: the count [`Peaks::take`] would take one after another, with
    /// a margin for the float adds, so the room is never under it.
    pub fn room(&self, l: usize, rate: f64) -> u32 {
        let free = 1.0 + SLACK - self.v.held_by_others(l, self.lending());
        whole(free / rate + 1e-9)
    }

    /// The first of `paths[from..]` one more flow of `s` fits (module doc).
    /// With `sides`, path `i`'s links are bit `i` of those leaf sides in
    /// order ([`Peaks::mask_sides`]), and where the masks are for `s`'s
    /// rate and phase the answer is read from them, not tested path by
    /// path.
    pub fn first_fit(
        &self,
        paths: Paths<'_>,
        from: usize,
        s: &Share,
        sides: Option<&[u32]>,
    ) -> Option<usize> {
        match self.masked(sides, s, false) {
            Some((m, sides, ph)) => {
                let mut found = None;
                m.each(sides, ph, false, from, paths.len(), |i| {
                    found = Some(i);
                    true
                });
                found
            }
            None => (from..paths.len()).find(|&i| self.fits(&paths.get(i), s, false)),
        }
    }

    /// The masks, when `sides` are given and they are for `s`'s rate.
    fn masked<'a>(
        &'a self,
        sides: Option<&'a [u32]>,
        s: &Share,
        lent: bool,
    ) -> Option<(&'a Masks, &'a [u32], usize)> {
        let (ph, sides) = (dense_phase(s.phase), sides?);
        let m = (self.masks.as_ref()).filter(|m| m.keeps(s.rate, ph, lent, sides))?;
        Some((m, sides, ph))
    }

    /// Where `p` comes in the order lent fits are searched ("Time-shared
    /// links"): by the held peaks on its busier link, least first (fewest
    /// jobs to interleave with), ties by index `i`.
    fn lent_key(&self, p: &Path, i: usize) -> (f64, usize) {
        let busier = (p.links().iter()).fold(0.0f64, |m, &l| m.max(self.v.held[l as usize]));
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
        paths: Paths<'_>,
        after: Option<(f64, usize)>,
        s: &Share,
        sides: Option<&[u32]>,
    ) -> Option<(f64, usize)> {
        let before =
            |a: (f64, usize), b: (f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).is_lt();
        let mut best: Option<(f64, usize)> = None;
        // `fitting`: known to fit (the masks said so).
        let mut consider = |i: usize, fitting: bool| {
            let key = self.lent_key(&paths.get(i), i);
            let later = after.is_none_or(|a| before(a, key));
            let sooner = best.is_none_or(|b| before(key, b));
            if later && sooner && (fitting || self.fits(&paths.get(i), s, true)) {
                best = Some(key);
            }
            false
        };
        match self.masked(sides, s, true) {
            Some((m, sides, ph)) => m.each(sides, ph, true, 0, paths.len(), |i| consider(i, true)),
            None => (0..paths.len()).for_each(|i| {
                consider(i, false);
            }),
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
            let (held, job) = (self.v.held_by_others(l, lent), self.v.job[l]);
            let now = self.v.phase[l * PHASES + ph];
            k = (self.sums).count(now, s.rate, k, |v| held + job.max(v) <= 1.0 + SLACK);
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
            let at = &mut self.v.phase[l * PHASES + ph];
            if let Some(u) = self.undo.as_mut().filter(|_| n > 0) {
                u.push((l, ph, *at, self.v.job[l]));
            }
            if self.v.job[l] == 0.0 && *at == 0.0 && n > 0 {
                self.touched.push(l);
            }
            *at = self.sums.add(*at, s.rate, n);
            let peak = *at > self.v.job[l];
            self.v.job[l] = self.v.job[l].max(*at);
            if n > 0 {
                self.remask(l, ph, peak, true);
            }
        }
    }

    /// The routed job's peak per link (links in order), its scratch
    /// cleared for the next.
    pub fn finish(&mut self) -> Vec<(usize, f64)> {
        self.touched.sort_unstable();
        if let Some(m) = &mut self.masks {
            m.clean();
        }
        let mut out = Vec::with_capacity(self.touched.len());
        for l in self.touched.drain(..) {
            out.push((l, std::mem::take(&mut self.v.job[l])));
            self.v.phase[l * PHASES..(l + 1) * PHASES].fill(0.0);
        }
        out
    }

    /// Add (`sign` 1) or take away (-1) a job's peaks.
    pub fn hold(&mut self, peaks: &[(usize, f64)], sign: f64) {
        self.version += 1;
        for &(l, p) in peaks {
            self.v.held[l] += sign * p;
            self.remask(l, 0, true, false);
            if !self.touched.is_empty() {
                self.remask(l, 0, true, true); // a job being routed too
            }
        }
    }
}

/// `x` rounded down to a whole count, 0 below 0 (a cast truncates toward
/// zero, which is the floor here: hot callers avoid `f64::floor`, a libm
/// call where the target lacks SSE4.1).
pub fn whole(x: f64) -> u32 {
    x.max(0.0) as u32
}
