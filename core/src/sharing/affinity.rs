//! One time shift per job across links: Cassini's Affinity graph (seed
//! 001, Section 4.4.1, Algorithm 1 and Theorem 1; issue 16, item 3).
//!
//! The graph is bipartite: jobs on one side, shared links (links carrying
//! more than one job) on the other, an edge `(j, l)` weighted by job `j`'s
//! time shift on link `l` from [`super::circle::fit`]. A BFS from a
//! reference job (shift 0) visits jobs only; crossing from job `j` through
//! link `l` to job `k` sets
//!
//! ```text
//! t_k = (t_j - w(j, l) + w(l, k)) mod iter_k
//! ```
//!
//! so every pair of jobs on a link keeps the relative shift that link's
//! rotation gave it (Eq. 4.6) when the graph has no loop. The thesis picks
//! the reference at random; here it is the component's first job in input
//! order, so the result is deterministic.
//!
//! **Loops.** With a loop two paths to a job may disagree, and Algorithm 2
//! drops such placement candidates. Before rejecting, links that carry
//! exactly the same set of jobs with the same shifts are merged into one
//! (two links of one slice, say, solved as the same problem): they impose
//! the same relative shifts, so they cannot disagree. What remains with a
//! cycle is rejected ([`Loop`]).
//!
//! Modulo: a job's demand repeats every iteration, so its shift is taken
//! modulo its own iteration time (as Algorithm 1 does), which moves it by
//! whole iterations and leaves every link's demand pattern, and score, as
//! its rotation had it (checked in the tests).

use std::collections::{BTreeMap, VecDeque};

use thiserror::Error;

/// A shared link: `(job index, that job's shift on this link in ms)`.
pub type SharedLink = Vec<(usize, u32)>;

/// The jobs of a connected component with a loop (Algorithm 2 drops the
/// candidate).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the affinity graph has a loop through jobs {jobs:?}: no single time shift per job keeps every link's rotation")]
pub struct Loop {
    pub jobs: Vec<usize>,
}

/// One time shift per job (ms, `< iteration_ms[j]`; `None` for a job on no
/// shared link), from the per-link shifts of `links` (module doc).
pub fn time_shifts(iteration_ms: &[u32], links: &[SharedLink]) -> Result<Vec<Option<u32>>, Loop> {
    let links = merged(links);
    let n = iteration_ms.len();
    let mut by_job: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (l, link) in links.iter().enumerate() {
        for &(j, _) in link {
            by_job[j].push(l);
        }
    }
    let mut shift: Vec<Option<u32>> = vec![None; n];
    let mut seen_link = vec![false; links.len()];
    for start in 0..n {
        if shift[start].is_some() || by_job[start].is_empty() {
            continue;
        }
        let (mut jobs, mut edges, mut nlinks) = (vec![start], 0usize, 0usize);
        shift[start] = Some(0);
        let mut queue = VecDeque::from([start]);
        while let Some(j) = queue.pop_front() {
            let tj = i64::from(shift[j].unwrap_or(0));
            for &l in &by_job[j] {
                if !seen_link[l] {
                    seen_link[l] = true;
                    nlinks += 1;
                    edges += links[l].len();
                }
                let wjl = weight(&links[l], j);
                for &(k, wlk) in &links[l] {
                    if shift[k].is_none() {
                        let it = i64::from(iteration_ms[k].max(1));
                        let tk = (tj - wjl + i64::from(wlk)).rem_euclid(it);
                        shift[k] = Some(tk as u32);
                        jobs.push(k);
                        queue.push_back(k);
                    }
                }
            }
        }
        // A connected bipartite graph is a tree iff edges = vertices - 1.
        if edges + 1 != jobs.len() + nlinks {
            jobs.sort_unstable();
            return Err(Loop { jobs });
        }
    }
    Ok(shift)
}

fn weight(link: &SharedLink, j: usize) -> i64 {
    link.iter()
        .find(|&&(k, _)| k == j)
        .map_or(0, |&(_, w)| i64::from(w))
}

/// `links` with those carrying the same jobs at the same shifts merged
/// (first one kept), jobs sorted within each.
fn merged(links: &[SharedLink]) -> Vec<SharedLink> {
    let mut out: BTreeMap<SharedLink, ()> = BTreeMap::new();
    let mut order = Vec::new();
    for l in links {
        let mut l = l.clone();
        l.sort_unstable();
        l.dedup_by_key(|x| x.0);
        if out.insert(l.clone(), ()).is_none() {
            order.push(l);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Rng;
    use crate::sharing::circle::{fit, score_at, OnLink};
    use crate::sharing::profile::Profile;

    #[test]
    fn fig_4_7_a_job_on_two_links_gets_one_shift_that_keeps_both() {
        // j0 shares l0 with j1, j1 shares l1 with j2 (Fig. 4.7/4.8).
        let iters = [40, 60, 30];
        let links = vec![vec![(0, 0), (1, 25)], vec![(1, 5), (2, 12)]];
        let t = time_shifts(&iters, &links).unwrap();
        assert_eq!(t, vec![Some(0), Some(25), Some(2)]);
        // Relative shift on l1 kept: t2 - t1 = 12 - 5 (mod 30 for j2).
        let (t1, t2) = (t[1].unwrap(), t[2].unwrap());
        assert_eq!((t2 + 30 - t1 % 30) % 30, 7);
    }

    #[test]
    fn loops_are_rejected_unless_they_are_the_same_link_twice() {
        let iters = [40, 40];
        // Two links with the same jobs and shifts: merged, no loop.
        let same = vec![vec![(0, 0), (1, 10)], vec![(1, 10), (0, 0)]];
        assert_eq!(time_shifts(&iters, &same).unwrap(), vec![Some(0), Some(10)]);
        // The same jobs with other shifts: a loop, and they disagree.
        let other = vec![vec![(0, 0), (1, 10)], vec![(0, 0), (1, 20)]];
        assert_eq!(time_shifts(&iters, &other), Err(Loop { jobs: vec![0, 1] }));
        // A triangle through three links.
        let tri = vec![
            vec![(0, 0), (1, 1)],
            vec![(1, 0), (2, 1)],
            vec![(2, 0), (0, 1)],
        ];
        assert!(time_shifts(&[10, 10, 10], &tri).is_err());
        // Jobs on no shared link get no shift.
        assert_eq!(time_shifts(&[10, 10], &[]).unwrap(), vec![None, None]);
    }

    #[test]
    fn eq_4_6_every_link_keeps_its_score_under_the_global_shifts() {
        // Random loop-free graphs: each new link joins one job already in
        // the graph to new jobs, so the graph stays a tree.
        let mut rng = Rng(23);
        for _ in 0..40 {
            let mut profiles: Vec<Profile> = Vec::new();
            let new_job = |rng: &mut Rng, profiles: &mut Vec<Profile>| {
                let iter = [20u32, 30, 40, 60, 255][rng.below(5) as usize];
                profiles.push(Profile::up_down(iter, rng.below(50) as f64 / 100.0));
                profiles.len() - 1
            };
            let first = new_job(&mut rng, &mut profiles);
            let mut members: Vec<Vec<usize>> = Vec::new();
            for l in 0..4 {
                let anchor = if l == 0 {
                    first
                } else {
                    rng.below(profiles.len() as u64) as usize
                };
                let mut m = vec![anchor];
                for _ in 0..1 + rng.below(2) {
                    m.push(new_job(&mut rng, &mut profiles));
                }
                members.push(m);
            }
            let on = |m: &[usize]| -> Vec<OnLink> {
                m.iter()
                    .map(|&j| OnLink {
                        profile: &profiles[j],
                        load: 1.0,
                    })
                    .collect()
            };
            let fits: Vec<_> = members.iter().map(|m| fit(&on(m), 1.0)).collect();
            let links: Vec<SharedLink> = members
                .iter()
                .zip(&fits)
                .map(|(m, f)| m.iter().copied().zip(f.shifts_ms.iter().copied()).collect())
                .collect();
            let iters: Vec<u32> = profiles.iter().map(Profile::iteration_ms).collect();
            let t = time_shifts(&iters, &links).unwrap();
            for (m, f) in members.iter().zip(&fits) {
                let global: Vec<u32> = m.iter().map(|&j| t[j].unwrap()).collect();
                let got = score_at(&on(m), 1.0, &global);
                assert!(
                    (got - f.score).abs() < 1e-9,
                    "link {m:?}: score {} with its own shifts, {got} with the global ones",
                    f.score
                );
            }
        }
    }
}
