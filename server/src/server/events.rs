//! `GET /v1/events`: server-sent events (the WHATWG HTML "Server-sent
//! events" format, `text/event-stream`) for what changes the fabric:
//! `admitted`, `released`, `failed` (a change that did not commit) and
//! `drift` (a device found differing from the state's intent by
//! `GET /v1/status`) and `leader` (with leader election: this instance
//! became the leader or stepped down; `detail` says which).
//!
//! Each event's `id` is a sequence number of this process and its data a
//! JSON object (`seq`, `kind`, `job`, `device`, `detail`, `at_ms`: Unix
//! time). A subscriber that falls more than [`BACKLOG`] events behind is
//! told how many it missed (`lagged`) and goes on: the stream never blocks
//! a change. Comments every 15 s keep idle connections open through
//! proxies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::stream::Stream;
use serde::Serialize;
use tokio::sync::{broadcast, watch};

/// Events kept for a slow subscriber.
pub const BACKLOG: usize = 1024;

/// One fabric event.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub seq: u64,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub at_ms: u64,
}

/// The service's event bus.
#[derive(Debug)]
pub struct Events {
    tx: broadcast::Sender<Event>,
    seq: AtomicU64,
    /// Set when the service shuts down: every stream ends.
    closing: watch::Sender<bool>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            tx: broadcast::channel(BACKLOG).0,
            seq: AtomicU64::new(0),
            closing: watch::channel(false).0,
        }
    }
}

impl Events {
    /// Publish an event (dropped when nobody listens).
    pub fn publish(
        &self,
        kind: &'static str,
        job: Option<String>,
        device: Option<String>,
        detail: Option<String>,
    ) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = self.tx.send(Event {
            seq,
            kind,
            job,
            device,
            detail,
            at_ms,
        });
    }

    /// End every stream, now and from now on (shutdown: a graceful
    /// shutdown waits for the responses in flight, and a stream's response
    /// would never end by itself).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// The SSE response of a new subscriber: events from now on, until
    /// [`Events::close`].
    pub fn subscribe(&self) -> Sse<impl Stream<Item = Result<SseEvent, std::convert::Infallible>>> {
        let rx = self.tx.subscribe();
        let closing = self.closing.subscribe();
        let stream =
            futures_util::stream::unfold((rx, closing), |(mut rx, mut closing)| async move {
                let received = tokio::select! {
                    r = rx.recv() => r,
                    _ = closing.wait_for(|closed| *closed) => return None,
                };
                let ev = match received {
                    Ok(e) => SseEvent::default()
                        .id(e.seq.to_string())
                        .event(e.kind)
                        .json_data(&e)
                        .unwrap_or_else(|_| SseEvent::default().comment("unserialisable event")),
                    Err(broadcast::error::RecvError::Lagged(n)) => SseEvent::default()
                        .event("lagged")
                        .data(format!("{{\"missed\": {n}}}")),
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                Some((Ok(ev), (rx, closing)))
            });
        Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    }
}
