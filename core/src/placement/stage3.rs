//! The exact search behind OCS-vClos Stage 3 (paper Appendix A.3), for one
//! shape: `l` virtual leaves of `s` ports and `s` virtual-spine slots.
//!
//! A.3's unknowns are `a_n` (virtual leaves on leaf `n`), `t_m` (slots on
//! spine `m`) and the links: `a_n * t_m` between leaf `n` and spine `m`,
//! each through one OCS or a direct cable, within the idle ports of every
//! (leaf, OCS) and (spine, OCS). The paper linearises the products and
//! calls a commercial ILP solver (~2 s at 2048 GPUs); this searches the same
//! space directly, in three nested levels:
//!
//! 1. `a` over the leaves in the caller's preference order (fewest idle
//!    servers first), most virtual leaves on the preferred leaves first;
//! 2. for each complete `a`, `t` over the spines in preference order (fewest
//!    free ports first), most slots on the preferred spines first;
//! 3. for each `(a, t)`, which OCS carries each link:
//!    [`assign_exact`] (a flow heuristic, then backtracking).
//!
//! **Complete.** Every cut is a necessary condition no extension can undo:
//! not enough virtual leaves / slots left to reach `l` / `s`; the chosen
//! leaves cannot send their `a_n * s` links to spines able to take them
//! (a max-flow through the per-OCS port counts); a spine cannot give each
//! chosen leaf `a_n * t_m` links through the ports they share. Identical
//! leaves (or spines) are interchangeable, so only non-increasing counts
//! among neighbours with the same ports are tried; the relaxations solve
//! them once (a run of them is one node of the flow, a chosen leaf like an
//! earlier one is not checked again): the same cuts at a fraction of the
//! work (issue 13: -13% of a whole replay's instructions). So if the shape has a
//! slice, it is found, unless the node `budget` runs out first, which is
//! reported as [`Cutoff`] (the replay counts them as `search_cutoffs`);
//! tests check the answer against brute force on small fabrics, and
//! against an ILP of A.3 (HiGHS) on every instance a 512-GPU replay gives
//! the search (`tests/stage3_ilp.rs`, through [`record_instances`]).
//! The objective (eq. 12) only orders the search: the first slice found is
//! returned, not a proven optimum.
//!
//! **Cheap nodes.** On an all-OCS fabric, once a search has gone past a
//! few nodes, its relaxations are checked as minimum cuts over OCS subsets
//! ([`super::cuts`]) instead of max-flows: the same answers, so the same
//! path, budget and slice, at about a third of the time per search at
//! 8192 GPUs (issue 13; docs/performance.md, "Cheaper decisions").

use std::cell::RefCell;

use super::assign::{assign_exact, Assignment, Budget, Cutoff};
use super::cuts::Cuts;
use super::flow::Flow;

/// One Stage 3 instance, leaves and spines in preference order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// Most virtual leaves each leaf can host (idle servers, usable ports).
    pub leaf_max: Vec<u32>,
    /// `leaf_cap[n][o]`: idle uplink-side ports of leaf `n` on OCS `o`.
    pub leaf_cap: Vec<Vec<u32>>,
    /// `spine_cap[m][o]`: idle spine-side ports of spine `m` on OCS `o`.
    pub spine_cap: Vec<Vec<u32>>,
    /// `direct[n][m]`: free direct cables between leaf `n` and spine `m`.
    pub direct: Vec<Vec<u32>>,
}

/// A slice: `(leaf index, a_n)`, `(spine index, t_m)`, and per chosen leaf
/// and spine the links per OCS (`x`) and over direct cables (`dx`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solution {
    pub set: Vec<(usize, u32)>,
    pub slots: Vec<(usize, u32)>,
    pub x: Assignment,
    pub dx: Vec<Vec<u32>>,
}

/// Find a slice of `l` virtual leaves x `s` slots, or prove there is none.
pub fn solve(p: &Problem, l: u32, s: u32, budget: &mut Budget) -> Result<Option<Solution>, Cutoff> {
    let found = solve_with(p, (l, s), budget, true);
    RECORDED.with_borrow_mut(|rec| {
        if let Some(rec) = rec {
            let outcome = match &found {
                Ok(Some(_)) => Outcome::Slice,
                Ok(None) => Outcome::None,
                Err(Cutoff) => Outcome::Cutoff,
            };
            rec.push(Instance {
                outcome,
                l,
                s,
                problem: p.clone(),
            });
        }
    });
    found
}

/// What one exact search concluded, with the instance it searched: the
/// diagnostic record of [`record_instances`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Instance {
    pub outcome: Outcome,
    pub l: u32,
    pub s: u32,
    pub problem: Problem,
}

/// A search's answer: a slice found, none exists (proven), or the budget
/// ran out first; `Rescued` is a cut-off search whose shape the
/// spines-first try then placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Slice,
    None,
    Cutoff,
    Rescued,
}

thread_local! {
    /// The instances [`solve`] searched on this thread while recording.
    static RECORDED: RefCell<Option<Vec<Instance>>> = const { RefCell::new(None) };
}

/// Whether [`record_instances`] is on (then every search is recorded, so
/// none may be answered without [`solve`]).
pub(crate) fn recording() -> bool {
    RECORDED.with_borrow(Option::is_some)
}

/// Diagnostic only (`examples/stage3_instances.rs`, docs/performance.md
/// "What the cut-off shapes are"): with `on`, start recording every
/// instance the exact search is given on this thread (and its answer);
/// either way, return what was recorded since the last call. An
/// independent solver (`tools/stage3_ilp.py`, an ILP of Appendix A.3)
/// can then check each `none` and say whether a `cutoff` had a slice.
#[doc(hidden)]
pub fn record_instances(on: bool) -> Vec<Instance> {
    RECORDED.with_borrow_mut(|rec| {
        let out = rec.take().unwrap_or_default();
        *rec = on.then(Vec::new);
        out
    })
}

/// Diagnostic only: while recording, mark the last instance (a cut-off
/// search) as placed by the spines-first try, so the record separates the
/// shapes left unsettled from those the rescue settled.
pub(crate) fn mark_rescued() {
    RECORDED.with_borrow_mut(|rec| {
        if let Some(last) = rec.as_mut().and_then(|r| r.last_mut()) {
            if last.outcome == Outcome::Cutoff {
                last.outcome = Outcome::Rescued;
            }
        }
    });
}

/// [`solve`]; with `cuts`, the relaxations are checked as minimum cuts
/// over OCS subsets ([`super::cuts`]) wherever they apply, otherwise
/// always as max-flows (the tests compare the two).
fn solve_with(
    p: &Problem,
    (l, s): (u32, u32),
    budget: &mut Budget,
    cuts: bool,
) -> Result<Option<Solution>, Cutoff> {
    let nl = p.leaf_max.len();
    let ns = p.spine_cap.len();
    if l == 0 || s == 0 || nl == 0 || ns == 0 {
        return Ok(None);
    }
    let sum = |c: &[u32]| c.iter().sum::<u32>();
    let leaf_max: Vec<u32> = (0..nl)
        .map(|n| leaf_slots(p.leaf_max[n], sum(&p.leaf_cap[n]) + sum(&p.direct[n]), s))
        .collect();
    let spine_max: Vec<u32> = (0..ns)
        .map(|m| {
            spine_slots(
                sum(&p.spine_cap[m]) + p.direct.iter().map(|r| r[m]).sum::<u32>(),
                l,
            )
        })
        .collect();
    let mut search = Search {
        p,
        l,
        s,
        same_leaf: (0..nl)
            .map(|n| {
                n > 0 && leaf_max[n] == leaf_max[n - 1] && leaf_row(p, n) == leaf_row(p, n - 1)
            })
            .collect(),
        same_spine: (0..ns)
            .map(|m| m > 0 && spine_col(p, m) == spine_col(p, m - 1))
            .collect(),
        leaf_left: suffix(&leaf_max),
        cuts: None,
        want_cuts: cuts,
        nodes: 0,
        leaf_max,
        spine_max,
        a: vec![0; nl],
        t: vec![0; ns],
        budget,
        flow: Flow::default(),
    };
    if too_few(search.leaf_left[0], sum(&search.spine_max), (l, s)) {
        return Ok(None);
    }
    search.leaves(0, l)
}

/// Virtual leaves a leaf can host: at most `max`, and one per `s` of its
/// `ports` usable uplinks.
pub(crate) fn leaf_slots(max: u32, ports: u32, s: u32) -> u32 {
    max.min(ports / s)
}

/// Slots a spine can take: one per `l` of its `ports` usable ports.
pub(crate) fn spine_slots(ports: u32, l: u32) -> u32 {
    ports / l
}

/// The search's bound before its first node: `leaves` virtual leaves and
/// `slots` spine slots in all ([`leaf_slots`], [`spine_slots`]) cannot
/// hold an `l` x `s` slice.
pub(crate) fn too_few(leaves: u32, slots: u32, (l, s): (u32, u32)) -> bool {
    leaves < l || slots < s
}

fn suffix(v: &[u32]) -> Vec<u32> {
    let mut out = vec![0; v.len() + 1];
    for i in (0..v.len()).rev() {
        out[i] = out[i + 1] + v[i];
    }
    out
}

fn leaf_row(p: &Problem, n: usize) -> (&[u32], &[u32]) {
    (&p.leaf_cap[n], &p.direct[n])
}

fn spine_col(p: &Problem, m: usize) -> (&[u32], Vec<u32>) {
    (&p.spine_cap[m], p.direct.iter().map(|r| r[m]).collect())
}

struct Search<'a> {
    p: &'a Problem,
    l: u32,
    s: u32,
    /// Leaf (spine) `i` has the same ports as `i - 1`: interchangeable.
    same_leaf: Vec<bool>,
    same_spine: Vec<bool>,
    leaf_max: Vec<u32>,
    /// Virtual leaves leaves `i..` could still host.
    leaf_left: Vec<u32>,
    spine_max: Vec<u32>,
    a: Vec<u32>,
    t: Vec<u32>,
    budget: &'a mut Budget,
    /// Scratch graph for the relaxations (reused, not reallocated).
    flow: Flow,
    /// The relaxations as cuts over OCS subsets, where they apply: built
    /// once the search has visited [`CUTS_AFTER`] leaf-level nodes
    /// (`want_cuts` until then).
    cuts: Option<Cuts>,
    want_cuts: bool,
    /// Leaf-level nodes visited.
    nodes: u32,
}

/// Leaf-level nodes a search visits with flows before it builds the cut
/// tables: most searches end within a few nodes (the root relaxation
/// fails, or the first leaves found fit), and for them the tables cost
/// more than the flows they would save (at 2048 GPUs building them for
/// every search raised the decision p50 from 58 to 73 us).
const CUTS_AFTER: u32 = 8;

impl Search<'_> {
    /// Level 1: virtual leaves on leaves `i..`, `left` still to place.
    fn leaves(&mut self, i: usize, left: u32) -> Result<Option<Solution>, Cutoff> {
        self.budget.tick()?;
        self.nodes += 1;
        if self.want_cuts && self.nodes > CUTS_AFTER {
            self.want_cuts = false;
            self.cuts = Cuts::new(self.p, (self.l, self.s), &self.leaf_max, &self.spine_max);
            if let Some(c) = &mut self.cuts {
                // The sums along the path so far: leaves `0..i` decided.
                for n in 0..i {
                    c.set_leaf(n, self.a[n]);
                }
            }
        }
        if left == 0 {
            return self.spines_for_leaves(i);
        }
        if self.leaf_left[i] < left || !self.leaves_fit(i, left) {
            return Ok(None);
        }
        let mut hi = self.leaf_max[i].min(left);
        if self.same_leaf[i] {
            hi = hi.min(self.a[i - 1]);
        }
        for v in (0..=hi).rev() {
            self.a[i] = v;
            if let Some(c) = &mut self.cuts {
                c.set_leaf(i, v);
            }
            let found = self.leaves(i + 1, left - v);
            if !matches!(found, Ok(None)) {
                return found;
            }
        }
        self.a[i] = 0;
        Ok(None)
    }

    /// Level 1's relaxation at leaf `i`, `left` virtual leaves to go.
    fn leaves_fit(&mut self, i: usize, left: u32) -> bool {
        match &self.cuts {
            Some(c) => c.leaves_fit(i, left),
            None => self.links_fit((i, left), (0, self.s), None),
        }
    }

    /// The pair-blind relaxation: can `l * s` links flow from the leaves
    /// (leaf `n < i` sends exactly `a_n * s`; later leaves together send
    /// the `l_left * s` still missing, each at most `leaf_max * s`) through
    /// the per-OCS port counts and direct cables into the spines (spine
    /// `m < j` takes exactly `t_m * l`; later ones together the `s_left * l`
    /// missing, each at most `tmax * l`, `spine_max` when `None`)? Every slice is such a flow, so a
    /// failure cuts the branch; which pair each link joins is not tracked,
    /// so success proves nothing.
    fn links_fit(
        &mut self,
        (i, l_left): (usize, u32),
        (j, s_left): (usize, u32),
        tmax: Option<&[u32]>,
    ) -> bool {
        let tmax = tmax.unwrap_or(&self.spine_max);
        let p = self.p;
        let k = p.spine_cap.first().map_or(0, Vec::len);
        let (nl, ns) = (p.leaf_cap.len(), p.spine_cap.len());
        // Nodes: 0 source, 1 sink, 2 later leaves, 3 later spines, then
        // leaves, OCSes, spines.
        let leaf = |n: usize| 4 + n;
        let ocs = |o: usize| 4 + nl + o;
        let spine = |m: usize| 4 + nl + k + m;
        let mut f = std::mem::take(&mut self.flow);
        f.reset(4 + nl + k + ns);
        f.add_cap(0, 2, l_left * self.s);
        // A run of identical leaves on the same side of `i` (and, before
        // `i`, with the same `a_n`) is one node with its capacities times
        // the run's length: the flow's value is the same (split a merged
        // flow evenly, and max-flow is integral), and a fabric with few
        // jobs has long such runs (the caller sorts alike leaves together).
        let mut n = 0;
        while n < nl {
            let run = 1
                + (n + 1..nl)
                    .take_while(|&x| {
                        self.same_leaf[x]
                            && (x < i) == (n < i)
                            && (x >= i || self.a[x] == self.a[n])
                    })
                    .count();
            let from = if n < i { self.a[n] } else { self.leaf_max[n] };
            let r = run as u32;
            if from > 0 {
                f.add_cap(if n < i { 0 } else { 2 }, leaf(n), r * from * self.s);
                for o in 0..k {
                    f.add_cap(leaf(n), ocs(o), r * p.leaf_cap[n][o]);
                }
                for m in 0..ns {
                    f.add_cap(leaf(n), spine(m), r * p.direct[n][m]);
                }
            }
            n += run;
        }
        f.add_cap(3, 1, s_left * self.l);
        for (m, &most) in tmax.iter().enumerate() {
            for o in 0..k {
                f.add_cap(ocs(o), spine(m), p.spine_cap[m][o]);
            }
            if m < j {
                f.add_cap(spine(m), 1, self.t[m] * self.l);
            } else {
                f.add_cap(spine(m), 3, most * self.l);
            }
        }
        let fits = f.run(0, 1) >= self.l * self.s;
        self.flow = f;
        fits
    }

    /// Level 2 entry: `a` is complete at depth `i` (no virtual leaf on
    /// leaves `i..`).
    fn spines_for_leaves(&mut self, i: usize) -> Result<Option<Solution>, Cutoff> {
        let p = self.p;
        if let Some(c) = &mut self.cuts {
            c.begin_spines(i, &self.a, &distinct_leaves(p, &self.a));
        }
        let vleaves: u32 = self.a.iter().sum();
        // Slots a spine can carry: the most `t` for which every chosen leaf
        // can send it `a_n * t` links at once through its OCS ports.
        let mut tmax = vec![0; p.spine_cap.len()];
        for (m, most) in tmax.iter_mut().enumerate() {
            while *most < self.spine_max[m].min(self.s) {
                // One max-flow per step: charged to the budget like a node.
                self.budget.tick()?;
                let takes = match &mut self.cuts {
                    Some(c) => c.spine_takes(&self.a, m, *most + 1, vleaves * (*most + 1)),
                    None => self.spine_takes(m, *most + 1),
                };
                if !takes {
                    break;
                }
                *most += 1;
            }
        }
        if let Some(c) = &mut self.cuts {
            c.set_tmax(&tmax);
        }
        let left = suffix(&tmax);
        self.t.fill(0);
        self.spines(0, self.s, &tmax, &left)
    }

    /// Can spine `m` take `a_n * t` links from every chosen leaf at once
    /// (through each OCS, within both ends' ports, or direct)?
    fn spine_takes(&mut self, m: usize, t: u32) -> bool {
        let p = self.p;
        let k = p.spine_cap[m].len();
        let nl = self.a.len();
        // Nodes: 0 source, 1 sink, leaves, OCSes.
        let mut f = std::mem::take(&mut self.flow);
        f.reset(2 + nl + k);
        let mut want = 0;
        for (n, &an) in self.a.iter().enumerate().filter(|(_, &an)| an > 0) {
            want += an * t;
            f.add_cap(0, 2 + n, an * t);
            f.add_cap(2 + n, 1, p.direct[n][m]);
            for o in 0..k {
                f.add_cap(2 + n, 2 + nl + o, p.leaf_cap[n][o]);
            }
        }
        for o in 0..k {
            f.add_cap(2 + nl + o, 1, p.spine_cap[m][o]);
        }
        let fits = f.run(0, 1) == want;
        self.flow = f;
        fits
    }

    /// Can every chosen leaf send its `a_n * s` links, `a_n * t_m` to each
    /// spine `m < j` and `a_n * left` to later spines (at most `a_n *
    /// tmax` each), through the ports it shares with them per OCS?
    /// Leaves with the same `a_n` and the same ports pose the same flow
    /// problem, which is solved once (on a fabric with few jobs most chosen
    /// leaves are alike).
    fn leaves_send(&mut self, j: usize, left: u32, tmax: &[u32]) -> bool {
        let p = self.p;
        let ns = p.spine_cap.len();
        let k = p.spine_cap.first().map_or(0, Vec::len);
        let mut f = std::mem::take(&mut self.flow);
        let mut distinct: Vec<usize> = Vec::new();
        let fits = self
            .a
            .iter()
            .enumerate()
            .filter(|(_, &an)| an > 0)
            .all(|(n, &an)| {
                let same = |&m: &usize| self.a[m] == an && leaf_row(p, m) == leaf_row(p, n);
                if distinct.iter().any(same) {
                    return true;
                }
                distinct.push(n);
                // Nodes: 0 source, 1 sink, 2 later spines, spines, OCSes.
                f.reset(3 + ns + k);
                f.add_cap(0, 2, an * left);
                for (m, &most) in tmax.iter().enumerate() {
                    if m < j {
                        f.add_cap(0, 3 + m, an * self.t[m]);
                    } else {
                        f.add_cap(2, 3 + m, an * most);
                    }
                    f.add_cap(3 + m, 1, p.direct[n][m]);
                    for o in 0..k {
                        f.add_cap(3 + m, 3 + ns + o, p.spine_cap[m][o]);
                    }
                }
                for o in 0..k {
                    f.add_cap(3 + ns + o, 1, p.leaf_cap[n][o]);
                }
                f.run(0, 1) == an * self.s
            });
        self.flow = f;
        fits
    }

    /// Level 2: slots on spines `j..`, `left` still to place.
    fn spines(
        &mut self,
        j: usize,
        left: u32,
        tmax: &[u32],
        room: &[u32],
    ) -> Result<Option<Solution>, Cutoff> {
        // A node here runs one flow for the relaxation and one per chosen
        // leaf: all are charged, so the budget bounds the work.
        let chosen = self.a.iter().filter(|&&an| an > 0).count() as u64;
        self.budget.take(2 + chosen)?;
        let nl = self.a.len();
        let fits = match &self.cuts {
            Some(c) => room[j] >= left && c.spines_fit(j, left),
            None => {
                room[j] >= left
                    && self.links_fit((nl, 0), (j, left), Some(tmax))
                    && self.leaves_send(j, left, tmax)
            }
        };
        if !fits {
            return Ok(None);
        }
        if left == 0 {
            return self.links();
        }
        let mut hi = tmax[j].min(left);
        if self.same_spine[j] {
            hi = hi.min(self.t[j - 1]);
        }
        for v in (0..=hi).rev() {
            self.t[j] = v;
            if let Some(c) = &mut self.cuts {
                c.set_spine(j, v);
            }
            let found = self.spines(j + 1, left - v, tmax, room);
            if !matches!(found, Ok(None)) {
                return found;
            }
        }
        self.t[j] = 0;
        Ok(None)
    }

    /// Level 3: `a` and `t` are complete; direct cables first (each serves
    /// one pair only, so using it never costs another pair), then the OCSes.
    fn links(&mut self) -> Result<Option<Solution>, Cutoff> {
        let p = self.p;
        let set: Vec<(usize, u32)> = pick(&self.a);
        let slots: Vec<(usize, u32)> = pick(&self.t);
        let dx: Vec<Vec<u32>> = set
            .iter()
            .map(|&(n, an)| {
                slots
                    .iter()
                    .map(|&(m, tm)| (an * tm).min(p.direct[n][m]))
                    .collect()
            })
            .collect();
        let need: Vec<Vec<u32>> = set
            .iter()
            .zip(&dx)
            .map(|(&(_, an), row)| {
                slots
                    .iter()
                    .zip(row)
                    .map(|(&(_, tm), d)| an * tm - d)
                    .collect()
            })
            .collect();
        let lc: Vec<Vec<u32>> = set.iter().map(|&(n, _)| p.leaf_cap[n].clone()).collect();
        let sc: Vec<Vec<u32>> = slots.iter().map(|&(m, _)| p.spine_cap[m].clone()).collect();
        Ok(assign_exact(&need, &lc, &sc, self.budget)?.map(|x| Solution { set, slots, x, dx }))
    }
}

/// The chosen leaves (`a_n > 0`) that pose distinct per-leaf flow
/// problems: the first of each group with the same `a_n` and ports.
fn distinct_leaves(p: &Problem, a: &[u32]) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for (n, &an) in a.iter().enumerate().filter(|(_, &an)| an > 0) {
        if !out
            .iter()
            .any(|&m| a[m] == an && leaf_row(p, m) == leaf_row(p, n))
        {
            out.push(n);
        }
    }
    out
}

/// The non-zero entries of `v`, with their indices.
fn pick(v: &[u32]) -> Vec<(usize, u32)> {
    v.iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(i, &c)| (i, c))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::placement::Rng;

    /// Every (a, t) and every split of every pair's links over direct
    /// cables and OCSes: no pruning, no symmetry, no heuristics.
    pub(crate) fn brute(p: &Problem, l: u32, s: u32) -> bool {
        let mut found = false;
        each_vector(&p.leaf_max, l, &mut |a| {
            let spine_any = vec![s; p.spine_cap.len()];
            each_vector(&spine_any, s, &mut |t| {
                found = found || brute_links(p, a, t);
            });
        });
        found
    }

    /// Call `f` with every vector `v <= max` summing to `total`.
    fn each_vector(max: &[u32], total: u32, f: &mut dyn FnMut(&[u32])) {
        fn go(max: &[u32], i: usize, left: u32, v: &mut Vec<u32>, f: &mut dyn FnMut(&[u32])) {
            if i == max.len() {
                if left == 0 {
                    f(v);
                }
                return;
            }
            for c in 0..=max[i].min(left) {
                v[i] = c;
                go(max, i + 1, left - c, v, f);
            }
            v[i] = 0;
        }
        go(max, 0, total, &mut vec![0; max.len()], f);
    }

    fn brute_links(p: &Problem, a: &[u32], t: &[u32]) -> bool {
        let pairs: Vec<(usize, usize, u32)> = a
            .iter()
            .enumerate()
            .flat_map(|(n, &an)| t.iter().enumerate().map(move |(m, &tm)| (n, m, an * tm)))
            .filter(|&(_, _, c)| c > 0)
            .collect();
        let mut lc = p.leaf_cap.clone();
        let mut sc = p.spine_cap.clone();
        let mut direct = p.direct.clone();
        fn go(
            pairs: &[(usize, usize, u32)],
            lc: &mut [Vec<u32>],
            sc: &mut [Vec<u32>],
            direct: &mut [Vec<u32>],
        ) -> bool {
            let Some(&(n, m, c)) = pairs.first() else {
                return true;
            };
            // `o == k` is the direct cable.
            fn split(
                (n, m): (usize, usize),
                left: u32,
                o: usize,
                rest: &[(usize, usize, u32)],
                lc: &mut [Vec<u32>],
                sc: &mut [Vec<u32>],
                direct: &mut [Vec<u32>],
            ) -> bool {
                let k = lc[n].len();
                if o > k {
                    return left == 0 && go(rest, lc, sc, direct);
                }
                let max = if o == k {
                    direct[n][m]
                } else {
                    lc[n][o].min(sc[m][o])
                };
                (0..=max.min(left)).any(|y| {
                    let cell = |lc: &mut [Vec<u32>],
                                sc: &mut [Vec<u32>],
                                d: &mut [Vec<u32>],
                                add: bool| {
                        let upd = |v: &mut u32| if add { *v += y } else { *v -= y };
                        if o == k {
                            upd(&mut d[n][m]);
                        } else {
                            upd(&mut lc[n][o]);
                            upd(&mut sc[m][o]);
                        }
                    };
                    cell(lc, sc, direct, false);
                    let ok = split((n, m), left - y, o + 1, rest, lc, sc, direct);
                    cell(lc, sc, direct, true);
                    ok
                })
            }
            split((n, m), c, 0, &pairs[1..], lc, sc, direct)
        }
        go(&pairs, &mut lc, &mut sc, &mut direct)
    }

    /// `n` switches' idle ports on each of `k` OCSes, each below `below`.
    fn random_caps(rng: &mut Rng, n: usize, k: usize, below: u64) -> Vec<Vec<u32>> {
        (0..n)
            .map(|_| (0..k).map(|_| rng.below(below) as u32).collect())
            .collect()
    }

    fn random_problem(rng: &mut Rng) -> Problem {
        let nl = 1 + rng.below(4) as usize;
        let ns = 1 + rng.below(3) as usize;
        let k = 1 + rng.below(2) as usize;
        let caps = |rng: &mut Rng, n: usize| random_caps(rng, n, k, 4);
        let leaf_cap = caps(rng, nl);
        let spine_cap = caps(rng, ns);
        let direct = (0..nl)
            .map(|_| (0..ns).map(|_| u32::from(rng.below(4) == 0)).collect())
            .collect();
        // Repeat a row now and then so the symmetry cut is exercised.
        let mut p = Problem {
            leaf_max: (0..nl).map(|_| rng.below(3) as u32).collect(),
            leaf_cap,
            spine_cap,
            direct,
        };
        if nl > 1 && rng.below(2) == 0 {
            p.leaf_cap[1] = p.leaf_cap[0].clone();
            p.direct[1] = p.direct[0].clone();
            p.leaf_max[1] = p.leaf_max[0];
        }
        p
    }

    /// A solution is a real slice: the counts add up, every pair gets
    /// exactly `a_n * t_m` links, no port is used twice.
    fn check(p: &Problem, sol: &Solution, l: u32, s: u32) {
        assert_eq!(sol.set.iter().map(|x| x.1).sum::<u32>(), l);
        assert_eq!(sol.slots.iter().map(|x| x.1).sum::<u32>(), s);
        let mut lc = p.leaf_cap.clone();
        let mut sc = p.spine_cap.clone();
        for (i, &(n, an)) in sol.set.iter().enumerate() {
            assert!(an <= p.leaf_max[n]);
            for (j, &(m, tm)) in sol.slots.iter().enumerate() {
                let per = &sol.x[i][j];
                assert_eq!(per.iter().sum::<u32>() + sol.dx[i][j], an * tm);
                assert!(sol.dx[i][j] <= p.direct[n][m]);
                for (o, &y) in per.iter().enumerate() {
                    lc[n][o] = lc[n][o].checked_sub(y).unwrap();
                    sc[m][o] = sc[m][o].checked_sub(y).unwrap();
                }
            }
        }
    }

    #[test]
    fn finds_a_slice_exactly_when_brute_force_does() {
        let mut rng = Rng(0x57a9_e3e8_ac70_0003);
        let (mut feasible, mut tried) = (0, 0);
        for _ in 0..1500 {
            let p = random_problem(&mut rng);
            let l = 2 + rng.below(3) as u32;
            let s = 1 + rng.below(3) as u32;
            let want = brute(&p, l, s);
            let got = solve(&p, l, s, &mut Budget(u64::MAX)).unwrap();
            assert_eq!(got.is_some(), want, "l {l} s {s} {p:?}");
            if let Some(sol) = &got {
                check(&p, sol, l, s);
            }
            feasible += u32::from(want);
            tried += 1;
        }
        assert!(
            feasible * 10 > tried,
            "too few feasible instances: {feasible}/{tried}"
        );
        assert!(
            feasible * 10 < tried * 9,
            "too few infeasible instances: {feasible}/{tried}"
        );
    }

    /// An all-OCS instance (no direct cable, so the cut form applies)
    /// with up to 4 OCSes, alike leaves and spines now and then.
    fn random_ocs_problem(rng: &mut Rng) -> Problem {
        let nl = 1 + rng.below(9) as usize;
        let ns = 1 + rng.below(6) as usize;
        let k = 1 + rng.below(4) as usize;
        let caps = |rng: &mut Rng, n: usize| random_caps(rng, n, k, 5);
        let mut p = Problem {
            leaf_max: (0..nl).map(|_| rng.below(4) as u32).collect(),
            leaf_cap: caps(rng, nl),
            spine_cap: caps(rng, ns),
            direct: vec![vec![0; ns]; nl],
        };
        for n in 1..nl {
            if rng.below(3) == 0 {
                p.leaf_cap[n] = p.leaf_cap[n - 1].clone();
                p.leaf_max[n] = p.leaf_max[n - 1];
            }
        }
        for m in 1..ns {
            if rng.below(3) == 0 {
                p.spine_cap[m] = p.spine_cap[m - 1].clone();
            }
        }
        p
    }

    #[test]
    fn cuts_search_exactly_as_the_flows_do() {
        // Same answer, same slice and the same budget spent, whether the
        // relaxations run as max-flows or as cuts over OCS subsets; with
        // small budgets too, so cutoffs must fall at the same node.
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut found, mut none, mut cut) = (0, 0, 0);
        for _ in 0..3000 {
            let p = random_ocs_problem(&mut rng);
            let l = 1 + rng.below(6) as u32;
            let s = 1 + rng.below(6) as u32;
            let units = [5, 20, 100, 10_000][rng.below(4) as usize];
            let (mut b1, mut b2) = (Budget(units), Budget(units));
            let with_cuts = solve_with(&p, (l, s), &mut b1, true);
            let with_flows = solve_with(&p, (l, s), &mut b2, false);
            assert_eq!(with_cuts, with_flows, "l {l} s {s} budget {units} {p:?}");
            assert_eq!(b1.0, b2.0, "budget left, l {l} s {s} {p:?}");
            match with_cuts {
                Ok(Some(sol)) => {
                    check(&p, &sol, l, s);
                    found += 1;
                }
                Ok(None) => none += 1,
                Err(Cutoff) => cut += 1,
            }
        }
        assert!(
            found > 100 && none > 100 && cut > 100,
            "{found} found, {none} none, {cut} cut off"
        );
    }

    #[test]
    fn cuts_agree_with_brute_force() {
        let mut rng = Rng(0x3c17_55ed_0000_0013);
        for _ in 0..1500 {
            let mut p = random_ocs_problem(&mut rng);
            // Brute force is exponential: keep it tiny.
            p.leaf_max.truncate(4);
            p.leaf_cap.truncate(4);
            p.direct.truncate(4);
            p.spine_cap.truncate(3);
            for row in &mut p.direct {
                row.truncate(3);
            }
            let l = 1 + rng.below(4) as u32;
            let s = 1 + rng.below(3) as u32;
            let got = solve(&p, l, s, &mut Budget(u64::MAX)).unwrap();
            assert_eq!(got.is_some(), brute(&p, l, s), "l {l} s {s} {p:?}");
        }
    }

    #[test]
    fn hosts_several_virtual_leaves_and_slots_where_one_per_switch_cannot() {
        // One leaf with 4 idle servers' worth of ports on each of 2 OCS, one
        // spine: l = 2 virtual leaves x s = 2 slots must both sit on them.
        let p = Problem {
            leaf_max: vec![2],
            leaf_cap: vec![vec![2, 2]],
            spine_cap: vec![vec![2, 2]],
            direct: vec![vec![0]],
        };
        let sol = solve(&p, 2, 2, &mut Budget(1000)).unwrap().unwrap();
        assert_eq!(sol.set, vec![(0, 2)]);
        assert_eq!(sol.slots, vec![(0, 2)]);
        check(&p, &sol, 2, 2);
        // One port fewer on the spine and there is no slice.
        let mut short = p.clone();
        short.spine_cap[0][1] = 1;
        assert_eq!(solve(&short, 2, 2, &mut Budget(1000)), Ok(None));
    }

    #[test]
    fn a_small_budget_is_a_cutoff_not_a_no() {
        let p = Problem {
            leaf_max: vec![1; 4],
            leaf_cap: vec![vec![1, 1]; 4],
            spine_cap: vec![vec![2, 2]; 2],
            direct: vec![vec![0; 2]; 4],
        };
        assert!(solve(&p, 4, 2, &mut Budget(10_000)).unwrap().is_some());
        assert_eq!(solve(&p, 4, 2, &mut Budget(2)), Err(Cutoff));
    }
}
