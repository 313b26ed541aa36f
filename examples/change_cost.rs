//! Measurement: what one state change costs as the held jobs grow, on the
//! state directory, without devices (the O(jobs) part of every change:
//! the state re-read and compared, the intent built from every decision,
//! the journal with the state before and after, state.json rewritten).
//!
//! `cargo run --release --example change_cost -- TOPOLOGY HELD JOB_GPUS ROUNDS`
//!
//! Fills a state directory with up to `HELD` jobs of `JOB_GPUS` GPUs
//! (placed by vClos on the topology, written as state.json), then times
//! `ROUNDS` submissions and releases of a one-GPU job (a job inside one
//! server changes no device, so what is timed is the state's own work) and
//! prints medians, the state's size and the jobs held.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use vclos::controller::NoProgress;
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::{self, JobRequest, Outcome, Policy};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let topo = Arc::new(vclos::topology::load(Path::new(&a[1])).unwrap());
    let want: usize = a[2].parse().unwrap();
    let gpus: u32 = a[3].parse().unwrap();
    let rounds: usize = a[4].parse().unwrap();
    let mut p = placement::placer(Policy::Vclos, Arc::clone(&topo)).unwrap();
    let mut held = Vec::new();
    while held.len() < want {
        let job = JobRequest::new(JobId::new(format!("h{}", held.len())).unwrap(), gpus);
        match p.place(&job).unwrap() {
            Outcome::Placed(d) => held.push((*d).clone()),
            Outcome::Blocked(_) => break,
        }
    }
    let dir = tempfile::tempdir().unwrap();
    vclos::state::store::init(dir.path(), &topo.name).unwrap();
    vclos::state::store::save(dir.path(), &topo.name, &held).unwrap();
    let bytes = std::fs::metadata(dir.path().join("state.json"))
        .map(|m| m.len())
        .unwrap_or(0);
    let mut f = Fabric::load(Arc::clone(&topo), dir.path()).unwrap();
    let (mut submit, mut release) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        let id = JobId::new(format!("probe{i}")).unwrap();
        let t = Instant::now();
        f.submit(&id, 1, &NoProgress).await.unwrap();
        submit.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        f.release(&id, &NoProgress).await.unwrap();
        release.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "{} jobs of {gpus} GPUs held, state.json {:.1} MB: submit {:.2} ms, release {:.2} ms (medians of {rounds})",
        held.len(),
        bytes as f64 / 1e6,
        median(submit),
        median(release)
    );
}
