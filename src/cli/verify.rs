//! `vclos verify`: read every device's running configuration through its
//! real driver and verify every held job against what the devices hold.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use vclos::controller::TopologyDrivers;
use vclos::jobs::journal;
use vclos::state::{lock, store, FabricState};
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
    let decisions = store::load(&args.state, &topo.name)?;
    // The state must be one every other command accepts.
    FabricState::from_decisions(Arc::clone(&topo), &decisions)
        .with_context(|| format!("{}", store::state_path(&args.state).display()))?;
    // Devices mid-change, or left mid-change, cannot be verified against it.
    if let Some(holder) = lock::probe(&args.state)? {
        let who = holder.map_or_else(|| "another vclos process".into(), |h| h.to_string());
        bail!("an operation is in flight ({who}); nothing verified: verify again when it has finished");
    }
    if let Some(j) = journal::read(&args.state)? {
        bail!(
            "an interrupted {:?} of job `{}` is pending recovery; nothing verified: run `vclos reconcile` first",
            j.operation,
            j.decision.job
        );
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
