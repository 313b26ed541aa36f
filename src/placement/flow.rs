//! A small integral max-flow (Edmonds-Karp), for the OCS transportation
//! problems: how many leaf uplinks can reach a spine through the OCS layer
//! when each (leaf, OCS) and (spine, OCS) pair has a limited number of idle
//! ports. Graphs have at most a few hundred nodes, so the simplest correct
//! algorithm is plenty; augmenting paths also let an already-placed leaf be
//! re-routed through another OCS to make room for the next one.

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

    /// Augment from `s` to `t` until no path is left; returns the total flow.
    pub fn run(&mut self, s: usize, t: usize) -> u32 {
        // One allocation per run, not per augmenting path.
        let mut prev = vec![usize::MAX; self.adj.len()];
        let mut q = VecDeque::with_capacity(self.adj.len());
        loop {
            prev.fill(usize::MAX);
            q.clear();
            q.push_back(s);
            prev[s] = usize::MAX - 1;
            while let Some(u) = q.pop_front() {
                if u == t {
                    break;
                }
                for &e in &self.adj[u] {
                    let v = self.to[e];
                    if self.cap[e] > 0 && prev[v] == usize::MAX {
                        prev[v] = e;
                        q.push_back(v);
                    }
                }
            }
            if prev[t] == usize::MAX {
                return self.flowed;
            }
            let mut push = u32::MAX;
            let mut v = t;
            while v != s {
                let e = prev[v];
                push = push.min(self.cap[e]);
                v = self.to[e ^ 1];
            }
            let mut v = t;
            while v != s {
                let e = prev[v];
                self.cap[e] -= push;
                self.cap[e ^ 1] += push;
                v = self.to[e ^ 1];
            }
            self.flowed += push;
        }
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
