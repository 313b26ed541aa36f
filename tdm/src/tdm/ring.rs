//! Ring formation for Ring-AllReduce jobs (issue 19 item 3; seed 003
//! Algorithm 3 and Eq. 7, seed 004 Algorithm 3).
//!
//! A RAR job's pods must form one ring (Eq. 7: every pod of the job has one
//! ring successor and one predecessor, and there is no sub-ring). The ring
//! is chosen to overlap the circuits the stage already needs (`lb`, the
//! connection-demand booleans LB of 003 Algorithm 2), so that it adds as few
//! new pod pairs as possible:
//!
//! 1. the sub-topology of the existing links among the job's pods
//!    (003 Alg. 3 lines 1-3);
//! 2. degrees are cut down: in the directed version (003, half duplex),
//!    while a pod has in-degree > 1 the link from the in-neighbour with the
//!    highest out-degree is deleted, and symmetrically for out-degree
//!    (lines 4-13); in the undirected version (004, full duplex), while a
//!    pod has degree > 2 the link to the neighbour with the highest degree
//!    is deleted (004 Alg. 3 lines 3-8);
//! 3. every cycle that is not already the whole ring is cut (one link
//!    removed; 003 line 14, 004 line 9);
//! 4. the remaining paths (single pods included) are joined end to start,
//!    in the order of the job's pods, into one ring (003 line 15, 004 line
//!    10).
//!
//! Ties are broken by the order of the job's pods, so the result is
//! deterministic.

/// A ring as the cyclic order of its pods: `ring[k] -> ring[k + 1]` and
/// `ring[last] -> ring[0]` are its links (none for a single pod; a two-pod
/// ring is the pair both ways).
pub type Ring = Vec<usize>;

/// The ring links of `ring`, in order.
pub fn ring_links(ring: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let n = if ring.len() < 2 { 0 } else { ring.len() };
    (0..n).map(move |k| (ring[k], ring[(k + 1) % ring.len()]))
}

/// Directed Algorithm 3 (003): `lb(a, b)` says whether the stage already has
/// a link from pod `a` to pod `b`.
pub fn form_directed(nodes: &[usize], lb: impl Fn(usize, usize) -> bool) -> Ring {
    let m = nodes.len();
    let mut e = vec![false; m * m];
    for a in 0..m {
        for b in 0..m {
            e[a * m + b] = a != b && lb(nodes[a], nodes[b]);
        }
    }
    let indeg = |e: &[bool], x: usize| (0..m).filter(|&y| e[y * m + x]).count();
    let outdeg = |e: &[bool], x: usize| (0..m).filter(|&y| e[x * m + y]).count();
    for n in 0..m {
        while indeg(&e, n) > 1 {
            let from = (0..m)
                .filter(|&y| e[y * m + n])
                .max_by_key(|&y| (outdeg(&e, y), std::cmp::Reverse(y)));
            if let Some(y) = from {
                e[y * m + n] = false;
            }
        }
        while outdeg(&e, n) > 1 {
            let to = (0..m)
                .filter(|&y| e[n * m + y])
                .max_by_key(|&y| (indeg(&e, y), std::cmp::Reverse(y)));
            if let Some(y) = to {
                e[n * m + y] = false;
            }
        }
    }
    let succ: Vec<Option<usize>> = (0..m).map(|x| (0..m).find(|&y| e[x * m + y])).collect();
    join(nodes, succ)
}

/// Undirected Algorithm 3 (004): `lb(a, b) || lb(b, a)` is a link.
pub fn form_undirected(nodes: &[usize], lb: impl Fn(usize, usize) -> bool) -> Ring {
    let m = nodes.len();
    let mut e = vec![false; m * m];
    for a in 0..m {
        for b in 0..m {
            e[a * m + b] = a != b && (lb(nodes[a], nodes[b]) || lb(nodes[b], nodes[a]));
        }
    }
    let deg = |e: &[bool], x: usize| (0..m).filter(|&y| e[x * m + y]).count();
    for n in 0..m {
        while deg(&e, n) > 2 {
            let to = (0..m)
                .filter(|&y| e[n * m + y])
                .max_by_key(|&y| (deg(&e, y), std::cmp::Reverse(y)));
            if let Some(y) = to {
                e[n * m + y] = false;
                e[y * m + n] = false;
            }
        }
    }
    // Orient every path and cycle: walk from each unvisited pod, path ends
    // (degree <= 1) first so that a path is walked from one end.
    let mut succ = vec![None; m];
    let mut seen = vec![false; m];
    let ends = (0..m).filter(|&x| deg(&e, x) <= 1);
    let starts: Vec<usize> = ends.chain(0..m).collect();
    for s in starts {
        if seen[s] {
            continue;
        }
        let (mut prev, mut at) = (None, s);
        loop {
            seen[at] = true;
            let next = (0..m).find(|&y| e[at * m + y] && Some(y) != prev && (!seen[y] || y == s));
            let Some(y) = next else { break };
            succ[at] = Some(y);
            if y == s {
                break;
            }
            (prev, at) = (Some(at), y);
        }
    }
    join(nodes, succ)
}

/// Steps 3-4: cut every cycle short of the whole ring, then join the paths.
/// `succ[x]` is pod position `x`'s successor; at most one predecessor each.
fn join(nodes: &[usize], mut succ: Vec<Option<usize>>) -> Ring {
    let m = nodes.len();
    if m < 2 {
        return nodes.to_vec();
    }
    // A cycle through position x: follow successors back to x.
    for x in 0..m {
        let mut at = x;
        let mut len = 0;
        while let Some(y) = succ[at] {
            len += 1;
            at = y;
            if at == x || len > m {
                break;
            }
        }
        if at == x && len > 0 {
            if len == m {
                return walk(nodes, &succ, x);
            }
            // Cut the link into the cycle's first pod (x is the lowest
            // position on it: lower ones were cut already).
            if let Some(p) = (0..m).find(|&p| succ[p] == Some(x)) {
                succ[p] = None;
            }
        }
    }
    let mut has_pred = vec![false; m];
    for y in succ.iter().flatten() {
        has_pred[*y] = true;
    }
    let mut ring = Vec::with_capacity(m);
    for start in (0..m).filter(|&x| !has_pred[x]) {
        ring.extend(walk(nodes, &succ, start));
    }
    ring
}

/// The pods from position `start` along `succ`, stopping before a repeat.
fn walk(nodes: &[usize], succ: &[Option<usize>], start: usize) -> Vec<usize> {
    let mut out = vec![nodes[start]];
    let mut at = start;
    while let Some(y) = succ[at] {
        if y == start || out.len() >= nodes.len() {
            break;
        }
        out.push(nodes[y]);
        at = y;
    }
    out
}

/// Whether `ring` is one cycle over exactly `nodes` (Eq. 7).
pub fn is_ring_over(ring: &[usize], nodes: &[usize]) -> bool {
    let mut a = ring.to_vec();
    let mut b = nodes.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    a == b && a.windows(2).all(|w| w[0] != w[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn existing_links_are_reused() {
        // 0 -> 1 -> 2 exist: the ring keeps them and closes 2 -> 0.
        let lb = |a: usize, b: usize| (a, b) == (0, 1) || (a, b) == (1, 2);
        let r = form_directed(&[2, 0, 1], lb);
        let links: Vec<_> = ring_links(&r).collect();
        assert!(links.contains(&(0, 1)) && links.contains(&(1, 2)), "{r:?}");
        assert!(is_ring_over(&r, &[0, 1, 2]));
        // A sub-ring 0 <-> 1 is cut, pod 2 joined.
        let two = |a: usize, b: usize| a + b == 1;
        let r = form_directed(&[0, 1, 2], two);
        assert!(is_ring_over(&r, &[0, 1, 2]), "{r:?}");
        let r = form_undirected(&[0, 1, 2, 3], |a, b| a + 1 == b);
        assert_eq!(r, vec![0, 1, 2, 3]);
    }

    proptest! {
        #[test]
        fn every_ring_is_one_cycle_over_the_jobs_pods(
            m in 1usize..10,
            links in proptest::collection::vec(any::<bool>(), 100),
            shuffle in any::<u64>(),
        ) {
            let mut nodes: Vec<usize> = (0..m).map(|i| i * 3 + 1).collect();
            nodes.rotate_left((shuffle as usize) % m);
            let lb = |a: usize, b: usize| links[(a % 10) * 10 + (b % 10)];
            for ring in [form_directed(&nodes, lb), form_undirected(&nodes, lb)] {
                prop_assert!(is_ring_over(&ring, &nodes), "{:?} over {:?}", ring, nodes);
                prop_assert_eq!(ring_links(&ring).count(), if m < 2 { 0 } else { m });
            }
        }
    }
}
