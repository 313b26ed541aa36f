//! A real etcd (Debian `etcd-server`, 3.4) started by a test on loopback
//! ports, in a temporary data directory, killed when dropped. Without the
//! `etcd` binary a test prints a `SKIPPED:` notice and passes, unless
//! `VCLOS_REQUIRE_INTEROP=1` (CI, `.ci/etcd.sh` installs it): then it fails.
#![allow(dead_code, clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../interop/mod.rs"]
mod interop;

/// Whether `etcd` is on PATH; the skip notice (or, under
/// `VCLOS_REQUIRE_INTEROP`, the failure) otherwise.
fn etcd_on_path() -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("etcd").is_file()));
    if found {
        return true;
    }
    assert!(
        !interop::required(),
        "`etcd` on PATH is required (VCLOS_REQUIRE_INTEROP is set): run `bash .ci/etcd.sh`"
    );
    eprintln!("SKIPPED: `etcd` not found on PATH (install Debian etcd-server: `bash .ci/etcd.sh`)");
    false
}

/// One etcd member serving clients on `endpoint`.
pub struct Etcd {
    child: Option<Child>,
    pub endpoint: String,
    peer: String,
    pub dir: tempfile::TempDir,
    name: String,
    /// `--initial-cluster` (every member's `name=peer`).
    cluster: String,
}

/// A cluster of etcd members on loopback (`etcd` clustering guide, static
/// bootstrap: every member started with the same `--initial-cluster`).
pub struct Cluster {
    pub members: Vec<Etcd>,
}

impl Cluster {
    /// Start `n` members, or `None` (after the skip notice) without etcd.
    pub async fn start(n: usize) -> Option<Cluster> {
        if !etcd_on_path() {
            return None;
        }
        let mut members: Vec<Etcd> = (0..n)
            .map(|i| Etcd {
                child: None,
                endpoint: format!("http://127.0.0.1:{}", free_port()),
                peer: format!("http://127.0.0.1:{}", free_port()),
                dir: tempfile::tempdir().unwrap(),
                name: format!("m{i}"),
                cluster: String::new(),
            })
            .collect();
        let cluster: Vec<String> = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer))
            .collect();
        for m in &mut members {
            m.cluster = cluster.join(",");
            m.launch();
        }
        for m in &members {
            m.wait_ready().await;
        }
        Some(Cluster { members })
    }

    /// Every member's client URL, comma-separated (`--etcd-endpoints`).
    pub fn endpoints(&self) -> String {
        let e: Vec<&str> = self.members.iter().map(|m| m.endpoint.as_str()).collect();
        e.join(",")
    }
}

pub use interop::free_port;

impl Etcd {
    /// Start one, or `None` (after the skip notice) without the binary.
    pub async fn start() -> Option<Etcd> {
        if !etcd_on_path() {
            return None;
        }
        let peer = format!("http://127.0.0.1:{}", free_port());
        let mut e = Etcd {
            child: None,
            endpoint: format!("http://127.0.0.1:{}", free_port()),
            cluster: format!("t={peer}"),
            peer,
            dir: tempfile::tempdir().unwrap(),
            name: "t".into(),
        };
        e.spawn().await;
        Some(e)
    }

    async fn spawn(&mut self) {
        self.launch();
        self.wait_ready().await;
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .unwrap();
        let child = Command::new("etcd")
            .arg(format!("--name={}", self.name))
            .arg(format!(
                "--data-dir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--listen-client-urls={}", self.endpoint))
            .arg(format!("--advertise-client-urls={}", self.endpoint))
            .arg(format!("--listen-peer-urls={}", self.peer))
            .arg(format!("--initial-advertise-peer-urls={}", self.peer))
            .arg(format!("--initial-cluster={}", self.cluster))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Wait until it answers a read.
    async fn wait_ready(&self) {
        let start = Instant::now();
        loop {
            if let Ok(Ok(mut c)) = tokio::time::timeout(
                Duration::from_secs(1),
                etcd_client::Client::connect([&self.endpoint], None),
            )
            .await
            {
                if c.get("/", None).await.is_ok() {
                    return;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "etcd did not start: {}",
                std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `kill -9` it (its data directory stays).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same ports and data.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    /// A client of its own.
    pub async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([&self.endpoint], None)
            .await
            .unwrap()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}
