//! `vclos apply`: the plan of `vclos plan`, then done as one transaction on
//! the devices; state.json changes only if every device committed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use vclos::controller::ApplyReport;
use vclos::jobs::{Applied, Fabric};
use vclos::names::JobId;
use vclos::plan::Plan;

use super::fabric::{runtime, Bars, FabricArgs};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("change").required(true).args(["submit", "release", "decision"])))]
pub struct ApplyArgs {
    #[command(flatten)]
    fabric: FabricArgs,
    /// Place and admit a job asking for GPUS GPUs.
    #[arg(long, value_name = "JOB:GPUS")]
    submit: Option<String>,
    /// Release a held job.
    #[arg(long, value_name = "JOB")]
    release: Option<String>,
    /// Admit a hand-written decision (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    decision: Option<PathBuf>,
    /// With --submit: vclos, ocs-vclos or titan, as `plan --policy`
    /// (default: the fabric's own).
    #[arg(long, value_name = "POLICY", value_parser = super::fabric::fabric_policy, requires = "submit")]
    policy: Option<vclos::placement::Policy>,
    /// With --submit: how the engine may shape a job, as `plan`'s.
    #[command(flatten)]
    slicing: super::fabric::SlicingArgs,
    /// Print the plan and the report as JSON.
    #[arg(long)]
    json: bool,
    /// Do not ask for confirmation on a terminal.
    #[arg(long)]
    yes: bool,
}

/// `JOB:GPUS`, validated.
pub fn parse_submit(spec: &str) -> Result<(JobId, u32)> {
    let (job, gpus) = spec
        .split_once(':')
        .with_context(|| format!("--submit {spec:?}: expected JOB:GPUS"))?;
    let gpus = gpus
        .parse()
        .with_context(|| format!("--submit {spec:?}: GPUS must be a number"))?;
    Ok((JobId::new(job)?, gpus))
}

pub fn run(args: ApplyArgs) -> Result<ExitCode> {
    // Everything that can be refused is refused before any device is touched.
    let action = if let Some(job) = &args.release {
        Change::Release(JobId::new(job.as_str())?)
    } else if let Some(path) = &args.decision {
        Change::Decision(super::plan::read_decision(path)?, path.clone())
    } else if let Some(spec) = &args.submit {
        let (job, gpus) = parse_submit(spec)?;
        Change::Submit(job, gpus, args.policy)
    } else {
        bail!("one of --submit, --release, --decision is required")
    };
    let job = match &action {
        Change::Submit(job, ..) | Change::Release(job) => job.clone(),
        Change::Decision(d, _) => d.job.clone(),
    };
    runtime()?.block_on(async {
        let mut fabric =
            (args.fabric.open("apply", Some(&job)).await?).with_slicing(args.slicing.options());
        let plan = action.plan(&fabric)?;
        if !args.json {
            print!(
                "{}",
                super::plan::text(&plan, std::io::stdout().is_terminal())
            );
        }
        if !args.yes && std::io::stdin().is_terminal() && !confirm()? {
            println!("not applied");
            return Ok(ExitCode::FAILURE);
        }
        let report = fabric.apply(&plan, &Bars::new()).await?;
        fabric.shutdown().await;
        finish(Applied { plan, report }, args.json)
    })
}

enum Change {
    Submit(JobId, u32, Option<vclos::placement::Policy>),
    Release(JobId),
    Decision(vclos::decision::Decision, std::path::PathBuf),
}

impl Change {
    fn plan(self, f: &Fabric) -> Result<Plan> {
        Ok(match self {
            Change::Submit(job, gpus, policy) => {
                f.plan_submit_by(&job, gpus, policy.unwrap_or(f.policy()))?
            }
            Change::Release(job) => f.plan_release(&job)?,
            Change::Decision(d, path) => {
                super::plan::check_decision(&path, f.topology(), &d)?;
                f.plan_decision(d)?
            }
        })
    }
}

fn confirm() -> Result<bool> {
    print!("apply this plan? [y/N] ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

/// Print the outcome; non-zero exit unless committed.
pub fn finish(done: Applied, json: bool) -> Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(&done)?);
    } else {
        print!("{}", done.report);
        summary(&done.plan, &done.report);
    }
    Ok(if done.report.is_committed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn summary(plan: &Plan, report: &ApplyReport) {
    if report.is_committed() {
        println!("{} job {}: done; state saved", plan.action, plan.job);
    } else if report.is_unchanged() {
        println!(
            "{} job {}: FAILED; every device is as it was and the state is unchanged",
            plan.action, plan.job
        );
    } else {
        println!(
            "{} job {}: FAILED and some devices could not be put back; the journal is kept: \
             run `vclos reconcile` once they are reachable",
            plan.action, plan.job
        );
    }
}
