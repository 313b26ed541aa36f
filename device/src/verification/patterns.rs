//! The Leaf-wise permutation traffic patterns of the paper's Section 5.3.
//!
//! Each pattern is a list of steps; each step is a list of (src rank, dst
//! rank) flows that run at the same time. Ranks index the job's GPUs in rank
//! order (GPUs grouped by leaf), as the paper's proofs assume.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Ring all-reduce: rank i sends to rank i+1 (mod N), every step alike.
    Ring,
    /// Recursive halving-doubling: step k pairs rank i with i XOR 2^k; when N
    /// is not a power of two, the first N - 2^floor(log2 N) ranks first send to
    /// rank i + 2^floor(log2 N).
    HalvingDoubling,
    /// Pair-wise all-to-all: in step t rank i sends to rank i+t+1 (mod N).
    PairwiseAllToAll,
}

pub const ALL_PATTERNS: [Pattern; 3] = [
    Pattern::Ring,
    Pattern::HalvingDoubling,
    Pattern::PairwiseAllToAll,
];

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pattern::Ring => "ring all-reduce",
            Pattern::HalvingDoubling => "halving-doubling",
            Pattern::PairwiseAllToAll => "pair-wise all-to-all",
        })
    }
}

impl Pattern {
    /// The flows of every step for a job of `n` ranks.
    pub fn steps(self, n: usize) -> Vec<Vec<(usize, usize)>> {
        if n < 2 {
            return Vec::new();
        }
        match self {
            Pattern::Ring => vec![(0..n).map(|i| (i, (i + 1) % n)).collect()],
            Pattern::PairwiseAllToAll => (0..n - 1)
                .map(|t| (0..n).map(|i| (i, (i + t + 1) % n)).collect())
                .collect(),
            Pattern::HalvingDoubling => {
                let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
                let mut steps = Vec::new();
                if p < n {
                    steps.push((0..n - p).map(|i| (i, i + p)).collect());
                }
                let mut k = 1;
                while k < p {
                    steps.push((0..p).map(|i| (i, i ^ k)).collect());
                    k <<= 1;
                }
                steps
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_permutations_of_the_ranks() {
        for n in [2, 3, 8, 12, 16] {
            for p in ALL_PATTERNS {
                for step in p.steps(n) {
                    let mut srcs: Vec<_> = step.iter().map(|f| f.0).collect();
                    let mut dsts: Vec<_> = step.iter().map(|f| f.1).collect();
                    srcs.dedup();
                    dsts.sort();
                    dsts.dedup();
                    assert_eq!(srcs.len(), step.len(), "{p} n={n}: a rank sends twice");
                    assert_eq!(dsts.len(), step.len(), "{p} n={n}: a rank receives twice");
                    assert!(step.iter().all(|&(a, b)| a != b && a < n && b < n));
                }
            }
        }
        assert_eq!(Pattern::HalvingDoubling.steps(8).len(), 3);
        assert_eq!(Pattern::HalvingDoubling.steps(12).len(), 4);
        assert_eq!(
            Pattern::HalvingDoubling.steps(12)[0],
            vec![(0, 8), (1, 9), (2, 10), (3, 11)]
        );
        assert_eq!(Pattern::PairwiseAllToAll.steps(4).len(), 3);
    }
}
