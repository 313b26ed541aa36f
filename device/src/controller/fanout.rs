//! Bounded fan-out: run one task per item, at most `max` at a time.
//!
//! Each item becomes a tokio task (so devices make progress in parallel on a
//! multi-threaded runtime, not just concurrently), and a new one starts as
//! soon as any finishes, so a slow device never holds back a whole "wave".
//! Results come back in input order. Dropping the future aborts every task
//! (the `JoinSet` owns them), which is what a cancelled apply must do.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::JoinSet;

/// Run `start(item)` for every item, `max` (at least 1) in flight at a time;
/// `on_done` sees each result as it arrives. A task that panicked leaves
/// `None` in its place.
pub(crate) async fn bounded<T, R, F, Fut>(
    items: Vec<T>,
    max: usize,
    mut start: F,
    mut on_done: impl FnMut(&R),
) -> Vec<Option<R>>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = R> + Send + 'static,
    R: Send + 'static,
{
    let max = max.max(1);
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    let mut index = HashMap::new();
    let mut set = JoinSet::new();
    let mut pending = items.into_iter().enumerate();
    loop {
        while set.len() < max {
            let Some((i, item)) = pending.next() else {
                break;
            };
            let handle = set.spawn(start(item));
            index.insert(handle.id(), i);
        }
        match set.join_next_with_id().await {
            None => break,
            Some(Ok((id, r))) => {
                on_done(&r);
                if let Some(slot) = index.get(&id).and_then(|&i| out.get_mut(i)) {
                    *slot = Some(r);
                }
            }
            Some(Err(e)) => tracing::error!(error = %e, "controller task died"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keeps_order_bounds_in_flight_and_survives_a_panic() {
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let started = tokio::time::Instant::now();
        let mut seen = 0;
        let out = bounded(
            (0..10u64).collect(),
            3,
            |i| {
                let (now, peak) = (now.clone(), peak.clone());
                async move {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    // Later items finish first: order must still be kept.
                    tokio::time::sleep(Duration::from_millis(100 - i * 5)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    assert_ne!(i, 7, "task 7 panics on purpose");
                    i * 2
                }
            },
            |_| seen += 1,
        )
        .await;
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        assert_eq!(seen, 9);
        let want: Vec<Option<u64>> = (0..10).map(|i| (i != 7).then_some(i * 2)).collect();
        assert_eq!(out, want);
        // Ten tasks of <=100 ms, three at a time: four waves at most.
        assert!(started.elapsed() <= Duration::from_millis(400));
        assert!(started.elapsed() >= Duration::from_millis(55 * 3));
    }
}
