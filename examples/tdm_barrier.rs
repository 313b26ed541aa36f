//! How long one TDM stage barrier takes on the emulated fabric (issue 19,
//! item 4): from the barrier to the read-back of the new map, i.e. the
//! `DLT-PATCH` + multi-pair `ENT-PATCH` exchange, the OCS's switching
//! delay, and the `RTRV-PATCH` round trips, over real Telnet/TL1 through
//! the real driver. The testbed OCS alternates between two stages of
//! `PORTS / 2` leaf-to-leaf circuits that share no circuit, so every
//! barrier rewires all `PORTS` ports.
//!
//! `cargo run --release --example tdm_barrier -- [PORTS=16] [BARRIERS=40]`
//!
//! Prints min / median / max over the barriers, at the MEMS switching
//! delay (50 ms) and at 0 ms (the TL1 and driver overhead alone).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use vclos::controller::TopologyDrivers;
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::tdm::run::{self, RunOptions, TdmEvent};
use vclos::tdm::transition;
use vclos::tdm::{Circuit, Schedule, Stage, Variant};

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");

/// Stage `s` joins leaf1 uplink `i` (OCS port i) to leaf2 uplink
/// 17 + (i - 1 + s) mod n.
fn schedule(n: u32) -> Schedule {
    let stage = |s: u32, job: &str| Stage {
        jobs: vec![job.to_string()],
        time_s: 0.0,
        ocs: BTreeMap::from([(
            "ocs1".to_string(),
            (1..=n)
                .map(|i| Circuit {
                    a: i.to_string(),
                    b: (17 + (i - 1 + s) % n).to_string(),
                    jobs: vec![job.to_string()],
                })
                .collect(),
        )]),
    };
    Schedule {
        topology: "testbed-ocs".into(),
        variant: Variant::Tdm,
        switch_ms: 50.0,
        round_s: 0.1,
        baseline_round_s: 0.1,
        reconfiguration_s: 0.1,
        stages: vec![stage(0, "a"), stage(1, "b")],
    }
}

async fn measure(ports: u32, barriers: u32, delay: Duration) -> Result<Vec<f64>> {
    let topo = Arc::new(vclos::topology::from_str("testbed-ocs.yaml", TESTBED)?);
    let opts = FabricOptions {
        switch_delay: delay,
        ..FabricOptions::default()
    };
    let fab = EmulatedFabric::start(topo, opts).await?;
    let dir = tempfile::tempdir()?;
    std::env::set_var("VCLOS_TDM_BENCH_PW", "admin");
    let text = fab.aim(
        "t",
        TESTBED,
        &dir.path().join("known_hosts"),
        "VCLOS_TDM_BENCH_PW",
    )?;
    let topo = Arc::new(vclos::topology::from_str("emu.yaml", &text)?);
    let s = schedule(ports / 2);
    let v = transition::validate(&s, &topo)?;
    let mut o = RunOptions::new(&s);
    o.rounds = barriers / 2 + 1;
    o.switch_delay = delay;
    let mut times = Vec::new();
    let mut on_event = |e: &TdmEvent| {
        if let TdmEvent::Switched {
            elapsed_ms, ocs, ..
        } = e
        {
            if ocs[0].ports_touched == ports as usize {
                times.push(*elapsed_ms);
            }
        }
    };
    let factory = TopologyDrivers::new(topo);
    run::run(&s, &v, &factory, &o, None, &mut on_event).await?;
    times.sort_by(f64::total_cmp);
    Ok(times)
}

#[tokio::main]
async fn main() -> Result<()> {
    let arg = |i: usize, d: u32| -> Result<u32> {
        std::env::args().nth(i).map_or(Ok(d), |a| {
            a.parse().context("arguments: [PORTS] [BARRIERS]")
        })
    };
    let (ports, barriers) = (arg(1, 16)?, arg(2, 40)?);
    if !(2..=32).contains(&ports) || ports % 2 == 1 {
        bail!("PORTS must be even, from 2 to 32 (the testbed's leaf uplinks)");
    }
    for ms in [50, 0] {
        let t = measure(ports, barriers, Duration::from_millis(ms)).await?;
        let (Some(min), Some(max)) = (t.first(), t.last()) else {
            bail!("no barrier measured");
        };
        println!(
            "switching delay {ms} ms, {ports} ports per barrier, {} barriers: min {min:.1} ms, median {:.1} ms, max {max:.1} ms",
            t.len(),
            t[t.len() / 2],
        );
    }
    Ok(())
}
