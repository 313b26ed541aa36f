//! The etcd state store against a real etcd started on loopback ports
//! (`etcd_common`): the compare-and-swap, the exclusive journal, the
//! transaction number, size limits, the lease lock and its fencing, and the
//! job lifecycle on the emulated fabric with its state in etcd.
#![cfg(feature = "etcd")]
#![allow(clippy::unwrap_used)]

#[path = "etcd_common/mod.rs"]
mod etcd;
#[path = "lifecycle_common/mod.rs"]
mod lifecycle;

use std::sync::Arc;
use std::time::Duration;

use vclos::controller::NoProgress;
use vclos::decision::{Decision, GpuRef, Stage};
use vclos::jobs::{Fabric, JobsError, Journal, Operation};
use vclos::names::JobId;
use vclos::state::lock::{Holder, LockError};
use vclos::store::etcd::{EtcdOptions, EtcdStore};
use vclos::store::{RemoteError, Store, Version};

fn d(job: &str, gpus: usize) -> Decision {
    Decision {
        requested_gpus: None,
        sharing: None,
        job: JobId::new(job).unwrap(),
        stage: Stage::Server,
        gpus: (0..gpus)
            .map(|i| GpuRef {
                server: format!("srv{i}").into(),
                gpu: 0,
            })
            .collect(),
        vclos: Default::default(),
        source_routes: vec![],
    }
}

async fn store(e: &etcd::Etcd, topology: &str) -> EtcdStore {
    store_with(e, topology, |_| {}).await
}

async fn store_with(e: &etcd::Etcd, topology: &str, f: impl FnOnce(&mut EtcdOptions)) -> EtcdStore {
    let mut o = EtcdOptions::new(vec![e.endpoint.clone()]);
    o.lease_ttl = Duration::from_secs(2);
    f(&mut o);
    EtcdStore::connect(o, topology).await.unwrap()
}

fn journal(old: &[Decision], new: &[Decision], job: &Decision) -> Journal {
    Journal::new(
        "t",
        Operation::Admit,
        job.clone(),
        old.to_vec(),
        new.to_vec(),
        vec![],
    )
}

/// One transaction as the lifecycle runs it: journal, then the state
/// conditional on `read`, then the journal removed.
async fn commit(
    s: &EtcdStore,
    read: Version,
    old: &[Decision],
    new: &[Decision],
) -> Result<Version, JobsError> {
    let job = new
        .last()
        .or(old.last())
        .cloned()
        .unwrap_or_else(|| d("x", 1));
    s.begin(&journal(old, new, &job)).await?.sync().await?;
    let v = s.save(read, new).await;
    if v.is_ok() {
        s.remove_journal().await?;
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_round_trips_and_the_transaction_number_increases() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    let s = store(&e, "t").await;
    let missing = s.load().await.unwrap_err();
    assert!(
        matches!(missing, JobsError::Remote(RemoteError::Missing { .. })),
        "{missing}"
    );
    assert!(missing.to_string().contains("--init"), "{missing}");
    assert!(s.init().await.unwrap());
    assert!(!s.init().await.unwrap(), "a second init changes nothing");
    let first = s.load().await.unwrap();
    assert!(first.decisions.is_empty());
    assert_eq!(first.version.txn, 0);

    let mut held = vec![];
    let mut last = first.version;
    for (i, j) in ["b", "a", "c"].into_iter().enumerate() {
        let mut next = held.clone();
        next.push(d(j, i + 1));
        let v = commit(&s, last, &held, &next).await.unwrap();
        assert_eq!(v.txn, last.txn + 1, "one more transaction");
        assert!(v.revision > last.revision, "{v:?} after {last:?}");
        let read = s.load().await.unwrap();
        assert_eq!(read.decisions, next, "order kept");
        assert_eq!(read.version, v);
        assert_eq!(
            s.journal().await.unwrap(),
            None,
            "the journal went with the save"
        );
        held = next;
        last = v;
    }
    assert_eq!(s.txn_number().await.unwrap(), 3);

    // The same documents as the files: readable as state.json's.
    let mut c = e.client().await;
    let raw = c.get("/vclos/t/state", None).await.unwrap();
    let doc: serde_json::Value = serde_json::from_slice(raw.kvs()[0].value()).unwrap();
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["topology"], "t");
    assert_eq!(doc["decisions"].as_array().unwrap().len(), 3);

    // Another topology's store is apart, and a state of another topology
    // is refused.
    let other = store(&e, "u").await;
    assert!(other.load().await.is_err());
    c.put("/vclos/u/state", raw.kvs()[0].value(), None)
        .await
        .unwrap();
    let wrong = other.load().await.unwrap_err();
    assert!(wrong.to_string().contains("topology `t`"), "{wrong}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_on_one_revision_exactly_one_commits() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    // Two writers, each with its own connection.
    let a = store(&e, "t").await;
    let b = store(&e, "t").await;
    a.init().await.unwrap();
    for round in 0..20 {
        let read_a = a.load().await.unwrap();
        let read_b = b.load().await.unwrap();
        assert_eq!(read_a, read_b);
        let held = read_a.decisions.clone();
        let mut next_a = held.clone();
        next_a.push(d(&format!("a{round}"), 1));
        let mut next_b = held.clone();
        next_b.push(d(&format!("b{round}"), 1));
        // One journal (the exclusive create admits one), then both save
        // against the revision they read, at once.
        a.begin(&journal(&held, &next_a, &next_a[held.len()]))
            .await
            .unwrap();
        let (ra, rb) = tokio::join!(
            a.save(read_a.version, &next_a),
            b.save(read_b.version, &next_b)
        );
        let won = match (&ra, &rb) {
            (Ok(_), Err(JobsError::Conflict { read, .. })) => {
                assert_eq!(*read, read_b.version.revision);
                &next_a
            }
            (Err(JobsError::Conflict { read, .. }), Ok(_)) => {
                assert_eq!(*read, read_a.version.revision);
                &next_b
            }
            other => panic!("round {round}: exactly one must commit: {other:?}"),
        };
        let now = a.load().await.unwrap();
        assert_eq!(&now.decisions, won);
        assert_eq!(
            now.version.txn,
            read_a.version.txn + 1,
            "one transaction, not two"
        );
        a.remove_journal().await.unwrap();
    }

    // A writer that read before another committed cannot commit after it.
    let stale = b.load().await.unwrap();
    let mut next = stale.decisions.clone();
    next.push(d("first", 1));
    commit(&a, stale.version, &stale.decisions, &next)
        .await
        .unwrap();
    let mut late = stale.decisions.clone();
    late.push(d("late", 1));
    let e2 = commit(&b, stale.version, &stale.decisions, &late)
        .await
        .unwrap_err();
    assert!(matches!(e2, JobsError::Conflict { .. }), "{e2}");
    assert!(e2.to_string().contains("nothing was written"), "{e2}");
    assert_eq!(
        b.load().await.unwrap().decisions,
        next,
        "the winner's state stays"
    );
    // Its journal is still there for it (or recovery) to settle.
    assert!(b.journal().await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_write_is_refused_while_one_exists() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    let a = store(&e, "t").await;
    let b = store(&e, "t").await;
    a.init().await.unwrap();
    assert_eq!(a.journal().await.unwrap(), None);
    let j = journal(&[], &[d("a", 1)], &d("a", 1));
    a.begin(&j).await.unwrap().sync().await.unwrap();
    assert_eq!(b.journal().await.unwrap(), Some(j.clone()));
    for s in [&a, &b] {
        let e = s.begin(&j).await.err().unwrap();
        assert!(
            matches!(e, JobsError::PendingJournal(ref k) if k == "/vclos/t/journal"),
            "{e}"
        );
    }
    a.remove_journal().await.unwrap();
    assert_eq!(b.journal().await.unwrap(), None);
    b.begin(&j).await.unwrap();
    // A state is written only while a journal exists.
    b.remove_journal().await.unwrap();
    let v = b.load().await.unwrap().version;
    let e = b.save(v, &[d("a", 1)]).await.unwrap_err();
    assert!(matches!(e, JobsError::Conflict { .. }), "{e}");
    assert!(e.to_string().contains("journal"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_over_the_limit_fails_clearly_and_writes_nothing() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    let s = store(&e, "t").await;
    s.init().await.unwrap();
    let v = s.load().await.unwrap().version;
    // ~3 MB of decisions: over etcd's default 1.5 MiB request limit.
    let big = vec![d("big", 60_000)];
    let err = s.begin(&journal(&[], &big, &big[0])).await.err().unwrap();
    match &err {
        JobsError::Remote(RemoteError::TooLarge {
            key, size, limit, ..
        }) => {
            assert_eq!(key, "/vclos/t/journal");
            assert!(size > limit);
        }
        other => panic!("{other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("--max-request-bytes") && text.contains("nothing was written"),
        "{text}"
    );
    assert_eq!(s.journal().await.unwrap(), None);
    // The state on its own too (a journal written by hand around it).
    let small = store_with(&e, "t", |o| o.max_value_bytes = 4096).await;
    small.begin(&journal(&[], &[], &d("x", 1))).await.unwrap();
    let err = small.save(v, &[d("mid", 200)]).await.unwrap_err();
    assert!(
        matches!(err, JobsError::Remote(RemoteError::TooLarge { ref key, .. }) if key == "/vclos/t/state"),
        "{err}"
    );
    assert_eq!(s.load().await.unwrap().decisions, vec![], "nothing written");
    // A limit raised past the server's: etcd refuses, and it is said.
    let raised = store_with(&e, "t", |o| o.max_value_bytes = 64 << 20).await;
    raised.remove_journal().await.unwrap();
    let err = raised
        .begin(&journal(&[], &big, &big[0]))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, JobsError::Remote(RemoteError::Unavailable { .. })),
        "{err}"
    );
    // etcd's gRPC server refuses it whole ("received message larger than
    // max"; a request under that but over --max-request-bytes: "request is
    // too large").
    let text = err.to_string();
    assert!(
        text.contains("larger than max") || text.contains("too large"),
        "{text}"
    );
    assert_eq!(s.journal().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_lock_excludes_other_writers_and_fences_a_lost_one() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    let a = store(&e, "t").await;
    let b = store(&e, "t").await;
    a.init().await.unwrap();
    let held = a
        .lock(&Holder::me("serve", None), Duration::ZERO)
        .await
        .unwrap();
    let first_term = held.term().unwrap();
    let who = b.writer().await.unwrap().unwrap().unwrap();
    assert_eq!(who.operation, "serve");
    let busy = b
        .lock(
            &Holder::me("job submit", Some("x")),
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(busy, JobsError::Lock(LockError::Busy { .. })),
        "{busy}"
    );
    assert!(
        busy.to_string().contains("serve"),
        "names the holder: {busy}"
    );
    // A writer waiting longer than the lease TTL (2 s) for it...
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            b.lock(&Holder::me("serve", None), Duration::from_secs(15))
                .await
        })
    };
    // ...while the holder's lease outlives its TTL (kept alive).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        b.writer().await.unwrap().unwrap().unwrap().pid,
        std::process::id()
    );
    assert!(!waiter.is_finished());
    // Released on drop: the waiting writer gets it.
    drop(held);
    let lb = waiter.await.unwrap().unwrap();
    assert!(
        lb.term().unwrap() > first_term,
        "each new holder a larger term"
    );
    drop(lb);

    // A writer whose lease is lost (here: revoked behind its back, as an
    // expiry would) writes nothing once another writer holds the lock.
    let _la = a
        .lock(&Holder::me("serve", None), Duration::from_secs(5))
        .await
        .unwrap();
    let v = a.load().await.unwrap().version;
    let mut c = e.client().await;
    for l in c.leases().await.unwrap().leases() {
        c.lease_revoke(l.id()).await.unwrap();
    }
    let _lb = b
        .lock(&Holder::me("serve", None), Duration::from_secs(5))
        .await
        .unwrap();
    let lost = a
        .begin(&journal(&[], &[d("a", 1)], &d("a", 1)))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(lost, JobsError::Remote(RemoteError::LockLost { .. })),
        "{lost}"
    );
    b.begin(&journal(&[], &[d("b", 1)], &d("b", 1)))
        .await
        .unwrap();
    let lost = a.save(v, &[d("a", 1)]).await.unwrap_err();
    assert!(
        matches!(lost, JobsError::Remote(RemoteError::LockLost { .. })),
        "{lost}"
    );
    let lost = a.remove_journal().await.unwrap_err();
    assert!(
        matches!(lost, JobsError::Remote(RemoteError::LockLost { .. })),
        "{lost}"
    );
    assert!(
        b.journal().await.unwrap().is_some(),
        "the new writer's journal stays"
    );
    b.save(v, &[d("b", 1)]).await.unwrap();
    assert_eq!(a.load().await.unwrap().decisions, vec![d("b", 1)]);
}

/// Keys in the writer lock's queue of topology `topology`.
async fn queued(e: &etcd::Etcd, topology: &str) -> usize {
    let mut c = e.client().await;
    let key = format!("/vclos/{topology}/lock.queue/");
    let opts = etcd_client::GetOptions::new()
        .with_prefix()
        .with_count_only();
    c.get(key, Some(opts)).await.unwrap().count() as usize
}

/// Until `n` writers are queued (each waiter's place is taken before the
/// next one starts), at most 10 s.
async fn until_queued(e: &etcd::Etcd, topology: &str, n: usize) {
    for _ in 0..1000 {
        if queued(e, topology).await == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{n} waiters never queued: {}", queued(e, topology).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_writers_get_the_lock_first_come_first_served() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    let a = store(&e, "q").await;
    a.init().await.unwrap();
    let held = a
        .lock(&Holder::me("serve", None), Duration::ZERO)
        .await
        .unwrap();
    // Four writers, each with its own client (as separate processes),
    // queue one after the other.
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..4 {
        let w = store(&e, "q").await;
        let order = Arc::clone(&order);
        waiters.push(tokio::spawn(async move {
            let job = format!("w{i}");
            let lock = w
                .lock(
                    &Holder::me("job submit", Some(&job)),
                    Duration::from_secs(30),
                )
                .await
                .unwrap();
            order.lock().unwrap().push(job);
            tokio::time::sleep(Duration::from_millis(30)).await;
            lock.release().await;
        }));
        until_queued(&e, "q", i + 1).await;
    }
    // The holder releases and asks again at once: it queues behind them
    // (before, every waiter retried after a release and it could win).
    held.release().await;
    let again = a
        .lock(&Holder::me("serve", None), Duration::from_secs(30))
        .await
        .unwrap();
    order.lock().unwrap().push("a again".into());
    again.release().await;
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        ["w0", "w1", "w2", "w3", "a again"],
        "the lock went out of turn"
    );
    assert_eq!(queued(&e, "q").await, 0, "a holder leaves the queue");

    let again = a
        .lock(&Holder::me("serve", None), Duration::ZERO)
        .await
        .unwrap();
    // A waiter that gives up, and one whose call is dropped, leave the
    // queue at once (their leases revoked): the writer behind them is
    // not held up for a TTL (the leases here last 60 s).
    let long = |o: &mut EtcdOptions| o.lease_ttl = Duration::from_secs(60);
    let gives_up = store_with(&e, "q", long).await;
    let gave_up = tokio::spawn(async move {
        gives_up
            .lock(&Holder::me("job submit", Some("x")), Duration::from_secs(3))
            .await
            .map(|_| ())
    });
    until_queued(&e, "q", 1).await;
    let dropped = store_with(&e, "q", long).await;
    let dropped = tokio::spawn(async move {
        dropped
            .lock(
                &Holder::me("job submit", Some("y")),
                Duration::from_secs(60),
            )
            .await
            .map(|_| ())
    });
    until_queued(&e, "q", 2).await;
    let last = store(&e, "q").await;
    let last = tokio::spawn(async move {
        last.lock(
            &Holder::me("job submit", Some("z")),
            Duration::from_secs(60),
        )
        .await
        .map(|l| l.holder().job.clone())
    });
    until_queued(&e, "q", 3).await;
    let busy = gave_up.await.unwrap().unwrap_err();
    assert!(
        matches!(busy, JobsError::Lock(LockError::Busy { .. })),
        "{busy}"
    );
    dropped.abort();
    until_queued(&e, "q", 1).await;
    again.release().await;
    assert_eq!(last.await.unwrap().unwrap().as_deref(), Some("z"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_survives_an_etcd_restart() {
    let Some(mut e) = etcd::Etcd::start().await else {
        return;
    };
    let s = store(&e, "t").await;
    s.init().await.unwrap();
    let v = s.load().await.unwrap().version;
    let v = commit(&s, v, &[], &[d("a", 1)]).await.unwrap();
    e.kill();
    let down = s.load().await.unwrap_err();
    assert!(
        matches!(down, JobsError::Remote(RemoteError::Unavailable { .. })),
        "{down}"
    );
    assert!(down.to_string().contains(&e.endpoint), "{down}");
    e.restart().await;
    // The same client reconnects; the state is durable.
    let start = std::time::Instant::now();
    let read = loop {
        match s.load().await {
            Ok(r) => break r,
            Err(_) if start.elapsed() < Duration::from_secs(15) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(read.decisions, vec![d("a", 1)]);
    assert_eq!(read.version, v);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_runs_on_the_emulated_fabric_with_its_state_in_etcd() {
    let Some(e) = etcd::Etcd::start().await else {
        return;
    };
    let emu = lifecycle::emu(Duration::ZERO).await;
    let s = Arc::new(store(&e, &emu.topo.name).await);
    s.init().await.unwrap();
    let open = || async {
        let mut f = Fabric::load_store(emu.topo.clone(), s.clone() as Arc<dyn Store>)
            .await
            .unwrap()
            .with_options(lifecycle::options());
        f.read_timeout = Duration::from_secs(5);
        f.wait = Duration::from_secs(5);
        f.lock("test", None).await.unwrap();
        f
    };
    let mut f = open().await;
    let fix = f.reconcile(true, &NoProgress).await.unwrap();
    assert!(fix.fix.as_ref().is_none_or(|r| r.is_committed()));
    let id = |s: &str| JobId::new(s).unwrap();
    for (j, gpus) in [("a", 12), ("c", 8)] {
        let done = f.submit(&id(j), gpus, &NoProgress).await.unwrap();
        assert!(done.report.is_committed(), "{}", done.report);
    }
    let after_two = s.load().await.unwrap();
    assert_eq!(after_two.version.txn, 2);
    assert_eq!(after_two.decisions, f.jobs());
    // The journal of the last admission, as it was just before the state
    // was saved (etcd keeps the revisions): it names the writer's term, the
    // lock key's create_revision.
    let mut c = e.client().await;
    let key = |k: &str| format!("/vclos/{}/{k}", emu.topo.name);
    let lock = c.get(key("lock"), None).await.unwrap();
    let term = lock.kvs()[0].create_revision();
    let before = etcd_client::GetOptions::new().with_revision(after_two.version.revision - 1);
    let j = c.get(key("journal"), Some(before)).await.unwrap();
    let j: Journal = serde_json::from_slice(j.kvs()[0].value()).unwrap();
    assert_eq!(j.term, Some(term));
    assert_eq!(j.new, after_two.decisions);
    assert_eq!(j.owner.unwrap().operation, "test");
    let r = f.release(&id("a"), &NoProgress).await.unwrap();
    assert!(r.report.is_committed(), "{}", r.report);
    assert_eq!(s.txn_number().await.unwrap(), 3);
    let rec = f.reconcile(false, &NoProgress).await.unwrap();
    assert!(
        rec.drift.is_empty() && rec.unreachable.is_empty(),
        "{rec:?}"
    );
    let jobs = f.jobs();
    f.shutdown().await;
    drop(f);
    // Another instance picks the state back up from etcd.
    let g = open().await;
    assert_eq!(g.jobs(), jobs);
    assert_eq!(g.jobs().len(), 1);
    assert!(g.pending_journal().await.unwrap().is_none());
}
