//! A fabric's state in etcd (`vclos serve --store etcd --etcd-endpoints
//! URL,...`): the same documents as the state directory's files, under one
//! key prefix per fabric, every write an etcd transaction conditional on
//! what was read.
//!
//! # Keys (`PREFIX` is `--etcd-prefix`, `/vclos` by default)
//!
//! | key                     | value                                            |
//! |-------------------------|--------------------------------------------------|
//! | `PREFIX/TOPOLOGY/state` | state.json's document (`{"version":1,"topology":..,"decisions":[..]}`), compact JSON |
//! | `PREFIX/TOPOLOGY/journal` | journal.json's document, while a transaction is in flight |
//! | `PREFIX/TOPOLOGY/txn`   | transactions committed so far, a decimal number  |
//! | `PREFIX/TOPOLOGY/lock`  | the writer's [`Holder`] record, bound to its lease |
//! | `PREFIX/TOPOLOGY/lock.queue/LEASE` | a waiting writer's [`Holder`] record, bound to its lease (hexadecimal) |
//!
//! # Every write is a compare-and-swap
//!
//! etcd's `Txn` evaluates a list of comparisons and, atomically, applies
//! the success operations if all hold and the failure operations
//! otherwise; a comparison may test a key's `create_revision` (0 when the
//! key does not exist), `mod_revision` or `version` (etcd API reference,
//! "Transaction": <https://etcd.io/docs/v3.4/learning/api/#transaction>).
//! So:
//!
//! * [`Store::load`] reads `state` and `txn` in one transaction (one
//!   revision); [`Version::revision`] is the state key's `mod_revision`.
//! * [`Store::begin`] puts `journal` only if its `create_revision` is 0
//!   (none exists): the exclusive create.
//! * [`Store::save`] puts `state` and `txn + 1` and deletes `journal` in one
//!   transaction, only if `state`'s `mod_revision` is still the one read
//!   and the journal exists. Two writers that read the same revision can
//!   therefore never both commit: the second finds a newer `mod_revision`
//!   and gets [`JobsError::Conflict`], with nothing written.
//! * While this store holds the writer lock, every write also compares the
//!   lock key's `create_revision` with the one it created: a writer whose
//!   lease expired (and whose lock another writer may have taken since)
//!   writes nothing ([`RemoteError::LockLost`]).
//!
//! # The writer lock is a lease
//!
//! [`Store::lock`] grants a lease of [`EtcdOptions::lease_ttl`], keeps it
//! alive every third of its TTL, and queues: it puts
//! `PREFIX/TOPOLOGY/lock.queue/LEASE` bound to the lease and waits until no
//! queue key older than its own is left (watching the one just before it,
//! as etcd's own `concurrency.Mutex` recipe does: "etcd concurrency",
//! `clientv3/concurrency/mutex.go`, `waitDeletes`); then it creates `lock`
//! bound to the same lease (only if absent) and deletes its queue key in
//! one transaction. So writers get the lock **first come, first served**:
//! a writer that releases and asks again queues behind those already
//! waiting (before, every waiter retried at once after a release and the
//! releaser could win again and again: docs/performance.md, "Writers
//! contending for the lock"). A waiter that gives up (its wait ran out,
//! or its call was dropped) revokes its lease, so its place goes at once;
//! one that died keeps its place until its lease expires (at most the
//! TTL, as a dead holder keeps the lock), and one cut off from etcd for a
//! TTL loses its place and queues again at the tail.
//!
//! A key attached to a lease is deleted when the lease
//! expires or is revoked (etcd API reference, "Lease API":
//! <https://etcd.io/docs/v3.4/learning/api/#lease-api>), so a writer that
//! dies (`kill -9`) releases the lock within the TTL, as the kernel drops a
//! dead writer's `flock` at once. Dropping the lock revokes the lease (best
//! effort, on the runtime: a process that exits first leaves it to expire
//! after its TTL). If the
//! keep-alive fails for a whole TTL the lease expires and every later write
//! of this writer is refused by the fence; stepping down and campaigning
//! again is leader election's part (issue 18, item 2).
//!
//! # Durability
//!
//! etcd acknowledges a write once a quorum of members has it in its
//! fsynced write-ahead log ("Once an operation has been acknowledged, it is
//! durable": <https://etcd.io/docs/v3.4/learning/api_guarantees/>), so a
//! journal is durable when [`Store::begin`] returns: [`Durable::sync`] has
//! nothing left to wait for. The lifecycle's crash-safety argument
//! (`crate::jobs::journal`) carries over with each file replaced by its key
//! and each fsync by the acknowledgement; a write is never torn.
//!
//! # Sizes
//!
//! etcd refuses a request over `--max-request-bytes` (1.5 MiB by default:
//! <https://etcd.io/docs/v3.4/dev-guide/limit/>). A value larger than
//! [`EtcdOptions::max_value_bytes`] (a little under that) is refused here
//! with [`RemoteError::TooLarge`] before anything is sent: the journal
//! (which holds the state twice) is written first, so an admission whose
//! state would not fit fails before any device is touched. Values are never
//! split or truncated: a fabric whose state outgrows the limit raises etcd's
//! `--max-request-bytes` together with `max_value_bytes`, or keeps its
//! state in a state directory. Reads are bounded by
//! [`MAX_STATE_BYTES`], like the files.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, GetResponse, KeyValue, KvClient,
    PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, TxnResponse, WatchOptions,
};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::{Committed, Durable, RemoteError, Store, Version, WriterLock};
use crate::decision::Decision;
use crate::jobs::{JobsError, Journal};
use crate::state::lock::{who, Holder, LockError};
use crate::state::store::MAX_STATE_BYTES;

/// The state document's version (the same as state.json's).
const VERSION: u32 = 1;

/// How an [`EtcdStore`] reaches etcd and what it writes.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Client URLs of the cluster's members (`http://127.0.0.1:2379`).
    pub endpoints: Vec<String>,
    /// Keys are `PREFIX/TOPOLOGY/...`.
    pub prefix: String,
    /// The writer lock's lease: a dead writer's lock is gone after this.
    pub lease_ttl: Duration,
    /// Bound on connecting and on each request.
    pub timeout: Duration,
    /// Largest value written (the journal, the state): a little under
    /// etcd's default `--max-request-bytes`, 1.5 MiB, leaving room for the
    /// keys and the rest of the transaction.
    pub max_value_bytes: usize,
}

/// Default [`EtcdOptions::max_value_bytes`]: etcd's default request limit
/// (1,572,864 bytes) less 64 KiB.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 1_572_864 - 65_536;

impl EtcdOptions {
    /// Defaults (prefix `/vclos`, lease 10 s, timeout 5 s) for `endpoints`.
    pub fn new(endpoints: Vec<String>) -> Self {
        EtcdOptions {
            endpoints,
            prefix: "/vclos".into(),
            lease_ttl: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
        }
    }
}

/// The lock this store holds, as its writes compare it.
#[derive(Debug, Clone, Copy)]
struct Fence {
    /// The lock key's `create_revision`.
    created: i64,
    lease: i64,
}

/// One fabric's state in etcd.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    kv: KvClient,
    options: EtcdOptions,
    topology: String,
    /// Set while a lock taken through this store is held.
    fence: Arc<Mutex<Option<Fence>>>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("location", &self.location())
            .finish_non_exhaustive()
    }
}

/// An endpoint as messages show it: without any `user:password@`.
fn shown(endpoint: &str) -> String {
    match endpoint.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => endpoint
            .rsplit_once('@')
            .map_or(endpoint, |(_, h)| h)
            .into(),
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateDoc {
    version: u32,
    topology: String,
    decisions: Vec<Decision>,
}

impl EtcdStore {
    /// Wait until `key` changes after revision `seen` (a watch from the
    /// next revision, so a release between the read and the watch is not
    /// missed: etcd's watch API replays history from a start revision), or
    /// `limit` passes. `false` when no watch could be opened or it ended
    /// early (the caller falls back to a pause).
    ///
    /// Why (the etcd client's own lock recipe, `concurrency.Mutex`, waits
    /// on the key before it the same way): polled with back-off, a waiter
    /// slept up to 500 ms after the lock was free, and a writer taking the
    /// lock again at once won it over every sleeping waiter
    /// (`examples/lock_handoff.rs`, docs/performance.md).
    async fn wait_change(&self, key: impl Into<Vec<u8>>, seen: i64, limit: Duration) -> bool {
        let mut client = self.client.clone();
        let opts = WatchOptions::new().with_start_revision(seen + 1);
        let watch = async move {
            let mut stream = client.watch(key, Some(opts)).await.ok()?;
            loop {
                let r = stream.message().await.ok()??;
                if r.canceled() {
                    return None;
                }
                if !r.events().is_empty() {
                    return Some(());
                }
            }
        };
        !matches!(tokio::time::timeout(limit, watch).await, Ok(None))
    }

    /// Connect to etcd for the fabric of topology `topology` (nothing is
    /// read or written yet).
    pub async fn connect(options: EtcdOptions, topology: &str) -> Result<Self, JobsError> {
        let location = Self::location_of(&options, topology);
        if options.endpoints.is_empty() {
            return Err(RemoteError::Unavailable {
                location,
                message: "no endpoint given (--etcd-endpoints URL,...)".into(),
            }
            .into());
        }
        let connect = ConnectOptions::new()
            .with_connect_timeout(options.timeout)
            .with_keep_alive(Duration::from_secs(2), options.timeout);
        let client = tokio::time::timeout(
            options.timeout,
            Client::connect(&options.endpoints, Some(connect)),
        )
        .await
        .map_err(|_| RemoteError::Unavailable {
            location: location.clone(),
            message: format!("not reached within {} s", options.timeout.as_secs()),
        })?
        .map_err(|e| RemoteError::Unavailable {
            location,
            message: e.to_string(),
        })?;
        // Reads are bounded like the files (a value over the request limit
        // cannot be written, but a cluster may be run with a higher one).
        let kv = client
            .kv_client()
            .max_decoding_message_size(2 * MAX_STATE_BYTES + 4096);
        Ok(EtcdStore {
            client,
            kv,
            options,
            topology: topology.to_string(),
            fence: Arc::new(Mutex::new(None)),
        })
    }

    fn location_of(options: &EtcdOptions, topology: &str) -> String {
        let endpoints: Vec<String> = options.endpoints.iter().map(|e| shown(e)).collect();
        format!(
            "etcd {} {}/{topology}",
            endpoints.join(","),
            options.prefix.trim_end_matches('/')
        )
    }

    fn key(&self, name: &str) -> String {
        format!(
            "{}/{}/{name}",
            self.options.prefix.trim_end_matches('/'),
            self.topology
        )
    }

    fn unavailable(&self, e: impl std::fmt::Display) -> JobsError {
        RemoteError::Unavailable {
            location: self.location(),
            message: e.to_string(),
        }
        .into()
    }

    /// One transaction, bounded by the timeout. A request that could not
    /// even be sent (the client's connection to a member that is down was
    /// refused) is sent again, once per endpoint, so the client's balancer
    /// reaches a live member; a request that may have been sent is never
    /// repeated (a compare-and-swap repeated after it applied would read as
    /// a conflict).
    async fn txn(&self, txn: Txn) -> Result<TxnResponse, JobsError> {
        self.send(txn, false).await
    }

    /// A transaction that only reads: repeated on any error until the
    /// timeout, since reading twice changes nothing (an etcd leader
    /// election, "etcdserver: leader changed", lasts about a second).
    async fn read(&self, txn: Txn) -> Result<TxnResponse, JobsError> {
        self.send(txn, true).await
    }

    async fn send(&self, txn: Txn, read: bool) -> Result<TxnResponse, JobsError> {
        let deadline = tokio::time::Instant::now() + self.options.timeout;
        let mut left = self.options.endpoints.len().max(1);
        loop {
            let mut kv = self.kv.clone();
            match tokio::time::timeout_at(deadline, kv.txn(txn.clone())).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) if read => {
                    debug!(store = %self.location(), error = %e, "read failed; again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(Err(e)) if left > 1 && never_sent(&e) => {
                    debug!(store = %self.location(), error = %e, "a member is down; another one");
                    left -= 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(Err(e)) => return Err(self.unavailable(e)),
                Err(_) => {
                    return Err(self.unavailable(format!(
                        "no answer within {} s",
                        self.options.timeout.as_secs()
                    )))
                }
            }
        }
    }

    /// The comparisons fencing a write: the lock key is still the one this
    /// store created, when it holds one.
    fn fence(&self) -> Vec<Compare> {
        let held = self.fence.lock().map(|f| *f).unwrap_or(None);
        held.map(|f| Compare::create_revision(self.key("lock"), CompareOp::Equal, f.created))
            .into_iter()
            .collect()
    }

    /// After a failed fenced transaction whose failure branch read the lock
    /// key: whether the lock was lost.
    fn lock_lost(&self, lock: Option<&KeyValue>) -> Option<JobsError> {
        let held = self.fence.lock().map(|f| *f).unwrap_or(None)?;
        if lock.map(KeyValue::create_revision) == Some(held.created) {
            return None;
        }
        Some(
            RemoteError::LockLost {
                location: self.location(),
                why: match lock {
                    None => "its lease expired".into(),
                    Some(kv) => format!(
                        "its lease expired and {} took it",
                        who(serde_json::from_slice::<Holder>(kv.value()).ok().as_ref())
                    ),
                },
            }
            .into(),
        )
    }

    fn checked_len(&self, key: &str, bytes: &[u8]) -> Result<(), JobsError> {
        if bytes.len() > self.options.max_value_bytes {
            return Err(RemoteError::TooLarge {
                key: key.to_string(),
                size: bytes.len(),
                limit: self.options.max_value_bytes,
                hint: " (etcd's --max-request-bytes is 1.5 MiB by default: raise it and the \
                       store's limit together, or keep this fabric's state in a state directory)",
            }
            .into());
        }
        Ok(())
    }

    fn read_len(key: &str, kv: &KeyValue) -> Result<(), JobsError> {
        if kv.value().len() > MAX_STATE_BYTES {
            return Err(RemoteError::TooLarge {
                key: key.to_string(),
                size: kv.value().len(),
                limit: MAX_STATE_BYTES,
                hint: " (not a value vclos wrote)",
            }
            .into());
        }
        Ok(())
    }

    fn render_state(&self, decisions: &[Decision]) -> Result<Vec<u8>, JobsError> {
        let doc = StateDoc {
            version: VERSION,
            topology: self.topology.clone(),
            decisions: decisions.to_vec(),
        };
        let key = self.key("state");
        let bytes = serde_json::to_vec(&doc).map_err(|e| RemoteError::Invalid {
            key: key.clone(),
            message: e.to_string(),
        })?;
        self.checked_len(&key, &bytes)?;
        Ok(bytes)
    }

    fn parse_state(&self, kv: &KeyValue) -> Result<Vec<Decision>, JobsError> {
        let key = self.key("state");
        Self::read_len(&key, kv)?;
        let invalid = |message: String| RemoteError::Invalid {
            key: key.clone(),
            message,
        };
        let doc: StateDoc = serde_json::from_slice(kv.value())
            .map_err(|e| invalid(format!("not a valid state: {e}")))?;
        if doc.version != VERSION {
            return Err(invalid(format!(
                "state version {} is not supported (expected {VERSION})",
                doc.version
            ))
            .into());
        }
        if doc.topology != self.topology {
            return Err(invalid(format!(
                "state belongs to topology `{}`, not `{}`",
                doc.topology, self.topology
            ))
            .into());
        }
        Ok(doc.decisions)
    }

    fn parse_txn(&self, kv: Option<&KeyValue>) -> Result<u64, JobsError> {
        let Some(kv) = kv else { return Ok(0) };
        std::str::from_utf8(kv.value())
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| {
                RemoteError::Invalid {
                    key: self.key("txn"),
                    message: "not a transaction number".into(),
                }
                .into()
            })
    }

    /// The journal held by `kv`.
    fn parse_journal(&self, kv: &KeyValue) -> Result<Journal, JobsError> {
        let key = self.key("journal");
        Self::read_len(&key, kv)?;
        let j: Journal = serde_json::from_slice(kv.value()).map_err(|e| JobsError::Journal {
            file: key.clone(),
            message: format!("not a valid journal: {e}"),
        })?;
        if j.version != 1 {
            return Err(JobsError::Journal {
                file: key,
                message: format!("version {} is not supported", j.version),
            });
        }
        Ok(j)
    }

    /// The transaction number committed so far (0 before the first).
    pub async fn txn_number(&self) -> Result<u64, JobsError> {
        Ok(self.load().await?.version.txn)
    }
}

/// A place in the writer lock's queue (module doc, "The writer lock is a
/// lease"): the key `lock.queue/LEASE`, bound to a lease this process
/// keeps alive while it waits and, once it has the lock, while it holds
/// it. Dropped while it waits (the wait ran out, or the call was
/// cancelled), it revokes the lease, so its place goes at once.
struct Waiter {
    key: String,
    /// The queue key's `create_revision`: its place.
    created: i64,
    lease: i64,
    client: Client,
    keeper: Option<tokio::task::JoinHandle<()>>,
    valid: Arc<Mutex<Instant>>,
    lost: tokio::sync::watch::Receiver<bool>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let Some(keeper) = self.keeper.take() else {
            return;
        };
        keeper.abort();
        let (mut client, lease) = (self.client.clone(), self.lease);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = client.lease_revoke(lease).await;
            });
        }
    }
}

impl EtcdStore {
    /// A lease kept alive from now on and a key in the lock's queue bound
    /// to it.
    async fn queue_up(&self, holder: &Holder) -> Result<Waiter, JobsError> {
        let ttl = i64::try_from(self.options.lease_ttl.as_secs().max(1)).unwrap_or(10);
        let mut client = self.client.clone();
        let asked = Instant::now();
        let lease = tokio::time::timeout(self.options.timeout, client.lease_grant(ttl, None))
            .await
            .map_err(|_| self.unavailable("no lease granted in time"))?
            .map_err(|e| self.unavailable(e))?
            .id();
        let valid = Arc::new(Mutex::new(asked + Duration::from_secs(ttl.unsigned_abs())));
        let (lost_tx, lost) = tokio::sync::watch::channel(false);
        let renewal = Renewal {
            valid: Arc::clone(&valid),
            lost: lost_tx,
        };
        let keeper = tokio::spawn(keep_alive(
            client.clone(),
            lease,
            self.options.lease_ttl,
            self.location(),
            renewal,
        ));
        let mut waiter = Waiter {
            key: format!("{}{lease:016x}", self.key("lock.queue/")),
            created: 0,
            lease,
            client,
            keeper: Some(keeper),
            valid,
            lost,
        };
        let value = serde_json::to_vec(holder).unwrap_or_default();
        let put = TxnOp::put(
            waiter.key.clone(),
            value,
            Some(PutOptions::new().with_lease(lease)),
        );
        let r = self.txn(Txn::new().and_then(vec![put])).await?;
        waiter.created = revision(&r);
        Ok(waiter)
    }

    /// Wait for `waiter`'s turn, then take the lock: first come, first
    /// served. `None` when the waiting lease was lost.
    async fn wait_turn(
        &self,
        waiter: Waiter,
        holder: &Holder,
        start: Instant,
        wait: Duration,
    ) -> Result<Option<Box<dyn WriterLock>>, JobsError> {
        let key = self.key("lock");
        // The waiter queued last before this one (etcd's own recipe:
        // `concurrency.Mutex` waits on the key with the largest
        // create_revision below its own).
        let before = GetOptions::new()
            .with_prefix()
            .with_max_create_revision(waiter.created - 1)
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_limit(1)
            .with_keys_only();
        let mut pause = Duration::from_millis(20);
        let mut warned = false;
        loop {
            if *waiter.lost.borrow() {
                return Ok(None);
            }
            let r = self
                .read(Txn::new().and_then(vec![
                    TxnOp::get(key.clone(), None),
                    TxnOp::get(self.key("lock.queue/"), Some(before.clone())),
                ]))
                .await?;
            let ahead = got(&r, 1).map(|kv| kv.key().to_vec());
            let mut seen = revision(&r);
            let mut other = got(&r, 0);
            let watched = match ahead {
                Some(k) => k,
                None => match self.take(&waiter, holder).await? {
                    Ok(fence) => return Ok(Some(self.held(waiter, holder, fence))),
                    Err((kv, at)) => {
                        (other, seen) = (kv, at);
                        key.clone().into_bytes()
                    }
                },
            };
            let other = other.and_then(|kv| serde_json::from_slice::<Holder>(kv.value()).ok());
            if start.elapsed() >= wait {
                return Err(LockError::Busy {
                    dir: self.location(),
                    holder: other.map(Box::new),
                    waited: start.elapsed().as_secs(),
                }
                .into());
            }
            if !warned {
                warned = true;
                warn!(store = %self.location(), "waiting up to {} s for the writer lock held by {}", wait.as_secs(), who(other.as_ref()));
            }
            // Until the key watched changes (the waiter before this one
            // went: it took the lock or gave up; or the lock was released
            // or its lease expired), rechecking the waiting lease now and
            // then, and no longer than the wait left.
            let left = wait.saturating_sub(start.elapsed());
            let limit = left
                .min(self.options.lease_ttl / 3)
                .max(Duration::from_millis(1));
            if !self.wait_change(watched, seen, limit).await {
                tokio::time::sleep(pause.min(limit)).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }

    /// The head of the queue takes the lock if it is free, leaving the
    /// queue in the same transaction: the fence, or the lock key as it
    /// is (if any) and the revision it was read at.
    async fn take(
        &self,
        waiter: &Waiter,
        holder: &Holder,
    ) -> Result<Result<Fence, (Option<KeyValue>, i64)>, JobsError> {
        let key = self.key("lock");
        let value = serde_json::to_vec(holder).unwrap_or_default();
        let r = self
            .txn(
                Txn::new()
                    .when(vec![absent(&key)])
                    .and_then(vec![
                        TxnOp::put(
                            key.clone(),
                            value,
                            Some(PutOptions::new().with_lease(waiter.lease)),
                        ),
                        TxnOp::delete(waiter.key.clone(), None),
                    ])
                    .or_else(vec![TxnOp::get(key, None)]),
            )
            .await?;
        if !r.succeeded() {
            return Ok(Err((got(&r, 0), revision(&r))));
        }
        Ok(Ok(Fence {
            created: revision(&r),
            lease: waiter.lease,
        }))
    }

    /// The lock `waiter` took: its lease's keep-alive goes on.
    fn held(&self, mut waiter: Waiter, holder: &Holder, fence: Fence) -> Box<dyn WriterLock> {
        if let Ok(mut f) = self.fence.lock() {
            *f = Some(fence);
        }
        let keeper = waiter
            .keeper
            .take()
            .unwrap_or_else(|| tokio::spawn(async {}));
        Box::new(LeaseLock {
            store: self.clone(),
            holder: holder.clone(),
            fence,
            keeper,
            valid: Arc::clone(&waiter.valid),
            lost: waiter.lost.clone(),
            released: false,
        })
    }
}

/// The comparison "`key` does not exist" (its `create_revision` is 0): an
/// exclusive create.
fn absent(key: &str) -> Compare {
    Compare::create_revision(key, CompareOp::Equal, 0)
}

/// Whether a failed request never left this process: its connection
/// could not be made (tonic's transport `ConnectError`, e.g. refused by a
/// member that is down).
fn never_sent(e: &etcd_client::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        let refused = s
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        if refused || s.to_string().contains("tcp connect error") {
            return true;
        }
        source = s.source();
    }
    false
}

/// The key-values of the `i`th response of a transaction (a get).
fn got(r: &TxnResponse, i: usize) -> Option<KeyValue> {
    match r.op_responses().into_iter().nth(i) {
        Some(TxnOpResponse::Get(g)) => first(&g),
        _ => None,
    }
}

fn first(g: &GetResponse) -> Option<KeyValue> {
    g.kvs().first().cloned()
}

fn revision(r: &TxnResponse) -> i64 {
    r.header().map_or(0, |h| h.revision())
}

/// Nothing to wait for: etcd acknowledged the journal durable.
struct Acknowledged;

#[async_trait]
impl Durable for Acknowledged {
    async fn sync(self: Box<Self>) -> Result<(), JobsError> {
        Ok(())
    }
}

/// The writer lock: a key bound to a lease kept alive by a task.
#[derive(Debug)]
struct LeaseLock {
    store: EtcdStore,
    holder: Holder,
    fence: Fence,
    keeper: tokio::task::JoinHandle<()>,
    /// Until when the lease is known alive (see [`Renewal`]).
    valid: Arc<Mutex<Instant>>,
    lost: tokio::sync::watch::Receiver<bool>,
    /// Disarmed already ([`WriterLock::release`], or drop).
    released: bool,
}

/// What the keep-alive task shares with the lock: until when the lease is
/// known alive, and the signal it sends when that passed.
///
/// A renewal answered with TTL `t` keeps the lease alive until at least
/// `sent + t`, where `sent` is when the request left this process: etcd
/// renews from when it *receives* the request, which is later. So this
/// side's view expires no later than etcd's, and a writer that finds its
/// view expired (it was stopped, or cut off from etcd) stops writing before
/// another can have taken the lock (etcd, "Lease API":
/// <https://etcd.io/docs/v3.4/learning/api/#lease-api>; clocks: monotonic,
/// counted here, never compared across machines).
struct Renewal {
    valid: Arc<Mutex<Instant>>,
    lost: tokio::sync::watch::Sender<bool>,
}

impl Renewal {
    fn until(&self) -> Instant {
        self.valid
            .lock()
            .map(|v| *v)
            .unwrap_or_else(|_| Instant::now())
    }

    fn renewed(&self, sent: Instant, ttl: i64) {
        let until = sent + Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
        if let Ok(mut v) = self.valid.lock() {
            *v = (*v).max(until);
        }
    }

    fn lose(&self, location: &str, why: &str) {
        warn!(%location, "the writer lock's lease {why}: this writer stops writing");
        let _ = self.lost.send(true);
    }
}

#[async_trait]
impl WriterLock for LeaseLock {
    fn holder(&self) -> &Holder {
        &self.holder
    }

    fn term(&self) -> Option<i64> {
        Some(self.fence.created)
    }

    fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.lost.clone())
    }

    async fn release(mut self: Box<Self>) {
        let Some((mut client, lease)) = self.disarm() else {
            return;
        };
        let revoke = client.lease_revoke(lease);
        if let Ok(Err(e)) = tokio::time::timeout(self.store.options.timeout, revoke).await {
            debug!(error = %e, "revoking the writer lock's lease; it expires after its TTL");
        }
    }

    async fn check(&self) -> Result<(), JobsError> {
        let until = self
            .valid
            .lock()
            .map(|v| *v)
            .unwrap_or_else(|_| Instant::now());
        let margin = self.store.options.lease_ttl / 3;
        if *self.lost.borrow() || until.saturating_duration_since(Instant::now()) < margin {
            return Err(RemoteError::LockLost {
                location: self.store.location(),
                why: "its lease was not renewed in time".into(),
            }
            .into());
        }
        let key = self.store.key("lock");
        let r = (self.store)
            .txn(
                Txn::new()
                    .when(self.store.fence())
                    .or_else(vec![TxnOp::get(key, None)]),
            )
            .await?;
        match r.succeeded() {
            true => Ok(()),
            false => Err(self
                .store
                .lock_lost(got(&r, 0).as_ref())
                .unwrap_or_else(|| self.store.unavailable("the lock changed"))),
        }
    }

    async fn set_operation(&mut self, operation: &str, job: Option<&str>) -> Result<(), JobsError> {
        self.holder.operation = operation.to_string();
        self.holder.job = job.map(str::to_string);
        let key = self.store.key("lock");
        let value = serde_json::to_vec(&self.holder).unwrap_or_default();
        let r = (self.store)
            .txn(
                Txn::new()
                    .when(vec![Compare::create_revision(
                        key.clone(),
                        CompareOp::Equal,
                        self.fence.created,
                    )])
                    .and_then(vec![TxnOp::put(
                        key.clone(),
                        value,
                        Some(PutOptions::new().with_lease(self.fence.lease)),
                    )])
                    .or_else(vec![TxnOp::get(key, None)]),
            )
            .await?;
        if !r.succeeded() {
            return Err(self
                .store
                .lock_lost(got(&r, 0).as_ref())
                .unwrap_or_else(|| self.store.unavailable("the lock changed")));
        }
        Ok(())
    }
}

impl LeaseLock {
    /// Stop keeping the lease alive and stop fencing this store's writes
    /// with it; the client and lease to revoke, the first time only.
    fn disarm(&mut self) -> Option<(Client, i64)> {
        if std::mem::replace(&mut self.released, true) {
            return None;
        }
        self.keeper.abort();
        if let Ok(mut f) = self.store.fence.lock() {
            *f = None;
        }
        Some((self.store.client.clone(), self.fence.lease))
    }
}

impl Drop for LeaseLock {
    fn drop(&mut self) {
        // Revoke the lease (the lock key goes with it) in the background;
        // if the runtime is gone the lease expires after its TTL instead.
        let Some((mut client, lease)) = self.disarm() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = client.lease_revoke(lease).await;
            });
        }
    }
}

/// Keep `lease` alive every third of `ttl` until aborted or lost: lost
/// when etcd says it expired, or when no renewal was answered for as long
/// as the last one kept it alive ([`Renewal`]); reconnects the keep-alive
/// stream in between (an etcd member may go away).
async fn keep_alive(mut client: Client, lease: i64, ttl: Duration, location: String, r: Renewal) {
    let every = (ttl / 3).max(Duration::from_millis(100));
    let mut stream = None;
    loop {
        if Instant::now() >= r.until() {
            return r.lose(&location, "was not renewed within its TTL");
        }
        if stream.is_none() {
            match tokio::time::timeout(every, client.lease_keep_alive(lease)).await {
                Ok(Ok(k)) => stream = Some(k),
                Ok(Err(e)) => debug!(%location, error = %e, "reconnecting the lease keep-alive"),
                Err(_) => debug!(%location, "lease keep-alive: no stream in time; retrying"),
            }
        }
        if let Some((keeper, answers)) = &mut stream {
            let sent = Instant::now();
            let alive = async {
                keeper.keep_alive().await?;
                answers.message().await
            };
            match tokio::time::timeout(every, alive).await {
                Ok(Ok(Some(a))) if a.ttl() > 0 => r.renewed(sent, a.ttl()),
                Ok(Ok(Some(_))) => return r.lose(&location, "expired"),
                Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {
                    debug!(%location, "lease keep-alive unanswered; reconnecting");
                    stream = None;
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}

#[async_trait]
impl Store for EtcdStore {
    fn location(&self) -> String {
        Self::location_of(&self.options, &self.topology)
    }

    fn state_name(&self) -> String {
        self.key("state")
    }

    fn journal_name(&self) -> String {
        self.key("journal")
    }

    async fn init(&self) -> Result<bool, JobsError> {
        let key = self.key("state");
        let value = self.render_state(&[])?;
        let r = self
            .txn(
                Txn::new()
                    .when(vec![absent(&key)])
                    .and_then(vec![
                        TxnOp::put(key.clone(), value, None),
                        TxnOp::put(self.key("txn"), "0", None),
                    ])
                    .or_else(vec![TxnOp::get(key, None)]),
            )
            .await?;
        if r.succeeded() {
            return Ok(true);
        }
        // One exists: it must be this topology's.
        match got(&r, 0) {
            Some(kv) => self.parse_state(&kv).map(|_| false),
            None => Err(self.unavailable("the state vanished while it was created")),
        }
    }

    async fn load(&self) -> Result<Committed, JobsError> {
        let r = self
            .read(Txn::new().and_then(vec![
                TxnOp::get(self.key("state"), None),
                TxnOp::get(self.key("txn"), None),
            ]))
            .await?;
        let Some(state) = got(&r, 0) else {
            return Err(RemoteError::Missing {
                location: self.location(),
                topology: self.topology.clone(),
            }
            .into());
        };
        Ok(Committed {
            decisions: self.parse_state(&state)?,
            version: Version {
                revision: state.mod_revision(),
                txn: self.parse_txn(got(&r, 1).as_ref())?,
            },
        })
    }

    async fn journal(&self) -> Result<Option<Journal>, JobsError> {
        let r = self
            .read(Txn::new().and_then(vec![TxnOp::get(self.key("journal"), None)]))
            .await?;
        got(&r, 0).map(|kv| self.parse_journal(&kv)).transpose()
    }

    async fn begin(&self, journal: &Journal) -> Result<Box<dyn Durable>, JobsError> {
        let key = self.key("journal");
        let value = serde_json::to_vec(journal).map_err(|e| JobsError::Journal {
            file: key.clone(),
            message: e.to_string(),
        })?;
        self.checked_len(&key, &value)?;
        let mut when = vec![absent(&key)];
        when.extend(self.fence());
        let r = self
            .txn(
                Txn::new()
                    .when(when)
                    .and_then(vec![TxnOp::put(key.clone(), value, None)])
                    .or_else(vec![
                        TxnOp::get(key.clone(), None),
                        TxnOp::get(self.key("lock"), None),
                    ]),
            )
            .await?;
        if r.succeeded() {
            debug!(key = %key, revision = revision(&r), "journal written");
            return Ok(Box::new(Acknowledged));
        }
        if got(&r, 0).is_some() {
            return Err(JobsError::PendingJournal(key));
        }
        Err(self
            .lock_lost(got(&r, 1).as_ref())
            .unwrap_or_else(|| self.unavailable("the journal could not be written")))
    }

    async fn save(&self, read: Version, decisions: &[Decision]) -> Result<Version, JobsError> {
        let key = self.key("state");
        let journal = self.key("journal");
        let value = self.render_state(decisions)?;
        let txn = read.txn + 1;
        let mut when = vec![
            Compare::mod_revision(key.clone(), CompareOp::Equal, read.revision),
            Compare::create_revision(journal.clone(), CompareOp::Greater, 0),
        ];
        when.extend(self.fence());
        let r = self
            .txn(
                Txn::new()
                    .when(when)
                    .and_then(vec![
                        TxnOp::put(key.clone(), value, None),
                        TxnOp::put(self.key("txn"), txn.to_string(), None),
                        TxnOp::delete(journal.clone(), None),
                    ])
                    .or_else(vec![
                        TxnOp::get(key.clone(), None),
                        TxnOp::get(journal, None),
                        TxnOp::get(self.key("lock"), None),
                    ]),
            )
            .await?;
        if r.succeeded() {
            let revision = revision(&r);
            debug!(key = %key, revision, txn, "state saved");
            return Ok(Version { revision, txn });
        }
        if let Some(lost) = self.lock_lost(got(&r, 2).as_ref()) {
            return Err(lost);
        }
        let why = match (got(&r, 0), got(&r, 1)) {
            (Some(s), _) if s.mod_revision() != read.revision => {
                format!("it is at revision {} now", s.mod_revision())
            }
            (None, _) => "it was deleted".to_string(),
            (_, None) => "the journal it was to settle is gone".to_string(),
            _ => "the comparison failed".to_string(),
        };
        Err(JobsError::Conflict {
            key,
            read: read.revision,
            why: Some(why),
        })
    }

    async fn remove_journal(&self) -> Result<(), JobsError> {
        let journal = self.key("journal");
        let r = self
            .txn(
                Txn::new()
                    .when(self.fence())
                    .and_then(vec![TxnOp::delete(journal, None)])
                    .or_else(vec![TxnOp::get(self.key("lock"), None)]),
            )
            .await?;
        if r.succeeded() {
            return Ok(());
        }
        Err(self
            .lock_lost(got(&r, 0).as_ref())
            .unwrap_or_else(|| self.unavailable("the journal could not be removed")))
    }

    async fn lock(
        &self,
        holder: &Holder,
        wait: Duration,
    ) -> Result<Box<dyn WriterLock>, JobsError> {
        let start = Instant::now();
        loop {
            let waiter = self.queue_up(holder).await?;
            if let Some(lock) = self.wait_turn(waiter, holder, start, wait).await? {
                return Ok(lock);
            }
            // The waiting lease was lost (this process was cut off from
            // etcd for a TTL): its place went with it; queue again.
            debug!(store = %self.location(), "lost the place in the writer lock's queue; queueing again");
        }
    }

    async fn writer(&self) -> Result<Option<Option<Holder>>, JobsError> {
        let r = self
            .read(Txn::new().and_then(vec![TxnOp::get(self.key("lock"), None)]))
            .await?;
        Ok(got(&r, 0).map(|kv| serde_json::from_slice::<Holder>(kv.value()).ok()))
    }
}
