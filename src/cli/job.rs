//! `vclos job submit|release|list|show`: the scheduler-facing verbs, on the
//! state directory or, with `--server URL`, through a running `vclos serve`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use vclos::client::{Client, Submitted};
use vclos::jobs::Applied;
use vclos::names::JobId;
use vclos::placement::given::Named;

use super::fabric::{runtime, Bars, FabricArgs};
use super::remote::{failed, job_line, servers, Target, TargetArgs};

#[derive(Debug, Subcommand)]
pub enum JobCmd {
    /// Place a job, configure its slice of the fabric, record it.
    Submit(SubmitArgs),
    /// Remove a job's configuration and free what it held.
    Release(ReleaseArgs),
    /// Held jobs (no device is contacted).
    List(ListArgs),
    /// One held job's decision (no device is contacted).
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[arg(long)]
    id: String,
    /// GPUs; optional with `--servers` or `--gpus-on` (then every GPU
    /// named).
    #[arg(long, required_unless_present_any = ["servers", "gpus_on"])]
    gpus: Option<u32>,
    /// The servers a scheduler already chose (comma-separated topology
    /// names): isolate exactly these, or refuse and name a set that fits
    /// (locally or with `--server`).
    #[arg(long, value_name = "SERVER,...", value_delimiter = ',', num_args = 1..)]
    servers: Option<Vec<String>>,
    /// The GPUs a scheduler already chose, one server per flag:
    /// `--gpus-on srv1=0,1 --gpus-on srv5=2,3` (0-based GPU indices).
    #[arg(long, value_name = "SERVER=GPU,...", conflicts_with = "servers")]
    gpus_on: Vec<String>,
    /// vclos, ocs-vclos or titan: Titan's choice of GPUs (partly used
    /// servers first, Eq. 1), each job across leaves isolated by the
    /// fabric's own policy (docs/titan.md 3.4). Default: the fabric's own,
    /// ocs-vclos with OCS, else vclos. titan not with --servers/--gpus-on.
    #[arg(long, value_name = "POLICY", value_parser = super::fabric::fabric_policy)]
    policy: Option<vclos::placement::Policy>,
    /// Place and plan only; touch nothing.
    #[arg(long)]
    dry_run: bool,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    slicing: super::fabric::SlicingArgs,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[arg(long)]
    id: String,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[arg(long)]
    id: String,
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: JobCmd) -> Result<ExitCode> {
    match cmd {
        JobCmd::Submit(a) => {
            let id = JobId::new(a.id.as_str())?;
            match a.target.target()? {
                Target::Remote(c) => submit_remote(&c, &id, &a),
                Target::Local(fabric) => submit_local(fabric, &id, &a),
            }
        }
        JobCmd::Release(a) => {
            let id = JobId::new(a.id.as_str())?;
            match a.target.target()? {
                Target::Remote(c) => {
                    let done = c.release(&id).map_err(failed)?;
                    finish_remote(&done, a.json)
                }
                Target::Local(fabric) => runtime()?.block_on(async {
                    let mut f = fabric.open("job release", Some(&id)).await?;
                    let done = f.release(&id, &Bars::new()).await?;
                    f.shutdown().await;
                    super::apply::finish(done, a.json)
                }),
            }
        }
        JobCmd::List(a) => {
            let (jobs, dir) = match a.target.target()? {
                Target::Remote(c) => (c.list().map_err(failed)?, None),
                Target::Local(fabric) => {
                    let f = fabric.load()?;
                    (f.jobs(), Some(fabric.state.clone()))
                }
            };
            if a.json {
                println!("{}", serde_json::to_string_pretty(&jobs)?);
            } else {
                for d in &jobs {
                    println!("{}", job_line(d));
                }
                println!("{} job(s)", jobs.len());
            }
            if let Some(dir) = dir {
                super::fabric::warn_pending(&dir, "this list")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        JobCmd::Show(a) => {
            let id = JobId::new(a.id.as_str())?;
            let d = match a.target.target()? {
                Target::Remote(c) => c.show(&id).map_err(failed)?,
                Target::Local(fabric) => {
                    let f = fabric.load()?;
                    match f.state().decision(&id) {
                        Some(d) => d.clone(),
                        None => bail!("job `{id}` is not held"),
                    }
                }
            };
            if a.json {
                println!("{}", serde_json::to_string_pretty(&d)?);
            } else {
                println!("{}", job_line(&d));
                println!("servers: {}", servers(&d).join(","));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

impl SubmitArgs {
    /// What `--servers` or `--gpus-on` names, if either is given.
    fn named(&self) -> Result<Option<Named>> {
        Ok(match &self.servers {
            Some(servers) => Some(Named::Servers(servers.clone())),
            None if !self.gpus_on.is_empty() => Some(Named::Gpus(gpus_on(&self.gpus_on)?)),
            None => None,
        })
    }

    /// Place the job (on `--servers` when given) and plan its admission.
    fn plan(&self, f: &vclos::jobs::Fabric, id: &JobId) -> Result<vclos::plan::Plan> {
        let policy = self.policy.unwrap_or(f.policy());
        Ok(match self.named()? {
            Some(named) => f.plan_submit_on_by(id, self.gpus, &named, policy)?,
            None => f.plan_submit_by(id, self.gpus.unwrap_or_default(), policy)?,
        })
    }
}

/// `--gpus-on SERVER=GPU,...` flags as a map (a server named twice is an
/// error, as in the API).
fn gpus_on(flags: &[String]) -> Result<BTreeMap<String, Vec<u16>>> {
    let mut map = BTreeMap::new();
    for flag in flags {
        let (server, gpus) = flag.split_once('=').with_context(|| {
            format!("--gpus-on `{flag}`: expected SERVER=GPU,... (e.g. srv1=0,1)")
        })?;
        let gpus = (gpus.split(','))
            .map(|g| g.trim().parse::<u16>())
            .collect::<Result<Vec<u16>, _>>()
            .with_context(|| format!("--gpus-on `{flag}`: GPU indices are numbers from 0"))?;
        if map.insert(server.to_string(), gpus).is_some() {
            bail!("--gpus-on: server `{server}` is given twice");
        }
    }
    Ok(map)
}

fn submit_local(fabric: FabricArgs, id: &JobId, a: &SubmitArgs) -> Result<ExitCode> {
    let slicing = a.slicing.options();
    if a.dry_run {
        let f = fabric.load()?.with_slicing(slicing);
        super::fabric::warn_pending(&fabric.state, "this plan")?;
        let plan = a.plan(&f, id)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&plan)?);
        } else {
            print!("{}", super::plan::text(&plan, false));
        }
        return Ok(ExitCode::SUCCESS);
    }
    runtime()?.block_on(async {
        // Locked before placing: the placement sees every admission
        // committed before it.
        let mut f = fabric
            .open("job submit", Some(id))
            .await?
            .with_slicing(slicing);
        let plan = a.plan(&f, id)?;
        let report = f.apply(&plan, &Bars::new()).await?;
        f.shutdown().await;
        super::apply::finish(Applied { plan, report }, a.json)
    })
}

fn submit_remote(c: &Client, id: &JobId, a: &SubmitArgs) -> Result<ExitCode> {
    let s = &a.slicing;
    if s.round_up != 0 || s.partial_servers || s.sharing.is_some() {
        bail!(
            "--round-up, --partial-servers and --sharing shape a local placement; \
             `vclos serve` places with its own settings: leave them out with --server"
        );
    }
    let named = a.named()?;
    match c
        .submit_by(id, a.gpus, named.as_ref(), a.policy, a.dry_run)
        .map_err(failed)?
    {
        Submitted::Committed(done) => finish_remote(&done, a.json),
        Submitted::Existing(held) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&held)?);
            } else {
                println!("{}", job_line(&held.decision));
                println!(
                    "admit job {}: already held with this request; nothing changed",
                    held.job
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Submitted::DryRun(plan) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                let devices = plan["devices"].as_array().cloned().unwrap_or_default();
                let gpus = plan["decision"]["gpus"].as_array().map_or(0, Vec::len);
                if devices.is_empty() {
                    println!("dry run: admit job {id}: {gpus} GPU(s); no device changes");
                } else {
                    println!(
                        "dry run: admit job {id}: {gpus} GPU(s); {} device(s) change:",
                        devices.len()
                    );
                }
                for d in &devices {
                    println!(
                        "  stage {} {}",
                        d["stage"],
                        d["device"].as_str().unwrap_or("?")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Print a committed remote change as `apply::finish` prints a local one.
fn finish_remote(done: &vclos::client::Applied, json: bool) -> Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(done)?);
    } else {
        print!("{}", done.devices);
        println!(
            "{} job {}: done; state saved ({:.0} ms at the service)",
            done.action, done.job, done.timings.total_ms
        );
    }
    Ok(if done.committed && done.devices.is_committed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
