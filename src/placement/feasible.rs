//! Whether a job size can ever be placed: decided once per size, on the
//! empty fabric, never by draining the fabric (issue 13, item 2).
//!
//! A placement only ever uses free resources, and the empty fabric has every
//! GPU, port and link free and every OCS port idle (re-patchable, paper
//! Section 7: only idle links are rewired). So any decision a policy can make
//! on a partly used fabric it can also make on the empty one, and a size
//! the policy *proves* blocked on the empty fabric is blocked forever: the
//! paper's vClos shapes need the same number of servers under every leaf of
//! the slice (Section 6, `ReqSevNum` rounded to whole servers), so e.g. 181
//! servers (a prime above a leaf's server count) has no shape at all.
//!
//! "Proves" matters: OCS-vClos's exact Stage 3 search runs within a node
//! budget ([`crate::placement::stage3`]); a "blocked" reached after a cutoff
//! is not a proof, and the verdict is then [`Verdict::Unknown`] (the job
//! waits, as before). Verdicts are memoised per size: one probe placement
//! per distinct size, whatever the trace length.

use std::collections::HashMap;
use std::sync::Arc;

use super::{placer, Blocked, JobRequest, Outcome, Placer, Policy};
use crate::names::JobId;
use crate::topology::Topology;

/// What the empty fabric says about a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It has a slice of this size (so the job only waits for room).
    Placeable,
    /// Proven: no slice of this size exists even on the empty fabric.
    Never(Blocked),
    /// The probe's search was cut off, or the probe failed: treat as placeable.
    Unknown,
}

/// Memoised verdicts for one policy on one fabric.
#[derive(Debug)]
pub struct Feasibility {
    policy: Policy,
    topo: Arc<Topology>,
    memo: HashMap<u32, Verdict>,
}

impl Feasibility {
    pub fn new(policy: Policy, topo: Arc<Topology>) -> Self {
        Feasibility {
            policy,
            topo,
            memo: HashMap::new(),
        }
    }

    /// For the policy and fabric of `placer` (None if it keeps no fabric
    /// state or its name is not a policy's).
    pub fn for_placer(placer: &dyn Placer) -> Option<Self> {
        let policy = Policy::ALL
            .into_iter()
            .find(|p| p.name() == placer.name())?;
        let topo = Arc::clone(placer.fabric()?.topology());
        Some(Self::new(policy, topo))
    }

    /// The verdict for a job of `gpus` GPUs (probed once per size).
    pub fn check(&mut self, gpus: u32) -> Verdict {
        if let Some(v) = self.memo.get(&gpus) {
            return *v;
        }
        let v = self.probe(gpus);
        self.memo.insert(gpus, v);
        v
    }

    fn probe(&self, gpus: u32) -> Verdict {
        let Ok(mut p) = placer(self.policy, Arc::clone(&self.topo)) else {
            return Verdict::Unknown;
        };
        let Ok(id) = JobId::new("feasibility-probe") else {
            return Verdict::Unknown;
        };
        match p.place(&JobRequest { id, gpus }) {
            Ok(Outcome::Placed(_)) => Verdict::Placeable,
            Ok(Outcome::Blocked(b)) if p.search_cutoffs() == 0 => Verdict::Never(b),
            _ => Verdict::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn testbed() -> Arc<Topology> {
        let text = include_str!("../../topologies/testbed.yaml");
        Arc::new(crate::topology::from_str("testbed.yaml", text).unwrap())
    }

    #[test]
    fn sizes_without_a_slice_shape_are_never_placeable_and_others_are() {
        // testbed: 2 leaves x 4 servers x 4 GPUs. vClos needs the same
        // number of servers under each leaf of a multi-leaf slice.
        let mut f = Feasibility::new(Policy::Vclos, testbed());
        for gpus in [1, 4, 8, 16, 24, 32] {
            assert_eq!(f.check(gpus), Verdict::Placeable, "{gpus} GPUs");
        }
        // 5 servers: more than a leaf holds, odd, so no even split.
        assert!(
            matches!(f.check(20), Verdict::Never(_)),
            "{:?}",
            f.check(20)
        );
        // The ideal network places any size that fits.
        let mut best = Feasibility::new(Policy::Best, testbed());
        assert_eq!(best.check(20), Verdict::Placeable);
    }
}
