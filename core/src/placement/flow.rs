//! A small integral max-flow (Dinic), for the OCS transportation
//! problems: how many leaf uplinks can reach a spine through the OCS layer
//! when each (leaf, OCS) and (spine, OCS) pair has a limited number of idle
//! ports. Graphs have at most a few hundred nodes; augmenting paths let an
//! already-placed leaf be re-routed through another OCS to make room for
//! the next one.

/// No edge: the end of a node's edge list.
const NONE: u32 = u32::MAX;

/// The graph as flat arrays (each node's edges a linked list through
/// `next_edge`), and the scratch of [`Flow::run`]: the exact searches build
/// and solve one small graph per search node, so nothing here is allocated
/// again once the first graph of that size has been built.
#[derive(Debug, Clone, Default)]
pub struct Flow {
    /// First and last edge out of each node, or [`NONE`]: edges are
    /// appended, so they are visited in the order they were added (which
    /// decides the paths found, hence the links a plan takes).
    first: Vec<u32>,
    last: Vec<u32>,
    /// Per edge: its head, capacity and the node's next edge.
    to: Vec<u32>,
    cap: Vec<u32>,
    next_edge: Vec<u32>,
    flowed: u32,
    level: Vec<u32>,
    /// Per node, the edge the blocking-flow search resumes from.
    cursor: Vec<u32>,
    queue: Vec<u32>,
}

impl Flow {
    pub fn new(nodes: usize) -> Self {
        let mut f = Flow::default();
        f.reset(nodes);
        f
    }

    /// Empty the graph for reuse with `nodes` nodes, keeping allocations:
    /// the exact searches build one small graph per search node.
    pub fn reset(&mut self, nodes: usize) {
        self.first.clear();
        self.first.resize(nodes, NONE);
        self.last.clear();
        self.last.resize(nodes, NONE);
        self.to.clear();
        self.cap.clear();
        self.next_edge.clear();
        self.flowed = 0;
    }

    pub fn add_node(&mut self) -> usize {
        self.first.push(NONE);
        self.last.push(NONE);
        self.first.len() - 1
    }

    /// Add edge `u -> v` with capacity `c`; returns its id.
    pub fn add_edge(&mut self, u: usize, v: usize, c: u32) -> usize {
        let id = self.to.len();
        self.to.extend([v as u32, u as u32]);
        self.cap.extend([c, 0]);
        self.next_edge.extend([NONE, NONE]);
        self.append(u, id as u32);
        self.append(v, id as u32 + 1);
        id
    }

    fn append(&mut self, u: usize, e: u32) {
        match self.last[u] {
            NONE => self.first[u] = e,
            prev => self.next_edge[prev as usize] = e,
        }
        self.last[u] = e;
    }

    /// Add capacity `c` from `u` to `v` when there is any: for the
    /// relaxations, whose graphs are mostly zero-capacity pairs (on an
    /// all-OCS fabric every leaf-spine direct count is 0), which cost a
    /// BFS visit each and carry nothing.
    pub fn add_cap(&mut self, u: usize, v: usize, c: u32) {
        if c > 0 {
            self.add_edge(u, v, c);
        }
    }

    /// Delete edge `e` (and its residual twin); flow already through it stays counted.
    pub fn remove_edge(&mut self, e: usize) {
        self.cap[e] = 0;
        self.cap[e ^ 1] = 0;
    }

    /// Units flowing through edge `e`.
    pub fn flow_on(&self, e: usize) -> u32 {
        self.cap[e ^ 1]
    }

    /// Total flow pushed so far.
    pub fn value(&self) -> u32 {
        self.flowed
    }

    /// Augment from `s` to `t` until no path is left; returns the total
    /// flow. Dinic's algorithm: the exact searches run a flow per search
    /// node, with hundreds of units over shallow layered graphs, where one
    /// blocking flow per phase beats one BFS per augmenting path.
    pub fn run(&mut self, s: usize, t: usize) -> u32 {
        let n = self.first.len();
        self.level.resize(n, NONE);
        loop {
            if !self.layer(s, t) {
                return self.flowed;
            }
            self.cursor.clear();
            self.cursor.extend_from_slice(&self.first);
            self.flowed += self.push(s as u32, t as u32, u32::MAX);
        }
    }

    /// Breadth-first levels from `s` over edges with capacity; whether `t`
    /// is reached. It stops once `t` is: no node of `t`'s level or beyond
    /// leads to `t` along increasing levels, so they stay unlevelled and
    /// [`Flow::push`] skips them at once.
    fn layer(&mut self, s: usize, t: usize) -> bool {
        self.level.fill(NONE);
        self.level[s] = 0;
        self.queue.clear();
        self.queue.push(s as u32);
        let mut head = 0;
        while head < self.queue.len() {
            let u = self.queue[head] as usize;
            head += 1;
            let mut e = self.first[u];
            while e != NONE {
                let v = self.to[e as usize] as usize;
                if self.cap[e as usize] > 0 && self.level[v] == NONE {
                    self.level[v] = self.level[u] + 1;
                    if v == t {
                        return true;
                    }
                    self.queue.push(v as u32);
                }
                e = self.next_edge[e as usize];
            }
        }
        self.level[t] != NONE
    }

    /// A blocking flow along increasing levels from `u`, at most `limit`
    /// (depth <= node count). Each edge is left (its cursor moved on) once
    /// what is below it takes less than was offered, so the paths are
    /// those of one augmenting path per descent from `s`, found without
    /// walking the shared prefix again each time.
    fn push(&mut self, u: u32, t: u32, limit: u32) -> u32 {
        if u == t {
            return limit;
        }
        let u = u as usize;
        let mut sent = 0;
        while self.cursor[u] != NONE {
            let e = self.cursor[u] as usize;
            let v = self.to[e];
            if self.cap[e] > 0 && self.level[v as usize] == self.level[u] + 1 {
                let offer = (limit - sent).min(self.cap[e]);
                let got = self.push(v, t, offer);
                self.cap[e] -= got;
                self.cap[e ^ 1] += got;
                sent += got;
                if sent == limit {
                    return sent;
                }
                if got == offer {
                    // The edge is saturated, or `v` took all it was offered and may take more.
                    continue;
                }
            }
            self.cursor[u] = self.next_edge[e];
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook form of [`Flow::run`]: every level kept, one
    /// augmenting path per descent from the source.
    fn one_path_at_a_time(f: &mut Flow, s: usize, t: usize) -> u32 {
        fn path(f: &mut Flow, u: usize, t: usize, limit: u32) -> u32 {
            if u == t {
                return limit;
            }
            while f.cursor[u] != NONE {
                let e = f.cursor[u] as usize;
                let v = f.to[e] as usize;
                if f.cap[e] > 0 && f.level[v] == f.level[u] + 1 {
                    let got = path(f, v, t, limit.min(f.cap[e]));
                    if got > 0 {
                        f.cap[e] -= got;
                        f.cap[e ^ 1] += got;
                        return got;
                    }
                }
                f.cursor[u] = f.next_edge[e];
            }
            0
        }
        let n = f.first.len();
        f.level.resize(n, NONE);
        loop {
            f.level.fill(NONE);
            f.level[s] = 0;
            let mut queue = vec![s];
            let mut head = 0;
            while head < queue.len() {
                let u = queue[head];
                head += 1;
                let mut e = f.first[u];
                while e != NONE {
                    let v = f.to[e as usize] as usize;
                    if f.cap[e as usize] > 0 && f.level[v] == NONE {
                        f.level[v] = f.level[u] + 1;
                        queue.push(v);
                    }
                    e = f.next_edge[e as usize];
                }
            }
            if f.level[t] == NONE {
                return f.flowed;
            }
            f.cursor.clone_from(&f.first);
            loop {
                let got = path(f, s, t, u32::MAX);
                if got == 0 {
                    break;
                }
                f.flowed += got;
            }
        }
    }

    /// Random layered graphs like [`crate::placement::assign`]'s (source,
    /// leaves, OCSes or spines, sink, with some back and skip edges): the
    /// blocking-flow descents carry exactly what one path at a time
    /// carries, edge by edge (a plan takes its links from the flow on each
    /// edge, so the decisions stay the same).
    #[test]
    fn blocking_flows_carry_what_one_path_at_a_time_carries() {
        let mut rng = crate::placement::Rng(0x5eed);
        for _ in 0..400 {
            let (a, b) = (1 + rng.below(12) as usize, 1 + rng.below(12) as usize);
            let n = 2 + a + b;
            let mut edges = Vec::new();
            for i in 0..a {
                edges.push((0, 2 + i, rng.below(20) as u32));
                for j in 0..b {
                    if rng.below(3) > 0 {
                        edges.push((2 + i, 2 + a + j, rng.below(8) as u32));
                    }
                }
            }
            for j in 0..b {
                edges.push((2 + a + j, 1, rng.below(20) as u32));
            }
            for _ in 0..rng.below(6) {
                let (u, v) = (
                    2 + rng.below((a + b) as u64) as usize,
                    2 + rng.below((a + b) as u64) as usize,
                );
                edges.push((u, v, rng.below(5) as u32));
            }
            let build = || {
                let mut f = Flow::new(n);
                let ids: Vec<usize> = edges.iter().map(|&(u, v, c)| f.add_edge(u, v, c)).collect();
                (f, ids)
            };
            let (mut fast, ids) = build();
            let (mut slow, _) = build();
            assert_eq!(fast.run(0, 1), one_path_at_a_time(&mut slow, 0, 1));
            for &e in &ids {
                assert_eq!(fast.flow_on(e), slow.flow_on(e), "{edges:?}");
            }
        }
    }

    #[test]
    fn reroutes_to_make_room() {
        // Leaf A can use OCS 1 or 2, leaf B only OCS 1; each OCS has one
        // spine port. Greedy A->1 would block B; max-flow reroutes A to 2.
        let (s, t, a, b, o1, o2) = (0, 1, 2, 3, 4, 5);
        let mut f = Flow::new(6);
        f.add_edge(s, a, 1);
        let a1 = f.add_edge(a, o1, 1);
        f.add_edge(a, o2, 1);
        f.add_edge(o1, t, 1);
        f.add_edge(o2, t, 1);
        assert_eq!(f.run(s, t), 1);
        f.add_edge(s, b, 1);
        f.add_edge(b, o1, 1);
        assert_eq!(f.run(s, t), 2);
        assert_eq!(f.flow_on(a1), 0);
    }
}
