//! A job's flows as a router goes over them: consecutive flows of one
//! leaf pair and one share as one run, and the job's flows counted per
//! leaf side, phase and rate for the strict router's leaf check
//! ([`super::routes`]).

use super::peak::{dense_phase, PHASES};
use super::traffic::{Block, Share};
use crate::topology::{LeafId, ServerId};
use crate::trace::Collective;

/// A placed job's flows between leaves as runs, in route order, with what
/// a route's set-up reads of them: the phases and rate of its flows, its
/// leaves' sides, and, once a strict router's leaf check asked, its flows
/// per side. All of it depends on the placement and the collective only,
/// so a router that routes the same candidate again (titan: strictly,
/// then with links lent; a blocked job tried again after a release) keeps
/// the last few instead of making the job's traffic and runs again.
#[derive(Debug, Clone)]
pub(super) struct JobRuns {
    pub placed: Vec<(ServerId, LeafId, u16)>,
    pub collective: Collective,
    pub runs: Vec<Run>,
    /// The phase slots of its flows (bit per [`dense_phase`]), and the
    /// rate of its first (a job's flows have one).
    pub phases: u32,
    pub rate: Option<f64>,
    /// Whether its flows have one share whose weight is its rate (ring,
    /// all-to-all): then its weight on a link is its rate there, to the
    /// bit (the same adds of the same number), which is its peak.
    pub weight_is_rate: bool,
    /// Its leaves' sides (`2 l`, `2 l + 1`), leaves in order.
    pub sides: Vec<usize>,
    /// Per side with flows between leaves: per rate, the most flows in
    /// any one phase ([`Tally::most`]); made when first asked.
    pub most: Option<Most>,
}

/// Per leaf side: per rate, the most flows in any one phase.
pub(super) type Most = Vec<(usize, Vec<(f64, u32)>)>;

impl JobRuns {
    /// `placed` (server, leaf, port per GPU in rank order) with its
    /// collective's `blocks`: consecutive flows of one leaf pair and one
    /// share are one run (flows inside a leaf in between are switched by
    /// the leaf and change no link).
    pub fn new(
        placed: &[(ServerId, LeafId, u16)],
        collective: Collective,
        blocks: &[Block<'_>],
    ) -> Self {
        let mut runs: Vec<Run> = Vec::new();
        for b in blocks {
            let (Some(&s), Some(&d)) = (b.src.first(), b.dst.first()) else {
                continue;
            };
            let (from, to) = (placed[s as usize].1, placed[d as usize].1);
            push_run(&mut runs, from, to, b.share, b.count());
        }
        let first = blocks.first().map(|b| b.share);
        let phases = (blocks.iter()).fold(0, |m, b| m | 1 << dense_phase(b.share.phase));
        let one_share = blocks.iter().all(|b| Some(b.share) == first);
        Self::of_runs(placed, collective, runs, phases, first, one_share)
    }

    /// The job of `runs`, its flows in `phases`, the first with share
    /// `first` (none: no flows), all with it when `one_share`.
    fn of_runs(
        placed: &[(ServerId, LeafId, u16)],
        collective: Collective,
        runs: Vec<Run>,
        phases: u32,
        first: Option<Share>,
        one_share: bool,
    ) -> Self {
        JobRuns {
            placed: placed.to_vec(),
            collective,
            runs,
            phases,
            rate: first.map(|s| s.rate),
            weight_is_rate: one_share
                && first.is_some_and(|s| s.weight.to_bits() == s.rate.to_bits()),
            sides: sides(placed),
            most: None,
        }
    }

    /// An all-to-all job's runs without its blocks: the runs
    /// [`JobRuns::new`] makes of [`super::traffic`]'s blocks (every server
    /// to every other, in server order), counted per stretch of
    /// consecutive servers on one leaf instead of per server pair. A
    /// server's blocks to the servers of one stretch are consecutive and
    /// join one leaf pair, so they merge into one run of their flows added
    /// up; blocks inside a leaf are skipped in both. For an all-to-all job
    /// of 240 GPUs on 30 servers under 5 leaves, 870 blocks become 150
    /// steps, and the blocks are never made (tested against
    /// [`JobRuns::new`]). `None` on fewer than two servers (no blocks).
    pub fn alltoall(placed: &[(ServerId, LeafId, u16)], servers: &[Vec<u32>]) -> Option<Self> {
        if servers.len() < 2 {
            return None;
        }
        let leaf = |members: &[u32]| placed[members[0] as usize].1;
        let mut stretches: Vec<(LeafId, u32)> = Vec::new();
        for members in servers {
            let (l, n) = (leaf(members), members.len() as u32);
            match stretches.last_mut() {
                Some(s) if s.0 == l => s.1 += n,
                _ => stretches.push((l, n)),
            }
        }
        let weight = super::traffic::alltoall_weight(servers);
        let share = Share {
            weight,
            phase: 0,
            rate: weight,
        };
        let mut runs: Vec<Run> = Vec::new();
        for members in servers {
            let (from, n) = (leaf(members), members.len() as u32);
            for &(to, m) in &stretches {
                push_run(&mut runs, from, to, share, n * m);
            }
        }
        let phases = 1 << dense_phase(share.phase);
        Some(Self::of_runs(
            placed,
            Collective::Alltoall,
            runs,
            phases,
            Some(share),
            true,
        ))
    }

    /// Whether this is `placed` with `collective`.
    pub fn is(&self, placed: &[(ServerId, LeafId, u16)], collective: Collective) -> bool {
        self.collective == collective && self.placed == placed
    }

    /// Per side with flows: per rate, the most flows in any one phase,
    /// counted in `tally` (scratch) the first time.
    pub fn most(&mut self, tally: &mut Tally, leaves: usize) -> &Most {
        self.most.get_or_insert_with(|| {
            tally.start(leaves);
            for r in &self.runs {
                let ph = dense_phase(r.share.phase);
                tally.add(2 * r.from.index(), ph, r.share.rate, r.flows);
                tally.add(2 * r.to.index() + 1, ph, r.share.rate, r.flows);
            }
            let sides = tally.sides.clone();
            sides.into_iter().map(|s| (s, tally.most(s))).collect()
        })
    }
}

/// `flows` from leaf `from` to `to` with `share`, next after `runs`: added
/// to the last run when it is of the same leaf pair and share, a new run
/// otherwise; none inside a leaf (switched by the leaf, they change no
/// link, and the runs on either side of them still join).
fn push_run(runs: &mut Vec<Run>, from: LeafId, to: LeafId, share: Share, flows: u32) {
    if from == to {
        return;
    }
    match runs.last_mut() {
        Some(r) if (r.from, r.to, r.share) == (from, to, share) => r.flows += flows,
        _ => runs.push(Run {
            from,
            to,
            share,
            flows,
        }),
    }
}

/// The sides (`2 l`, `2 l + 1`) of the leaves of `placed`, leaves in order.
fn sides(placed: &[(ServerId, LeafId, u16)]) -> Vec<usize> {
    let mut leaves: Vec<usize> = placed.iter().map(|x| x.1.index()).collect();
    leaves.dedup(); // GPUs come leaf by leaf, mostly
    leaves.sort_unstable();
    leaves.dedup();
    leaves.iter().flat_map(|&l| [2 * l, 2 * l + 1]).collect()
}

/// Consecutive flows of one leaf pair and one share ([`JobRuns`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Run {
    pub from: LeafId,
    pub to: LeafId,
    pub share: Share,
    pub flows: u32,
}

/// A job's flows per leaf side (`2 l` up, `2 l + 1` down), phase and
/// rate, for the router's leaf check (`Router::leaves_have_room`): dense by side and phase (a
/// job's flows of one phase have one rate, but for uneven all-to-all
/// weights), other rates of a slot in a short list. Scratch: kept
/// between routes.
#[derive(Debug, Clone, Default)]
pub(super) struct Tally {
    /// Per (side, phase): the rate's bits and its flows (0: none yet).
    slots: Vec<(u64, u32)>,
    /// The sides with flows, in the order met, and whether each has.
    pub sides: Vec<usize>,
    met: Vec<bool>,
    /// (side, phase, rate's bits, flows) of a slot's other rates.
    other: Vec<(usize, usize, u64, u32)>,
}

impl Tally {
    pub fn start(&mut self, leaves: usize) {
        for side in self.sides.drain(..) {
            self.slots[side * PHASES..(side + 1) * PHASES].fill((0, 0));
            self.met[side] = false;
        }
        self.slots.resize(2 * leaves * PHASES, (0, 0));
        self.met.resize(2 * leaves, false);
        self.other.clear();
    }

    pub fn add(&mut self, side: usize, ph: usize, rate: f64, n: u32) {
        let bits = rate.to_bits();
        if !self.met[side] {
            self.met[side] = true;
            self.sides.push(side);
        }
        match &mut self.slots[side * PHASES + ph] {
            (r, k) if *k == 0 || *r == bits => (*r, *k) = (bits, *k + n),
            _ => match (self.other.iter_mut()).find(|o| (o.0, o.1, o.2) == (side, ph, bits)) {
                Some(o) => o.3 += n,
                None => self.other.push((side, ph, bits, n)),
            },
        }
    }

    /// Per rate, the most flows `side` has in any one phase.
    pub fn most(&self, side: usize) -> Vec<(f64, u32)> {
        let slots = &self.slots[side * PHASES..(side + 1) * PHASES];
        let other = (self.other.iter())
            .filter(|o| o.0 == side)
            .map(|o| (o.2, o.3));
        let mut most: Vec<(u64, u32)> = Vec::new();
        for (r, n) in slots.iter().copied().filter(|s| s.1 > 0).chain(other) {
            match most.iter_mut().find(|m| m.0 == r) {
                Some(m) => m.1 = m.1.max(n),
                None => most.push((r, n)),
            }
        }
        most.into_iter()
            .map(|(r, n)| (f64::from_bits(r), n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rand::seq::SliceRandom;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    use super::*;
    use crate::network::traffic::Traffic;

    /// GPUs on 1-11 servers (1-8 GPUs each, each on one of 1-5 leaves, so
    /// a leaf's servers are often apart), server by server, or shuffled.
    fn random_job(rng: &mut Pcg64) -> Vec<(ServerId, LeafId, u16)> {
        let servers = rng.random_range(1..12u32);
        let leaves = rng.random_range(1..6u32);
        let mut placed = Vec::new();
        for s in 0..servers {
            let leaf = LeafId(rng.random_range(0..leaves));
            for port in 0..rng.random_range(1..9u16) {
                placed.push((ServerId(s), leaf, port));
            }
        }
        if rng.random_bool(0.3) {
            placed.shuffle(rng);
        }
        placed
    }

    /// [`JobRuns::alltoall`] makes exactly the job [`JobRuns::new`] makes
    /// of the blocks, on random placements.
    #[test]
    fn alltoall_runs_are_the_runs_of_its_blocks() {
        let mut rng = Pcg64::seed_from_u64(15);
        let mut compared = 0;
        for _ in 0..2000 {
            let placed = random_job(&mut rng);
            let servers: Vec<ServerId> = placed.iter().map(|p| p.0).collect();
            let traffic = Traffic::new(&servers);
            let blocks = traffic.blocks(Collective::Alltoall);
            let slow = JobRuns::new(&placed, Collective::Alltoall, &blocks);
            let Some(fast) = JobRuns::alltoall(&placed, traffic.servers()) else {
                assert!(blocks.is_empty());
                continue;
            };
            compared += 1;
            assert_eq!(fast.runs, slow.runs, "{placed:?}");
            assert_eq!(
                (
                    fast.phases,
                    fast.rate.map(f64::to_bits),
                    fast.weight_is_rate
                ),
                (
                    slow.phases,
                    slow.rate.map(f64::to_bits),
                    slow.weight_is_rate
                )
            );
            assert_eq!(fast.sides, slow.sides);
        }
        assert!(compared > 1500);
    }
}
