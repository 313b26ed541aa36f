//! The service with 10,000 jobs held (issue 17: "The service holds 10,000
//! jobs in state with `GET /v1/jobs` under 50 ms").
//!
//! Builds a state directory holding 10,000 admitted single-GPU jobs on a
//! generated 10,240-GPU fabric (160 leaves x 64 spines, 8 servers of 8 GPUs
//! per leaf, no OCS): the decisions come from the vClos placer and are saved
//! through the state store, as `vclos serve` reads them. The service's
//! router (`vclos::server::router`, with its bearer-token check) then
//! serves on loopback in process, and curl, a third-party HTTP client,
//! fetches `GET /v1/jobs`; each iteration is the transfer time curl itself
//! reports (`%{time_total}`: connect, request, the whole response), so the
//! cost of starting curl is not counted. No device is contacted: reading
//! the held jobs needs none, and `vclos serve` contacts devices at startup
//! only to settle a journal an interrupted run left.
//!
//! Run: `cargo bench --bench service`. With `VCLOS_BENCH_KEEP=DIR` the
//! topology (`DIR/topology.yaml`) and the state (`DIR/state`) are written
//! there and kept, e.g. to time the binary:
//! `vclos serve --topology DIR/topology.yaml --state DIR/state`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::decision::Decision;
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::{self, JobRequest, Outcome, Policy};
use vclos::server::{self, Config, Token};
use vclos::state::store;
use vclos::topology::{self, generate as topogen, Topology};

const JOBS: usize = 10_000;
const TOKEN: &str = "bench-token-0123456789abcdef";

/// The fabric and its state directory with [`JOBS`] held jobs.
fn state_with_jobs(dir: &Path) -> Arc<Topology> {
    let params = topogen::Params::uniform("service10k", 160, 64, 8, 0);
    let text = topogen::generate(&params).unwrap();
    std::fs::write(dir.join("topology.yaml"), &text).unwrap();
    let topo = Arc::new(topology::from_str("topology.yaml", &text).unwrap());
    assert!(topo.gpu_count() >= JOBS, "{} GPUs", topo.gpu_count());
    let mut placer = placement::placer(Policy::Vclos, Arc::clone(&topo)).unwrap();
    let held: Vec<Decision> = (0..JOBS)
        .map(|i| {
            let id = JobId::new(format!("job-{i:05}")).unwrap();
            match placer.place(&JobRequest::new(id, 1)).unwrap() {
                Outcome::Placed(d) => (*d).clone(),
                Outcome::Blocked(b) => panic!("job {i} blocked: {b:?}"),
            }
        })
        .collect();
    let state = dir.join("state");
    store::init(&state, &topo.name).unwrap();
    store::save(&state, &topo.name, &held).unwrap();
    topo
}

/// One `GET /v1/jobs` by curl: (HTTP status, curl's transfer time, bytes).
fn get_jobs(url: &str) -> (u16, Duration, u64) {
    let o = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w"])
        .arg("%{http_code} %{time_total} %{size_download}")
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .arg(format!("{url}/v1/jobs"))
        .output()
        .unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    let mut f = out.split_whitespace();
    let code = f.next().unwrap().parse().unwrap();
    let secs: f64 = f.next().unwrap().parse().unwrap();
    let bytes = f.next().unwrap().parse().unwrap();
    (code, Duration::from_secs_f64(secs), bytes)
}

fn service(c: &mut Criterion) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("VCLOS_BENCH_KEEP") {
        Some(d) => {
            std::fs::create_dir_all(&d).unwrap();
            std::path::PathBuf::from(d)
        }
        None => scratch.path().to_path_buf(),
    };
    let t = Instant::now();
    let topo = state_with_jobs(&dir);
    eprintln!(
        "service: {JOBS} jobs placed and saved in {:.1} s ({} GPUs; state.json {} bytes)",
        t.elapsed().as_secs_f64(),
        topo.gpu_count(),
        std::fs::metadata(store::state_path(&dir.join("state")))
            .unwrap()
            .len()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let t = Instant::now();
    let fabric = Fabric::load(Arc::clone(&topo), dir.join("state")).unwrap();
    eprintln!(
        "service: the state loaded in {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    // Where a response's time goes, outside the service (the best of 5):
    // serialising from the state, as the handler does, and what cloning
    // the decisions first (the handler before) added.
    let best = |f: &dyn Fn() -> usize| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let json = serde_json::to_vec(&fabric.state().decisions()).unwrap();
    let serialise = best(&|| {
        serde_json::to_vec(&fabric.state().decisions())
            .unwrap()
            .len()
    });
    let clone = best(&|| fabric.jobs().len());
    eprintln!(
        "service: serialising the {JOBS} decisions takes {:.2} ms ({} bytes); cloning them first took {:.2} ms more",
        serialise.as_secs_f64() * 1e3,
        json.len(),
        clone.as_secs_f64() * 1e3
    );
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: Some(Token::from_file_text(TOKEN).unwrap()),
        request_timeout: Duration::from_secs(30),
        max_waiting: 64,
        tls: None,
        elect: None,
    };
    let app = server::router(fabric, &config);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(config.listen))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, app).await });
    let (code, took, bytes) = get_jobs(&url);
    assert_eq!(code, 200);
    assert_eq!(bytes, json.len() as u64, "the response is the decisions");
    eprintln!(
        "service: GET /v1/jobs, first: {:.2} ms, {bytes} bytes",
        took.as_secs_f64() * 1e3
    );
    let mut g = c.benchmark_group("service");
    g.sample_size(30).measurement_time(Duration::from_secs(10));
    g.bench_function("get_jobs_10000", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let (code, took, _) = get_jobs(&url);
                    assert_eq!(code, 200);
                    took
                })
                .sum()
        })
    });
    g.finish();
}

criterion_group!(benches, service);
criterion_main!(benches);
