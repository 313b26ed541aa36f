//! Which OCS carries each link of an OCS-vClos slice.
//!
//! Once the leaves of a Stage 3 slice and the number of virtual-spine slots
//! on each spine are chosen, every leaf needs `need[i][j]` links to spine
//! `j`, and each link goes through one OCS `o`, using one idle leaf-side port
//! of leaf `i` on `o` and one idle spine-side port of spine `j` on `o`. This
//! is an edge colouring of the bipartite multigraph "leaf -> spine, `need`
//! times" with one colour per OCS and a capacity per (vertex, colour): the
//! class-teacher timetabling problem with availabilities, NP-complete in
//! general (Even, Itai and Shamir, 1976).
//!
//! The colours are decided one OCS at a time, each by a max-flow with lower
//! bounds: OCS `o` must carry at least what the later OCS cannot absorb at
//! every leaf and spine (`remaining degree - their capacity`), at most its
//! own capacity, and otherwise as much as possible. The lower bounds make
//! every vertex-level necessary condition hold for the rest at each step,
//! which is exactly what a greedy per-spine fill lacked (it strands a leaf's
//! capacity on one OCS while the spines have room only on another; measured
//! on CLUSTER512, it failed to connect 16 idle leaves across 12 idle spines).
//! It is still a heuristic: it can fail on a feasible instance, never
//! returns an invalid one (checked against brute force in the tests).
//!
//! Before the heuristic, one pair-blind max-flow ([`carriable`]) asks
//! whether the links can pass through the OCS ports at all; most failing
//! instances fail there, at one flow instead of two per OCS.
//!
//! **Spread, then as needed** (issue 13): the heuristic is first run with
//! each leaf's and spine's ports capped per OCS at an even share
//! ([`spread_caps`]: its links taken from the OCSes where it has the most
//! idle ports, so what it keeps idle stays level across the OCSes, plus
//! [`SPREAD_SLACK`]), and only if that fails with the full capacities.
//! A port on OCS `o` reaches only ports on `o` (paper Section 7: each OCS
//! is its own crossbar), so a leaf whose idle ports have all drifted onto
//! a few OCSes can no longer reach the spines whose idle ports sit on the
//! others. The plain heuristic fills OCS 0 first as far as it can, which is
//! exactly that drift. On `u2k` seed 1 with `--backfill slices --round-up
//! 2`, OCS-vClos's avg JCT was 57 416 s on 8 OCS, 51 454 s on 2 and 47 131
//! s on one OCS of the same ports: the split alone cost 22%
//! (docs/performance.md, "OCS drift and leaf leftovers").

use super::flow::Flow;

/// Links per (leaf, spine, OCS).
pub type Assignment = Vec<Vec<Vec<u32>>>;

/// Assign `need[i][j]` links between leaf `i` and spine `j` to OCSes, with
/// at most `leaf_cap[i][o]` links of leaf `i` and `spine_cap[j][o]` links of
/// spine `j` on OCS `o`.
pub fn assign<L: AsRef<[u32]>, S: AsRef<[u32]>>(
    need: &[Vec<u32>],
    leaf_cap: &[L],
    spine_cap: &[S],
) -> Option<Assignment> {
    let (ld, sd) = degrees(need, spine_cap.len());
    let fits = SCRATCH.with_borrow_mut(|flow| carriable((leaf_cap, spine_cap), (&ld, &sd), flow));
    if !fits {
        return None;
    }
    let spread = (spread_caps(leaf_cap, &ld), spread_caps(spine_cap, &sd));
    assign_by_ocs(need, &spread.0, &spread.1).or_else(|| assign_by_ocs(need, leaf_cap, spine_cap))
}

/// Links a vertex may put on one OCS beyond its even share in the spread
/// pass of [`assign`]. Measured on `u2k` seed 1 with `--backfill slices
/// --round-up 2` (docs/performance.md, "OCS drift and leaf leftovers"):
/// 0 did worse than 1 (58 900 s against 57 551 s avg JCT, the pass
/// failing more often and falling back to OCS 0 first), and with the
/// leaf-leftover order of Stage 3 so did 2 (53 060 s against 51 672 s).
const SPREAD_SLACK: u32 = 1;

/// Per vertex (a row of `cap`: idle ports per OCS) and its `deg` links,
/// the ports it may use on each OCS in [`assign`]'s spread pass: the links
/// taken one by one from the OCS where it has the most idle ports left
/// (lowest OCS on ties), so what stays idle is as level as it can be, plus
/// [`SPREAD_SLACK`], never above the capacity.
fn spread_caps<C: AsRef<[u32]>>(cap: &[C], deg: &[u32]) -> Vec<Vec<u32>> {
    cap.iter()
        .zip(deg)
        .map(|(row, &d)| {
            let row = row.as_ref();
            let mut left = row.to_vec();
            let mut take = vec![0u32; row.len()];
            for _ in 0..d {
                let most = (0..row.len())
                    .filter(|&o| left[o] > 0)
                    .max_by_key(|&o| (left[o], std::cmp::Reverse(o)));
                let Some(o) = most else { break };
                left[o] -= 1;
                take[o] += 1;
            }
            take.iter()
                .zip(row)
                .map(|(&t, &c)| (t + SPREAD_SLACK).min(c))
                .collect()
        })
        .collect()
}

thread_local! {
    /// [`assign`]'s graph for [`carriable`], reused call after call (a
    /// Stage 3 call asks it for every candidate leaf set).
    static SCRATCH: std::cell::RefCell<Flow> = std::cell::RefCell::new(Flow::default());
}

/// Links each leaf and each spine of `need` takes.
fn degrees(need: &[Vec<u32>], ns: usize) -> (Vec<u32>, Vec<u32>) {
    let ld = need.iter().map(|r| r.iter().sum()).collect();
    let sd = (0..ns).map(|j| need.iter().map(|r| r[j]).sum()).collect();
    (ld, sd)
}

/// Whether leaves that take `ld[i]` links and spines that take `sd[j]`
/// can be joined at all through the OCS ports, blind to which leaf goes
/// to which spine: a max-flow source -> leaf `i` (`ld[i]`) -> OCS `o`
/// (`leaf_cap[i][o]`) -> spine `j` (`spine_cap[j][o]`) -> sink (`sd[j]`)
/// that carries every link. Any assignment is such a flow, so this is
/// necessary; it is one max-flow where [`assign`]'s heuristic runs two per
/// OCS, and on the hard traces it refuses 94% of the instances the
/// heuristic cannot assign (issue 13; docs/performance.md, "Cheaper Stage
/// 3 calls"). `flow` is scratch, kept for its allocations.
fn carriable<L: AsRef<[u32]>, S: AsRef<[u32]>>(
    (leaf_cap, spine_cap): (&[L], &[S]),
    (ld, sd): (&[u32], &[u32]),
    flow: &mut Flow,
) -> bool {
    let (nl, ns) = (leaf_cap.len(), spine_cap.len());
    let k = spine_cap.first().map_or(0, |c| c.as_ref().len());
    // Nodes: 0 source, 1 sink, leaves, OCSes, spines.
    flow.reset(2 + nl + k + ns);
    for (i, caps) in leaf_cap.iter().enumerate() {
        flow.add_cap(0, 2 + i, ld[i]);
        for (o, &c) in caps.as_ref().iter().enumerate() {
            flow.add_cap(2 + i, 2 + nl + o, c);
        }
    }
    for (j, caps) in spine_cap.iter().enumerate() {
        for (o, &c) in caps.as_ref().iter().enumerate() {
            flow.add_cap(2 + nl + o, 2 + nl + k + j, c);
        }
        flow.add_cap(2 + nl + k + j, 1, sd[j]);
    }
    flow.run(0, 1) == ld.iter().sum::<u32>()
}

/// [`assign`]'s heuristic: the OCSes one at a time (module doc).
fn assign_by_ocs<L: AsRef<[u32]>, S: AsRef<[u32]>>(
    need: &[Vec<u32>],
    leaf_cap: &[L],
    spine_cap: &[S],
) -> Option<Assignment> {
    let nl = need.len();
    let ns = spine_cap.len();
    let k = spine_cap.first().map_or(0, |c| c.as_ref().len());
    let mut rem: Vec<Vec<u32>> = need.to_vec();
    let mut x = vec![vec![vec![0u32; k]; ns]; nl];
    for o in 0..k {
        let ld: Vec<u32> = rem.iter().map(|r| r.iter().sum()).collect();
        let sd: Vec<u32> = (0..ns).map(|j| rem.iter().map(|r| r[j]).sum()).collect();
        if ld.iter().all(|&d| d == 0) {
            break;
        }
        let later = |cap: &[u32]| cap[o + 1..].iter().sum::<u32>();
        let bounds = |deg: u32, cap: &[u32]| {
            let lo = deg.saturating_sub(later(cap));
            let hi = cap[o].min(deg);
            (lo <= hi).then_some((lo, hi))
        };
        let lb: Vec<(u32, u32)> = (0..nl)
            .map(|i| bounds(ld[i], leaf_cap[i].as_ref()))
            .collect::<Option<_>>()?;
        let sb: Vec<(u32, u32)> = (0..ns)
            .map(|j| bounds(sd[j], spine_cap[j].as_ref()))
            .collect::<Option<_>>()?;
        // Nodes: 0 S, 1 T, 2 SS, 3 TT, leaves, spines.
        let (s, t, ss, tt) = (0, 1, 2, 3);
        let leaf = |i: usize| 4 + i;
        let spine = |j: usize| 4 + nl + j;
        let mut f = Flow::new(4 + nl + ns);
        let mut excess = vec![0i64; 4 + nl + ns];
        let mut bounded = |f: &mut Flow, u: usize, v: usize, (lo, hi): (u32, u32)| {
            if hi > lo {
                f.add_edge(u, v, hi - lo);
            }
            excess[v] += i64::from(lo);
            excess[u] -= i64::from(lo);
        };
        for (i, &b) in lb.iter().enumerate() {
            bounded(&mut f, s, leaf(i), b);
        }
        for (j, &b) in sb.iter().enumerate() {
            bounded(&mut f, spine(j), t, b);
        }
        let mut pair = Vec::new();
        for (i, r) in rem.iter().enumerate() {
            for (j, &c) in r.iter().enumerate() {
                if c > 0 {
                    pair.push((i, j, f.add_edge(leaf(i), spine(j), c)));
                }
            }
        }
        let back = f.add_edge(t, s, u32::MAX / 2);
        let mut must = 0u32;
        for (v, &e) in excess.iter().enumerate() {
            let c = u32::try_from(e.unsigned_abs()).ok()?;
            if e > 0 {
                f.add_edge(ss, v, c);
                must += c;
            } else if e < 0 {
                f.add_edge(v, tt, c);
            }
        }
        if f.run(ss, tt) != must {
            return None;
        }
        // Feasible: now carry as much as this OCS can.
        f.remove_edge(back);
        f.run(s, t);
        for (i, j, e) in pair {
            let y = f.flow_on(e);
            x[i][j][o] = y;
            rem[i][j] -= y;
        }
    }
    rem.iter().all(|r| r.iter().all(|&c| c == 0)).then_some(x)
}

/// The search ran out of nodes before it could prove or disprove a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cutoff;

/// Nodes an exact search may still visit.
#[derive(Debug, Clone, Copy)]
pub struct Budget(pub u64);

impl Budget {
    pub fn tick(&mut self) -> Result<(), Cutoff> {
        self.take(1)
    }

    /// Spend `n` units at once (e.g. one per max-flow a step runs).
    pub fn take(&mut self, n: u64) -> Result<(), Cutoff> {
        self.0 = self.0.checked_sub(n).ok_or(Cutoff)?;
        Ok(())
    }
}

/// [`assign`], made complete: the flow heuristic first, then a
/// backtracking search over how each (leaf, spine) pair's links split across
/// the OCSes. Every cut is a necessary condition (each leaf's and spine's
/// remaining links fit its remaining ports; each unsplit pair fits the ports
/// the two share per OCS), so the search answers `None` only when no
/// assignment exists, or runs out of `budget`.
pub fn assign_exact(
    need: &[Vec<u32>],
    leaf_cap: &[Vec<u32>],
    spine_cap: &[Vec<u32>],
    budget: &mut Budget,
) -> Result<Option<Assignment>, Cutoff> {
    budget.tick()?;
    let ns = spine_cap.len();
    let k = spine_cap.first().map_or(0, Vec::len);
    // Tightest pairs first: they fail fastest.
    let mut pairs: Vec<(usize, usize)> = (0..need.len())
        .flat_map(|i| (0..ns).map(move |j| (i, j)))
        .filter(|&(i, j)| need[i][j] > 0)
        .collect();
    let share =
        |i: usize, j: usize| -> u32 { (0..k).map(|o| leaf_cap[i][o].min(spine_cap[j][o])).sum() };
    pairs.sort_by_key(|&(i, j)| (share(i, j) - need[i][j].min(share(i, j)), i, j));
    let (ld, sd) = degrees(need, ns);
    let mut dfs = Dfs {
        need,
        pairs,
        lc: leaf_cap.to_vec(),
        sc: spine_cap.to_vec(),
        ld,
        sd,
        x: vec![vec![vec![0; k]; ns]; need.len()],
        budget,
        flow: Flow::default(),
    };
    // The necessary conditions first (they include [`carriable`], so a
    // refused instance costs one max-flow), then the heuristic.
    if !dfs.counts_hold(0) {
        return Ok(None);
    }
    if let Some(x) = assign_by_ocs(need, leaf_cap, spine_cap) {
        return Ok(Some(x));
    }
    Ok(dfs.pair(0)?.then_some(dfs.x))
}

/// Backtracking state of [`assign_exact`]: remaining ports and demands.
struct Dfs<'a> {
    need: &'a [Vec<u32>],
    pairs: Vec<(usize, usize)>,
    lc: Vec<Vec<u32>>,
    sc: Vec<Vec<u32>>,
    /// Links each leaf / spine still has to place.
    ld: Vec<u32>,
    sd: Vec<u32>,
    x: Assignment,
    budget: &'a mut Budget,
    /// Scratch graph for the relaxation (reused, not reallocated).
    flow: Flow,
}

impl Dfs<'_> {
    /// Necessary conditions for the pairs from `p` on: per leaf, spine and
    /// pair, the links fit the ports; and pair-blind, the remaining links
    /// flow from leaves through the OCSes to spines.
    fn counts_hold(&mut self, p: usize) -> bool {
        let sum = |c: &[u32]| c.iter().sum::<u32>();
        self.ld.iter().zip(&self.lc).all(|(&d, c)| d <= sum(c))
            && self.sd.iter().zip(&self.sc).all(|(&d, c)| d <= sum(c))
            && self.flow_fits()
            && self.pairs[p..].iter().all(|&(i, j)| {
                let shared: u32 = self.lc[i]
                    .iter()
                    .zip(&self.sc[j])
                    .map(|(a, b)| *a.min(b))
                    .sum();
                self.need[i][j] <= shared
            })
    }

    fn flow_fits(&mut self) -> bool {
        carriable((&self.lc, &self.sc), (&self.ld, &self.sd), &mut self.flow)
    }

    fn pair(&mut self, p: usize) -> Result<bool, Cutoff> {
        let Some(&(i, j)) = self.pairs.get(p) else {
            return Ok(true);
        };
        self.split(p, (i, j), self.need[i][j], 0)
    }

    /// Put `left` links of pair `(i, j)` on OCS `o` and later ones.
    fn split(
        &mut self,
        p: usize,
        (i, j): (usize, usize),
        left: u32,
        o: usize,
    ) -> Result<bool, Cutoff> {
        self.budget.tick()?;
        let k = self.lc[i].len();
        if o == k {
            return Ok(left == 0 && self.counts_hold(p + 1) && self.pair(p + 1)?);
        }
        let later: u32 = (o + 1..k).map(|q| self.lc[i][q].min(self.sc[j][q])).sum();
        let hi = left.min(self.lc[i][o]).min(self.sc[j][o]);
        let lo = left.saturating_sub(later);
        for y in (lo..=hi).rev() {
            self.lc[i][o] -= y;
            self.sc[j][o] -= y;
            self.ld[i] -= y;
            self.sd[j] -= y;
            self.x[i][j][o] = y;
            let found = self.split(p, (i, j), left - y, o + 1);
            if matches!(found, Ok(true)) {
                return Ok(true);
            }
            self.lc[i][o] += y;
            self.sc[j][o] += y;
            self.ld[i] += y;
            self.sd[j] += y;
            self.x[i][j][o] = 0;
            found?;
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use crate::placement::Rng;

    fn valid(x: &Assignment, need: &[Vec<u32>], lc: &[Vec<u32>], sc: &[Vec<u32>]) {
        for (i, row) in x.iter().enumerate() {
            for (j, per) in row.iter().enumerate() {
                assert_eq!(per.iter().sum::<u32>(), need[i][j]);
            }
            for o in 0..lc[i].len() {
                assert!(row.iter().map(|p| p[o]).sum::<u32>() <= lc[i][o]);
            }
        }
        for (j, cap) in sc.iter().enumerate() {
            for (o, &c) in cap.iter().enumerate() {
                assert!(x.iter().map(|r| r[j][o]).sum::<u32>() <= c);
            }
        }
    }

    /// Exhaustive search over every per-pair split (tiny instances only).
    fn brute(need: &[Vec<u32>], lc: &mut [Vec<u32>], sc: &mut [Vec<u32>], at: usize) -> bool {
        let ns = sc.len();
        if at == need.len() * ns {
            return true;
        }
        let (i, j) = (at / ns, at % ns);
        fn split(
            left: u32,
            o: usize,
            (i, j): (usize, usize),
            need: &[Vec<u32>],
            lc: &mut [Vec<u32>],
            sc: &mut [Vec<u32>],
            at: usize,
        ) -> bool {
            let k = sc[j].len();
            if o == k {
                return left == 0 && brute(need, lc, sc, at + 1);
            }
            let max = left.min(lc[i][o]).min(sc[j][o]);
            for y in 0..=max {
                lc[i][o] -= y;
                sc[j][o] -= y;
                let ok = split(left - y, o + 1, (i, j), need, lc, sc, at);
                lc[i][o] += y;
                sc[j][o] += y;
                if ok {
                    return true;
                }
            }
            false
        }
        split(need[i][j], 0, (i, j), need, lc, sc, at)
    }

    #[test]
    fn balances_across_ocs_where_a_greedy_fill_strands_ports() {
        // 4 leaves x 4 spines, 2 OCS; leaves have 2 ports per OCS, spines 2
        // per OCS: every leaf needs one link to every spine. Putting each
        // spine's links on OCS 0 first would exhaust the leaves' OCS-0 ports
        // after two spines.
        let need = vec![vec![1; 4]; 4];
        let lc = vec![vec![2, 2]; 4];
        let sc = vec![vec![2, 2]; 4];
        let x = assign(&need, &lc, &sc).unwrap();
        valid(&x, &need, &lc, &sc);
    }

    /// A leaf with 4 idle ports on each of 4 OCSes and 4 links to give:
    /// the plain heuristic puts all 4 on OCS 0; the spread pass caps each
    /// OCS at an even share of one plus [`SPREAD_SLACK`], so at most 2
    /// (issue 13, module doc).
    #[test]
    fn links_are_spread_so_idle_ports_stay_level_across_the_ocses() {
        let need = vec![vec![2, 2]];
        let lc = vec![vec![4; 4]];
        let sc = vec![vec![4; 4]; 2];
        assert_eq!(spread_caps(&lc, &[4]), vec![vec![2; 4]]);
        let x = assign(&need, &lc, &sc).unwrap();
        valid(&x, &need, &lc, &sc);
        let per_ocs: Vec<u32> = (0..4).map(|o| x[0].iter().map(|p| p[o]).sum()).collect();
        assert!(per_ocs.iter().all(|&n| n <= 2), "not spread: {per_ocs:?}");
        assert_eq!(
            assign_by_ocs(&need, &lc, &sc).unwrap()[0][0],
            vec![2, 0, 0, 0]
        );
        // Ports already uneven: the links come from the fullest OCSes.
        assert_eq!(spread_caps(&[vec![1, 4, 2]], &[3]), vec![vec![1, 4, 1]]);
        assert_eq!(spread_caps(&[vec![0, 2]], &[5]), vec![vec![0, 2]]);
    }

    /// Every leaf's and spine's links fit its ports, summed over the OCSes.
    fn counts_fit((ld, sd): (&[u32], &[u32]), lc: &[Vec<u32>], sc: &[Vec<u32>]) -> bool {
        let fits =
            |d: &[u32], c: &[Vec<u32>]| d.iter().zip(c).all(|(&d, c)| d <= c.iter().sum::<u32>());
        fits(ld, lc) && fits(sd, sc)
    }

    /// Two leaves with ports only on OCS 0, one spine with one port on
    /// each OCS, one link from each leaf: every leaf, spine and pair has
    /// ports enough, but the spine's single OCS-0 port cannot take both.
    #[test]
    fn a_pair_blind_flow_refuses_what_no_count_sees() {
        let need = vec![vec![1], vec![1]];
        let lc = vec![vec![1, 0], vec![1, 0]];
        let sc = vec![vec![1, 1]];
        let (ld, sd) = degrees(&need, sc.len());
        assert!(counts_fit((&ld, &sd), &lc, &sc));
        let shared = |i: usize| {
            lc[i]
                .iter()
                .zip(&sc[0])
                .map(|(a, b)| *a.min(b))
                .sum::<u32>()
        };
        assert!((0..2).all(|i| need[i][0] <= shared(i)));
        assert!(!carriable((&lc, &sc), (&ld, &sd), &mut Flow::default()));
        assert!(!brute(&need, &mut lc.clone(), &mut sc.clone(), 0));
        assert_eq!(assign(&need, &lc, &sc), None);
        assert_eq!(assign_exact(&need, &lc, &sc, &mut Budget(1_000)), Ok(None));
        // One more OCS-0 port on the spine and it fits.
        let sc = vec![vec![2, 1]];
        assert!(carriable((&lc, &sc), (&ld, &sd), &mut Flow::default()));
        valid(&assign(&need, &lc, &sc).unwrap(), &need, &lc, &sc);
    }

    /// The flow is necessary (never refuses an instance that has an
    /// assignment) and refuses some that per-vertex counts let through.
    #[test]
    fn the_pair_blind_flow_never_refuses_a_feasible_instance() {
        let mut rng = Rng(0xca77_1ab1_e000_0003);
        let (mut feasible, mut refused) = (0, 0);
        let mut flow = Flow::default();
        for _ in 0..3000 {
            let (need, lc, sc) = random_instance(&mut rng, 4);
            let want = brute(&need, &mut lc.clone(), &mut sc.clone(), 0);
            let (ld, sd) = degrees(&need, sc.len());
            let fits = carriable((&lc, &sc), (&ld, &sd), &mut flow);
            assert!(
                fits || !want,
                "refused a feasible instance: {need:?} {lc:?} {sc:?}"
            );
            feasible += u32::from(want);
            refused += u32::from(counts_fit((&ld, &sd), &lc, &sc) && !fits);
        }
        assert!(feasible > 500, "too few feasible instances: {feasible}");
        assert!(refused > 0, "the flow refused nothing the counts allowed");
    }

    type Table = Vec<Vec<u32>>;

    /// A random instance (need, leaf caps, spine caps): up to `leaves`
    /// leaves, 3 spines, 3 OCS.
    fn random_instance(rng: &mut Rng, leaves: u64) -> (Table, Table, Table) {
        let nl = 1 + rng.below(leaves) as usize;
        let ns = 1 + rng.below(3) as usize;
        let k = 1 + rng.below(3) as usize;
        let mut table = |rows: usize, cols: usize, max: u64| -> Table {
            (0..rows)
                .map(|_| (0..cols).map(|_| rng.below(max) as u32).collect())
                .collect()
        };
        let need = table(nl, ns, 3);
        let lc = table(nl, k, 4);
        let sc = table(ns, k, 4);
        (need, lc, sc)
    }

    #[test]
    fn agrees_with_exhaustive_search_when_it_succeeds_and_rarely_misses() {
        let mut rng = Rng(0x51f1_5eed_0000_0001);
        let (mut feasible, mut found) = (0, 0);
        for _ in 0..400 {
            let (need, lc, sc) = random_instance(&mut rng, 3);
            let want = brute(&need, &mut lc.clone(), &mut sc.clone(), 0);
            let got = assign(&need, &lc, &sc);
            if let Some(x) = &got {
                assert!(want, "assigned an infeasible instance");
                valid(x, &need, &lc, &sc);
                found += 1;
            }
            feasible += u32::from(want);
        }
        assert!(feasible > 100, "too few feasible instances: {feasible}");
        // The heuristic may miss a few; it must find the vast majority.
        assert!(found * 100 >= feasible * 95, "found {found} of {feasible}");
    }

    #[test]
    fn exact_assignment_agrees_with_exhaustive_search_on_every_instance() {
        let mut rng = Rng(0x0e4a_c7a5_5160_0002);
        let (mut feasible, mut rescued) = (0, 0);
        for _ in 0..3000 {
            let (need, lc, sc) = random_instance(&mut rng, 4);
            let want = brute(&need, &mut lc.clone(), &mut sc.clone(), 0);
            let mut budget = Budget(u64::MAX);
            let got = assign_exact(&need, &lc, &sc, &mut budget).unwrap();
            assert_eq!(got.is_some(), want, "need {need:?} lc {lc:?} sc {sc:?}");
            if let Some(x) = &got {
                valid(x, &need, &lc, &sc);
                if assign(&need, &lc, &sc).is_none() {
                    rescued += 1;
                    // Only the backtracking found it: a small budget cannot.
                    let mut tiny = Budget(1);
                    assert_eq!(assign_exact(&need, &lc, &sc, &mut tiny), Err(Cutoff));
                }
            }
            feasible += u32::from(want);
        }
        assert!(feasible > 500, "too few feasible instances: {feasible}");
        // The instances the flow heuristic misses are where exactness shows.
        assert!(rescued > 0, "no instance needed the backtracking search");
    }
}
