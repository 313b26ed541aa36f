//! The workload: workers submitting and releasing random jobs on one state
//! directory as a cluster scheduler would, through the `vclos` binary (one
//! child process per operation, `kill -9`ed at random) or through the
//! library (one `Fabric` per operation in each task), recording every
//! operation's invocation, completion and outcome for the checker.
//!
//! A `kill` is SIGKILL (`tokio::process::Child::start_kill`, which is
//! `kill(2)` with SIGKILL on Unix: the process gets no chance to clean up),
//! the same as `kill -9`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tokio::process::Command;
use tokio::sync::oneshot;
use vclos::controller::NoProgress;
use vclos::decision::Decision;
use vclos::jobs::{Applied, Fabric, JobsError};
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::topology::Topology;

use super::checker::{Kind, Observed, Op, Outcome};

pub const BIN: &str = env!("CARGO_BIN_EXE_vclos");

/// Job sizes drawn (testbed-ocs has 8 servers of 4 GPUs on two leaves):
/// one server or less (no device touched), whole servers on one leaf, and
/// two-leaf jobs that take spine VRFs and rewire the OCS.
const SIZES: [u32; 9] = [1, 2, 4, 8, 8, 12, 16, 20, 24];

/// An operation that has not finished after this is killed (unknown):
/// above the 60 s a command waits for the state directory's lock.
const OP_TIMEOUT: Duration = Duration::from_secs(180);

/// Run parameters, from the environment (documented in docs/concurrency.md).
#[derive(Debug, Clone)]
pub struct Config {
    pub secs: u64,
    pub workers: usize,
    pub seed: u64,
    /// Mean time between kills (0: none).
    pub kill_every: Duration,
    /// Reply delay of leaf1 (widens the windows in which operations overlap).
    pub leaf_delay: Duration,
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={v:?}: not a whole number: {e}")),
        Err(_) => default,
    }
}

impl Config {
    /// `VCLOS_CHAOS_SECS` (default `secs`), `VCLOS_CHAOS_WORKERS` (4),
    /// `VCLOS_CHAOS_SEED` (from the clock), `VCLOS_CHAOS_KILL_MS` (3000),
    /// `VCLOS_CHAOS_LEAF_DELAY_MS` (10).
    pub fn from_env(secs: u64) -> Config {
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Config {
            secs: env_u64("VCLOS_CHAOS_SECS", secs),
            workers: env_u64("VCLOS_CHAOS_WORKERS", 4).max(1) as usize,
            seed: env_u64("VCLOS_CHAOS_SEED", clock),
            kill_every: Duration::from_millis(env_u64("VCLOS_CHAOS_KILL_MS", 3000)),
            leaf_delay: Duration::from_millis(env_u64("VCLOS_CHAOS_LEAF_DELAY_MS", 10)),
        }
    }
}

/// Create the state directory holding an empty state for `topology`.
pub fn init_state(dir: &Path, topology: &str) {
    vclos::state::store::init(dir, topology).unwrap();
    assert!(vclos::state::store::load(dir, topology).unwrap().is_empty());
}

/// The operations in flight, what may be released, the history.
struct Shared {
    next_job: u64,
    /// Jobs whose submission was acknowledged or unknown and that no
    /// acknowledged release has freed (nor is one in flight).
    releasable: Vec<String>,
    history: Vec<Op>,
    /// Operations that first recovered a journal another one left.
    recoveries: u64,
    /// Per worker: how to kill its operation in flight.
    kill: Vec<Option<oneshot::Sender<()>>>,
}

/// The run: shared state and the clock.
#[derive(Clone)]
pub struct Run {
    shared: Arc<Mutex<Shared>>,
    start: Instant,
    end: Instant,
}

impl Run {
    pub fn new(cfg: &Config) -> Run {
        let start = Instant::now();
        Run {
            shared: Arc::new(Mutex::new(Shared {
                next_job: 0,
                releasable: vec![],
                history: vec![],
                recoveries: 0,
                kill: (0..cfg.workers).map(|_| None).collect(),
            })),
            start,
            end: start + Duration::from_secs(cfg.secs),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap()
    }

    /// The next operation of a worker: a release of a releasable job, or a
    /// submission of a fresh job.
    /// After a submission refused for want of room (`full`), a release
    /// whenever one is possible, as a scheduler would wait for a job to end.
    fn next_op(&self, rng: &mut Pcg64Mcg, full: bool) -> (Kind, String) {
        let mut s = self.lock();
        // The more jobs are held, the likelier a release (as jobs finish):
        // the fabric neither stays full nor empty.
        let held = s.releasable.len() as f64;
        if held > 0.0 && (full || rng.random_bool(held / (held + 2.0))) {
            let i = rng.random_range(0..s.releasable.len());
            return (Kind::Release, s.releasable.swap_remove(i));
        }
        s.next_job += 1;
        let gpus = SIZES[rng.random_range(0..SIZES.len())];
        (Kind::Submit { gpus }, format!("j{}", s.next_job))
    }

    /// Record an operation; true if it was a submission refused for want
    /// of room.
    fn record(
        &self,
        worker: usize,
        kind: Kind,
        job: String,
        invoked: Instant,
        outcome: Outcome,
    ) -> bool {
        let full = matches!(&outcome, Outcome::Failed(why)
            if why.contains("cannot be placed now") || why.contains("cannot be placed on the servers"));
        let mut s = self.lock();
        // What a scheduler would retry or may release later.
        let again = match (&kind, &outcome) {
            (Kind::Submit { .. }, o) => !matches!(o, Outcome::Failed(_)),
            (Kind::Release, Outcome::Ok) => false,
            (Kind::Release, Outcome::Failed(why)) => !why.contains("is not held"),
            (Kind::Release, Outcome::Unknown(_)) => true,
        };
        if again {
            s.releasable.push(job.clone());
        }
        s.history.push(Op {
            worker,
            kind,
            job,
            invoked: invoked - self.start,
            completed: self.start.elapsed(),
            outcome,
        });
        full
    }

    pub fn history(&self) -> Vec<Op> {
        self.lock().history.clone()
    }

    /// How many operations recovered a journal first (a kill landed while
    /// a transaction was in flight).
    pub fn recoveries(&self) -> u64 {
        self.lock().recoveries
    }

    /// After a refusal for want of room with nothing to release, wait a
    /// little for a job to end instead of spinning.
    async fn pause(&self, full: bool) {
        if full && self.lock().releasable.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn over(&self) -> bool {
        Instant::now() >= self.end
    }

    /// The loop of every worker until the run is over: the next operation,
    /// performed by `op`, its outcome recorded.
    async fn drive<F, Fut>(&self, worker: usize, seed: u64, mut op: F)
    where
        F: FnMut(Kind, String) -> Fut,
        Fut: std::future::Future<Output = Outcome>,
    {
        let mut rng = rng_of(seed, worker);
        let mut full = false;
        while !self.over() {
            self.pause(full).await;
            let (kind, job) = self.next_op(&mut rng, full);
            let invoked = Instant::now();
            let outcome = op(kind.clone(), job.clone()).await;
            full = self.record(worker, kind, job, invoked, outcome);
        }
    }
}

/// Per-worker generator: the seed and the worker index.
pub fn rng_of(seed: u64, worker: usize) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(seed ^ (worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A child's exit and output, or why it has none.
pub struct Exit {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Run `vclos ARGS --topology T --state S` until it exits or `kill` fires.
pub async fn vclos(
    topo: &Path,
    state: &Path,
    args: &[&str],
    kill: Option<oneshot::Receiver<()>>,
) -> Result<Exit, String> {
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--topology")
        .arg(topo)
        .arg("--state")
        .arg(state)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let out = tokio::spawn(read_all(child.stdout.take()));
    let err = tokio::spawn(read_all(child.stderr.take()));
    let kill = async {
        match kill {
            Some(rx) => rx.await.is_ok(),
            None => std::future::pending().await,
        }
    };
    let killed = tokio::select! {
        st = child.wait() => st.map_err(|e| format!("wait: {e}"))?,
        true = kill => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err("killed".into());
        }
        () = tokio::time::sleep(OP_TIMEOUT) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(format!("timed out after {OP_TIMEOUT:?}"));
        }
    };
    Ok(Exit {
        success: killed.success(),
        stdout: out.await.unwrap_or_default(),
        stderr: err.await.unwrap_or_default(),
    })
}

/// Everything a child writes to one pipe.
async fn read_all<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> String {
    let mut buf = Vec::new();
    if let Some(mut p) = pipe {
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut p, &mut buf).await;
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Errors that say the operation was refused before anything changed.
const REFUSALS: [&str; 11] = [
    "cannot be placed now",
    "can never be placed",
    // The state lock's wait ran out: nothing was changed.
    "gave up after waiting",
    "is not held",
    "is already held",
    "is not admitted",
    "is held by job",
    "recover first",
    "plan is stale",
    "refused before sending",
    "recovering an interrupted operation",
];

/// First line of an error output, for the history.
fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

/// The outcome of a `job submit|release --json` as a scheduler reads it.
pub fn classify(exit: &Exit) -> Outcome {
    let outcome = serde_json::from_str::<serde_json::Value>(&exit.stdout)
        .map(|v| v["report"]["outcome"].clone())
        .unwrap_or_default();
    let result = outcome["result"].as_str();
    match (exit.success, result) {
        (true, Some("committed")) => Outcome::Ok,
        (false, Some(r @ ("aborted" | "rolled-back"))) => Outcome::Failed(format!(
            "{r}: {}",
            first_line(outcome["cause"].as_str().unwrap_or(""))
        )),
        (_, Some(other)) => Outcome::Unknown(format!("report {other}, exit ok {}", exit.success)),
        (true, None) => Outcome::Unknown("exit 0 without a report".into()),
        (false, None) => {
            // The error itself (anything before it is a recovery's report).
            let line = exit
                .stderr
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or(&exit.stderr);
            if REFUSALS.iter().any(|r| line.contains(r)) {
                Outcome::Failed(first_line(line))
            } else {
                Outcome::Unknown(first_line(line))
            }
        }
    }
}

/// One worker of the process workload: a `vclos` child per operation.
pub async fn process_worker(run: Run, worker: usize, seed: u64, topo: PathBuf, state: PathBuf) {
    let r = run.clone();
    run.drive(worker, seed, |kind, job| {
        let (run, topo, state) = (r.clone(), topo.clone(), state.clone());
        async move {
            let (tx, rx) = oneshot::channel();
            run.lock().kill[worker] = Some(tx);
            let gpus = match kind {
                Kind::Submit { gpus } => gpus.to_string(),
                Kind::Release => String::new(),
            };
            let args: Vec<&str> = match kind {
                Kind::Submit { .. } if titan(&job) => vec![
                    "job", "submit", "--id", &job, "--gpus", &gpus, "--policy", "titan", "--json",
                ],
                Kind::Submit { .. } => {
                    vec!["job", "submit", "--id", &job, "--gpus", &gpus, "--json"]
                }
                Kind::Release => vec!["job", "release", "--id", &job, "--json"],
            };
            let exit = vclos(&topo, &state, &args, Some(rx)).await;
            run.lock().kill[worker] = None;
            match exit {
                Ok(e) => {
                    if e.stderr.contains("recovered an interrupted") {
                        run.lock().recoveries += 1;
                    }
                    classify(&e)
                }
                Err(why) => Outcome::Unknown(why),
            }
        }
    })
    .await;
}

/// Kill a random operation in flight every `every` on average (0.5x to
/// 1.5x), until the run is over; returns how many kills were sent.
pub async fn killer(run: Run, seed: u64, every: Duration) -> u64 {
    let mut rng = rng_of(seed, usize::MAX - 1);
    let mut sent = 0;
    if every.is_zero() {
        return 0;
    }
    while !run.over() {
        let gap = every.mul_f64(rng.random_range(0.5..1.5));
        tokio::time::sleep(gap).await;
        let mut s = run.lock();
        let busy: Vec<usize> = (0..s.kill.len()).filter(|&i| s.kill[i].is_some()).collect();
        if busy.is_empty() {
            continue;
        }
        let w = busy[rng.random_range(0..busy.len())];
        if let Some(tx) = s.kill[w].take() {
            if tx.send(()).is_ok() {
                sent += 1;
            }
        }
    }
    sent
}

/// The outcome of a library operation: errors that refuse before anything
/// is sent are refusals (`Fabric::apply`'s contract: `Err` means nothing
/// was sent, except a state file that could not be saved after commit).
fn classify_lib(r: Result<Applied, JobsError>) -> Outcome {
    match r {
        Ok(a) if a.report.is_committed() => Outcome::Ok,
        Ok(a) if a.report.is_unchanged() => Outcome::Failed(format!("{:?}", a.report.outcome)),
        Ok(a) => Outcome::Unknown(format!("{:?}", a.report.outcome)),
        Err(
            e @ (JobsError::Blocked { .. }
            | JobsError::Plan(_)
            | JobsError::State(_)
            | JobsError::Placement(_)
            | JobsError::PendingJournal(_)
            | JobsError::Stale(_)
            | JobsError::BusyLink { .. }
            | JobsError::ForeignSteering(_)
            | JobsError::Refused { .. }
            | JobsError::Lock(_)
            | JobsError::ChangeSet(_)),
        ) => Outcome::Failed(e.to_string()),
        Err(e) => Outcome::Unknown(e.to_string()),
    }
}

/// One task of the library workload: its own `Fabric` for each operation,
/// opened (with recovery), used, shut down and dropped.
pub async fn task_worker(run: Run, worker: usize, seed: u64, topo: Arc<Topology>, state: PathBuf) {
    let r = run.clone();
    run.drive(worker, seed, |kind, job| {
        let (run, topo, state) = (r.clone(), topo.clone(), state.clone());
        async move {
            let (mut f, recovered) = match Fabric::open(topo, &state).await {
                Ok(opened) => opened,
                // Nothing of this operation was attempted.
                Err(e) => return Outcome::Failed(format!("open: {e}")),
            };
            if recovered.is_some() {
                run.lock().recoveries += 1;
            }
            if titan(&job) {
                f = f.with_policy(Policy::Titan);
            }
            let r = match (JobId::new(job.as_str()), &kind) {
                (Err(e), _) => Err(e.into()),
                (Ok(id), Kind::Submit { gpus }) => f.submit(&id, *gpus, &NoProgress).await,
                (Ok(id), Kind::Release) => f.release(&id, &NoProgress).await,
            };
            f.shutdown().await;
            classify_lib(r)
        }
    })
    .await;
}

/// Settle once (`vclos reconcile`, recovering any journal a killed process
/// left), then observe: state.json's decisions, a journal still pending,
/// drift from `vclos reconcile --json`, and `vclos verify --json`.
pub async fn observe(topo: &Path, state: &Path) -> Observed {
    let mut problems = Vec::new();
    match vclos(topo, state, &["reconcile", "--json"], None).await {
        Ok(e) if e.success => {}
        Ok(e) => eprintln!(
            "settling reconcile exited non-zero: {}",
            first_line(&e.stderr)
        ),
        Err(e) => problems.push(format!("settling reconcile: {e}")),
    }
    if state.join("journal.json").exists() {
        problems.push("a journal is still pending after settling".into());
    }
    let decisions = match read_decisions(state) {
        Ok(d) => d,
        Err(e) => {
            problems.push(e);
            vec![]
        }
    };
    match vclos(topo, state, &["reconcile", "--json"], None).await {
        Ok(e) => match serde_json::from_str::<serde_json::Value>(&e.stdout) {
            Ok(r) => {
                for d in r["drift"].as_array().into_iter().flatten() {
                    problems.push(format!(
                        "{}: drift from state.json's intent: {} missing, {} unexpected, {} foreign",
                        d["device"],
                        count(&d["missing"]),
                        count(&d["extra"]),
                        count(&d["foreign"])
                    ));
                }
                for u in r["unreachable"].as_array().into_iter().flatten() {
                    problems.push(format!("unreachable: {u}"));
                }
                if !e.success && problems.is_empty() {
                    problems.push(format!("reconcile failed: {}", first_line(&e.stderr)));
                }
            }
            Err(_) => problems.push(format!("reconcile: {}", first_line(&e.stderr))),
        },
        Err(e) => problems.push(format!("reconcile: {e}")),
    }
    match vclos(topo, state, &["verify", "--json"], None).await {
        Ok(e) => match serde_json::from_str::<serde_json::Value>(&e.stdout) {
            Ok(v) if e.success && v["ok"] == true => {}
            Ok(v) => {
                for r in v["reports"].as_array().into_iter().flatten() {
                    let n = count(&r["violations"]);
                    if n > 0 {
                        problems.push(format!(
                            "verify: job {}: {n} violation(s), first: {}",
                            r["job"], r["violations"][0]
                        ));
                    }
                }
                if v["ok"] != true && problems.is_empty() {
                    problems.push("verify: not ok".into());
                }
            }
            Err(_) => problems.push(format!("verify: {}", first_line(&e.stderr))),
        },
        Err(e) => problems.push(format!("verify: {e}")),
    }
    Observed {
        decisions,
        device_problems: problems,
    }
}

fn count(v: &serde_json::Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

/// The decisions in state.json, read directly (no state validation).
pub fn read_decisions(state: &Path) -> Result<Vec<Decision>, String> {
    let file = state.join("state.json");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    serde_json::from_value(v["decisions"].clone())
        .map_err(|e| format!("{}: decisions: {e}", file.display()))
}

/// The API workload's client: `curl` (a third-party HTTP client), one
/// process per request, as a scheduler's hook would call `vclos serve`.
///
/// With several `urls` (instances of one fabric under leader election), a
/// request goes to the one that answers as leader: a follower's 503 names
/// it, an instance that refuses the connection (killed) is skipped — both
/// before anything was sent to the fabric — and while no leader is elected
/// the client waits, as a scheduler's retry loop would, up to a bound.
pub struct Api {
    pub urls: Vec<String>,
    pub token: String,
}

/// How long a request waits for a leader to be elected.
const ELECTION_WAIT: Duration = Duration::from_secs(30);

/// One worker of the API workload: the same operations as the others,
/// each one HTTP request to `vclos serve`.
pub async fn api_worker(run: Run, worker: usize, seed: u64, api: Arc<Api>) {
    run.drive(worker, seed, |kind, job| {
        let api = Arc::clone(&api);
        async move {
            let named = match &kind {
                Kind::Submit { gpus } => schedulers_choice(&job, *gpus),
                Kind::Release => None,
            };
            let (method, path, body) = match (&kind, &named) {
                (Kind::Submit { gpus }, None) if titan(&job) => (
                    "POST",
                    "/v1/jobs".to_string(),
                    Some(format!(
                        r#"{{"id": "{job}", "gpus": {gpus}, "policy": "titan"}}"#
                    )),
                ),
                (Kind::Submit { gpus }, None) => (
                    "POST",
                    "/v1/jobs".to_string(),
                    Some(format!(r#"{{"id": "{job}", "gpus": {gpus}}}"#)),
                ),
                (Kind::Submit { gpus }, Some(servers)) => (
                    "POST",
                    "/v1/jobs".to_string(),
                    Some(
                        serde_json::json!({"id": job, "gpus": gpus, "servers": servers})
                            .to_string(),
                    ),
                ),
                (Kind::Release, _) => ("DELETE", format!("/v1/jobs/{job}"), None),
            };
            match api_call(&api, method, &path, body).await {
                Ok((code, v)) => {
                    if let (Some(servers), 201) = (&named, code) {
                        NAMED_ADMITTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        assert_eq!(
                            decision_servers(&v["decision"]),
                            sorted(servers),
                            "job {job} was placed beyond the servers it named: {v}"
                        );
                    }
                    classify_api(code, &v)
                }
                Err(e) => Outcome::Unknown(e),
            }
        }
    })
    .await;
}

/// Every fourth job (numbers 1, 5, 9, ...; never one that names its
/// servers) is placed with `--policy titan` (the API's `policy`), so titan
/// and the fabric's own policy admit and release side by side.
pub fn titan(job: &str) -> bool {
    job.trim_start_matches('j')
        .parse::<u64>()
        .is_ok_and(|n| n % 4 == 1)
}

/// Admissions on servers the request named (see [`schedulers_choice`]).
pub static NAMED_ADMITTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Every other multi-server job names its servers, as a scheduler that
/// already chose them would (issue 17 item 2; testbed-ocs: srv1-srv4
/// under leaf1, srv5-srv8 under leaf2): alternating leaves (an even
/// count is a 2-leaf slice, an odd one is refused as uneven), or, for
/// every fourth job, one leaf.
fn schedulers_choice(job: &str, gpus: u32) -> Option<Vec<String>> {
    let n: u64 = job.trim_start_matches('j').parse().ok()?;
    let k = u64::from(gpus.div_ceil(4));
    if gpus <= 4 || n % 2 == 1 {
        return None;
    }
    let on = |leaf: u64, i: u64| format!("srv{}", 1 + leaf * 4 + (i + n) % 4);
    Some(if k <= 4 && n.is_multiple_of(4) {
        (0..k).map(|i| on((n / 4) % 2, i)).collect()
    } else {
        (0..k).map(|i| on(i % 2, i / 2)).collect()
    })
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// The servers a decision (JSON) holds GPUs on, sorted.
fn decision_servers(d: &serde_json::Value) -> Vec<String> {
    let mut s: Vec<String> = (d["gpus"].as_array().into_iter().flatten())
        .filter_map(|g| g["server"].as_str().map(str::to_string))
        .collect();
    s.sort();
    s.dedup();
    s
}

async fn api_call(
    api: &Api,
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, serde_json::Value), String> {
    let started = tokio::time::Instant::now();
    let mut at = 0;
    loop {
        let url = &api.urls[at % api.urls.len()];
        match curl_once(url, &api.token, method, path, body.as_deref()).await? {
            Sent::Answer(code, v) if code == 503 && is_follower(&v) => {
                if let Some(i) =
                    (v["leader"].as_str()).and_then(|l| api.urls.iter().position(|u| u == l))
                {
                    at = i;
                    continue;
                }
            }
            Sent::Answer(code, v) => return Ok((code, v)),
            Sent::Refused => {}
        }
        if started.elapsed() > ELECTION_WAIT {
            return Ok((
                503,
                serde_json::json!({"detail": "no leader within the election wait"}),
            ));
        }
        at += 1;
        if at % api.urls.len() == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A follower's 503 (nothing was done; the leader, if elected, named).
fn is_follower(v: &serde_json::Value) -> bool {
    v["detail"]
        .as_str()
        .is_some_and(|d| d.starts_with("this instance is a follower"))
}

/// What one request came to.
enum Sent {
    /// The instance answered.
    Answer(u16, serde_json::Value),
    /// The connection was refused: nothing was sent.
    Refused,
}

async fn curl_once(
    url: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<Sent, String> {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "-m",
        "180",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-X",
        method,
    ])
    .arg(format!("{url}{path}"))
    .args(["-H", &format!("Authorization: Bearer {token}")])
    .kill_on_drop(true);
    if let Some(b) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary", b]);
    }
    let out = cmd.output().await.map_err(|e| format!("curl: {e}"))?;
    // curl's exit status 7: "Failed to connect to host".
    if out.status.code() == Some(7) {
        return Ok(Sent::Refused);
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').ok_or("curl: no status")?;
    let code: u16 = code.trim().parse().map_err(|_| format!("curl: {text}"))?;
    if code == 0 {
        return Err(format!(
            "curl: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Sent::Answer(
        code,
        serde_json::from_str(body).unwrap_or_default(),
    ))
}

/// What a scheduler learns from an answer of `vclos serve`.
pub fn classify_api(code: u16, v: &serde_json::Value) -> Outcome {
    let detail = first_line(v["detail"].as_str().unwrap_or_default());
    match code {
        200 | 201 if v["committed"] == true || v["existing"] == true => Outcome::Ok,
        // Refused before anything changed.
        400 | 404 | 409 | 413 | 422 => Outcome::Failed(detail),
        502 if detail.starts_with("the devices refused the change") => Outcome::Failed(detail),
        // A change still running when the request timed out may commit.
        503 if detail.contains("did not finish within the request timeout") => {
            Outcome::Unknown(detail)
        }
        // A leader deposed mid-transaction: its successor settles the
        // journal, which may adopt the change.
        503 if detail.starts_with("this instance lost its leadership") => Outcome::Unknown(detail),
        503 => Outcome::Failed(detail),
        _ => Outcome::Unknown(format!("HTTP {code}: {detail}")),
    }
}
