//! Diagnostic (issue 13, item 3): where does FIFO head-of-line waiting
//! come from? Replays a trace with a plain FIFO loop and, for every head
//! that is blocked, records its size, the cause, how long it held the
//! queue, and whether a slightly larger size (1-4 more servers) would
//! have been placed on the same fabric state at the first block. For
//! OCS-vClos it also asks whether vClos (no rewiring) would have placed the
//! head on the same state: its slices are OCS-vClos slices, so a "yes"
//! would mean the OCS-vClos search missed one.
//!
//! `cargo run --release --example head_blocking -- TOPOLOGY TRACE POLICY`
//! (`ROWS=N` prints the N largest (cause, size) rows; default 40).
#![allow(clippy::unwrap_used)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::Path;
use std::sync::Arc;

use vclos::names::JobId;
use vclos::placement::{self, Blocked, JobRequest, Outcome, Placer, Policy};

#[derive(Default, Debug)]
struct Acc {
    episodes: u64,
    wait_s: f64,
    rescue: [u64; 5],
    vclos_would: u64,
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let topo = Arc::new(vclos::topology::load(Path::new(&a[1])).unwrap());
    let trace = vclos::trace::load(Path::new(&a[2])).unwrap();
    let policy: Policy = a[3].parse().unwrap();
    let t = u32::from(topo.gpus_per_server);
    let mut p = placement::placer(policy, Arc::clone(&topo)).unwrap();
    let mut done: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut next = 0;
    let mut head = 0;
    let mut blocked_since: Option<(f64, Blocked)> = None;
    let mut by: BTreeMap<(String, u32), Acc> = BTreeMap::new();
    let mut total_wait = 0.0;
    while head < trace.len() {
        // Next event: arrival or completion.
        let arr = trace.get(next).map(|j| j.arrival_s);
        let comp = done.peek().map(|Reverse((e, _))| *e as f64 / 1e3);
        let now = match (arr, comp) {
            (Some(x), Some(y)) => x.min(y),
            (Some(x), None) => x,
            (None, Some(y)) => y,
            (None, None) => break,
        };
        while let Some(Reverse((e, i))) = done.peek().copied() {
            if e as f64 / 1e3 > now {
                break;
            }
            done.pop();
            p.release(&trace[i].id).unwrap();
        }
        while next < trace.len() && trace[next].arrival_s <= now {
            next += 1;
        }
        while head < next {
            let j = &trace[head];
            let req = JobRequest::new(j.id.clone(), j.gpus);
            match p.place(&req).unwrap() {
                Outcome::Placed(_) => {
                    if let Some((since, cause)) = blocked_since.take() {
                        let k = j.gpus.div_ceil(t);
                        let acc = by.entry((format!("{cause:?}"), k)).or_default();
                        acc.wait_s += now - since;
                        total_wait += now - since;
                    }
                    done.push(Reverse((((now + j.duration_s) * 1e3) as u64, head)));
                    head += 1;
                }
                Outcome::Blocked(b) => {
                    if blocked_since.is_none() {
                        blocked_since = Some((now, b));
                        let k = j.gpus.div_ceil(t);
                        let acc = by.entry((format!("{b:?}"), k)).or_default();
                        acc.episodes += 1;
                        if b == Blocked::Network && policy == Policy::OcsVclos {
                            if let Some(st) = p.fabric() {
                                let mut v = placement::VclosPlacer::with_state(st.clone());
                                if matches!(v.place(&req), Ok(Outcome::Placed(_))) {
                                    acc.vclos_would += 1;
                                }
                            }
                        }
                        if b == Blocked::Network {
                            for extra in 1..=4u32 {
                                if let Some(st) = p.fabric() {
                                    let mut c: Box<dyn placement::Placer> = match policy {
                                        Policy::OcsVclos => Box::new(
                                            placement::OcsVclosPlacer::with_state(st.clone()),
                                        ),
                                        _ => {
                                            Box::new(placement::VclosPlacer::with_state(st.clone()))
                                        }
                                    };
                                    let r = JobRequest::new(
                                        JobId::new("probe").unwrap(),
                                        (k + extra) * t,
                                    );
                                    if matches!(c.place(&r), Ok(Outcome::Placed(_))) {
                                        acc.rescue[extra as usize] += 1;
                                        break;
                                    }
                                }
                            }
                        }
                    }
                    break;
                }
            }
        }
    }
    println!("total head-blocked time {total_wait:.0} s");
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1.wait_s.total_cmp(&a.1.wait_s));
    for ((cause, k), acc) in rows.iter().take(
        std::env::var("ROWS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(40),
    ) {
        println!("{cause:8} k={k:3} episodes {:4} wait {:9.0} s ({:4.1}%) rescued by +1..4 servers {:?} vclos would {}", acc.episodes, acc.wait_s, 100.0 * acc.wait_s / total_wait, &acc.rescue[1..], acc.vclos_would);
    }
}
