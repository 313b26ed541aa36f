//! Refusals kept per state version (issue 13, item 1: "memoised
//! infeasibility per (shape, state version)").
//!
//! A backfilling replay asks its placer about one state many times: every
//! job behind a blocked head is tried, and jobs of one size, or a size one
//! job reaches by `--round-up` and another asks for outright, meet the same
//! multi-leaf search on the same free resources. The answer is a function
//! of the state's contents ([`FabricState::version`] names them), the size
//! and grain, and the search budget left in the call (OCS-vClos's
//! [`super::ocs`] call budget; vClos has none), so a "no slice" found once
//! is the answer again: it is kept with what the search spent and how
//! many of its shapes were cut off, and a repeat takes the same budget off
//! the call without searching, so every decision is the one the search
//! would have made. A repeat is not a new search: `search_cutoffs` counts
//! searches that ran out of budget, and a refusal resting on a kept cut-off
//! search is still unproven ([`Refusals::unsettled`]).
//!
//! Bounded: at most [`KEPT`] refusals, all dropped when full (the states
//! they were of are mostly gone by then).

use std::collections::HashMap;

use super::local::Grain;
use crate::state::FabricState;

/// Refusals kept before all are dropped.
pub const KEPT: usize = 4096;

/// (state version, grain, size, budget left in the call)
type Key = (u64, Grain, u32, u64);

/// One kept "no slice": the budget its search spent and the shapes it
/// left cut off.
#[derive(Debug, Clone, Copy)]
struct Refusal {
    spent: u64,
    cut: u64,
}

/// A placer's kept refusals (module doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct Refusals {
    kept: HashMap<Key, Refusal>,
    /// Repeats answered from a refusal whose search was cut off.
    repeated_cutoffs: u64,
}

impl Refusals {
    /// The multi-leaf search `search` for `gpus` of `grain` on `st`, with
    /// `budget` the call's budget left (in and out, 0 for none) and
    /// `cutoffs` the placer's count of cut-off searches; a refusal kept
    /// for the same question is answered without searching.
    pub fn search<P>(
        &mut self,
        (st, grain, gpus): (&FabricState, Grain, u32),
        budget: &mut u64,
        cutoffs: &mut u64,
        search: impl FnOnce(&mut u64, &mut u64) -> Option<P>,
    ) -> Option<P> {
        let key = (st.version(), grain, gpus, *budget);
        if let Some(r) = self.kept.get(&key) {
            *budget -= r.spent;
            self.repeated_cutoffs += r.cut;
            return None;
        }
        let (left, cut) = (*budget, *cutoffs);
        let found = search(budget, cutoffs);
        if found.is_none() {
            if self.kept.len() >= KEPT {
                self.kept.clear();
            }
            let r = Refusal {
                spent: left - *budget,
                cut: *cutoffs - cut,
            };
            self.kept.insert(key, r);
        }
        found
    }

    /// The count [`Refusals::unsettled`] adds: placing on a copy of the
    /// state (a forecast, a rearrangement) puts it back, as it does the
    /// placer's cutoffs.
    pub fn repeats_mut(&mut self) -> &mut u64 {
        &mut self.repeated_cutoffs
    }

    /// Cut-off searches, counting each repeat of a kept one again: how many
    /// refusals rest on a search that did not finish.
    pub fn unsettled(&self, cutoffs: u64) -> u64 {
        cutoffs + self.repeated_cutoffs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::uniform_topology;

    #[test]
    fn a_refusal_is_answered_again_with_its_cost_and_a_slice_never_kept() {
        let mut st = FabricState::new(uniform_topology(4, 4, 4, 0));
        let mut r = Refusals::default();
        let mut searches = 0;
        // A search that spends 30 of the budget, cuts off 2 shapes, finds
        // nothing.
        let mut refuse = |r: &mut Refusals, st: &FabricState, gpus, budget: &mut u64| {
            let cutoffs = &mut 10;
            let found = r.search((st, Grain::Servers, gpus), budget, cutoffs, |b, c| {
                searches += 1;
                *b -= 30;
                *c += 2;
                None::<()>
            });
            assert_eq!(found, None);
            *cutoffs
        };
        let mut budget = 100;
        assert_eq!(refuse(&mut r, &st, 8, &mut budget), 12);
        assert_eq!((budget, r.unsettled(0)), (70, 0));
        // The same question: no search, the same cost, its cutoffs counted
        // as unsettled only.
        let mut budget = 100;
        assert_eq!(refuse(&mut r, &st, 8, &mut budget), 10);
        assert_eq!((budget, r.unsettled(5)), (70, 7));
        // Another size, another budget left, another state: searched.
        refuse(&mut r, &st, 12, &mut 100);
        refuse(&mut r, &st, 8, &mut 99);
        let copy = st.clone();
        st = st.emptied();
        refuse(&mut r, &st, 8, &mut 100);
        // A clone of a state is the same question.
        refuse(&mut r, &copy, 8, &mut 100);
        assert_eq!(searches, 4);
        // A slice found is not kept.
        let mut found = 0;
        for _ in 0..2 {
            let got = r.search((&st, Grain::Servers, 16), &mut 100, &mut 0, |_, _| {
                found += 1;
                Some(())
            });
            assert_eq!(got, Some(()));
        }
        assert_eq!(found, 2);
    }

    #[test]
    fn refusals_are_bounded() {
        let st = FabricState::new(uniform_topology(4, 4, 4, 0));
        let mut r = Refusals::default();
        for gpus in 0..(KEPT as u32 + 10) {
            r.search(
                (&st, Grain::Servers, gpus),
                &mut 0,
                &mut 0,
                |_, _| None::<()>,
            );
            assert!(r.kept.len() <= KEPT);
        }
        assert_eq!(r.kept.len(), 10);
    }
}
