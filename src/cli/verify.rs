//! `vclos verify`: read every device's running configuration through its
//! real driver and verify every held job against what the devices hold.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use vclos::controller::TopologyDrivers;
use vclos::jobs::{self, Pending};
use vclos::topology;
use vclos::verification::{self, fetch, Report};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Topology file (its endpoints and credentials are used to reach devices).
    #[arg(long)]
    topology: PathBuf,
    /// State directory (`DIR/state.json`) holding the jobs to verify.
    #[arg(long)]
    state: PathBuf,
    /// Print the reports as JSON.
    #[arg(long)]
    json: bool,
    /// Devices read at once.
    #[arg(long, default_value_t = fetch::DEFAULT_CONCURRENCY)]
    concurrency: usize,
}

#[derive(Serialize)]
struct Output<'a> {
    ok: bool,
    devices: usize,
    reports: &'a [Report],
}

pub fn run(args: VerifyArgs) -> Result<ExitCode> {
    let topo = Arc::new(topology::load(&args.topology)?);
    // The state must be one every other command accepts.
    let state = jobs::stored_state(&args.state, &topo)?;
    let decisions: Vec<_> = state.decisions().into_iter().cloned().collect();
    // Devices mid-change, or left mid-change, cannot be verified against it.
    match jobs::pending(&args.state)? {
        Some(p @ Pending::InFlight(_)) => {
            bail!("{p}; nothing verified: verify again when it has finished")
        }
        Some(p @ Pending::Interrupted(_)) => {
            bail!("{p}; nothing verified: run `vclos reconcile` first")
        }
        None => {}
    }
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let names: Vec<String> = topo.devices.iter().map(|d| d.name.clone()).collect();
    let factory = Arc::new(TopologyDrivers::new(Arc::clone(&topo)));
    let fetched = rt.block_on(fetch::fetch_configs(factory, names, args.concurrency));
    let mut configs = std::collections::BTreeMap::new();
    let mut unreadable = Vec::new();
    for (device, r) in fetched {
        match r {
            Ok(text) => {
                configs.insert(device, text);
            }
            Err(e) => unreadable.push(format!(
                "{device}: cannot read the running configuration: {e}"
            )),
        }
    }
    if !unreadable.is_empty() {
        for u in &unreadable {
            eprintln!("error: {u}");
        }
        bail!(
            "{} of {} devices could not be read; nothing verified",
            unreadable.len(),
            topo.devices.len()
        );
    }
    let reports = verification::verify_fabric(&topo, &decisions, &configs)?;
    let ok = reports.iter().all(Report::ok);
    if args.json {
        let out = Output {
            ok,
            devices: configs.len(),
            reports: &reports,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for r in &reports {
            if r.ok() {
                println!("{}: OK ({} flows)", r.job, r.flows);
            } else {
                println!("{}: {} violation(s)", r.job, r.violations.len());
                for v in &r.violations {
                    println!("  {v}");
                }
            }
        }
        println!(
            "{} job(s) verified from {} device configurations: {}",
            decisions.len(),
            configs.len(),
            if ok { "OK" } else { "VIOLATIONS" }
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
