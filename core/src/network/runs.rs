//! A job's flows as a router goes over them: consecutive flows of one
//! leaf pair and one share as one run, and the job's flows counted per
//! leaf side, phase and rate for the strict router's leaf check
//! ([`super::routes`]).

use super::peak::PHASES;
use super::traffic::Share;
use crate::topology::LeafId;

/// Consecutive flows of one leaf pair and one share ([`super::routes::Router`]'s route in runs).
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
