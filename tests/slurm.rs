//! A real Slurm admitting its jobs through `vclos serve` (issue 17, item 3).
//!
//! The test starts, all on loopback and in one temporary directory:
//! `munged` with a generated key, `slurmctld` and four `slurmd` (one per
//! node, `slurmd -N srvN` with a port each: Debian's 22.05 build runs
//! several on one machine) for the nodes `srv1`..`srv4` of
//! `topologies/testbed-ocs.yaml` (Slurm node names are the topology's server
//! names, so the commands' default node map, the identity, applies), an
//! emulated fabric (`vclos emu serve`) and `vclos serve` on it. slurm.conf
//! sets `PrologSlurmctld` / `EpilogSlurmctld` to wrapper scripts that exec
//! `vclos slurm prolog` / `vclos slurm epilog --server URL --token-file F`,
//! as docs/slurm.md tells a user to. Then:
//!
//! * (a) a 2-node batch job: once its script runs, the service holds
//!   `slurm-<id>` and its decision is on exactly the nodes Slurm allocated;
//! * (b) the job's end releases it: the service no longer holds it;
//! * (c) a refusal holds the job: with every GPU of the fabric taken by a
//!   job admitted outside Slurm, the prolog is refused and exits non-zero,
//!   and Slurm does not run the job. slurm.conf(5) of Slurm 22.05
//!   (PrologSlurmctld): "A non-zero exit code will result in the job being
//!   requeued (where possible) or killed. Note that only batch jobs can be
//!   requeued."; and under "Prolog and Epilog Scripts": "If the
//!   PrologSlurmctld fails (returns a non-zero exit code), this will result
//!   in the job being requeued to be executed on another node if possible.
//!   Only batch jobs can be requeued. Interactive jobs (salloc and srun)
//!   will be cancelled if the PrologSlurmctld fails." Observed with 22.05.8:
//!   the batch job goes back to `JobState=PENDING` with `Restarts=1` and
//!   `EligibleTime` two minutes after the requeue (`Reason=None` at once,
//!   `Reason=BeginTime` from the scheduler's next pass), and its script
//!   never ran; the service holds nothing for it (the epilog, which Slurm
//!   runs for the requeued allocation too, finds nothing to release and
//!   exits 0);
//! * (d) the refused job is held, not lost: once the fabric is free again
//!   and the job made eligible now (`scontrol update StartTime=now`), the
//!   prolog admits it and it runs and is released like (a)/(b).
//!
//! Needs Debian's `slurmctld`, `slurmd`, `slurm-client` and `munge`
//! (`bash .ci/slurm.sh`) and root (slurmd runs jobs as their user; the
//! daemons run as root here). Without them it prints `SKIPPED:` and passes,
//! except under `VCLOS_REQUIRE_INTEROP=1` (CI), where it fails.
#![allow(clippy::unwrap_used)]

mod interop;
mod serve_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serve_common::{service, Service, BIN, TOKEN};
/// The Slurm nodes: servers of `topologies/testbed-ocs.yaml`.
const NODES: [&str; 4] = ["srv1", "srv2", "srv3", "srv4"];
/// Every GPU of testbed-ocs (8 servers x 4).
const FABRIC_GPUS: u32 = 32;

/// The programs the test runs, where Debian installs them.
const PROGRAMS: [&str; 7] = [
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "scontrol",
    "sinfo",
    "scancel",
];

/// `prog` on PATH or in /usr/sbin (root's daemons).
fn find(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Every program of [`PROGRAMS`], or `None` after the skip notice (a
/// failure under `VCLOS_REQUIRE_INTEROP`).
fn programs() -> Option<BTreeMap<&'static str, PathBuf>> {
    let found: BTreeMap<_, _> = PROGRAMS
        .iter()
        .filter_map(|p| find(p).map(|path| (*p, path)))
        .collect();
    let missing: Vec<_> = PROGRAMS
        .iter()
        .filter(|p| !found.contains_key(*p))
        .collect();
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let what = if !missing.is_empty() {
        format!("Slurm and munge ({missing:?} not found)")
    } else if !root {
        "root (to run slurmd and munged)".to_string()
    } else {
        return Some(found);
    };
    assert!(
        !interop::required(),
        "{what} is required (VCLOS_REQUIRE_INTEROP is set): run `bash .ci/slurm.sh` as root"
    );
    eprintln!("SKIPPED: {what}; install with `bash .ci/slurm.sh` as root");
    None
}

/// A daemon, stopped on drop: SIGTERM, then SIGKILL after 3 s.
struct Daemon {
    name: String,
    child: Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Daemon {
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` distinct free TCP ports on loopback ([`interop::free_port`]).
fn free_ports(n: usize) -> Vec<u16> {
    (0..n).map(|_| interop::free_port()).collect()
}

/// Poll `f` every 200 ms until it gives a value; panic after `secs`, with
/// `context()` (logs) in the message.
fn poll<T>(
    what: &str,
    secs: u64,
    context: impl Fn() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {secs} s waiting for {what}\n{}", context());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The last `n` lines of a file (for failure messages).
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<_> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// munged, slurmctld and one slurmd per node, in `dir`; stopped on drop
/// (jobs cancelled first), even when the test panics.
struct Slurm {
    dir: PathBuf,
    conf: PathBuf,
    bins: BTreeMap<&'static str, PathBuf>,
    daemons: Vec<Daemon>,
}

impl Drop for Slurm {
    fn drop(&mut self) {
        if self.daemons.iter().any(|d| d.name == "slurmctld") {
            let _ = self.run("scancel", &["--user=root"]);
        }
        // Nodes, then the controller, then munge.
        for d in self.daemons.iter_mut().rev() {
            d.stop();
        }
    }
}

impl Slurm {
    /// Start munged, slurmctld and the slurmds; `prolog` and `epilog` are
    /// the PrologSlurmctld and EpilogSlurmctld programs. Returns once every
    /// node is idle.
    fn start(
        dir: &Path,
        bins: BTreeMap<&'static str, PathBuf>,
        prolog: &Path,
        epilog: &Path,
    ) -> Slurm {
        let mut slurm = Slurm {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
            bins,
            daemons: Vec::new(),
        };
        // munged wants its socket's directory reachable by everyone and its
        // key readable by root only.
        let run = dir.join("run");
        let munge = dir.join("munge");
        for (d, mode) in [
            (dir, 0o755),
            (run.as_path(), 0o755),
            (munge.as_path(), 0o700),
        ] {
            std::fs::create_dir_all(d).unwrap();
            set_mode(d, mode);
        }
        for d in ["state", "spool", "log"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let key = munge.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").unwrap(),
            &mut bytes,
        )
        .unwrap();
        std::fs::write(&key, bytes).unwrap();
        set_mode(&key, 0o400);
        let socket = run.join("munge.sock");
        let args: Vec<String> = vec![
            "--foreground".into(),
            "--force".into(),
            format!("--key-file={}", key.display()),
            format!("--socket={}", socket.display()),
            format!("--pid-file={}", run.join("munged.pid").display()),
            format!("--log-file={}", munge.join("munged.log").display()),
            format!("--seed-file={}", munge.join("munged.seed").display()),
        ];
        slurm.spawn("munged", "munged", &args);
        poll(
            "munged's socket",
            10,
            || slurm.logs(),
            || socket.exists().then_some(()),
        );

        let ports = free_ports(1 + NODES.len());
        std::fs::write(
            &slurm.conf,
            slurm_conf(dir, &socket, &ports, prolog, epilog),
        )
        .unwrap();
        let conf = slurm.conf.display().to_string();
        slurm.spawn(
            "slurmctld",
            "slurmctld",
            &["-D".into(), "-f".into(), conf.clone()],
        );
        poll(
            "slurmctld to answer",
            30,
            || slurm.logs(),
            || {
                slurm
                    .run("scontrol", &["ping"])
                    .status
                    .success()
                    .then_some(())
            },
        );
        for node in NODES {
            let args = [
                "-D".into(),
                "-N".into(),
                node.into(),
                "-f".into(),
                conf.clone(),
            ];
            slurm.spawn(&format!("slurmd-{node}"), "slurmd", &args);
        }
        // Every node idle; a daemon that exits fails at once.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(dead) = slurm
                .daemons
                .iter_mut()
                .find_map(|d| matches!(d.child.try_wait(), Ok(Some(_))).then(|| d.name.clone()))
            {
                panic!("{dead} exited\n{}", slurm.logs());
            }
            let o = slurm.run("sinfo", &["--noheader", "--Node", "--format=%N %t"]);
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let idle = text
                .lines()
                .filter(|l| l.split_whitespace().nth(1) == Some("idle"))
                .count();
            if idle == NODES.len() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after 60 s waiting for every node idle: {text}\n{}",
                slurm.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        slurm
    }

    /// Start `prog` as daemon `name`, its output in `log/<name>.out`.
    fn spawn(&mut self, name: &str, prog: &str, args: &[String]) {
        let logs = self.dir.join("log");
        std::fs::create_dir_all(&logs).unwrap();
        let out = std::fs::File::create(logs.join(format!("{name}.out"))).unwrap();
        let child = Command::new(&self.bins[prog])
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        self.daemons.push(Daemon {
            name: name.to_string(),
            child,
        });
    }

    /// A Slurm client command against this cluster.
    fn run(&self, prog: &str, args: &[&str]) -> Output {
        let path = self
            .bins
            .get(prog)
            .cloned()
            .or_else(|| find(prog))
            .unwrap_or_else(|| PathBuf::from(prog));
        Command::new(path)
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The daemons' recent log lines, for failure messages.
    fn logs(&self) -> String {
        let mut s = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.join("log")) {
            let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                s += &format!("== {}\n{}\n", p.display(), tail(&p, 15));
            }
        }
        for f in ["prolog.log", "epilog.log"] {
            s += &format!("== {f}\n{}\n", tail(&self.dir.join(f), 20));
        }
        s
    }

    /// Submit `script` as a batch job on `nodes` nodes; its id.
    fn sbatch(&self, name: &str, nodes: usize, script: &Path) -> u32 {
        let out = self.dir.join("job-%j.out");
        let o = self.run(
            "sbatch",
            &[
                "--parsable",
                &format!("--job-name={name}"),
                &format!("--nodes={nodes}"),
                &format!("--output={}", out.display()),
                &format!("--chdir={}", self.dir.display()),
                script.to_str().unwrap(),
            ],
        );
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "sbatch: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        text.trim().split(';').next().unwrap().parse().unwrap()
    }

    /// `scontrol show job -o ID` as key=value pairs (empty once Slurm has
    /// forgotten the job).
    fn job(&self, id: u32) -> BTreeMap<String, String> {
        let o = self.run("scontrol", &["show", "job", "--oneliner", &id.to_string()]);
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A Slurm hostlist (`srv[1-2]`) as names.
    fn hostnames(&self, list: &str) -> BTreeSet<String> {
        let o = self.run("scontrol", &["show", "hostnames", list]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// slurm.conf: the controller on `ports[0]`, node `i` on `ports[i + 1]`.
fn slurm_conf(dir: &Path, munge: &Path, ports: &[u16], prolog: &Path, epilog: &Path) -> String {
    let d = dir.display();
    let mut c = format!(
        "# Written by tests/slurm.rs: one controller and {n} slurmd on loopback.
ClusterName=vclos-test
SlurmctldHost=localhost
SlurmctldPort={ctld}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
ReturnToService=2
MailProg=/bin/true
KillWait=2
MessageTimeout=10
PrologSlurmctld={prolog}
EpilogSlurmctld={epilog}
",
        n = NODES.len(),
        ctld = ports[0],
        munge = munge.display(),
        prolog = prolog.display(),
        epilog = epilog.display(),
    );
    for (node, port) in NODES.iter().zip(&ports[1..]) {
        c += &format!(
            "NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=1 State=UNKNOWN\n"
        );
    }
    c += &format!(
        "PartitionName=gpu Nodes={} Default=YES MaxTime=INFINITE State=UP\n",
        NODES.join(",")
    );
    c
}

/// A request to the service with the test's token.
fn curl(url: &str, method: &str, path: &str, body: Option<&str>) -> (u16, serde_json::Value) {
    serve_common::curl(url, method, path, body, Some(TOKEN))
}

/// The PrologSlurmctld / EpilogSlurmctld wrappers: what docs/slurm.md tells
/// a user to install, with the output kept in `dir` (Slurm discards it).
fn wrappers(dir: &Path, svc: &Service) -> (PathBuf, PathBuf) {
    let mut paths = Vec::new();
    for kind in ["prolog", "epilog"] {
        let path = dir.join(kind);
        let script = format!(
            "#!/bin/sh\n\
             # PrologSlurmctld / EpilogSlurmctld: runs on the controller, as SlurmUser.\n\
             exec >>{log} 2>&1\n\
             echo \"{kind} job $SLURM_JOB_ID nodes $SLURM_JOB_NODELIST\"\n\
             exec {bin} slurm {kind} --server {url} --token-file {token}\n",
            log = dir.join(format!("{kind}.log")).display(),
            bin = BIN,
            url = svc.url,
            token = svc.token.display(),
        );
        std::fs::write(&path, script).unwrap();
        set_mode(&path, 0o755);
        paths.push(path);
    }
    (paths[0].clone(), paths[1].clone())
}

/// The batch script: records that it ran and where, then waits (at most
/// 60 s) for the test to tell it to finish.
fn job_script(dir: &Path) -> PathBuf {
    let path = dir.join("job.sh");
    let d = dir.display();
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n\
             echo \"$SLURM_JOB_NODELIST\" > {d}/started.$SLURM_JOB_ID\n\
             i=0\n\
             while [ ! -e {d}/finish.$SLURM_JOB_ID ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n"
        ),
    )
    .unwrap();
    set_mode(&path, 0o755);
    path
}

/// The servers a decision's GPUs are on.
fn decision_servers(d: &serde_json::Value) -> BTreeSet<String> {
    d["gpus"]
        .as_array()
        .unwrap_or_else(|| panic!("no gpus in {d}"))
        .iter()
        .map(|g| g["server"].as_str().unwrap().to_string())
        .collect()
}

/// Run job `id` (submitted, or made eligible) to its end through the
/// service: (a) once its script runs, the service holds `slurm-<id>` on
/// exactly the nodes Slurm allocated; (b) after it ends, nothing.
fn admitted_then_released(slurm: &Slurm, svc: &Service, id: u32) {
    let dir = &slurm.dir;
    let logs = || slurm.logs();
    let started = dir.join(format!("started.{id}"));
    poll(&format!("job {id}'s script to start"), 60, logs, || {
        started.exists().then_some(())
    });
    let job = slurm.job(id);
    assert_eq!(
        job.get("JobState").map(String::as_str),
        Some("RUNNING"),
        "{job:?}"
    );
    let ran_on = std::fs::read_to_string(&started).unwrap();
    assert_eq!(ran_on.trim(), job["NodeList"], "{job:?}");
    let allocated = slurm.hostnames(&job["NodeList"]);
    assert_eq!(allocated.len(), 2, "{job:?}");
    assert!(
        allocated.iter().all(|n| NODES.contains(&n.as_str())),
        "{allocated:?}"
    );
    let path = format!("/v1/jobs/slurm-{id}");
    let (code, decision) = curl(&svc.url, "GET", &path, None);
    assert_eq!(code, 200, "slurm-{id} not held: {decision}\n{}", logs());
    assert_eq!(
        decision["job"],
        format!("slurm-{id}").as_str(),
        "{decision}"
    );
    assert_eq!(decision_servers(&decision), allocated, "{decision}");
    // The job ends: Slurm runs the epilog, which releases it.
    std::fs::write(dir.join(format!("finish.{id}")), "").unwrap();
    poll(&format!("job {id} to complete"), 60, logs, || {
        let j = slurm.job(id);
        (j.get("JobState").map(String::as_str) == Some("COMPLETED")).then_some(())
    });
    poll(&format!("slurm-{id} to be released"), 30, logs, || {
        (curl(&svc.url, "GET", &path, None).0 == 404).then_some(())
    });
}

#[test]
fn slurm_prolog_admits_epilog_releases_and_a_refusal_holds_the_job() {
    let Some(bins) = programs() else { return };
    let t0 = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let svc = service(dir);
    let (prolog, epilog) = wrappers(dir, &svc);
    let slurm = Slurm::start(dir, bins, &prolog, &epilog);
    let script = job_script(dir);
    eprintln!(
        "slurm and vclos serve up in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // (a) + (b): a 2-node job is admitted on its nodes, and released.
    let first = slurm.sbatch("two-nodes", 2, &script);
    admitted_then_released(&slurm, &svc, first);
    eprintln!("(a), (b) done at {:.1} s", t0.elapsed().as_secs_f64());
    let (_, list) = curl(&svc.url, "GET", "/v1/jobs", None);
    assert_eq!(list.as_array().map(Vec::len), Some(0), "{list}");

    // (c): a job outside Slurm takes every GPU; Slurm's next job is refused.
    let body = format!(r#"{{"id": "outside-slurm", "gpus": {FABRIC_GPUS}}}"#);
    let (code, held) = curl(&svc.url, "POST", "/v1/jobs", Some(&body));
    assert_eq!(code, 201, "{held}");
    let refused = slurm.sbatch("refused", 2, &script);
    let logs = || slurm.logs();
    let job = poll("the refused job to be requeued", 30, logs, || {
        let j = slurm.job(refused);
        let requeued = j.get("JobState").map(String::as_str) == Some("PENDING")
            && j.get("Restarts").is_some_and(|r| r != "0");
        requeued.then_some(j)
    });
    // Eligible again only later (`date` and Slurm both print local time).
    let now = Command::new("date")
        .arg("+%Y-%m-%dT%H:%M:%S")
        .output()
        .unwrap();
    let now = String::from_utf8_lossy(&now.stdout).trim().to_string();
    assert!(job["EligibleTime"] > now, "{job:?} (now {now})");
    eprintln!(
        "refused job {refused}: JobState={} Reason={} Restarts={} EligibleTime={}",
        job["JobState"], job["Reason"], job["Restarts"], job["EligibleTime"]
    );
    // The prolog ran and was refused (its log line, docs/clients.md).
    let prologs = std::fs::read_to_string(dir.join("prolog.log")).unwrap_or_default();
    assert!(
        prologs
            .lines()
            .any(|l| l.contains(&format!("job slurm-{refused}: ")) && l.contains("REFUSED")),
        "no refusal logged for {refused}\n{}",
        logs()
    );
    assert!(
        !dir.join(format!("started.{refused}")).exists(),
        "the refused job ran\n{}",
        logs()
    );
    let path = format!("/v1/jobs/slurm-{refused}");
    let (code, p) = curl(&svc.url, "GET", &path, None);
    assert_eq!(code, 404, "{p}");
    // Slurm ran the epilog for the refused allocation too: nothing held.
    poll("the refused allocation's epilog", 20, logs, || {
        let epilogs = std::fs::read_to_string(dir.join("epilog.log")).unwrap_or_default();
        epilogs
            .lines()
            .any(|l| l.contains(&format!("job slurm-{refused}: not held")))
            .then_some(())
    });
    let (_, list) = curl(&svc.url, "GET", "/v1/jobs", None);
    let ids: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["job"].clone())
        .collect();
    assert_eq!(ids, vec![serde_json::json!("outside-slurm")], "{list}");
    eprintln!("(c) done at {:.1} s", t0.elapsed().as_secs_f64());
    // Still not running a moment later (the requeue holds it off).
    std::thread::sleep(Duration::from_secs(2));
    let j = slurm.job(refused);
    assert_eq!(
        j.get("JobState").map(String::as_str),
        Some("PENDING"),
        "{j:?}"
    );
    assert!(!dir.join(format!("started.{refused}")).exists());

    // (d): held, not lost: the fabric freed and the job made eligible now,
    // it is admitted, runs and is released.
    let (code, r) = curl(&svc.url, "DELETE", "/v1/jobs/outside-slurm", None);
    assert_eq!(code, 200, "{r}");
    let o = slurm.run(
        "scontrol",
        &["update", &format!("JobId={refused}"), "StartTime=now"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    admitted_then_released(&slurm, &svc, refused);
    let (_, list) = curl(&svc.url, "GET", "/v1/jobs", None);
    assert_eq!(list.as_array().map(Vec::len), Some(0), "{list}");
    for f in ["prolog.log", "epilog.log"] {
        eprintln!("{f}:\n{}", tail(&dir.join(f), 20));
    }
    eprintln!("done in {:.1} s", t0.elapsed().as_secs_f64());
}
