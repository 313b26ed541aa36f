//! Jobs running under the fluid network model: how fast each progresses,
//! and when it completes (issue 14, item 3).
//!
//! A job's `duration_s` is its standalone run time; a share `alpha`
//! (`comm_fraction`) of it is communication its computation does not hide.
//! Sharing links slows the communication only: at `lambda` of its isolated
//! rate ([`super::fairshare`]) one standalone second takes
//! `(1 - alpha) + alpha / lambda` seconds, so the job advances at speed
//! `v = 1 / ((1 - alpha) + alpha / lambda)` standalone seconds per second.
//! Progress is tracked as standalone seconds left; speeds change only at
//! events (a job starts or finishes), when every job's progress is brought
//! up to date, `lambda` is solved again and each job whose speed changed
//! gets a new completion time (older ones stay in the heap and are skipped
//! by their version).
//!
//! Every running job's flows are present all the time (its computation
//! phases do not free the links): the conservative reading of the issue's
//! model, and the one in which interleaving jobs (Cassini, seed 001) has
//! something to win later.
//!
//! Solving is skipped while no link carries more than its capacity: then
//! every `lambda` is 1, which is the common case for isolated policies.
//!
//! **Phases** (issue 16, item 5; [`Congestion`]): with `--congestion
//! cassini|random|mltcp`, a link over capacity that carries only jobs
//! placed in a sharing mode (their decisions hold a profile) is played out
//! in time instead ([`crate::sharing::periodic`]): each job's `lambda`
//! there is the share of its demand it is served while communicating, with
//! the jobs at their decisions' time shifts (`cassini`) or at their start
//! times modulo their iterations with fair (`random`) or MLTCP (`mltcp`)
//! division. Such links are left out of the max-min solve, and a job's
//! `lambda` is the least of the solve's and its periodic links'. Other
//! links, and every job without a profile, stay in the fluid model.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use std::collections::HashMap;

use super::fairshare::{self, Class};
use super::routes::{Router, Unknown};
use crate::decision::Decision;
use crate::sharing::periodic::{self, Division};
use crate::trace::{Collective, Workload};

/// How links shared by periodic jobs are modelled (module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Congestion {
    /// Every flow on its links all the time, max-min fair (no phases).
    #[default]
    Fair,
    /// Phases at the decisions' time shifts, fair division (Cassini).
    Cassini,
    /// Phases at start times, fair division (sharing without shifts).
    Random,
    /// Phases at start times, MLTCP's `F(bytes_ratio)` division.
    Mltcp,
}

/// Most jobs on one link played out in time; more stay in the solve.
pub const MAX_PERIODIC_JOBS: usize = 8;
/// Link job sets whose served shares are kept, at most.
const CACHE: usize = 1 << 14;

/// Slack under which a link counts as not over capacity.
const OVER: f64 = 1e-9;

#[derive(Debug, Clone)]
struct Running {
    idx: usize,
    class: Class,
    /// Its profile and phase (ms), when its links are played out in time.
    periodic: Option<(Vec<(u32, f64)>, u32)>,
    alpha: f64,
    /// Standalone seconds still to run.
    left: f64,
    lambda: f64,
    speed: f64,
    version: u64,
}

/// A completion time in the heap: (time, job, version), earliest first.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Due(f64, usize, u64);

impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .total_cmp(&other.0)
            .then(self.1.cmp(&other.1))
            .then(self.2.cmp(&other.2))
    }
}

/// What the model saw of one job.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Seen {
    /// Shared a link with another job at some time.
    pub contended: bool,
    /// The lowest `lambda` it ran at.
    pub min_lambda: f64,
}

/// Running jobs under the fluid model.
#[derive(Debug)]
pub struct Contention {
    router: Router,
    capacity: Vec<f64>,
    running: Vec<Running>,
    /// Position in `running` of each trace job that runs.
    pos: Vec<Option<usize>>,
    /// Jobs on each directed link (trace indices).
    on_link: Vec<Vec<usize>>,
    /// Links whose load is over capacity.
    over: usize,
    seen: Vec<Seen>,
    due: BinaryHeap<Reverse<Due>>,
    now: f64,
    /// Integral over time of the load carried on all links.
    carried: f64,
    congestion: Congestion,
    /// Served shares by (job, weight) set of a periodic link.
    served: HashMap<Vec<(usize, u64)>, Vec<f64>>,
}

impl Contention {
    /// A model for a trace of `jobs` jobs, every link of capacity 1 (one
    /// NIC's line rate: the uniform fabrics of the paper).
    pub fn new(router: Router, jobs: usize) -> Self {
        let links = router.links();
        Contention {
            router,
            capacity: vec![1.0; links],
            running: Vec::new(),
            pos: vec![None; jobs],
            on_link: vec![Vec::new(); links],
            over: 0,
            seen: vec![
                Seen {
                    contended: false,
                    min_lambda: 1.0,
                };
                jobs
            ],
            due: BinaryHeap::new(),
            now: 0.0,
            carried: 0.0,
            congestion: Congestion::Fair,
            served: HashMap::new(),
        }
    }

    /// The router whose paths the model charges (for audits and tests).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Model links shared by periodic jobs as `congestion` says.
    pub fn with_congestion(mut self, congestion: Congestion) -> Self {
        self.congestion = congestion;
        self
    }

    /// A starting job's profile and phase, if its links are played out.
    fn periodic_of(&self, now: f64, d: &Decision) -> Option<(Vec<(u32, f64)>, u32)> {
        let sh = d.sharing.as_ref()?;
        let phases: Vec<(u32, f64)> = sh.profile.iter().map(|p| (p.ms, p.demand)).collect();
        let iter = sh.iteration_ms().max(1);
        // An iteration starts when the clock modulo `iter` is `start`: at
        // clock 0 the job is `iter - start` into its iteration.
        let start = match self.congestion {
            Congestion::Fair => return None,
            Congestion::Cassini => u64::from(sh.time_shift_ms),
            Congestion::Random | Congestion::Mltcp => (now.max(0.0) * 1e3) as u64,
        } % iter;
        Some((phases, ((iter - start) % iter) as u32))
    }

    /// Start trace job `idx` at `now` under decision `d`.
    pub fn start(
        &mut self,
        idx: usize,
        now: f64,
        duration_s: f64,
        workload: &Workload,
        d: &Decision,
    ) -> Result<(), Unknown> {
        self.advance(now);
        let class = self.router.route(idx as u64, d, workload.collective)?;
        self.occupy(idx, &class);
        self.pos[idx] = Some(self.running.len());
        let periodic = self.periodic_of(now, d);
        self.running.push(Running {
            idx,
            class,
            periodic,
            alpha: workload.comm_fraction,
            left: duration_s,
            lambda: 1.0,
            speed: 0.0,
            version: 0,
        });
        self.resolve();
        Ok(())
    }

    /// Job `idx` keeps running from `now` on the links of `d` instead of
    /// its own (its links were moved: `crate::placement::rearrange`), with
    /// its progress and phase kept.
    pub fn reroute(
        &mut self,
        idx: usize,
        now: f64,
        d: &Decision,
        collective: Collective,
    ) -> Result<(), Unknown> {
        self.advance(now);
        let Some(p) = self.pos[idx] else {
            return Ok(());
        };
        let old = self.running[p].class.clone();
        self.router.unroute(&old);
        for &(l, _) in &old.links {
            self.on_link[l].retain(|&j| j != idx);
        }
        self.recount(&old, -1.0);
        let class = self.router.route(idx as u64, d, collective)?;
        self.occupy(idx, &class);
        self.running[p].class = class;
        self.resolve();
        Ok(())
    }

    /// List `idx` on the links of `class` (marking every job that meets
    /// another as contended) and count them in the loads.
    fn occupy(&mut self, idx: usize, class: &Class) {
        for &(l, _) in &class.links {
            if !self.on_link[l].is_empty() {
                self.seen[idx].contended = true;
                for &other in &self.on_link[l] {
                    self.seen[other].contended = true;
                }
            }
            self.on_link[l].push(idx);
        }
        self.recount(class, 1.0);
    }

    /// Job `idx` completed (or is taken away) at `now`.
    pub fn finish(&mut self, idx: usize, now: f64) {
        self.advance(now);
        let Some(p) = self.pos[idx].take() else {
            return;
        };
        let job = self.running.swap_remove(p);
        if let Some(moved) = self.running.get(p) {
            self.pos[moved.idx] = Some(p);
        }
        self.router.unroute(&job.class);
        for &(l, _) in &job.class.links {
            self.on_link[l].retain(|&j| j != idx);
        }
        self.recount(&job.class, -1.0);
        if !job.class.links.is_empty() {
            self.resolve();
        }
    }

    /// The earliest completion: (time, trace job).
    pub fn next_completion(&mut self) -> Option<(f64, usize)> {
        while let Some(&Reverse(Due(t, idx, v))) = self.due.peek() {
            let current = self.pos[idx].is_some_and(|p| self.running[p].version == v);
            if current {
                return Some((t, idx));
            }
            self.due.pop();
        }
        None
    }

    /// Jobs running now.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// What the model saw of trace job `idx`.
    pub fn seen(&self, idx: usize) -> Seen {
        self.seen[idx]
    }

    /// Time-average load of the fabric's directed links up to the last
    /// event, over `span` seconds (0 when there are no links).
    pub fn link_utilization(&self, span: f64) -> f64 {
        if self.capacity.is_empty() || span <= 0.0 {
            return 0.0;
        }
        self.carried / (span * self.capacity.len() as f64)
    }

    /// Bring every running job's progress (and the carried-load integral)
    /// up to `now`.
    fn advance(&mut self, now: f64) {
        let dt = now - self.now;
        if dt > 0.0 {
            for r in &mut self.running {
                r.left = (r.left - r.speed * dt).max(0.0);
                let weight: f64 = r.class.links.iter().map(|&(_, w)| w).sum();
                self.carried += dt * r.lambda * weight;
            }
        }
        self.now = self.now.max(now);
    }

    /// Update the count of over-capacity links after `class` was added
    /// (`sign` 1) to or taken from (`sign` -1) the router's loads.
    fn recount(&mut self, class: &Class, sign: f64) {
        for &(l, w) in &class.links {
            let (now, cap) = (self.router.load(l as u32), self.capacity[l]);
            let before = now - sign * w;
            match (before > cap + OVER, now > cap + OVER) {
                (false, true) => self.over += 1,
                (true, false) => self.over = self.over.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// Solve `lambda` for every running job and reschedule the ones whose
    /// speed changed.
    fn resolve(&mut self) {
        let lambdas: Vec<f64> = if self.over == 0 {
            vec![1.0; self.running.len()]
        } else if self.congestion == Congestion::Fair {
            let classes: Vec<Class> = self.running.iter().map(|r| r.class.clone()).collect();
            fairshare::solve(&self.capacity, &classes)
        } else {
            self.phased_lambdas()
        };
        for (r, lambda) in self.running.iter_mut().zip(lambdas) {
            r.lambda = lambda;
            // Exactly 1 at full rate (no rounding of (1 - a) + a).
            let speed = if lambda >= 1.0 {
                1.0
            } else {
                1.0 / ((1.0 - r.alpha) + r.alpha / lambda)
            };
            let seen = &mut self.seen[r.idx];
            seen.min_lambda = seen.min_lambda.min(lambda);
            if speed != r.speed {
                r.speed = speed;
                r.version += 1;
                self.due
                    .push(Reverse(Due(self.now + r.left / speed, r.idx, r.version)));
            }
        }
    }
}

impl Contention {
    /// `lambda` of every running job when periodic links are played out
    /// in time (module doc).
    fn phased_lambdas(&mut self) -> Vec<f64> {
        let mut capacity = self.capacity.clone();
        let mut periodic_links = Vec::new();
        for (l, jobs) in self.on_link.iter().enumerate() {
            let over = self.router.load(l as u32) > self.capacity[l] + OVER;
            let all_periodic = jobs.len() <= MAX_PERIODIC_JOBS
                && jobs
                    .iter()
                    .all(|&j| self.pos[j].is_some_and(|p| self.running[p].periodic.is_some()));
            if over && all_periodic {
                capacity[l] = f64::INFINITY;
                periodic_links.push(l);
            }
        }
        let classes: Vec<Class> = self.running.iter().map(|r| r.class.clone()).collect();
        let mut lambdas = fairshare::solve(&capacity, &classes);
        for l in periodic_links {
            let mut key: Vec<(usize, u64)> = self.on_link[l]
                .iter()
                .map(|&j| (j, self.weight_on(j, l).to_bits()))
                .collect();
            key.sort_unstable();
            if !self.served.contains_key(&key) {
                if self.served.len() >= CACHE {
                    self.served.clear();
                }
                let jobs: Vec<periodic::OnLink> = key
                    .iter()
                    .filter_map(|&(j, w)| {
                        let r = &self.running[self.pos[j]?];
                        let (phases, phase_ms) = r.periodic.as_ref()?;
                        let w = f64::from_bits(w);
                        let phases = phases.iter().map(|&(ms, d)| (ms, d * w)).collect();
                        Some(periodic::OnLink {
                            phases,
                            phase_ms: *phase_ms,
                        })
                    })
                    .collect();
                let division = match self.congestion {
                    Congestion::Mltcp => Division::Mltcp,
                    _ => Division::Fair,
                };
                let served = periodic::served(&jobs, self.capacity[l], division);
                self.served.insert(key.clone(), served);
            }
            for ((j, _), s) in key.iter().zip(&self.served[&key]) {
                if let Some(p) = self.pos[*j] {
                    lambdas[p] = lambdas[p].min(s.max(1e-6));
                }
            }
        }
        lambdas
    }

    /// Job `j`'s weight on link `l` (line rates).
    fn weight_on(&self, j: usize, l: usize) -> f64 {
        self.pos[j]
            .and_then(|p| self.running[p].class.links.iter().find(|x| x.0 == l))
            .map_or(0.0, |x| x.1)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::decision::{GpuRef, Stage};
    use crate::names::JobId;
    use crate::network::routes::Routing;
    use crate::topology::generate::{loaded, Params};
    use crate::trace::Collective;

    /// 2 leaves x 2 servers x 1 GPU under ONE spine: every flow between the
    /// leaves crosses the same two links.
    fn narrow() -> std::sync::Arc<crate::topology::Topology> {
        loaded(&Params {
            name: "one-spine".into(),
            leaves: 2,
            spines: 1,
            gpus_per_server: 1,
            servers_per_leaf: Some(2),
            ocs: 0,
            allow_oversubscription: true,
        })
    }

    /// A job on the `k`-th server of each leaf.
    fn job(topo: &crate::topology::Topology, name: &str, k: usize) -> Decision {
        let gpus = topo
            .leaves
            .iter()
            .map(|l| GpuRef {
                server: topo.server(l.servers[k]).name.clone(),
                gpu: 0,
            })
            .collect();
        Decision {
            job: JobId::new(name).unwrap(),
            stage: Stage::Manual,
            gpus,
            vclos: Default::default(),
            source_routes: vec![],
            requested_gpus: None,
            sharing: None,
        }
    }

    fn work(alpha: f64) -> Workload {
        Workload {
            comm_fraction: alpha,
            collective: Collective::Ring,
            model: None,
            iteration_ms: None,
        }
    }

    #[test]
    fn two_rings_on_one_link_halve_their_communication_then_recover() {
        let topo = narrow();
        let mut m = Contention::new(Router::new(&topo, Routing::Ecmp { seed: 1 }), 2);
        m.start(0, 0.0, 100.0, &work(0.5), &job(&topo, "a", 0))
            .unwrap();
        // Alone: full speed, done at 100.
        assert_eq!(m.next_completion(), Some((100.0, 0)));
        m.start(1, 0.0, 50.0, &work(0.5), &job(&topo, "b", 1))
            .unwrap();
        // Both at lambda 1/2: speed 1 / (0.5 + 0.5 / 0.5) = 2/3; b needs 75 s.
        let (t, idx) = m.next_completion().unwrap();
        assert_eq!(idx, 1);
        assert!((t - 75.0).abs() < 1e-9, "{t}");
        m.finish(1, t);
        // a ran 50 standalone seconds; the other 50 at full speed.
        let (t, idx) = m.next_completion().unwrap();
        assert_eq!(idx, 0);
        assert!((t - 125.0).abs() < 1e-9, "{t}");
        assert!(m.seen(0).contended && m.seen(1).contended);
        assert_eq!(m.seen(0).min_lambda, 0.5);
        m.finish(0, t);
        assert_eq!((m.next_completion(), m.running()), (None, 0));
        // Each ring crosses all 4 directed links (up and down, both ways):
        // full together at half rate for 75 s, full with a alone for 50 s.
        let u = m.link_utilization(125.0);
        assert!((u - 1.0).abs() < 1e-9, "{u}");
        assert!((m.link_utilization(250.0) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_rerouted_job_keeps_its_progress_and_frees_the_links_it_left() {
        let topo = narrow();
        let mut m = Contention::new(Router::new(&topo, Routing::Ecmp { seed: 1 }), 2);
        m.start(0, 0.0, 100.0, &work(0.5), &job(&topo, "a", 0))
            .unwrap();
        m.start(1, 0.0, 50.0, &work(0.5), &job(&topo, "b", 1))
            .unwrap();
        // Both at speed 2/3 until 30 s (20 standalone seconds each); then
        // b runs within leaf 1 alone, off the shared links.
        let mut inside = job(&topo, "b", 0);
        inside.gpus = (topo.leaves[1].servers.iter())
            .map(|&s| GpuRef {
                server: topo.server(s).name.clone(),
                gpu: 0,
            })
            .collect();
        m.reroute(1, 30.0, &inside, Collective::Ring).unwrap();
        let (t, idx) = m.next_completion().unwrap();
        assert_eq!(idx, 1);
        assert!((t - 60.0).abs() < 1e-9, "{t}");
        m.finish(1, t);
        let (t, idx) = m.next_completion().unwrap();
        assert_eq!(idx, 0);
        assert!((t - 110.0).abs() < 1e-9, "{t}");
        // A job that is not running: nothing to move.
        m.reroute(1, 70.0, &inside, Collective::Ring).unwrap();
        assert_eq!(m.running(), 1);
    }

    #[test]
    fn computation_is_not_slowed_and_isolated_jobs_keep_their_duration() {
        let topo = narrow();
        let mut m = Contention::new(Router::new(&topo, Routing::Ecmp { seed: 1 }), 2);
        // No communication: sharing links costs nothing.
        m.start(0, 0.0, 100.0, &work(0.0), &job(&topo, "a", 0))
            .unwrap();
        m.start(1, 10.0, 100.0, &work(0.0), &job(&topo, "b", 1))
            .unwrap();
        assert_eq!(m.next_completion(), Some((100.0, 0)));
        m.finish(0, 100.0);
        assert_eq!(m.next_completion(), Some((110.0, 1)));
        // On the ideal fabric nothing is shared whatever alpha is.
        let mut m = Contention::new(Router::new(&topo, Routing::None), 2);
        m.start(0, 0.0, 100.0, &work(1.0), &job(&topo, "a", 0))
            .unwrap();
        m.start(1, 0.0, 100.0, &work(1.0), &job(&topo, "b", 1))
            .unwrap();
        assert_eq!(m.next_completion(), Some((100.0, 0)));
        assert!(!m.seen(1).contended);
    }
}
