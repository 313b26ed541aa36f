//! Which size a job is placed at: its own, or a larger slice shape whose
//! extra GPUs it holds idle (issue 13, items 2 and 3).
//!
//! vClos and OCS-vClos build a virtual Clos of `l` virtual leaves of the
//! same number of whole servers each (paper Section 6, Algorithm 3;
//! Section 7 and Appendix A.3 for OCS-vClos, where a leaf may host several
//! virtual leaves). A job of `k` servers therefore needs a divisor of `k`
//! that the fabric can carry: a prime `k` above a leaf's server count has
//! one shape only (`k` virtual leaves of one server), and on some fabrics
//! none at all. The paper already rounds a request UP to whole servers
//! (`ReqSevNum = ceil(N / T)`, Algorithms 1-2 line 2) and holds the unused
//! GPUs of the last server; this module extends that rounding in two ways,
//! both visible in the decision (`requested_gpus`, and
//! [`crate::decision::Decision::reserved_idle_gpus`]):
//!
//! 1. **A size with no slice on the empty fabric** is placed at the
//!    smallest larger size that has one. A placement only uses free
//!    resources and the empty fabric has all of them (every OCS port idle,
//!    so re-patchable: Section 7), so a size the empty fabric refuses is
//!    refused forever; waiting for it would only drain the fabric. Decided
//!    once per size by a probe placement on the empty fabric, memoised
//!    ([`Sizes`]). A probe whose exact search was cut off proves nothing and
//!    counts as "has a slice" (the job keeps its size and waits). If no
//!    size up to the whole fabric has a slice, the job is refused
//!    ([`super::PlacementError::NoShape`]).
//! 2. **`round_up`** ([`super::SliceOptions`], `--round-up SERVERS`; 0 by default, the
//!    paper's behaviour): when the job's size has no FREE slice now, up to
//!    that many more whole servers may be taken, the first larger size with
//!    a free slice wins. It trades idle GPUs for waiting: under FIFO a
//!    blocked head holds up the whole queue (docs/performance.md, "Placement
//!    at scale").

use std::collections::HashMap;

use crate::state::FabricState;

/// What the empty fabric says about one size (probe result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// A slice of this size exists on the empty fabric.
    Yes,
    /// Proven: none exists.
    No,
    /// The search was cut off: unknown, treated as [`Probe::Yes`].
    Unknown,
}

/// A placer's memo: the empty fabric its probes run on (built once, on
/// first use) and their verdicts.
#[derive(Debug, Clone, Default)]
pub struct Sizes {
    /// Per grain ([`super::Grain`]: whole servers, GPUs).
    verdicts: [Verdicts; 2],
    empty: Option<FabricState>,
}

impl Sizes {
    /// The verdicts of `grain` and the shared empty fabric.
    pub(crate) fn for_grain(
        &mut self,
        grain: super::Grain,
    ) -> (&mut Verdicts, &mut Option<FabricState>) {
        let i = match grain {
            super::Grain::Servers => 0,
            super::Grain::Gpus => 1,
        };
        (&mut self.verdicts[i], &mut self.empty)
    }
}

/// Memoised empty-fabric verdicts, by size in units of the placer's
/// [`super::Grain`] (whole servers, or GPUs with partial servers).
#[derive(Debug, Clone, Default)]
pub struct Verdicts {
    has_slice: HashMap<u32, bool>,
}

impl Verdicts {
    /// Whether `k` servers have a slice on the empty fabric (probed once).
    pub fn has_slice(&mut self, k: u32, probe: &mut dyn FnMut(u32) -> Probe) -> bool {
        *self
            .has_slice
            .entry(k)
            .or_insert_with(|| probe(k) != Probe::No)
    }

    /// The smallest size `>= k` and `<= most` servers that has a slice on
    /// the empty fabric, if any.
    pub fn covering(
        &mut self,
        k: u32,
        most: u32,
        probe: &mut dyn FnMut(u32) -> Probe,
    ) -> Option<u32> {
        (k..=most).find(|&c| self.has_slice(c, probe))
    }

    /// Sizes probed so far (for tests: one probe per size).
    #[cfg(test)]
    pub fn probed(&self) -> usize {
        self.has_slice.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_finds_the_smallest_size_with_a_slice_and_probes_each_once() {
        let calls = std::cell::Cell::new(0);
        let mut probe = |k: u32| {
            calls.set(calls.get() + 1);
            match k {
                5 | 7 => Probe::No,
                9 => Probe::Unknown,
                _ => Probe::Yes,
            }
        };
        let mut s = Verdicts::default();
        assert_eq!(s.covering(5, 10, &mut probe), Some(6));
        assert_eq!(s.covering(7, 10, &mut probe), Some(8));
        assert_eq!(s.covering(5, 10, &mut probe), Some(6));
        // A cut-off probe is not a proof: the size keeps its own shape.
        assert_eq!(s.covering(9, 10, &mut probe), Some(9));
        // Nothing up to the bound: none.
        assert_eq!(s.covering(7, 7, &mut probe), None);
        assert_eq!(s.probed(), 5);
        assert_eq!(calls.get(), 5);
    }
}
