//! `vclos plan`: a dry run showing what admitting or releasing a job would
//! change on every device, in apply order. It touches no device.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{ArgGroup, Args};
use std::sync::Arc;

use vclos::decision::Decision;
use vclos::diff::colorize;
use vclos::names::JobId;
use vclos::placement::{self, Blocked, JobRequest, Outcome, Policy, SliceOptions};
use vclos::plan::{self, Action, Plan};
use vclos::state::{store, FabricState};
use vclos::topology;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("change").required(true).args(["submit", "release", "decision"])))]
pub struct PlanArgs {
    /// Topology file.
    #[arg(long)]
    topology: PathBuf,
    /// State directory (`DIR/state.json`); an empty fabric when omitted.
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Directory of saved running configurations (`DIR/<device>.cfg`); it
    /// must exist and hold the file of at least one device.
    #[arg(long, value_name = "DIR")]
    running: Option<PathBuf>,
    /// Place and admit a job asking for GPUS GPUs; repeat to admit several,
    /// each placed on the state the previous ones leave.
    #[arg(long, value_name = "JOB:GPUS")]
    submit: Vec<String>,
    /// Release a held job.
    #[arg(long, value_name = "JOB")]
    release: Option<String>,
    /// Admit a hand-written decision (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    decision: Option<PathBuf>,
    /// With --submit: vclos, ocs-vclos or titan (as `job submit
    /// --policy`); default: the fabric's own.
    #[arg(long, value_name = "POLICY", value_parser = super::fabric::fabric_policy, requires = "submit")]
    policy: Option<Policy>,
    /// With --submit: how the engine may shape a job.
    #[command(flatten)]
    slicing: super::fabric::SlicingArgs,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
}

fn held(args: &PlanArgs, topo: &topology::Topology) -> Result<Vec<Decision>> {
    let Some(dir) = &args.state else {
        return Ok(Vec::new());
    };
    let held = store::load(dir, &topo.name)?;
    // A plan is made against the committed state; say if it is moving.
    super::fabric::warn_pending(dir, "this plan")?;
    Ok(held)
}

/// Place `JOB:GPUS` with `policy` (the fabric's own when `None`) on the
/// held state.
fn place(
    topo: &Arc<topology::Topology>,
    held: &[Decision],
    spec: &str,
    (policy, slicing): (Option<Policy>, SliceOptions),
) -> Result<Decision> {
    let (id, gpus) = super::apply::parse_submit(spec)?;
    vclos::intent::name::check_job_id(topo, &id)?;
    let job = id.to_string();
    let state = FabricState::from_decisions(Arc::clone(topo), held)?;
    let policy = policy.unwrap_or(Policy::of_fabric(topo));
    let mut placer = placement::fabric_placer(policy, state, slicing)?;
    match placer.place(&JobRequest::new(id, gpus))? {
        Outcome::Placed(d) => Ok(std::sync::Arc::unwrap_or_clone(d)),
        Outcome::Blocked(Blocked::Gpu) => {
            bail!("job `{job}` cannot be placed now: not enough free GPUs / idle servers")
        }
        Outcome::Blocked(Blocked::Network) => bail!(
            "job `{job}` cannot be placed now: no isolated network slice is free for {gpus} GPUs"
        ),
    }
}

pub(super) fn read_decision(path: &std::path::Path) -> Result<Decision> {
    Ok(vclos::decision::read_file(path)?)
}

/// A hand-written decision checked against the topology alone (names,
/// ports, shape) on an empty fabric, the refusal naming its file: whatever
/// is wrong in the file is said as the file's, before the held state is
/// consulted (a conflict with held jobs is not the file's fault).
pub(super) fn check_decision(
    path: &std::path::Path,
    topo: &Arc<topology::Topology>,
    d: &Decision,
) -> Result<()> {
    FabricState::new(Arc::clone(topo))
        .admit(d)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

pub fn run(args: PlanArgs) -> Result<ExitCode> {
    let topo = Arc::new(topology::load(&args.topology)?);
    let held = held(&args, &topo)?;
    let running = match &args.running {
        Some(dir) => plan::load_running(&topo, dir)?,
        None => plan::Running::new(),
    };
    if args.submit.len() > 1 {
        return submit_several(&args, &topo, held, &running);
    }
    let action = if let Some(job) = &args.release {
        Action::Release(JobId::new(job.as_str())?)
    } else if let Some(path) = &args.decision {
        let d = read_decision(path)?;
        check_decision(path, &topo, &d)?;
        Action::Admit(d)
    } else if let Some(spec) = args.submit.first() {
        Action::Admit(place(
            &topo,
            &held,
            spec,
            (args.policy, args.slicing.options()),
        )?)
    } else {
        bail!("one of --submit, --release, --decision is required")
    };
    let plan = plan::plan(&topo, &held, &running, action)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{}", text(&plan, std::io::stdout().is_terminal()));
    }
    Ok(ExitCode::SUCCESS)
}

/// Several `--submit`s: one plan per job, each from the state (and device
/// configurations) the previous one leaves, so they apply in sequence. JSON:
/// `{jobs, plans: [plan...], devices: [...]}` where `devices` lists every
/// plan's devices in apply order, each with its `job`, stages numbered
/// across the sequence.
fn submit_several(
    args: &PlanArgs,
    topo: &Arc<topology::Topology>,
    mut held: Vec<Decision>,
    running: &plan::Running,
) -> Result<ExitCode> {
    let mut plans = Vec::new();
    for (i, spec) in args.submit.iter().enumerate() {
        let d = place(topo, &held, spec, (args.policy, args.slicing.options()))?;
        // Saved running configurations describe the devices before the first job only.
        let none = plan::Running::new();
        let p = plan::plan(
            topo,
            &held,
            if i == 0 { running } else { &none },
            Action::Admit(d.clone()),
        )?;
        held.push(d);
        plans.push(p);
    }
    if args.json {
        let stages = 3; // OCS, spine, leaf
        let mut devices = Vec::new();
        for (i, p) in plans.iter().enumerate() {
            for d in &p.devices {
                let mut v = serde_json::to_value(d)?;
                v["job"] = serde_json::Value::from(p.job.as_str());
                v["stage"] = serde_json::Value::from(i * stages + d.stage);
                devices.push(v);
            }
        }
        let jobs: Vec<&str> = plans.iter().map(|p| p.job.as_str()).collect();
        let out = serde_json::json!({ "jobs": jobs, "plans": plans, "devices": devices });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let color = std::io::stdout().is_terminal();
        for p in &plans {
            print!("{}", text(p, color));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn text(plan: &Plan, color: bool) -> String {
    let mut out = format!(
        "plan: {} job {} ({} device{} change{})\n",
        plan.action,
        plan.job,
        plan.devices.len(),
        if plan.devices.len() == 1 { "" } else { "s" },
        if plan.devices.len() == 1 { "s" } else { "" },
    );
    let d = &plan.decision;
    if let (Some(asked), r @ 1..) = (d.requested_gpus, d.reserved_idle_gpus()) {
        out.push_str(&format!(
            "note: job {} asked for {asked} GPUs and holds {}: {r} reserved_idle_gpus (whole servers of its slice shape)\n",
            d.job,
            d.gpus.len(),
        ));
    }
    if let Some(s) = &d.sharing {
        out.push_str(&format!(
            "note: job {} starts its iterations at {} ms of each {} ms (time_shift_ms; sharing mode, {} shared link(s))\n",
            d.job,
            s.time_shift_ms,
            s.iteration_ms(),
            s.links.len()
        ));
    }
    for d in &plan.devices {
        let diff = &d.diff;
        out.push_str(&format!(
            "\n== stage {}: {} ({}, {}){}\n",
            d.stage,
            diff.device,
            diff.role,
            diff.dialect,
            if d.running_from_file {
                ", running from file"
            } else {
                ""
            }
        ));
        for i in &diff.removed {
            out.push_str(&format!("  - {i}\n"));
        }
        for i in &diff.added {
            out.push_str(&format!("  + {i}\n"));
        }
        out.push_str("-- config diff\n");
        out.push_str(&if color {
            colorize(&diff.diff)
        } else {
            diff.diff.clone()
        });
        out.push_str("-- commands\n");
        for c in &diff.commands {
            out.push_str(&format!("  {c}\n"));
        }
    }
    out
}
