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
            if from == to {
                continue; // switched inside the leaf
            }
            match runs.last_mut() {
                Some(r) if (r.from, r.to, r.share) == (from, to, b.share) => r.flows += b.count(),
                _ => runs.push(Run {
                    from,
                    to,
                    share: b.share,
                    flows: b.count(),
                }),
            }
        }
        let mut leaves: Vec<usize> = placed.iter().map(|x| x.1.index()).collect();
        leaves.dedup(); // GPUs come leaf by leaf, mostly
        leaves.sort_unstable();
        leaves.dedup();
        JobRuns {
            placed: placed.to_vec(),
            collective,
            runs,
            phases: (blocks.iter()).fold(0, |m, b| m | 1 << dense_phase(b.share.phase)),
            rate: blocks.first().map(|b| b.share.rate),
            weight_is_rate: blocks.first().is_some_and(|f| {
                let s = f.share;
                s.weight.to_bits() == s.rate.to_bits() && blocks.iter().all(|b| b.share == s)
            }),
            sides: leaves.iter().flat_map(|&l| [2 * l, 2 * l + 1]).collect(),
            most: None,
        }
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

/// Consecutive flows of one leaf pair and one share ([`JobRuns`]).
#[derive(Debug, Clone, Copy)]
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
