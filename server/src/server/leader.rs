//! Leader election for `vclos serve` on a store whose writer lock is a
//! lease (`--store etcd`; issue 18, items 2-4).
//!
//! # Design
//! * **The writer lock is the leadership.** There is no second mechanism:
//!   the instance whose fabric holds the store's writer lock (a key bound to
//!   a kept-alive lease, `crate::store::etcd`) is the leader, as a
//!   Kubernetes controller's Lease object is ("Leases", kubernetes.io,
//!   coordination.k8s.io/v1) and as etcd's own election API is a key on a
//!   lease ("etcd concurrency: election", etcd v3 `concurrency` package).
//!   The lock's holder record carries the leader's advertised URL
//!   (`--advertise-url`), which is how followers name it.
//! * **Campaign without the fabric.** [`campaign`] waits for the lock
//!   through the store, never holding the fabric's mutex while it waits, so
//!   a follower goes on answering reads. Once it has the lock it takes the
//!   mutex, re-reads the state under the lock and settles any journal the
//!   previous leader left, exactly as a single writer's recovery does
//!   (`Fabric::recover`: adopt the new state if every device holds it, else
//!   roll the devices back); only then does it serve writes.
//! * **Followers** answer every write with `503`, `Retry-After: 1` and the
//!   leader's URL (`leader`, when one is known); reads re-read the
//!   committed state from the store first, so any instance answers them.
//! * **Stepping down.** When the lease is lost (not renewed within its TTL:
//!   the process was stopped, or cut off from etcd) the lock's `lost` signal
//!   fires; the leader takes the mutex (the transaction in flight, if any,
//!   is already fenced: its lock check before a commit stage or its
//!   conditional save fails), drops the lock and campaigns again. A change
//!   that finds the lock gone or unverifiable (abandoned mid-transaction,
//!   fenced, or committed without its state saved), or a journal its
//!   takeover could not settle (devices unreachable then), makes it step
//!   down too,
//!   so that whoever leads next — possibly this instance again — settles
//!   the journal by recovery before any other write.
//! * **Fencing** is the store's: the journal records the writer's term
//!   before any device commits, the lock is checked (time left on the lease
//!   and the lock key's `create_revision`) right before the first device
//!   commit, and the state is saved only if the lock key is still the one
//!   this leader created. What no store can fence is a device command
//!   already on its way: a leader paused between that check and its commit
//!   (longer than a third of the TTL) may still commit on a device after its
//!   successor settled the journal; its save is then refused, and the drift
//!   shows in `GET /v1/status` / `vclos reconcile` (docs/ha.md).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::App;
use crate::controller::NoProgress;
use crate::state::lock::Holder;

/// How long one campaign waits for the lock before it starts another (it
/// renews its unused lease meanwhile; the figure only bounds one call).
const CAMPAIGN_WAIT: Duration = Duration::from_secs(3600);

/// Pause after a failed campaign step (etcd unreachable, say).
const RETRY: Duration = Duration::from_secs(1);

/// Campaign for leadership for as long as the service runs: take the lock,
/// settle, lead until the lock is lost, then start over.
pub(super) async fn campaign(app: Arc<App>, url: String) {
    let store = app.fabric.read().await.store().clone();
    loop {
        let holder = Holder::me("serve", None).serving_at(&url);
        let lock = match store.lock(&holder, CAMPAIGN_WAIT).await {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "campaign: no lock; trying again");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let term = lock.term();
        let lost = lock.lost();
        if !lead(&app, lock).await {
            tokio::time::sleep(RETRY).await;
            continue;
        }
        info!(?term, %url, "leader: serving writes");
        app.set_leader(true, term);
        let lost = async {
            match lost {
                Some(mut lost) => {
                    let _ = lost.wait_for(|l| *l).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = lost => {}
            () = app.resign.notified() => {}
        }
        step_down(&app).await;
    }
}

/// Hold `lock` and settle what the previous leader left; false (and the
/// lock dropped) if that failed.
async fn lead(app: &App, lock: Box<dyn crate::store::WriterLock>) -> bool {
    let mut f = app.fabric.write().await;
    if let Err(e) = f.adopt_lock(lock).await {
        warn!(error = %e, "campaign: took the lock but could not read the state");
        f.unlock();
        return false;
    }
    match f.recover(&NoProgress).await {
        Ok(Some(r)) => info!("taking over: {r}"),
        Ok(None) => {}
        // The journal stays; the first write answers 503 (pending journal)
        // and makes this leader step down, so the next term retries.
        Err(e) => warn!(error = %e, "taking over: the previous leader's journal is not settled"),
    }
    true
}

async fn step_down(app: &App) {
    let mut f = app.fabric.write().await;
    f.unlock();
    // A follower changes no device: its kept sessions go back to the
    // devices (a read opens one again when needed).
    f.shutdown().await;
    drop(f);
    app.set_leader(false, None);
    warn!("lost the lease: stepped down to follower; campaigning again");
}

impl App {
    fn set_leader(&self, leader: bool, term: Option<i64>) {
        self.leader.store(leader, Ordering::SeqCst);
        self.metrics.leader.set(i64::from(leader));
        let detail = match (leader, term) {
            (true, Some(t)) => format!("leader (term {t})"),
            (true, None) => "leader".into(),
            (false, _) => "follower".into(),
        };
        self.events.publish("leader", None, None, Some(detail));
    }
}
