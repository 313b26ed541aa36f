#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use super::*;
use crate::decision::{CrossConnect, GpuRef, OcsHop, ReservedLink, Stage, VirtualClos};

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

fn job(name: &str, arrival: f64, gpus: u32, duration: f64, deadline: Option<f64>) -> Job {
    Job {
        id: id(name),
        arrival_s: arrival,
        gpus,
        duration_s: duration,
        deadline_s: deadline,
        workload: crate::trace::Workload::default(),
    }
}

fn decision(job: &JobId, links: Vec<ReservedLink>, xc: Vec<CrossConnect>) -> Decision {
    Decision {
        requested_gpus: None,
        sharing: None,
        job: job.clone(),
        stage: Stage::Manual,
        gpus: vec![],
        vclos: VirtualClos {
            leaves: vec![],
            spines: vec![],
            links,
            cross_connects: xc,
        },
        source_routes: vec![],
    }
}

/// A placer that only counts GPUs: no locality, no network.
struct Pool {
    total: u32,
    free: u32,
    held: HashMap<JobId, u32>,
}

impl Pool {
    fn new(total: u32) -> Self {
        Self {
            total,
            free: total,
            held: HashMap::new(),
        }
    }
}

impl Placer for Pool {
    fn name(&self) -> &'static str {
        "pool"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        if job.gpus > self.total {
            return Err(PlacementError::TooLarge {
                job: job.id.clone(),
                gpus: job.gpus,
                total: self.total,
            });
        }
        if self.held.contains_key(&job.id) {
            return Err(PlacementError::DuplicateJob(job.id.clone()));
        }
        if job.gpus > self.free {
            return Ok(Outcome::Blocked(Blocked::Gpu));
        }
        self.free -= job.gpus;
        self.held.insert(job.id.clone(), job.gpus);
        Ok(Outcome::Placed(std::sync::Arc::new(decision(
            &job.id,
            vec![],
            vec![],
        ))))
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        let g = self
            .held
            .remove(job)
            .ok_or_else(|| PlacementError::UnknownJob(job.clone()))?;
        self.free += g;
        Ok(decision(job, vec![], vec![]))
    }
}

/// A GPU pool whose every multi-GPU job reserves the same leaf uplink and
/// spine port: the shape of a non-isolating policy.
struct Sharing(Pool);

impl Placer for Sharing {
    fn name(&self) -> &'static str {
        "sharing"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        Ok(match self.0.place(job)? {
            Outcome::Placed(_) => {
                let link = ReservedLink {
                    leaf: "leaf1".into(),
                    uplink: "up1".into(),
                    peer: "spine1".into(),
                    peer_port: "p1".into(),
                    via: None,
                };
                let mut d = decision(&job.id, vec![link], vec![]);
                d.gpus = vec![GpuRef {
                    server: format!("srv-{}", job.id).into(),
                    gpu: 0,
                }];
                Outcome::Placed(std::sync::Arc::new(d))
            }
            b => b,
        })
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.0.release(job)
    }
}

/// A GPU pool that refuses for the network what it cannot hold, and whose
/// first refusal of each job comes from a search cut off (two shapes left
/// unsettled) when `cuts`; later refusals are proofs.
struct Unsure {
    pool: Pool,
    cuts: bool,
    refused: HashMap<JobId, u32>,
    cutoffs: u64,
}

impl Placer for Unsure {
    fn name(&self) -> &'static str {
        "unsure"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        match self.pool.place(job)? {
            Outcome::Blocked(_) => {
                let n = self.refused.entry(job.id.clone()).or_default();
                *n += 1;
                if self.cuts && *n == 1 {
                    self.cutoffs += 2;
                }
                Ok(Outcome::Blocked(Blocked::Network))
            }
            placed => Ok(placed),
        }
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.pool.release(job)
    }
    fn search_cutoffs(&self) -> u64 {
        self.cutoffs
    }
}

/// `unproven_blocks` counts the refused calls during which the search cut
/// off, not the shapes, and none when every refusal was settled.
#[test]
fn unproven_blocks_count_the_refusals_whose_search_cut_off() {
    // a holds all 4 GPUs until 10; b, c, d (4 each) wait in turn, each
    // refused at least once, its first refusal cut off.
    let trace = vec![
        job("a", 0.0, 4, 10.0, None),
        job("b", 1.0, 4, 10.0, None),
        job("c", 2.0, 4, 10.0, None),
        job("d", 3.0, 4, 10.0, None),
    ];
    let run = |cuts| {
        let mut p = Unsure {
            pool: Pool::new(4),
            cuts,
            refused: HashMap::new(),
            cutoffs: 0,
        };
        let r = replay(&mut p, &trace, fifo()).unwrap();
        (r, p.refused)
    };
    let (r, refused) = run(true);
    assert_eq!(r.completed, 4);
    assert_eq!(refused.len(), 3, "{refused:?}");
    let attempts: u32 = refused.values().sum();
    assert_eq!(r.blocked_attempts_network, u64::from(attempts));
    assert_eq!(r.unproven_blocks, 3);
    assert_eq!(r.search_cutoffs, 6);
    let (r, _) = run(false);
    assert_eq!(r.blocked_attempts_network, u64::from(attempts));
    assert_eq!(r.unproven_blocks, 0);
}

fn fifo() -> ReplayOptions {
    ReplayOptions::default()
}

fn with_queue(queue: QueuePolicy) -> ReplayOptions {
    ReplayOptions {
        queue,
        ..ReplayOptions::default()
    }
}

/// a holds 3 of 4 GPUs until t=10; b (4 GPUs) arrives at 1; c (1 GPU) at 2.
fn hol_trace(deadline_b: f64, deadline_c: f64) -> Vec<Job> {
    vec![
        job("a", 0.0, 3, 10.0, Some(100.0)),
        job("b", 1.0, 4, 5.0, Some(deadline_b)),
        job("c", 2.0, 1, 2.0, Some(deadline_c)),
    ]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn fifo_head_of_line_blocks_the_small_job() {
    let r = replay(&mut Pool::new(4), &hol_trace(50.0, 100.0), fifo()).unwrap();
    // a: 0..10, b: 10..15, c: 15..17 (c fits at t=2 but waits behind b).
    assert_eq!(r.completed, 3);
    assert!(
        close(r.avg_jwt_s, (0.0 + 9.0 + 13.0) / 3.0),
        "{}",
        r.avg_jwt_s
    );
    assert!(
        close(r.avg_jct_s, (10.0 + 14.0 + 15.0) / 3.0),
        "{}",
        r.avg_jct_s
    );
    assert!(close(r.avg_jrt_s, (10.0 + 5.0 + 2.0) / 3.0));
    assert!(close(r.makespan_s, 17.0));
    // b blocked once (t=1; not retried at t=2 since nothing was freed), c once at t=10.
    assert_eq!((r.blocked_gpu, r.blocked_attempts_gpu), (2, 2));
    assert_eq!(r.place_calls, 5);
    assert_eq!(r.blocked_network, 0);
    assert_eq!(r.max_queue, 2);
}

#[test]
fn smallest_first_lets_the_small_job_pass() {
    let r = replay(
        &mut Pool::new(4),
        &hol_trace(50.0, 100.0),
        with_queue(QueuePolicy::Sf),
    )
    .unwrap();
    // a: 0..10, c: 2..4, b: 10..15.
    assert!(close(r.avg_jwt_s, 9.0 / 3.0), "{}", r.avg_jwt_s);
    assert!(
        close(r.avg_jct_s, (10.0 + 14.0 + 2.0) / 3.0),
        "{}",
        r.avg_jct_s
    );
    assert_eq!(r.queue, QueuePolicy::Sf);
}

#[test]
fn edf_orders_by_deadline_not_size() {
    // c due first: same schedule as SF.
    let r = replay(
        &mut Pool::new(4),
        &hol_trace(50.0, 5.0),
        with_queue(QueuePolicy::Edf),
    )
    .unwrap();
    assert!(close(r.avg_jwt_s, 3.0), "{}", r.avg_jwt_s);
    assert_eq!(r.deadline_misses, 0);
    // b due first: c waits behind it, as in FIFO; c then misses its deadline.
    let r = replay(
        &mut Pool::new(4),
        &hol_trace(12.0, 16.0),
        with_queue(QueuePolicy::Edf),
    )
    .unwrap();
    assert!(close(r.avg_jwt_s, 22.0 / 3.0), "{}", r.avg_jwt_s);
    assert_eq!(r.deadline_misses, 2); // b ends 15 > 12, c ends 17 > 16
}

#[test]
fn edf_without_deadline_uses_arrival_plus_duration() {
    let trace = vec![
        job("a", 0.0, 4, 10.0, None),
        job("long", 1.0, 1, 100.0, None), // due 101
        job("short", 2.0, 1, 1.0, None),  // due 3
    ];
    let r = replay(&mut Pool::new(4), &trace, with_queue(QueuePolicy::Edf)).unwrap();
    // At 10: short (due 3) first 10..11, then long 10..110 (both fit).
    assert!(
        close(r.avg_jwt_s, (0.0 + 9.0 + 8.0) / 3.0),
        "{}",
        r.avg_jwt_s
    );
}

#[test]
fn completions_are_processed_before_starts_at_the_same_time() {
    let trace = vec![job("a", 0.0, 4, 10.0, None), job("b", 10.0, 4, 1.0, None)];
    let r = replay(&mut Pool::new(4), &trace, fifo()).unwrap();
    assert!(close(r.avg_jwt_s, 0.0));
    assert_eq!(
        r.blocked_attempts_gpu, 0,
        "b must never see a's GPUs as busy"
    );
    assert_eq!(r.place_calls, 2);
}

#[test]
fn oversized_jobs_are_rejected_and_the_rest_run() {
    let trace = vec![job("big", 0.0, 8, 1.0, None), job("ok", 0.0, 2, 1.0, None)];
    let r = replay(&mut Pool::new(4), &trace, fifo()).unwrap();
    assert_eq!((r.rejected, r.completed, r.jobs), (1, 1, 2));
}

/// Blocks every job above `limit` GPUs for network reasons, even when empty.
struct NetLimited(Pool, u32);

impl Placer for NetLimited {
    fn name(&self) -> &'static str {
        "net-limited"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        if job.gpus > self.1 && job.gpus <= self.0.free {
            return Ok(Outcome::Blocked(Blocked::Network));
        }
        self.0.place(job)
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.0.release(job)
    }
}

#[test]
fn a_head_that_can_never_start_is_dropped_not_deadlocked() {
    let trace = vec![
        job("a", 0.0, 2, 5.0, None),
        job("wide", 1.0, 3, 5.0, None),
        job("c", 2.0, 1, 1.0, None),
    ];
    let r = replay(&mut NetLimited(Pool::new(4), 2), &trace, fifo()).unwrap();
    // wide: blocked (GPU) at 1, then (network) at 5 when a ends; dropped.
    assert_eq!(r.unplaceable, 1);
    assert_eq!(r.completed, 2);
    assert_eq!((r.blocked_gpu, r.blocked_network), (1, 1));
    // c waited behind wide until a finished at 5.
    assert!(close(r.avg_jwt_s, 3.0 / 2.0), "{}", r.avg_jwt_s);
}

/// Blocks every job but the gate `g` for network reasons while `g` runs
/// (when its GPUs are free).
struct Gate(Pool, bool);

impl Placer for Gate {
    fn name(&self) -> &'static str {
        "gate"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        let gate = job.id.as_str() == "g";
        if !gate && self.1 && job.gpus <= self.0.free {
            return Ok(Outcome::Blocked(Blocked::Network));
        }
        let out = self.0.place(job)?;
        self.1 |= gate && matches!(out, Outcome::Placed(_));
        Ok(out)
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.1 &= job.as_str() != "g";
        self.0.release(job)
    }
}

/// Each job's wait is split by why the head was blocked while it was
/// queued: b heads the queue blocked on GPUs until a ends at 10, then on
/// the network until the gate ends at 20; c waits behind it.
#[test]
fn waits_are_split_by_the_heads_cause() {
    let trace = vec![
        job("a", 0.0, 3, 10.0, None),
        job("g", 0.0, 1, 20.0, None),
        job("b", 1.0, 2, 1.0, None),
        job("c", 2.0, 1, 1.0, None),
    ];
    let r = replay(&mut Gate(Pool::new(4), false), &trace, fifo()).unwrap();
    assert_eq!(r.completed, 4);
    // b: 9 s on GPUs, 10 on the network; c: 8 and 10; a and g: none.
    assert!(close(r.avg_jwt_s, 37.0 / 4.0), "{}", r.avg_jwt_s);
    assert!(close(r.avg_jwt_gpu_s, 17.0 / 4.0), "{}", r.avg_jwt_gpu_s);
    assert!(
        close(r.avg_jwt_network_s, 20.0 / 4.0),
        "{}",
        r.avg_jwt_network_s
    );
    // Without network blocks, every wait is on GPUs.
    let r = replay(&mut Pool::new(4), &trace, fifo()).unwrap();
    assert!(r.avg_jwt_s > 0.0 && close(r.avg_jwt_gpu_s, r.avg_jwt_s));
    assert_eq!(r.avg_jwt_network_s, 0.0);
}

#[test]
fn ledger_counts_sharing_of_running_jobs_only() {
    // x and y overlap in time; z runs after both.
    let trace = vec![
        job("x", 0.0, 1, 10.0, None),
        job("y", 1.0, 1, 10.0, None),
        job("z", 30.0, 1, 1.0, None),
    ];
    let r = replay(&mut Sharing(Pool::new(8)), &trace, fifo()).unwrap();
    // y shares leaf1:up1 and spine1:p1 with x: two ports.
    assert_eq!(r.isolation_violations, 2);
    assert_eq!(r.gpu_conflicts, 0);
    assert_eq!(r.busy_rewires, 0);
    // An isolating placer (no shared ports) shows none.
    let r = replay(&mut Pool::new(8), &trace, fifo()).unwrap();
    assert_eq!(r.isolation_violations, 0);
}

#[test]
fn report_json_has_the_documented_field_names() {
    let r = replay(&mut Pool::new(4), &hol_trace(50.0, 100.0), fifo()).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    for k in [
        "jobs",
        "completed",
        "avg_jwt_s",
        "avg_jct_s",
        "avg_jrt_s",
        "blocked_gpu",
        "blocked_network",
        "decision_p50_us",
        "decision_p99_us",
        "isolation_violations",
        "busy_rewires",
        "search_cutoffs",
        "unproven_blocks",
        "policy",
        "queue",
        "topology",
        "makespan_s",
        "wall_ms",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["policy"], "pool");
    assert_eq!(v["queue"], "fifo");
    assert_eq!(v["stages"]["manual"], 3);
}

#[test]
fn unsorted_traces_are_refused() {
    let trace = vec![job("a", 5.0, 1, 1.0, None), job("b", 1.0, 1, 1.0, None)];
    assert!(matches!(
        replay(&mut Pool::new(4), &trace, fifo()),
        Err(ReplayError::Unsorted(_))
    ));
}

#[test]
fn progress_reaches_the_total() {
    let mut last = None;
    replay_with_progress(
        &mut Pool::new(4),
        &hol_trace(50.0, 100.0),
        fifo(),
        &mut |p| last = Some(p),
    )
    .unwrap();
    assert_eq!(last, Some(Progress { done: 3, total: 3 }));
}

fn via(leaf_side: &str, far_side: &str) -> ReservedLink {
    ReservedLink {
        leaf: "leaf1".into(),
        uplink: format!("up{leaf_side}").into(),
        peer: "spine1".into(),
        peer_port: format!("p{far_side}").into(),
        via: Some(OcsHop {
            ocs: "o1".into(),
            leaf_side: leaf_side.into(),
            far_side: far_side.into(),
        }),
    }
}

fn xc(a: &str, b: &str) -> CrossConnect {
    CrossConnect {
        ocs: "o1".into(),
        a: a.into(),
        b: b.into(),
    }
}

#[test]
fn ledger_sees_rewiring_of_busy_and_idle_ocs_ports() {
    let mut l = Ledger::with_patches(&[xc("1", "9"), xc("2", "10"), xc("3", "11")]);
    let a = id("a");
    l.start(0, &decision(&a, vec![via("1", "9")], vec![]));
    assert_eq!(l.audit(), Audit::default());
    // Rewiring idle ports 2 and 11 (partners 10 and 3 idle): fine.
    l.start(
        1,
        &decision(&id("b"), vec![via("2", "11")], vec![xc("2", "11")]),
    );
    assert_eq!(l.audit(), Audit::default());
    // Rewiring 3~9: 9 is held by a, and 9's partner 1 (held by a) goes dark.
    l.start(
        2,
        &decision(&id("c"), vec![via("3", "9")], vec![xc("3", "9")]),
    );
    assert_eq!(l.audit().busy_rewires, 2);
    assert_eq!(l.audit().isolation_violations, 2); // o1:9 and spine1:p9
}

#[test]
fn ledger_restores_initial_patches_and_checks_circuits() {
    let mut l = Ledger::with_patches(&[xc("1", "9"), xc("2", "10")]);
    l.start(
        0,
        &decision(&id("b"), vec![via("2", "9")], vec![xc("2", "9")]),
    );
    assert_eq!(l.audit(), Audit::default());
    l.finish(0);
    // 2~10 and 1~9 are back: a link over 1->9 needs no rewiring.
    l.start(1, &decision(&id("c"), vec![via("1", "9")], vec![]));
    assert_eq!(l.audit().circuit_mismatches, 0);
    // A link claiming 2->9 without its cross-connect is not a real circuit.
    l.start(2, &decision(&id("d"), vec![via("2", "9")], vec![]));
    assert_eq!(l.audit().circuit_mismatches, 1);
}

#[test]
fn percentile_is_nearest_rank() {
    let v: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(percentile(&v, 0.5), 50.0);
    assert_eq!(percentile(&v, 0.99), 99.0);
    assert_eq!(percentile(&v, 1.0), 100.0);
    assert_eq!(percentile(&[], 0.5), 0.0);
    assert_eq!(percentile(&[7.0], 0.01), 7.0);
}

/// Issue 13: a size with no vClos shape (20 GPUs on the testbed: 5 servers,
/// more than a leaf holds and no even split over two leaves) is placed in
/// the smallest larger shape (6 servers, 4 GPUs held idle), not dropped and
/// not waited for forever.
#[test]
fn a_size_with_no_slice_shape_runs_in_a_larger_one() {
    let text = include_str!("../../../topologies/testbed.yaml");
    let topo = std::sync::Arc::new(crate::topology::from_str("testbed.yaml", text).unwrap());
    let trace = vec![
        job("a", 0.0, 8, 100.0, None),
        job("wide", 1.0, 20, 5.0, None),
        job("c", 2.0, 4, 1.0, None),
    ];
    let mut p = crate::placement::VclosPlacer::new(topo);
    let opts = ReplayOptions {
        total_gpus: Some(32),
        ..ReplayOptions::default()
    };
    let r = replay(&mut p, &trace, opts).unwrap();
    assert_eq!((r.completed, r.unplaceable), (3, 0));
    assert_eq!((r.rounded_jobs, r.reserved_idle_gpus), (1, 4));
    assert!(
        close(r.reserved_idle_gpu_s, 4.0 * 5.0),
        "{}",
        r.reserved_idle_gpu_s
    );
    // wide waited for a to end: its shape needs 3 idle servers per leaf.
    assert!(
        close(r.avg_jwt_s, (0.0 + 99.0 + 98.0) / 3.0),
        "{}",
        r.avg_jwt_s
    );
    assert_eq!(r.isolation_violations, 0);
    // Utilisation counts asked-for GPUs only.
    let work = 8.0 * 100.0 + 20.0 * 5.0 + 4.0 * 1.0;
    assert!(close(r.utilization.unwrap(), work / (32.0 * r.makespan_s)));
}

/// A size no shape covers even on the empty fabric is dropped at once
/// (`NoShape`), while other jobs run: nobody waits for it.
#[test]
fn a_size_no_shape_covers_is_dropped_at_once() {
    let topo = crate::topology::generate::narrow_topology();
    let trace = vec![
        job("a", 0.0, 4, 100.0, None),
        job("big", 1.0, 16, 5.0, None),
        job("c", 2.0, 4, 1.0, None),
    ];
    let mut p = crate::placement::VclosPlacer::new(topo);
    let r = replay(&mut p, &trace, fifo()).unwrap();
    assert_eq!((r.completed, r.unplaceable), (2, 1));
    assert!(close(r.avg_jwt_s, 0.0), "{}", r.avg_jwt_s);
}

/// The sharing mode (issue 16) on a busy 512-GPU trace: jobs share links
/// only by agreement (the independent ledger counts no violation), some
/// do share, nobody is lost, and waiting falls against isolation alone.
#[test]
fn sharing_mode_shares_by_agreement_and_waits_less() {
    use crate::placement::{SharingMode, SliceOptions, VclosPlacer};
    use crate::trace::generate::{generate, Params, Sizes};
    let text = include_str!("../../../topologies/cluster512.yaml");
    let topo = std::sync::Arc::new(crate::topology::from_str("cluster512.yaml", text).unwrap());
    let trace = generate(&Params {
        jobs: 300,
        gpus: 512,
        load: 0.9,
        seed: 7,
        sizes: Sizes::Uniform { step: 8, max: 128 },
    })
    .unwrap()
    .jobs;
    let run = |sharing| {
        let options = SliceOptions {
            sharing,
            ..SliceOptions::default()
        };
        let mut p = VclosPlacer::new(topo.clone()).with_options(options);
        let opts = ReplayOptions {
            ledger: Ledger::from_topology(&topo),
            ..ReplayOptions::default()
        };
        replay(&mut p, &trace, opts).unwrap()
    };
    let alone = run(None);
    let shared = run(Some(SharingMode::default()));
    assert_eq!(alone.shared_jobs, 0);
    assert!(shared.shared_jobs > 0, "nothing shared");
    assert!(shared.shared_ports >= 2 * shared.shared_jobs);
    assert_eq!(shared.isolation_violations, 0);
    assert_eq!(shared.completed + shared.unplaceable, 300);
    assert_eq!(shared.completed, alone.completed);
    assert!(
        shared.avg_jwt_s < alone.avg_jwt_s,
        "{} vs {}",
        shared.avg_jwt_s,
        alone.avg_jwt_s
    );
}

/// A decision that lists a link as shared with someone other than its
/// holder is a violation, not agreed sharing; so is sharing with a holder
/// that never opted in.
#[test]
fn ledger_counts_sharing_without_agreement_as_violations() {
    use crate::decision::{SharedLink, Sharing as Section, SharingPhase};
    let link = || ReservedLink {
        leaf: "leaf1".into(),
        uplink: "up1".into(),
        peer: "spine1".into(),
        peer_port: "p1".into(),
        via: None,
    };
    let section = |with: &str| Section {
        time_shift_ms: 0,
        score: 1.0,
        profile: vec![SharingPhase {
            ms: 10,
            demand: 1.0,
        }],
        links: vec![SharedLink {
            leaf: "leaf1".into(),
            uplink: "up1".into(),
            with: vec![id(with)],
            vlan: 101,
        }],
        time_shared: Vec::new(),
    };
    let opted = |name: &str, with: Option<&str>| {
        let mut d = decision(&id(name), vec![link()], vec![]);
        d.sharing = Some(Box::new(with.map_or_else(
            || Section {
                links: vec![],
                ..section("x")
            },
            section,
        )));
        d
    };
    // Agreed: both opted in, y names x.
    let mut l = Ledger::new();
    l.start(0, &opted("x", None));
    l.start(1, &opted("y", Some("x")));
    let a = l.audit();
    assert_eq!(
        (a.isolation_violations, a.shared_ports, a.shared_jobs),
        (0, 2, 1)
    );
    // y names someone else.
    let mut l = Ledger::new();
    l.start(0, &opted("x", None));
    l.start(1, &opted("y", Some("w")));
    assert_eq!(l.audit().isolation_violations, 2);
    // x never opted in.
    let mut l = Ledger::new();
    l.start(0, &decision(&id("x"), vec![link()], vec![]));
    l.start(1, &opted("y", Some("x")));
    assert_eq!(
        (l.audit().isolation_violations, l.audit().shared_ports),
        (2, 0)
    );
}

/// FIFO without backfilling on `total` GPUs (the strict reference).
fn fifo_on(total: u32) -> ReplayOptions {
    ReplayOptions {
        total_gpus: Some(total),
        ..fifo()
    }
}

fn backfill_easy(total: u32) -> ReplayOptions {
    ReplayOptions {
        backfill: Backfill::Easy { depth: 10 },
        ..fifo_on(total)
    }
}

/// a holds 3 of 4 GPUs until 10; b (4 GPUs) waits for it. c (1 GPU, ends
/// at 7) fits before b's reservation; d (1 GPU, 20 s) would not end by 10
/// and b leaves no extra GPU, so it waits.
fn short_job_behind_a_blocked_head() -> Vec<Job> {
    vec![
        job("a", 0.0, 3, 10.0, None),
        job("b", 1.0, 4, 5.0, None),
        job("c", 2.0, 1, 5.0, None),
        job("d", 3.0, 1, 20.0, None),
    ]
}

#[test]
fn easy_backfill_starts_a_job_that_ends_before_the_heads_reservation() {
    let trace = short_job_behind_a_blocked_head();
    let strict = replay(&mut Pool::new(4), &trace, fifo_on(4)).unwrap();
    // b at 10, c and d after b at 15.
    assert_eq!(strict.backfilled_jobs, 0);
    assert_eq!(strict.backfill, "none");
    assert!((strict.avg_jwt_s - (0.0 + 9.0 + 13.0 + 12.0) / 4.0).abs() < 1e-9);
    let with_records = |o: ReplayOptions| ReplayOptions {
        job_records: true,
        ..o
    };
    assert!(strict.job_records.is_empty(), "records kept unasked");
    let strict = replay(&mut Pool::new(4), &trace, with_records(fifo_on(4))).unwrap();
    let easy = replay(&mut Pool::new(4), &trace, with_records(backfill_easy(4))).unwrap();
    // c at 2 (backfilled), b still at 10, d at 15.
    assert_eq!(easy.backfilled_jobs, 1);
    records_agree(&strict);
    records_agree(&easy);
    let c = &easy.job_records[2];
    assert_eq!(
        (c.job.as_str(), c.start_s, c.end_s),
        ("c", Some(2.0), Some(7.0))
    );
    assert_eq!(c.started_as, Some(StartedAs::Behind));
    // b was refused on GPUs when it arrived and when c ended.
    assert_eq!(
        (
            easy.job_records[1].blocked_gpu,
            easy.job_records[1].started_as
        ),
        (2, Some(StartedAs::Head))
    );
    assert_eq!(easy.backfill, "easy");
    assert!((easy.avg_jwt_s - (0.0 + 9.0 + 0.0 + 12.0) / 4.0).abs() < 1e-9);
    assert_eq!(easy.completed, 4);
}

#[test]
fn easy_backfill_lets_a_long_job_use_only_the_gpus_the_head_leaves() {
    // 8 GPUs; a holds 4 until 10; b needs 6, so at 10 it leaves 2 extra.
    // c (3 GPUs, long) fits now but not in the extra: it waits. d (2 GPUs,
    // long) fits in the extra: it starts at 3, and b still starts at 10.
    let trace = vec![
        job("a", 0.0, 4, 10.0, None),
        job("b", 1.0, 6, 5.0, None),
        job("c", 2.0, 3, 100.0, None),
        job("d", 3.0, 2, 100.0, None),
    ];
    let easy = replay(&mut Pool::new(8), &trace, backfill_easy(8)).unwrap();
    assert_eq!(easy.backfilled_jobs, 1);
    // a 0, b 9, c 13 (after b ends at 15), d 0.
    assert!((easy.avg_jwt_s - (0.0 + 9.0 + 13.0 + 0.0) / 4.0).abs() < 1e-9);
    assert_eq!(easy.max_jwt_s, 13.0);
    // Without backfilling d waits behind c.
    let strict = replay(&mut Pool::new(8), &trace, fifo_on(8)).unwrap();
    assert!((strict.avg_jwt_s - (0.0 + 9.0 + 13.0 + 12.0) / 4.0).abs() < 1e-9);
}

/// `topologies/NAME.yaml` and a trace of `jobs` jobs on its 512 GPUs at
/// load 0.9, sizes any multiple of 8 up to 128 (issue 13's shape).
fn hard_512(name: &str, jobs: u32, seed: u64) -> (std::sync::Arc<Topology>, Vec<Job>) {
    let path = format!("{}/../topologies/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let topo = std::sync::Arc::new(crate::topology::load(std::path::Path::new(&path)).unwrap());
    let trace = crate::trace::generate::generate(&crate::trace::generate::Params {
        jobs,
        gpus: 512,
        load: 0.9,
        seed,
        sizes: crate::trace::generate::Sizes::Uniform { step: 8, max: 128 },
    })
    .unwrap()
    .jobs;
    (topo, trace)
}

#[test]
fn easy_backfill_on_the_real_engines_keeps_isolation_and_every_job() {
    let (topo, trace) = hard_512("cluster512", 300, 3);
    for policy in [
        crate::placement::Policy::Best,
        crate::placement::Policy::Vclos,
    ] {
        let run = |backfill| {
            let mut p = crate::placement::placer(policy, std::sync::Arc::clone(&topo)).unwrap();
            let opts = ReplayOptions {
                backfill,
                total_gpus: Some(512),
                ledger: Ledger::from_topology(&topo),
                ..ReplayOptions::default()
            };
            replay(p.as_mut(), &trace, opts).unwrap()
        };
        let strict = run(Backfill::None);
        let easy = run(Backfill::Easy { depth: 100 });
        assert!(easy.backfilled_jobs > 0, "{policy:?}: nothing backfilled");
        assert_eq!(easy.completed, strict.completed, "{policy:?}");
        assert_eq!(easy.isolation_violations, 0);
        assert_eq!(easy.gpu_conflicts, 0);
        assert!(
            easy.avg_jwt_s < strict.avg_jwt_s,
            "{policy:?}: {} vs {}",
            easy.avg_jwt_s,
            strict.avg_jwt_s
        );
    }
}

#[test]
fn slice_reservations_keep_isolation_and_every_job_and_start_heads_on_time() {
    let (topo, trace) = hard_512("cluster512-ocs", 600, 5);
    let run = |backfill| {
        let policy = crate::placement::Policy::OcsVclos;
        let mut p = crate::placement::placer(policy, std::sync::Arc::clone(&topo)).unwrap();
        let opts = ReplayOptions {
            backfill,
            job_records: true,
            ..ReplayOptions::for_topology(&topo)
        };
        replay(p.as_mut(), &trace, opts).unwrap()
    };
    let easy = run(Backfill::Easy { depth: 100 });
    let slices = run(Backfill::Slices { depth: 100 });
    eprintln!(
        "easy {} s, slices {} s ({} backfilled, {} reservations, {} started on them, {} late)",
        easy.avg_jct_s,
        slices.avg_jct_s,
        slices.backfilled_jobs,
        slices.reservations,
        slices.reserved_starts,
        slices.late_heads
    );
    assert_eq!(slices.completed, easy.completed);
    assert_eq!(slices.backfill, "slices");
    records_agree(&easy);
    records_agree(&slices);
    let apart = slices
        .job_records
        .iter()
        .filter(|j| j.started_as == Some(StartedAs::Apart));
    assert!(
        apart.count() > 0,
        "no job started apart from a reserved slice"
    );
    assert!(slices.backfilled_jobs > 0 && slices.reservations > 0);
    for r in [&easy, &slices] {
        assert_eq!(r.isolation_violations, 0);
        assert_eq!(r.gpu_conflicts, 0);
        assert_eq!(r.busy_rewires, 0);
    }
    assert_eq!(easy.reservations, 0);
    assert!(slices.avg_jct_s < easy.avg_jct_s);
    // A head whose reserved slice is free starts on it, before any search:
    // here nearly every reservation.
    assert!(
        slices.reserved_starts * 10 >= slices.reservations * 9
            && slices.reserved_starts <= slices.reservations,
        "{} of {} reservations started on",
        slices.reserved_starts,
        slices.reservations
    );
    // Jobs backfilled past a head's reserved time keep off its slice, so
    // under exact estimates (the ideal network) heads start when reserved
    // (26 of 171 late without the mask and the check, 1 of 2 000 without
    // starting on the reservation at 2048 GPUs).
    assert_eq!(
        slices.late_heads, 0,
        "{} of {} heads late",
        slices.late_heads, slices.reservations
    );
}

/// The per-job records of `r` add up to its aggregates: one per job, the
/// completed ones average `avg_jct_s`, the backfilled ones are those not
/// started as the head, and the refused attempts are the report's.
fn records_agree(r: &Report) {
    let recs = &r.job_records;
    assert_eq!(recs.len(), r.jobs);
    let done: Vec<&JobRecord> = recs.iter().filter(|j| j.fate == Fate::Completed).collect();
    assert_eq!(done.len(), r.completed);
    let jct: f64 = done.iter().map(|j| j.end_s.unwrap() - j.arrival_s).sum();
    assert!(
        close(jct / done.len() as f64, r.avg_jct_s),
        "{} vs {}",
        jct,
        r.avg_jct_s
    );
    assert!(done
        .iter()
        .all(|j| j.start_s.is_some() && j.held_gpus >= j.gpus));
    let behind = recs
        .iter()
        .filter(|j| matches!(j.started_as, Some(StartedAs::Behind | StartedAs::Apart)));
    assert_eq!(behind.count() as u64, r.backfilled_jobs);
    let refused = |f: fn(&JobRecord) -> u32| recs.iter().map(|j| u64::from(f(j))).sum::<u64>();
    assert_eq!(refused(|j| j.blocked_gpu), r.blocked_attempts_gpu);
    assert_eq!(refused(|j| j.blocked_network), r.blocked_attempts_network);
    let mut csv = Vec::new();
    write_job_records(recs, &mut csv).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap().lines().count(),
        recs.len() + 1
    );
}

/// A decision over small pools of names, so jobs collide: links through
/// OCS `o1` (some rewired), and GPUs. `name` gives each string its `Name`.
fn random_decision(
    rng: &mut rand_pcg::Pcg64Mcg,
    job: usize,
    name: &mut dyn FnMut(String) -> crate::topology::Name,
) -> Decision {
    use rand::RngExt;
    let mut d = decision(&id(&format!("j{job}")), vec![], vec![]);
    for _ in 0..rng.random_range(0..4) {
        let (a, b) = (rng.random_range(1..9), rng.random_range(9..17));
        d.vclos.links.push(ReservedLink {
            leaf: name(format!("leaf{}", a % 3)),
            uplink: name(format!("up{a}")),
            peer: name("spine1".to_string()),
            peer_port: name(format!("p{b}")),
            via: Some(OcsHop {
                ocs: name("o1".to_string()),
                leaf_side: name(a.to_string()),
                far_side: name(b.to_string()),
            }),
        });
        if rng.random_bool(0.5) {
            d.vclos.cross_connects.push(CrossConnect {
                ocs: name("o1".to_string()),
                a: name(a.to_string()),
                b: name(b.to_string()),
            });
        }
    }
    for _ in 0..rng.random_range(0..3) {
        d.gpus.push(GpuRef {
            server: name(format!("s{}", rng.random_range(0..3))),
            gpu: rng.random_range(0..4),
        });
    }
    d
}

/// The ledger finds a port by its names' addresses first: decisions whose
/// names are one shared allocation per string and decisions whose every
/// name is freshly allocated must be audited alike, step by step.
#[test]
fn ledger_audits_shared_and_fresh_names_alike() {
    use rand::{RngExt, SeedableRng};
    let patches: Vec<CrossConnect> = (1..9)
        .map(|i| xc(&i.to_string(), &(i + 8).to_string()))
        .collect();
    let (mut by_addr, mut by_string) = (
        Ledger::with_patches(&patches),
        Ledger::with_patches(&patches),
    );
    let mut pool: HashMap<String, crate::topology::Name> = HashMap::new();
    let mut shared = |s: String| pool.entry(s.clone()).or_insert_with(|| s.into()).clone();
    let mut fresh = |s: String| crate::topology::Name::from(s);
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    let mut running = Vec::new();
    for job in 0..3000 {
        if !running.is_empty() && rng.random_bool(0.5) {
            let j = running.swap_remove(rng.random_range(0..running.len()));
            by_addr.finish(j);
            by_string.finish(j);
        } else {
            let seed = rng.random::<u64>();
            let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            by_addr.start(job, &random_decision(&mut r, job, &mut shared));
            let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            by_string.start(job, &random_decision(&mut r, job, &mut fresh));
            running.push(job);
        }
        assert_eq!(by_addr.audit(), by_string.audit(), "after job {job}");
        assert_eq!(by_addr.running(), by_string.running());
    }
    let a = by_addr.audit();
    assert!(a.isolation_violations > 0 && a.busy_rewires > 0);
    assert!(a.gpu_conflicts > 0 && a.circuit_mismatches > 0);
}

/// The audit on its own thread ([`super::auditor`]) counts what the ledger
/// counts when its starts and finishes are applied in the loop: every
/// event arrives, in order, the last partial batch too. Prefixes of one
/// random sequence (shorter and longer than a batch and than the
/// channel), so a lost, late or reordered event shows in one of them.
#[test]
fn the_audit_thread_counts_what_the_ledger_counts() {
    use rand::{RngExt, SeedableRng};
    use std::sync::Arc;
    let patches: Vec<CrossConnect> = (1..9)
        .map(|i| xc(&i.to_string(), &(i + 8).to_string()))
        .collect();
    let mut name = |s: String| crate::topology::Name::from(s);
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
    // (job, its decision when it starts, None when it finishes)
    let mut events = Vec::new();
    let mut running = Vec::new();
    for job in 0..6000 {
        if !running.is_empty() && rng.random_bool(0.5) {
            let j = running.swap_remove(rng.random_range(0..running.len()));
            events.push((j, None));
        } else {
            let d = Arc::new(random_decision(&mut rng, job, &mut name));
            events.push((job, Some(d)));
            running.push(job);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for len in [1, 2, 10, 100, 1000, 5000, events.len()] {
        let (mut inline, mut piped) = (
            Ledger::with_patches(&patches),
            Auditor::spawn(Ledger::with_patches(&patches)).unwrap(),
        );
        for (job, d) in &events[..len] {
            match d {
                Some(d) => {
                    inline.start(*job, d);
                    piped.start(*job, d);
                }
                None => {
                    inline.finish(*job);
                    piped.finish(*job);
                }
            }
        }
        let piped = piped.ledger().unwrap();
        let audit = piped.audit();
        assert_eq!(audit, inline.audit(), "after {len} events");
        assert_eq!(piped.running(), inline.running(), "after {len} events");
        seen.insert(audit.isolation_violations);
    }
    assert!(seen.len() > 3, "the prefixes' audits differ: {seen:?}");
}

#[test]
fn rearranging_moves_running_slices_with_every_audit_clean() {
    let (topo, trace) = hard_512("cluster512-ocs", 400, 2);
    use crate::network::routes::Routing;
    use crate::placement::rearrange::Moves;
    use crate::placement::Policy;
    for (policy, fair_share, moves) in [
        (Policy::OcsVclos, false, Moves::BreakBeforeMake),
        (Policy::OcsVclos, true, Moves::BreakBeforeMake),
        (Policy::Vclos, true, Moves::MakeBeforeBreak),
    ] {
        let run = |rearrange| {
            let mut p = crate::placement::placer(policy, std::sync::Arc::clone(&topo)).unwrap();
            let network = fair_share.then(|| Router::new(&topo, Routing::for_policy(policy, 1)));
            let opts = ReplayOptions {
                rearrange,
                moves,
                network,
                ..ReplayOptions::for_topology(&topo)
            };
            replay(p.as_mut(), &trace, opts).unwrap()
        };
        let (strict, moving) = (run(0), run(4));
        assert_eq!((strict.moved_jobs, strict.rearranged_jobs), (0, 0));
        assert!(moving.moved_jobs > 0, "{policy}: nothing moved");
        assert_eq!((moving.rearrange, &*moving.moves), (4, &*moves.to_string()));
        assert_eq!(strict.moves, "");
        assert_eq!(moving.completed, strict.completed, "{policy}");
        let audits = |r: &Report| {
            let a = [r.isolation_violations, r.busy_rewires, r.gpu_conflicts];
            (a, r.circuit_mismatches, r.contended_jobs)
        };
        assert_eq!(audits(&moving), ([0; 3], 0, 0), "{policy} {fair_share}");
        // On this trace (seed 2) moves shorten OCS-vClos's queue: 10 439 ->
        // 8 854 s avg JCT on the ideal network.
        if policy == Policy::OcsVclos {
            assert!(moving.avg_jct_s < strict.avg_jct_s, "{policy} {fair_share}");
        }
    }
}

/// A GPU pool that refuses on the network what it cannot hold, and every
/// job named `x...` while job `b` waits; it records every job it is asked
/// to rearrange for (and moves nothing).
struct Picky {
    pool: Pool,
    b_started: bool,
    refused_x: u32,
    asked: Vec<JobId>,
}

impl Placer for Picky {
    fn name(&self) -> &'static str {
        "picky"
    }
    fn place(&mut self, job: &JobRequest) -> Result<Outcome, PlacementError> {
        if job.id.as_str().starts_with('x') && !self.b_started {
            self.refused_x += 1;
            return Ok(Outcome::Blocked(Blocked::Network));
        }
        let out = self.pool.place(job)?;
        self.b_started |= job.id.as_str() == "b" && matches!(out, Outcome::Placed(_));
        Ok(match out {
            Outcome::Blocked(_) => Outcome::Blocked(Blocked::Network),
            placed => placed,
        })
    }
    fn release(&mut self, job: &JobId) -> Result<Decision, PlacementError> {
        self.pool.release(job)
    }
    fn rearrange(
        &mut self,
        job: &JobRequest,
        _: usize,
        _: crate::placement::rearrange::Moves,
    ) -> Result<Option<crate::placement::rearrange::Rearranged>, PlacementError> {
        self.asked.push(job.id.clone());
        Ok(None)
    }
}

#[test]
fn only_the_queues_head_may_move_running_jobs() {
    // `a` holds 6 of 8 GPUs; head `b` (4) waits for it; `x1` (2) behind it
    // fits the GPUs left and is tried by backfilling, refused on the network.
    let trace = vec![
        job("a", 0.0, 6, 100.0, None),
        job("b", 1.0, 4, 10.0, None),
        job("x1", 2.0, 2, 10.0, None),
    ];
    let mut p = Picky {
        pool: Pool::new(8),
        b_started: false,
        refused_x: 0,
        asked: Vec::new(),
    };
    let opts = ReplayOptions {
        rearrange: 4,
        ..backfill_easy(8)
    };
    let r = replay(&mut p, &trace, opts).unwrap();
    assert_eq!(r.completed, 3);
    assert!(p.refused_x > 0, "x1 was never tried behind the head");
    assert!(p.asked.contains(&id("b")), "{:?}", p.asked);
    assert!(!p.asked.contains(&id("x1")), "{:?}", p.asked);
}

#[test]
fn slice_reservations_with_rounding_up_forecast_rounded_slices_and_keep_every_rule() {
    use crate::placement::{placer_on, Policy, SliceOptions};
    let (topo, trace) = hard_512("cluster512-ocs", 600, 5);
    let run = |round_up| {
        let options = SliceOptions {
            round_up,
            ..SliceOptions::default()
        };
        let state = crate::state::FabricState::new(std::sync::Arc::clone(&topo));
        let mut p = placer_on(Policy::Vclos, state, options).unwrap();
        let opts = ReplayOptions {
            backfill: Backfill::Slices { depth: 100 },
            ..ReplayOptions::for_topology(&topo)
        };
        replay(p.as_mut(), &trace, opts).unwrap()
    };
    let (plain, rounded) = (run(0), run(2));
    eprintln!(
        "slices {} s, with --round-up 2 {} s ({} rounded, {} late)",
        plain.avg_jct_s, rounded.avg_jct_s, rounded.rounded_jobs, rounded.late_heads
    );
    assert_eq!(rounded.completed, trace.len());
    assert!(rounded.rounded_jobs > 0 && rounded.reserved_idle_gpu_s > 0.0);
    assert!(rounded.reservations > 0 && rounded.backfilled_jobs > 0);
    assert_eq!(
        (
            rounded.isolation_violations,
            rounded.gpu_conflicts,
            rounded.busy_rewires
        ),
        (0, 0, 0)
    );
    // Forecasts are made with the placer's options, so a head that will be
    // rounded up is reserved its rounded slice and starts on time.
    assert_eq!(rounded.late_heads, 0);
    assert_eq!((plain.rounded_jobs, plain.late_heads), (0, 0));
}
