//! A small integral max-flow (Dinic), for the OCS transportation
//! problems: how many leaf uplinks can reach a spine through the OCS layer
//! when each (leaf, OCS) and (spine, OCS) pair has a limited number of idle
//! ports. Graphs have at most a few hundred nodes; augmenting paths let an
//! already-placed leaf be re-routed through another OCS to make room for
//! the next one.

use std::collections::VecDeque;

#[derive(Debug, Clone, Default)]
pub struct Flow {
    adj: Vec<Vec<usize>>,
    to: Vec<usize>,
    cap: Vec<u32>,
    flowed: u32,
}

impl Flow {
    pub fn new(nodes: usize) -> Self {
        Flow {
            adj: vec![Vec::new(); nodes],
            ..Default::default()
        }
    }

    /// Empty the graph for reuse with `nodes` nodes, keeping allocations:
    /// the exact searches build one small graph per search node.
    pub fn reset(&mut self, nodes: usize) {
        self.adj.iter_mut().for_each(Vec::clear);
        self.adj.resize_with(nodes, Vec::new);
        self.to.clear();
        self.cap.clear();
        self.flowed = 0;
    }

    pub fn add_node(&mut self) -> usize {
        self.adj.push(Vec::new());
        self.adj.len() - 1
    }

    /// Add edge `u -> v` with capacity `c`; returns its id.
    pub fn add_edge(&mut self, u: usize, v: usize, c: u32) -> usize {
        let id = self.to.len();
        self.to.extend([v, u]);
        self.cap.extend([c, 0]);
        self.adj[u].push(id);
        self.adj[v].push(id + 1);
        id
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
        let n = self.adj.len();
        let mut level = vec![u32::MAX; n];
        let mut next = vec![0usize; n];
        let mut q = VecDeque::with_capacity(n);
        loop {
            level.fill(u32::MAX);
            level[s] = 0;
            q.clear();
            q.push_back(s);
            while let Some(u) = q.pop_front() {
                for &e in &self.adj[u] {
                    let v = self.to[e];
                    if self.cap[e] > 0 && level[v] == u32::MAX {
                        level[v] = level[u] + 1;
                        q.push_back(v);
                    }
                }
            }
            if level[t] == u32::MAX {
                return self.flowed;
            }
            next.fill(0);
            loop {
                let pushed = self.push(s, t, u32::MAX, &level, &mut next);
                if pushed == 0 {
                    break;
                }
                self.flowed += pushed;
            }
        }
    }

    /// One augmenting path along increasing levels (depth <= node count).
    fn push(&mut self, u: usize, t: usize, limit: u32, level: &[u32], next: &mut [usize]) -> u32 {
        if u == t {
            return limit;
        }
        while next[u] < self.adj[u].len() {
            let e = self.adj[u][next[u]];
            let v = self.to[e];
            if self.cap[e] > 0 && level[v] == level[u] + 1 {
                let got = self.push(v, t, limit.min(self.cap[e]), level, next);
                if got > 0 {
                    self.cap[e] -= got;
                    self.cap[e ^ 1] += got;
                    return got;
                }
            }
            next[u] += 1;
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
