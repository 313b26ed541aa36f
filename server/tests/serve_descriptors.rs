//! `vclos serve` when the process runs out of file descriptors: accepting
//! fails (`EMFILE`), pauses, and resumes once descriptors are free, so
//! `/healthz` answers again. A test binary of its own: it lowers this
//! process's descriptor limit (`prlimit`) and uses it all up.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vclos_server::server::{Limits, ACCEPT_PAUSE};

/// This process's soft limit on open files, from `/proc/self/limits`.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_resumes_once_descriptors_are_free_again() {
    // A small limit, so that using it up is quick.
    let pid = std::process::id().to_string();
    let lowered = std::process::Command::new("prlimit")
        .args(["--pid", &pid, "--nofile=512:512"])
        .status()
        .is_ok_and(|s| s.success());
    let limit = open_files_limit().unwrap();
    if !lowered && limit > 65_536 {
        eprintln!("skipped: no prlimit, and {limit} descriptors are too many to use up");
        return;
    }
    let svc = start(Limits::default(), Duration::from_secs(60)).await;
    assert_eq!(
        healthz_within(svc.addr, Duration::from_secs(10))
            .await
            .status,
        200
    );
    // Every descriptor taken but one, which the client's socket takes: the
    // service then cannot accept it.
    let mut taken = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => taken.push(f),
            Err(e) if e.raw_os_error() == Some(24) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(taken.len() < 1_000_000, "no descriptor limit");
    }
    taken.pop();
    let mut s = TcpStream::connect(svc.addr).await.unwrap();
    s.write_all(&request("GET", "/healthz", None, None))
        .await
        .unwrap();
    // Accepting fails a few times meanwhile, each followed by a pause: no
    // answer.
    let mut first = [0u8; 1];
    let early = tokio::time::timeout(ACCEPT_PAUSE * 4, s.read(&mut first)).await;
    assert!(
        early.is_err(),
        "answered without a descriptor to accept with"
    );
    let freed = Instant::now();
    drop(taken);
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("no answer within 10 s of descriptors coming back")
        .unwrap();
    assert_eq!(parse(&buf).status, 200);
    assert!(freed.elapsed() < Duration::from_secs(10));
    svc.answers_then_stop().await;
}
