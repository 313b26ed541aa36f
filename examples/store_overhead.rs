//! What admissions through the etcd state store add over the state
//! directory, on the emulated testbed-ocs fabric (no device delay):
//! `ROUNDS` submit + release pairs of a one-server job (devices untouched:
//! the store's cost alone) and of a two-leaf vClos job (a device
//! transaction), each through `Fabric` on a state directory and on etcd;
//! the mean per admission or release, and the difference.
//!
//! ```sh
//! etcd --data-dir /tmp/etcd-bench &    # 127.0.0.1:2379 (Debian etcd-server)
//! cargo run --release --features etcd --example store_overhead -- http://127.0.0.1:2379 [ROUNDS]
//! ```
//! The figure is in docs/performance.md ("The etcd state store").

use std::sync::Arc;
use std::time::{Duration, Instant};

use vclos::controller::NoProgress;
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::store::dir::DirStore;
use vclos::store::etcd::{EtcdOptions, EtcdStore};
use vclos::store::Store;
use vclos::topology;

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");
const PASSWORD_VAR: &str = "VCLOS_STORE_OVERHEAD_PW";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let endpoint = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:2379".into());
    let rounds: u32 = args.next().map_or(Ok(50), |r| r.parse())?;
    std::env::set_var(PASSWORD_VAR, "admin");
    let dir = tempfile::tempdir()?;
    let base = Arc::new(topology::from_str("t.yaml", TESTBED)?);
    let fab = EmulatedFabric::start(base, FabricOptions::default()).await?;
    let text = fab.aim("t", TESTBED, &dir.path().join("known_hosts"), PASSWORD_VAR)?;
    let topo = Arc::new(topology::from_str("emu.yaml", &text)?);

    let files: Arc<dyn Store> = Arc::new(DirStore::new(dir.path().join("state"), &topo.name));
    let mut options = EtcdOptions::new(vec![endpoint]);
    options.prefix = format!("/vclos-bench-{}", std::process::id());
    let etcd: Arc<dyn Store> = Arc::new(EtcdStore::connect(options, &topo.name).await?);
    println!("{rounds} rounds; mean per admission or release, ms");
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "", "directory", "etcd", "added"
    );
    for (what, gpus, policy, held) in [
        ("one server (no device)", 4, Policy::OcsVclos, &[][..]),
        // Two 12-GPU jobs fill three servers of each leaf: an 8-GPU job
        // then spans both leaves (spine VRFs and leaf source routes).
        (
            "two leaves (vClos, devices)",
            8,
            Policy::Vclos,
            &["a", "b"][..],
        ),
    ] {
        let mut means = Vec::new();
        for store in [&files, &etcd] {
            store.init().await?;
            let mut f = Fabric::load_store(topo.clone(), store.clone())
                .await?
                .with_policy(policy);
            f.lock("bench", None).await?;
            f.reconcile(true, &NoProgress).await?;
            for h in held {
                f.submit(&JobId::new(*h)?, 12, &NoProgress).await?;
            }
            let job = JobId::new("bench")?;
            // Warm the sessions and the connection.
            f.submit(&job, gpus, &NoProgress).await?;
            f.release(&job, &NoProgress).await?;
            let mut total = Duration::ZERO;
            let mut touched = 0;
            for _ in 0..rounds {
                let t = Instant::now();
                let s = f.submit(&job, gpus, &NoProgress).await?;
                anyhow::ensure!(s.report.is_committed(), "{}", s.report);
                touched = s.plan.devices.len();
                let r = f.release(&job, &NoProgress).await?;
                anyhow::ensure!(r.report.is_committed(), "{}", r.report);
                total += t.elapsed();
            }
            anyhow::ensure!(
                (touched > 0) != held.is_empty(),
                "{what}: {touched} device(s) changed"
            );
            for h in held {
                f.release(&JobId::new(*h)?, &NoProgress).await?;
            }
            f.shutdown().await;
            means.push(total.as_secs_f64() * 1e3 / f64::from(2 * rounds));
        }
        println!(
            "{what:<28} {:>10.2} {:>10.2} {:>+10.2}",
            means[0],
            means[1],
            means[1] - means[0]
        );
    }
    Ok(())
}
