//! `vclos status` and `vclos reconcile`: jobs, device reachability, drift
//! from the state's intent, a pending journal; `--fix` pushes intent.
//! `vclos status --server URL` asks a running `vclos serve` instead
//! (`GET /v1/status`) and prints its answer the same way.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use vclos::jobs::Drift;

use super::fabric::{runtime, Bars, FabricArgs};

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    target: super::remote::TargetArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    fabric: FabricArgs,
    /// Push the state's intent to every device that differs.
    #[arg(long)]
    fix: bool,
    #[arg(long)]
    json: bool,
}

/// "N missing, N unexpected, N foreign".
fn counts(d: &Drift) -> String {
    format!(
        "{} missing, {} unexpected, {} foreign",
        d.missing.len(),
        d.extra.len(),
        d.foreign.len()
    )
}

fn print_drift(d: &Drift) {
    println!("  {} ({}): {}", d.device, d.role, counts(d));
    for i in &d.missing {
        println!("    - missing: {i}");
    }
    for i in &d.extra {
        println!("    + unexpected: {i}");
    }
    for i in &d.foreign {
        println!("    ! foreign: {i}");
    }
}

/// What vclos does with foreign steering, printed under any drift listing it.
const FOREIGN_NOTE: &str = "foreign steering (not written by vclos) is never deleted or overwritten by vclos: \
     remove it on the device if it is unwanted; an apply or fix that must configure its port is refused";

pub fn status(a: StatusArgs) -> Result<ExitCode> {
    let s = match a.target.target()? {
        super::remote::Target::Remote(c) => c.status().map_err(super::remote::failed)?,
        super::remote::Target::Local(fabric) => {
            let f = fabric.load()?;
            runtime()?.block_on(async {
                let s = f.status().await;
                f.shutdown().await;
                s
            })?
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("topology {}: {} job(s)", s.topology, s.jobs.len());
    for d in &s.jobs {
        println!("  {} ({} GPUs)", d.job, d.gpus.len());
    }
    if let Some(w) = &s.writer {
        println!("{w}");
    }
    match &s.journal {
        Some(j) if s.writer.is_some() => println!(
            "journal: the {:?} of job `{}` in flight",
            j.operation, j.decision.job
        ),
        Some(j) => println!(
            "journal: an interrupted {:?} of job `{}` is pending recovery (run `vclos reconcile`)",
            j.operation, j.decision.job
        ),
        None => println!("journal: none"),
    }
    for d in &s.devices {
        match (&d.error, &d.drift) {
            (Some(e), _) => println!("  {:<10} {:<5} UNREACHABLE: {e}", d.device, d.role),
            (None, Some(x)) if !x.is_empty() => {
                println!(
                    "  {:<10} {:<5} reachable, DRIFT: {}",
                    d.device,
                    d.role,
                    counts(x)
                );
                for i in &x.foreign {
                    println!("      ! foreign: {i}");
                }
            }
            _ => println!("  {:<10} {:<5} reachable, in sync", d.device, d.role),
        }
    }
    if s.devices
        .iter()
        .any(|d| d.drift.as_ref().is_some_and(|x| !x.foreign.is_empty()))
    {
        println!("{FOREIGN_NOTE}");
    }
    let bad = s
        .devices
        .iter()
        .any(|d| d.error.is_some() || d.drift.as_ref().is_some_and(|x| !x.is_empty()));
    Ok(if bad || s.journal.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub fn reconcile(a: ReconcileArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        // Without --fix it changes no device, but it recovers a journal
        // left by an interrupted run: a writer too.
        let op = if a.fix {
            "reconcile --fix"
        } else {
            "reconcile"
        };
        let mut f = a.fabric.open(op, None).await?;
        let r = f.reconcile(a.fix, &Bars::new()).await?;
        f.shutdown().await;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            if r.drift.is_empty() {
                println!("every reachable device holds the state's intent");
            } else {
                println!(
                    "{} device(s) differ from the state's intent:",
                    r.drift.len()
                );
                r.drift.iter().for_each(print_drift);
                if r.drift.iter().any(|d| !d.foreign.is_empty()) {
                    println!("{FOREIGN_NOTE}");
                }
            }
            if !r.fix_refused.is_empty() {
                println!("--fix REFUSED, nothing was sent to any device:");
                for c in &r.fix_refused {
                    println!("  {c}");
                }
            }
            for (d, e) in &r.unreachable {
                println!("  {d}: UNREACHABLE: {e}");
            }
            if let Some(fix) = &r.fix {
                print!("{fix}");
            }
        }
        let ok = r.unreachable.is_empty()
            && r.fix_refused.is_empty()
            && match &r.fix {
                Some(fix) => fix.is_committed(),
                None => r.drift.is_empty(),
            };
        Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}
