//! How fast the writer lock passes between writers that contend for it:
//! `WRITERS` writers (each with its own store client, as separate
//! `vclos job submit` processes would be) each take the lock `ROUNDS`
//! times, hold it `HOLD_MS` (a transaction) and release it, all at once.
//! Prints, per store, the handoff gap (from one writer's release to the
//! next writer's acquisition: time the lock sat free while someone
//! waited), the wait per acquisition, and acquisitions per second.
//!
//! ```sh
//! etcd --data-dir /tmp/etcd-bench &    # 127.0.0.1:2379 (Debian etcd-server)
//! cargo run --release --features etcd --example lock_handoff -- http://127.0.0.1:2379 [WRITERS] [ROUNDS] [HOLD_MS]
//! ```
//! The figure is in docs/performance.md ("The etcd state store").

use std::sync::Arc;
use std::time::{Duration, Instant};

use vclos::state::lock::Holder;
use vclos::store::dir::DirStore;
use vclos::store::etcd::{EtcdOptions, EtcdStore};
use vclos::store::Store;

/// One acquisition: when it was asked for, got, and released.
struct Turn {
    asked: Instant,
    got: Instant,
    released: Instant,
}

async fn contend(stores: Vec<Arc<dyn Store>>, rounds: u32, hold: Duration) -> Vec<Turn> {
    let tasks: Vec<_> = (stores.into_iter().enumerate())
        .map(|(i, s)| {
            tokio::spawn(async move {
                let holder = Holder::me("job submit", Some(&format!("w{i}")));
                let mut turns = Vec::new();
                for _ in 0..rounds {
                    let asked = Instant::now();
                    let lock = s.lock(&holder, Duration::from_secs(60)).await;
                    let got = Instant::now();
                    let lock = lock.expect("the lock within 60 s");
                    tokio::time::sleep(hold).await;
                    lock.release().await;
                    turns.push(Turn {
                        asked,
                        got,
                        released: Instant::now(),
                    });
                }
                turns
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("writer task"));
    }
    all
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn report(name: &str, mut turns: Vec<Turn>) {
    turns.sort_by_key(|t| t.got);
    let start = turns.iter().map(|t| t.asked).min().expect("turns");
    let end = turns.iter().map(|t| t.released).max().expect("turns");
    // A gap: the lock free from one release to the next acquisition, when
    // that acquisition had been asked for before the release.
    let mut gaps: Vec<f64> = (turns.windows(2))
        .filter(|w| w[1].asked <= w[0].released)
        .map(|w| {
            w[1].got
                .saturating_duration_since(w[0].released)
                .as_secs_f64()
                * 1e3
        })
        .collect();
    let mut waits: Vec<f64> = (turns.iter())
        .map(|t| (t.got - t.asked).as_secs_f64() * 1e3)
        .collect();
    println!(
        "{name}: {} acquisitions in {:.2} s ({:.1}/s); handoff gap median {:.1} ms, p90 {:.1} ms, max {:.1} ms; wait median {:.0} ms, max {:.0} ms",
        turns.len(),
        (end - start).as_secs_f64(),
        turns.len() as f64 / (end - start).as_secs_f64(),
        pct(&mut gaps, 0.5),
        pct(&mut gaps, 0.9),
        pct(&mut gaps, 1.0),
        pct(&mut waits, 0.5),
        pct(&mut waits, 1.0),
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let endpoint = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:2379".into());
    let writers: usize = args.next().map_or(Ok(4), |r| r.parse())?;
    let rounds: u32 = args.next().map_or(Ok(20), |r| r.parse())?;
    let hold = Duration::from_millis(args.next().map_or(Ok(5), |r| r.parse())?);

    let dir = tempfile::tempdir()?;
    let first = DirStore::new(dir.path(), "t");
    first.init().await?;
    let stores: Vec<Arc<dyn Store>> = (0..writers)
        .map(|_| Arc::new(DirStore::new(dir.path(), "t")) as Arc<dyn Store>)
        .collect();
    report("state directory", contend(stores, rounds, hold).await);

    let topology = format!("handoff-{}", std::process::id());
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..writers {
        let s = EtcdStore::connect(EtcdOptions::new(vec![endpoint.clone()]), &topology).await?;
        stores.push(Arc::new(s));
    }
    stores[0].init().await?;
    report("etcd", contend(stores, rounds, hold).await);
    Ok(())
}
