//! A Jepsen-style concurrency harness (issue 12, item 7): workers submit
//! and release random jobs on one state directory against the emulated
//! testbed-ocs fabric for a bounded time — `vclos` processes with random
//! `kill -9`s, and tasks of one process through the library — then the
//! checker (tests/concurrency/checker.rs) asserts that every acknowledged
//! admission is held, every acknowledged release is gone, no job appears
//! that was not admitted, no GPU, port or OCS port is held twice, and the
//! devices hold exactly state.json's intent.
//!
//! Short by default (CI); longer runs and replaying a seed are described in
//! docs/concurrency.md, e.g.
//! `VCLOS_CHAOS_SECS=600 VCLOS_CHAOS_WORKERS=8 cargo test --release --test concurrency -- --nocapture`.
//! Nothing about timing is asserted.
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;

#[path = "concurrency/checker.rs"]
mod checker;

#[path = "concurrency/workload.rs"]
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use checker::{check, Kind, Observed, Op, Outcome};
use workload::{Config, Run};

/// The emulated fabric on a runtime of its own (so that workers blocking a
/// thread, e.g. on a lock, never starve the devices), an initialised state
/// directory, and the topology file aimed at the fabric.
struct Rig {
    emu: common::Emu,
    topo_file: PathBuf,
    state: PathBuf,
    /// Last: the fabric's tasks run on it until the rig is dropped.
    _rt: tokio::runtime::Runtime,
}

impl Rig {
    fn start(cfg: &Config) -> Rig {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // The OCS switches in its real 50 ms; leaf1 answers slowly.
        let emu = rt.block_on(common::emu_on(common::TESTBED, Duration::from_millis(50)));
        emu.fab
            .faults("leaf1")
            .unwrap()
            .delay_replies(cfg.leaf_delay);
        let topo_file = emu.dir.path().join("emu.yaml");
        let state = emu.state_dir();
        workload::init_state(&state, &emu.topo.name);
        Rig {
            emu,
            topo_file,
            state,
            _rt: rt,
        }
    }

    /// The devices brought to the empty state's intent.
    async fn sync(&self) {
        let e = workload::vclos(
            &self.topo_file,
            &self.state,
            &["reconcile", "--fix", "--json"],
            None,
        )
        .await
        .unwrap();
        assert!(e.success, "{}{}", e.stdout, e.stderr);
    }
}

fn workload_runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap()
}

/// Print the figures and the checker's verdict; panic unless it passed.
fn judge(what: &str, cfg: &Config, run: &Run, kills: u64, observed: &Observed) {
    let history = &run.history();
    let verdict = check(history, observed);
    let n = |f: &dyn Fn(&Op) -> bool| history.iter().filter(|o| f(o)).count();
    let submits = n(&|o| matches!(o.kind, Kind::Submit { .. }));
    let acked_admissions =
        n(&|o| matches!(o.kind, Kind::Submit { .. }) && o.outcome == Outcome::Ok);
    let acked_releases = n(&|o| o.kind == Kind::Release && o.outcome == Outcome::Ok);
    let titan = n(&|o| {
        matches!(o.kind, Kind::Submit { .. }) && o.outcome == Outcome::Ok && workload::titan(&o.job)
    });
    let refused = n(&|o| matches!(o.outcome, Outcome::Failed(_)));
    let killed = n(&|o| o.outcome == Outcome::Unknown("killed".into()));
    let unknown = n(&|o| matches!(o.outcome, Outcome::Unknown(_)));
    println!(
        "{what}: seed {} (replay: VCLOS_CHAOS_SEED={}), {} s, {} workers",
        cfg.seed, cfg.seed, cfg.secs, cfg.workers
    );
    println!(
        "{what}: {} ops ({submits} submits, {} releases), kills sent {kills}, ops killed {killed}, \
         recoveries {}, acked admissions {acked_admissions}, acked releases {acked_releases}, refused {refused}, \
         unknown {unknown}, held at end {}",
        history.len(),
        history.len() - submits,
        run.recoveries(),
        observed.decisions.len()
    );
    println!("{what}: {titan} acked admissions placed by titan");
    println!(
        "{what}: lost {}, resurrected {}, phantom {}, double-booked {}, device problems {}",
        verdict.lost.len(),
        verdict.resurrected.len(),
        verdict.phantom.len(),
        verdict.double_booked.len(),
        verdict.device_problems.len()
    );
    let mut took: Vec<f64> = history
        .iter()
        .map(|o| (o.completed.saturating_sub(o.invoked)).as_secs_f64() * 1e3)
        .collect();
    took.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        took.get(((took.len() as f64 * p) as usize).min(took.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "{what}: operation latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pct(0.5),
        pct(0.99),
        took.last().copied().unwrap_or(0.0)
    );
    // Why operations were refused or unknown, by first words.
    let mut why: std::collections::BTreeMap<String, usize> = Default::default();
    for o in history {
        if let Outcome::Failed(w) | Outcome::Unknown(w) = &o.outcome {
            let key = reason(w);
            *why.entry(key).or_default() += 1;
        }
    }
    for (w, c) in &why {
        println!("{what}:   {c:>4} x {w}");
    }
    if !verdict.ok() {
        // The history of the jobs at fault.
        let bad: std::collections::BTreeSet<&str> = verdict
            .lost
            .iter()
            .chain(&verdict.resurrected)
            .chain(&verdict.phantom)
            .filter_map(|l| l.split(':').next())
            .take(10)
            .collect();
        for o in history.iter().filter(|o| bad.contains(o.job.as_str())) {
            println!(
                "  {:>9.3}s..{:>9.3}s w{} {:?} {} -> {:?}",
                o.invoked.as_secs_f64(),
                o.completed.as_secs_f64(),
                o.worker,
                o.kind,
                o.job,
                o.outcome
            );
        }
    }
    assert!(
        verdict.ok(),
        "{what} (seed {}): the checker found violations:\n{verdict}",
        cfg.seed
    );
    assert!(titan > 0, "{what}: no titan admission was acknowledged");
}

/// An outcome's reason without job names and paths, to count alike ones.
fn reason(why: &str) -> String {
    let words: Vec<&str> = why
        .split_whitespace()
        .map(|w| {
            if w.starts_with('`') || w.contains('/') {
                "_"
            } else {
                w
            }
        })
        .take(10)
        .collect();
    words.join(" ")
}

/// Start the rig, run `worker` as each of the configured workers (with
/// the killer when `kills`) until the run is over, observe, judge.
fn chaos<F, Fut>(what: &str, secs: u64, kills: bool, worker: F)
where
    F: Fn(Run, usize, &Config, &Rig) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    chaos_with(what, secs, kills, |_| {}, || {}, worker);
}

/// [`chaos`] with `before` run once the devices are in sync (e.g. start a
/// service) and `after` once the workers are done, before the observation.
fn chaos_with<F, Fut>(
    what: &str,
    secs: u64,
    kills: bool,
    before: impl FnOnce(&Rig),
    after: impl FnOnce(),
    worker: F,
) where
    F: Fn(Run, usize, &Config, &Rig) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let kills_on = kills;
    let cfg = Config::from_env(secs);
    println!("{what}: seed {} (VCLOS_CHAOS_SEED to replay)", cfg.seed);
    let rig = Rig::start(&cfg);
    // Spare threads: a worker blocking one (e.g. waiting for the state
    // directory) never keeps the one holding it from running.
    let rt = workload_runtime(cfg.workers + 2);
    rt.block_on(async {
        rig.sync().await;
        before(&rig);
        let run = Run::new(&cfg);
        let workers: Vec<_> = (0..cfg.workers)
            .map(|w| tokio::spawn(worker(run.clone(), w, &cfg, &rig)))
            .collect();
        let every = if kills {
            cfg.kill_every
        } else {
            Duration::ZERO
        };
        let killer = tokio::spawn(workload::killer(run.clone(), cfg.seed, every));
        for w in workers {
            w.await.unwrap();
        }
        let kills = killer.await.unwrap();
        after();
        let observed = workload::observe(&rig.topo_file, &rig.state).await;
        judge(what, &cfg, &run, kills, &observed);
        // Nobody died, so no operation may have found a journal to recover:
        // one found would be a live transaction's (what the lock prevents).
        if !kills_on {
            assert_eq!(
                run.recoveries(),
                0,
                "{what}: a live transaction was recovered"
            );
        }
    });
}

#[test]
fn processes_submitting_and_releasing_with_kill_9_lose_nothing() {
    chaos("processes", 60, true, |run, w, cfg, rig| {
        workload::process_worker(run, w, cfg.seed, rig.topo_file.clone(), rig.state.clone())
    });
}

/// Start `vclos serve` (`cmd`) and read the line it prints once it listens.
fn spawn_serve(cmd: &mut std::process::Command) -> (std::process::Child, String) {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (child, line)
}

#[test]
fn api_clients_of_vclos_serve_submitting_and_releasing_lose_nothing() {
    // The service owns the state directory while it runs; stopped
    // (SIGTERM: the transaction in flight finishes) before the observation.
    let dir = tempfile::tempdir().unwrap();
    let token = "chaos-token-0123456789abcdef";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token).unwrap();
    let service: std::sync::Mutex<Option<std::process::Child>> = std::sync::Mutex::new(None);
    let api: std::sync::OnceLock<std::sync::Arc<workload::Api>> = std::sync::OnceLock::new();
    chaos_with(
        "api",
        20,
        false,
        |rig| {
            let (child, line) = spawn_serve(
                std::process::Command::new(workload::BIN)
                    .args(["serve", "--listen", "127.0.0.1:0", "--max-waiting", "1024"])
                    .arg("--topology")
                    .arg(&rig.topo_file)
                    .arg("--state")
                    .arg(&rig.state)
                    .arg("--token-file")
                    .arg(&token_file),
            );
            let url = line.trim().rsplit_once(' ').unwrap().1.to_string();
            let _ = api.set(std::sync::Arc::new(workload::Api {
                urls: vec![url],
                token: token.into(),
            }));
            *service.lock().unwrap() = Some(child);
        },
        || {
            if let Some(mut child) = service.lock().unwrap().take() {
                let pid = child.id().to_string();
                std::process::Command::new("kill")
                    .args(["-TERM", &pid])
                    .status()
                    .unwrap();
                assert!(
                    child.wait().unwrap().success(),
                    "vclos serve did not stop cleanly"
                );
            }
        },
        |run, w, cfg, _rig| {
            workload::api_worker(run, w, cfg.seed, std::sync::Arc::clone(api.get().unwrap()))
        },
    );
    // Some admissions named their servers (a scheduler's allocation), and
    // each was placed on exactly those (asserted as they were answered).
    let named = workload::NAMED_ADMITTED.load(std::sync::atomic::Ordering::Relaxed);
    println!("api: {named} admissions on servers the request named");
    assert!(named > 0, "no admission named its servers");
}

#[test]
fn tasks_of_one_process_submitting_and_releasing_lose_nothing() {
    chaos("tasks", 30, false, |run, w, cfg, rig| {
        workload::task_worker(run, w, cfg.seed, rig.emu.topo.clone(), rig.state.clone())
    });
}

#[cfg(feature = "etcd")]
#[path = "etcd_common/mod.rs"]
mod etcd;

/// Two `vclos serve` instances of one fabric on a 3-member etcd (issue 18,
/// item 5), each on a fixed port so a restarted one keeps its URL.
#[cfg(feature = "etcd")]
struct Instances {
    children: [Option<std::process::Child>; 2],
    ports: [u16; 2],
    args: Vec<std::ffi::OsString>,
}

#[cfg(feature = "etcd")]
impl Instances {
    fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    /// Start instance `i` (`--init` for the first start of all) and wait
    /// for its listening line.
    fn start(&mut self, i: usize, init: bool) {
        let (child, line) = spawn_serve(
            std::process::Command::new(workload::BIN)
                .args(&self.args)
                .args(["--listen", &format!("127.0.0.1:{}", self.ports[i])])
                .args(init.then_some("--init")),
        );
        assert!(line.contains("listening"), "{line}");
        self.children[i] = Some(child);
    }

    /// `kill -9` instance `i`.
    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The instance that leads right now.
    fn leader(&self) -> Option<usize> {
        (0..2).find(|&i| {
            let o = std::process::Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "5"])
                .arg(format!("{}/leaderz", self.url(i)))
                .output()
                .unwrap();
            o.stdout == b"200"
        })
    }

    /// Wait (a hang guard of a minute) until one leads, i.e. it settled.
    fn wait_leader(&self) -> usize {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(i) = self.leader() {
                return i;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "no leader elected");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The committed state and any journal, read from etcd itself.
#[cfg(feature = "etcd")]
fn etcd_state(endpoints: &str, topology: &str) -> (Vec<u8>, bool) {
    let endpoints: Vec<String> = endpoints.split(',').map(str::to_string).collect();
    let key = |k: &str| format!("/vclos/{topology}/{k}");
    let (state, journal) = (key("state"), key("journal"));
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let mut c = etcd_client::Client::connect(&endpoints, None)
                .await
                .unwrap();
            let s = c.get(state, None).await.unwrap().kvs()[0].value().to_vec();
            let j = !c.get(journal, None).await.unwrap().kvs().is_empty();
            (s, j)
        })
    })
    .join()
    .unwrap()
}

#[cfg(feature = "etcd")]
#[test]
fn api_clients_of_two_instances_on_etcd_with_the_leader_killed_lose_nothing() {
    use rand::RngExt as _;
    use std::sync::{Arc, Mutex, OnceLock};

    let ert = tokio::runtime::Runtime::new().unwrap();
    let Some(cluster) = ert.block_on(etcd::Cluster::start(3)) else {
        return;
    };
    let endpoints = cluster.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let token = "chaos-token-0123456789abcdef";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token).unwrap();
    let instances: Arc<Mutex<Option<Instances>>> = Arc::new(Mutex::new(None));
    let api: OnceLock<Arc<workload::Api>> = OnceLock::new();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer: Mutex<Option<std::thread::JoinHandle<u32>>> = Mutex::new(None);
    let seed = workload::Config::from_env(0).seed;
    let topology: OnceLock<String> = OnceLock::new();
    let state_dir: OnceLock<PathBuf> = OnceLock::new();
    chaos_with(
        "ha",
        30,
        false,
        |rig| {
            let _ = topology.set(rig.emu.topo.name.to_string());
            let _ = state_dir.set(rig.state.clone());
            let mut args: Vec<std::ffi::OsString> = vec!["serve".into(), "--topology".into()];
            args.push(rig.topo_file.clone().into());
            for a in ["--store", "etcd", "--etcd-endpoints", &endpoints] {
                args.push(a.into());
            }
            for a in [
                "--etcd-lease-ttl",
                "2",
                "--max-waiting",
                "1024",
                "--token-file",
            ] {
                args.push(a.into());
            }
            args.push(token_file.clone().into());
            let mut inst = Instances {
                children: [None, None],
                ports: [etcd::free_port(), etcd::free_port()],
                args,
            };
            inst.start(0, true);
            inst.wait_leader();
            inst.start(1, false);
            let urls = vec![inst.url(0), inst.url(1)];
            let _ = api.set(Arc::new(workload::Api {
                urls,
                token: token.into(),
            }));
            *instances.lock().unwrap() = Some(inst);
            // kill -9 the leader every 2-5 s; restart it half a second later.
            let (instances, stop) = (Arc::clone(&instances), Arc::clone(&stop));
            *killer.lock().unwrap() = Some(std::thread::spawn(move || {
                let mut rng = workload::rng_of(seed, 7777);
                let mut kills = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(rng.random_range(2000..5000)));
                    let mut g = instances.lock().unwrap();
                    let inst = g.as_mut().unwrap();
                    if let Some(i) = inst.leader() {
                        inst.kill(i);
                        kills += 1;
                        std::thread::sleep(Duration::from_millis(500));
                        inst.start(i, false);
                    }
                }
                kills
            }));
        },
        || {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let kills = killer.lock().unwrap().take().unwrap().join().unwrap();
            println!("ha: leader killer seed {seed}: {kills} leaders killed with kill -9");
            assert!(kills > 0, "no leader was killed");
            let mut g = instances.lock().unwrap();
            let inst = g.as_mut().unwrap();
            // A leader elected has settled any journal; then stop both.
            inst.wait_leader();
            for c in inst.children.iter_mut().flatten() {
                let pid = c.id().to_string();
                std::process::Command::new("kill")
                    .args(["-TERM", &pid])
                    .status()
                    .unwrap();
                let _ = c.wait();
            }
            // The checker reads the state etcd holds, put where it reads a
            // state directory's (the same document).
            let (state, journal) = etcd_state(&endpoints, topology.get().unwrap());
            assert!(
                !journal,
                "a journal is left in etcd after the leader settled"
            );
            std::fs::write(state_dir.get().unwrap().join("state.json"), state).unwrap();
        },
        |run, w, cfg, _rig| workload::api_worker(run, w, cfg.seed, Arc::clone(api.get().unwrap())),
    );
    let _ = (ert, cluster);
}
