//! Weighted max-min fair sharing of link capacity ("water-filling").
//!
//! The fluid model of issue 14. A class is one job's communication: on
//! each link `l` it crosses it puts `w_l` (the sum of its flows' weights
//! there, in NIC line rates, as on the job's own full-bandwidth network).
//! A collective advances in lock-step, as fast as its slowest flow, so all
//! of a job's flows run at the same fraction `lambda` in `(0, 1]` of their
//! isolated rates: the class gets `w_l * lambda` on every link. The
//! allocation is max-min fair in `lambda` (Bertsekas and Gallager, *Data
//! Networks*, 2nd ed., Section 6.5.2, "progressive filling", with the
//! per-link weights of weighted fair queueing): all `lambda` rise together
//! from 0; when a link fills, the classes crossing it are frozen at that
//! level; the rest go on rising; no class goes above 1 (its isolated rate:
//! the NIC limit, which the model does not represent as a link because a
//! NIC carries one job's traffic only, see [`super`]).
//!
//! This is the sharing rule of the paper's simulator (RapidNetSim: each flow
//! gets a link's bandwidth divided by the flows on it, a step lasts as long
//! as its slowest flow), made max-min fair so that capacity a job
//! bottlenecked elsewhere cannot use goes to the others, as TCP-like and
//! RoCE DCQCN congestion control tend to.
//!
//! The result satisfies, and the tests check on random instances:
//! * feasibility: on every link the rates add up to at most its capacity;
//! * max-min fairness: every class has `lambda = 1` or crosses a full link
//!   on which no class has a larger `lambda` (its bottleneck).
//!
//! Cost: each link enters a binary heap once per change of its load, so a
//! solve is `O(I log L)` for `I` class-link incidences and `L` links.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A class: the links it crosses (indices into the capacities, each at
/// most once) with its weight on each. A class on no link is never limited
/// (`lambda = 1`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Class {
    pub links: Vec<(usize, f64)>,
    /// Under [`crate::network::routes::Routing::Peak`] only: the job's
    /// peak over its phases on each of its links (the solve ignores it).
    pub peaks: Vec<(usize, f64)>,
}

impl Class {
    /// A class on `links`, with no peaks.
    pub fn new(links: Vec<(usize, f64)>) -> Self {
        Class {
            links,
            peaks: Vec::new(),
        }
    }
}

/// Relative tolerance: a link counts as full within it.
const EPS: f64 = 1e-12;

/// `lambda` of every class (same order), each in `(0, 1]`.
///
/// Weights must be positive (at least about `1e-9`) and capacities
/// positive and finite; a class listing a link index beyond `capacity` is a
/// caller bug, and is treated as not crossing that link.
pub fn solve(capacity: &[f64], classes: &[Class]) -> Vec<f64> {
    let mut links: Vec<LinkLoad> = capacity
        .iter()
        .map(|&c| LinkLoad {
            capacity: c,
            frozen: 0.0,
            active: 0.0,
            version: 0,
        })
        .collect();
    let mut on_link: Vec<Vec<usize>> = vec![Vec::new(); capacity.len()];
    for (i, c) in classes.iter().enumerate() {
        for &(l, w) in c.links.iter().filter(|(l, _)| *l < capacity.len()) {
            links[l].active += w;
            on_link[l].push(i);
        }
    }
    let mut heap: BinaryHeap<Fill> = links
        .iter()
        .enumerate()
        .filter_map(|(l, load)| {
            load.fill_level().map(|level| Fill {
                level,
                link: l,
                version: 0,
            })
        })
        .collect();
    let mut lambda = vec![f64::NAN; classes.len()];
    while let Some(Fill {
        level,
        link,
        version,
    }) = heap.pop()
    {
        if version != links[link].version {
            continue; // stale: the link's load changed since
        }
        if level >= 1.0 {
            break; // every class still rising reaches its isolated rate
        }
        for &i in &on_link[link] {
            if !lambda[i].is_nan() {
                continue;
            }
            lambda[i] = level;
            let c = &classes[i];
            for &(l, w) in c
                .links
                .iter()
                .filter(|(l, _)| *l < capacity.len() && *l != link)
            {
                let load = &mut links[l];
                load.active -= w;
                load.frozen += w * level;
                load.version += 1;
                if let Some(level) = load.fill_level() {
                    heap.push(Fill {
                        level,
                        link: l,
                        version: load.version,
                    });
                }
            }
        }
        links[link].version += 1; // full: never popped again
    }
    for l in &mut lambda {
        if l.is_nan() {
            *l = 1.0;
        }
    }
    lambda
}

#[derive(Debug, Clone, Copy)]
struct LinkLoad {
    capacity: f64,
    /// Rate of the classes already frozen.
    frozen: f64,
    /// Weight of the classes still rising.
    active: f64,
    version: u64,
}

impl LinkLoad {
    /// The common `lambda` at which this link fills, if anything rises on it.
    fn fill_level(&self) -> Option<f64> {
        if self.active <= EPS * self.capacity.max(1.0) {
            return None;
        }
        Some(((self.capacity - self.frozen) / self.active).max(0.0))
    }
}

/// A heap entry: lowest level first.
#[derive(Debug, Clone, Copy)]
struct Fill {
    level: f64,
    link: usize,
    version: u64,
}

impl PartialEq for Fill {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Fill {}
impl PartialOrd for Fill {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Fill {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap. Ties by link, for determinism.
        other
            .level
            .total_cmp(&self.level)
            .then(other.link.cmp(&self.link))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn class(weight: f64, links: &[usize]) -> Class {
        Class::new(links.iter().map(|&l| (l, weight)).collect())
    }

    #[test]
    fn alone_a_class_runs_at_its_isolated_rate() {
        assert_eq!(solve(&[1.0], &[class(1.0, &[0])]), [1.0]);
        assert_eq!(
            solve(&[1.0], &[class(0.5, &[0]), class(0.5, &[0])]),
            [1.0, 1.0]
        );
        assert_eq!(solve(&[], &[class(1.0, &[])]), [1.0]);
    }

    #[test]
    fn two_equal_flows_on_one_link_halve() {
        assert_eq!(
            solve(&[1.0], &[class(1.0, &[0]), class(1.0, &[0])]),
            [0.5, 0.5]
        );
    }

    #[test]
    fn capacity_a_bottlenecked_flow_cannot_use_goes_to_the_others() {
        // Link 0 carries a, b, c; link 1 carries c and d. Link 1 fills
        // first (c, d at 0.5); a and b share what c leaves on link 0.
        let l = solve(
            &[1.5, 1.0],
            &[
                class(1.0, &[0]),
                class(1.0, &[0]),
                class(1.0, &[0, 1]),
                class(1.0, &[1]),
            ],
        );
        assert_eq!(l, [0.5, 0.5, 0.5, 0.5]);
        let l = solve(
            &[2.0, 1.0],
            &[
                class(1.0, &[0]),
                class(1.0, &[0]),
                class(1.0, &[0, 1]),
                class(1.0, &[1]),
            ],
        );
        assert_eq!(l, [0.75, 0.75, 0.5, 0.5]);
    }

    #[test]
    fn a_job_runs_as_fast_as_its_slowest_link() {
        // Job a crosses links 0 and 1, job b only link 1 (weight 2 there):
        // link 1 fills at 1/3 for both; link 0 keeps spare capacity.
        let a = Class::new(vec![(0, 1.0), (1, 1.0)]);
        let b = class(2.0, &[1]);
        let l = solve(&[1.0, 1.0], &[a, b]);
        assert!((l[0] - 1.0 / 3.0).abs() < 1e-12 && (l[1] - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn weights_share_in_proportion() {
        // Weights 3 and 1 on a link of 2: lambda 0.5 each, rates 1.5 and 0.5.
        assert_eq!(
            solve(&[2.0], &[class(3.0, &[0]), class(1.0, &[0])]),
            [0.5, 0.5]
        );
    }

    fn check(capacity: &[f64], classes: &[Class], lambda: &[f64]) -> Result<(), TestCaseError> {
        let mut load = vec![0.0; capacity.len()];
        let mut top = vec![0.0f64; capacity.len()];
        for (c, &l) in classes.iter().zip(lambda) {
            prop_assert!(l > 0.0 && l <= 1.0, "lambda {l}");
            for &(k, w) in &c.links {
                load[k] += w * l;
                top[k] = top[k].max(l);
            }
        }
        let full = |k: usize| load[k] >= capacity[k] * (1.0 - 1e-9);
        for k in 0..capacity.len() {
            prop_assert!(
                load[k] <= capacity[k] * (1.0 + 1e-9),
                "link {k} over: {}",
                load[k]
            );
        }
        for (i, (c, &l)) in classes.iter().zip(lambda).enumerate() {
            let bottleneck = c
                .links
                .iter()
                .any(|&(k, _)| full(k) && top[k] <= l * (1.0 + 1e-9));
            prop_assert!(l == 1.0 || bottleneck, "class {i} at {l} has no bottleneck");
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn feasible_and_max_min_fair_on_random_instances(
            capacity in proptest::collection::vec(0.1f64..4.0, 1..12),
            raw in proptest::collection::vec(
                proptest::collection::vec((0usize..12, 0.05f64..2.0), 0..5), 0..30),
        ) {
            let classes: Vec<Class> = raw
                .into_iter()
                .map(|mut links| {
                    links.retain(|&(k, _)| k < capacity.len());
                    links.sort_by_key(|&(k, _)| k);
                    links.dedup_by_key(|&mut (k, _)| k);
                    Class::new(links)
                })
                .collect();
            let lambda = solve(&capacity, &classes);
            check(&capacity, &classes, &lambda)?;
        }
    }
}
