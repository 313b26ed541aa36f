//! Controller benchmarks (real time).
//!
//! 1. Fan-out: one transaction over N devices whose commit takes 20 ms
//!    (an in-bench driver that sleeps; everything else is instant). With
//!    enough parallelism 96 devices (cluster2048's switch count) should
//!    cost about one device's time; the ratio is printed at the end.
//! 2. The real thing on a small scale: two emulated OCS over Telnet/TL1,
//!    each swapping two cross-connects, with switching delay 0 (pure
//!    protocol + controller overhead) and 50 ms (a real OCS).
//!
//! `cargo bench --bench apply` (add `-- fanout` or `-- ocs` to filter).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::Criterion;
use tokio::runtime::Runtime;
use vclos::controller::{
    apply, ApplyOptions, ApplyReport, ChangeSet, DeviceChange, DriverFactory, NoProgress, Verify,
};
use vclos::emulator::busy::NeverBusy;
use vclos::emulator::ocs::OcsModel;
use vclos::emulator::tl1::{self, Login, Tl1Options, Tl1Server};
use vclos::topology::{DeviceId, Ocs, OcsId, Role};
use vclos_drivers::telnet::TelnetConfig;
use vclos_drivers::tl1::{Tl1Config, Tl1Driver};
use vclos_drivers::{Capabilities, CommitId, Driver, DriverError, LoadMode};

const COMMIT: Duration = Duration::from_millis(20);

/// A device whose commit takes [`COMMIT`]; every other call is instant.
struct SlowCommit {
    name: String,
    committed: bool,
}

#[async_trait]
impl Driver for SlowCommit {
    fn device(&self) -> &str {
        &self.name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            candidate: true,
            rollback: true,
            ..Capabilities::default()
        }
    }
    async fn open(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    async fn close(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    async fn get_config(&mut self) -> Result<String, DriverError> {
        Ok(if self.committed { "new\n" } else { "old\n" }.to_string())
    }
    async fn load_candidate(&mut self, _: &str, _: LoadMode) -> Result<(), DriverError> {
        Ok(())
    }
    async fn compare_config(&mut self) -> Result<String, DriverError> {
        Ok("-old\n+new\n".to_string())
    }
    async fn commit(&mut self, _: Option<Duration>) -> Result<CommitId, DriverError> {
        tokio::time::sleep(COMMIT).await;
        self.committed = true;
        Ok(CommitId("1".into()))
    }
    async fn confirm(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    async fn discard(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    async fn rollback(&mut self, _: Option<&CommitId>) -> Result<(), DriverError> {
        self.committed = false;
        Ok(())
    }
}

fn slow_factory() -> impl DriverFactory {
    |name: &str| -> Result<Box<dyn Driver>, DriverError> {
        Ok(Box::new(SlowCommit {
            name: name.to_string(),
            committed: false,
        }))
    }
}

fn fan_out_set(n: usize) -> ChangeSet {
    ChangeSet::new(
        (0..n)
            .map(|i| {
                DeviceChange::new(format!("leaf{i}"), Role::Leaf, 0, "new")
                    .with_verify(Verify::Equals("new".into()))
            })
            .collect(),
    )
}

fn run_fan_out(rt: &Runtime, n: usize, max_parallel: usize) -> ApplyReport {
    let opts = ApplyOptions {
        max_parallel,
        ..ApplyOptions::default()
    };
    let report = rt
        .block_on(apply(fan_out_set(n), &slow_factory(), &opts, &NoProgress))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.is_committed(), "{report}");
    report
}

fn bench_fan_out(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("fanout");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    for (n, max) in [(1, 96), (96, 96), (96, 32)] {
        g.bench_function(format!("{n}dev-max{max}"), |b| {
            b.iter(|| run_fan_out(rt, n, max))
        });
    }
    g.finish();
}

/// Median wall time of `runs` transactions.
fn median(rt: &Runtime, n: usize, max: usize, runs: usize) -> Duration {
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            run_fan_out(rt, n, max);
            t0.elapsed()
        })
        .collect();
    t.sort();
    t[runs / 2]
}

// ---------------------------------------------------------------------------
// Two emulated OCS over TL1.

const PASSWORD: &str = "bench-pw";

struct EmuOcs {
    _server: Tl1Server,
    config: Tl1Config,
}

async fn emu_ocs(name: &str, id: u32, delay: Duration) -> EmuOcs {
    let spec = Ocs {
        name: name.into(),
        device: DeviceId(id),
        ports: (1..=8).map(|i| i.to_string().into()).collect(),
        port_peer: vec![None; 8],
        patches: vec![(0, 4), (1, 5)],
    };
    let model =
        Arc::new(OcsModel::new(OcsId(id), &spec, Arc::new(NeverBusy)).with_switching_delay(delay));
    let opts = Tl1Options::new(Login {
        username: "admin".into(),
        password: PASSWORD.into(),
    });
    let server = tl1::serve(model, opts)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = server.local_addr();
    EmuOcs {
        config: Tl1Config {
            host: addr.ip().to_string(),
            port: addr.port(),
            username: "admin".into(),
            password: PASSWORD.into(),
            telnet: TelnetConfig::default(),
        },
        _server: server,
    }
}

/// Alternate between two patch tables so every iteration really switches:
/// {1~5, 2~6} <-> {1~6, 2~5}: one DLT-PATCH and two ENT-PATCH per OCS.
fn ocs_set(flip: bool) -> ChangeSet {
    let table = if flip { "1,6\n2,5\n" } else { "1,5\n2,6\n" };
    let want = if flip {
        "\"1,6\"\n\"2,5\"\n"
    } else {
        "\"1,5\"\n\"2,6\"\n"
    };
    ChangeSet::new(
        ["ocs1", "ocs2"]
            .iter()
            .map(|n| {
                DeviceChange::new(*n, Role::Ocs, 0, table)
                    .with_mode(LoadMode::Replace)
                    .with_verify(Verify::Equals(want.into()))
            })
            .collect(),
    )
}

fn bench_ocs(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("ocs");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for delay_ms in [0u64, 50] {
        let delay = Duration::from_millis(delay_ms);
        let boxes = rt.block_on(async {
            [
                emu_ocs("ocs1", 0, delay).await,
                emu_ocs("ocs2", 1, delay).await,
            ]
        });
        let configs: Vec<(String, Tl1Config)> = ["ocs1", "ocs2"]
            .iter()
            .zip(&boxes)
            .map(|(n, b)| (n.to_string(), b.config.clone()))
            .collect();
        let factory = move |name: &str| -> Result<Box<dyn Driver>, DriverError> {
            let cfg = configs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, c)| c.clone())
                .unwrap_or_else(|| panic!("{name}"));
            Ok(Box::new(Tl1Driver::new(name, cfg)))
        };
        let flips = AtomicUsize::new(0);
        g.bench_function(format!("2ocs-swap-switch{delay_ms}ms"), |b| {
            b.iter(|| {
                let flip = flips.fetch_add(1, Ordering::Relaxed).is_multiple_of(2);
                let report = rt
                    .block_on(apply(
                        ocs_set(flip),
                        &factory,
                        &ApplyOptions::default(),
                        &NoProgress,
                    ))
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(report.is_committed(), "{report}");
            })
        });
        drop(boxes);
    }
    g.finish();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut c = Criterion::default().configure_from_args();
    bench_fan_out(&mut c, &rt);
    bench_ocs(&mut c, &rt);
    c.final_summary();

    // The headline ratio, measured directly (medians of 30 transactions).
    let filter_ok = std::env::args()
        .skip(1)
        .all(|a| a.starts_with('-') || "fanout".contains(&a));
    if filter_ok {
        let one = median(&rt, 1, 96, 30);
        let many = median(&rt, 96, 96, 30);
        let bounded = median(&rt, 96, 32, 30);
        println!(
            "fan-out (commit = {COMMIT:?}): 1 device {one:.1?}, 96 devices {many:.1?} \
             (ratio {:.2}x), 96 devices max_parallel=32 {bounded:.1?} (ratio {:.2}x)",
            many.as_secs_f64() / one.as_secs_f64(),
            bounded.as_secs_f64() / one.as_secs_f64(),
        );
    }
}
