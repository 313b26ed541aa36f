//! `vclos job submit|release|list`: the scheduler-facing verbs.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use vclos::jobs::Applied;
use vclos::names::JobId;

use super::fabric::{runtime, Bars, FabricArgs};

#[derive(Debug, Subcommand)]
pub enum JobCmd {
    /// Place a job, configure its slice of the fabric, record it.
    Submit(SubmitArgs),
    /// Remove a job's configuration and free what it held.
    Release(ReleaseArgs),
    /// Held jobs (no device is contacted).
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    fabric: FabricArgs,
    #[arg(long)]
    id: String,
    /// GPUs; optional with `--servers` (then every GPU of those servers).
    #[arg(long, required_unless_present = "servers")]
    gpus: Option<u32>,
    /// The servers a scheduler already chose (comma-separated topology
    /// names): isolate exactly these, or refuse and name a set that fits.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    servers: Option<Vec<String>>,
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
    fabric: FabricArgs,
    #[arg(long)]
    id: String,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    fabric: FabricArgs,
    #[arg(long)]
    json: bool,
}

impl SubmitArgs {
    /// Place the job (on `--servers` when given) and plan its admission.
    fn plan(&self, f: &vclos::jobs::Fabric, id: &JobId) -> Result<vclos::plan::Plan> {
        Ok(match &self.servers {
            Some(servers) => f.plan_submit_on(id, self.gpus, servers)?,
            None => f.plan_submit(id, self.gpus.unwrap_or_default())?,
        })
    }
}

pub fn run(cmd: JobCmd) -> Result<ExitCode> {
    match cmd {
        JobCmd::Submit(a) => {
            let id = JobId::new(a.id.as_str())?;
            let slicing = a.slicing.options();
            if a.dry_run {
                let f = a.fabric.load()?.with_slicing(slicing);
                super::fabric::warn_pending(&a.fabric.state, "this plan")?;
                let plan = a.plan(&f, &id)?;
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
                let mut f = a
                    .fabric
                    .open("job submit", Some(&id))
                    .await?
                    .with_slicing(slicing);
                let plan = a.plan(&f, &id)?;
                let report = f.apply(&plan, &Bars::new()).await?;
                f.shutdown().await;
                super::apply::finish(Applied { plan, report }, a.json)
            })
        }
        JobCmd::Release(a) => {
            let id = JobId::new(a.id.as_str())?;
            runtime()?.block_on(async {
                let mut f = a.fabric.open("job release", Some(&id)).await?;
                let done = f.release(&id, &Bars::new()).await?;
                f.shutdown().await;
                super::apply::finish(done, a.json)
            })
        }
        JobCmd::List(a) => {
            let f = a.fabric.load()?;
            let jobs = f.jobs();
            if a.json {
                println!("{}", serde_json::to_string_pretty(&jobs)?);
            } else {
                for d in &jobs {
                    let reserved = match d.reserved_idle_gpus() {
                        0 => String::new(),
                        r => format!("  ({r} reserved_idle_gpus)"),
                    };
                    let shift = d.sharing.as_ref().map_or(String::new(), |s| {
                        format!(
                            "  time shift {} ms of {} ms, {} shared link(s)",
                            s.time_shift_ms,
                            s.iteration_ms(),
                            s.links.len()
                        )
                    });
                    println!(
                        "{:<20} {:>5} GPUs  {:?}  leaves {}  spines {}  cross-connects {}{reserved}{shift}",
                        d.job.to_string(),
                        d.gpus.len(),
                        d.stage,
                        d.vclos.leaves.len(),
                        d.vclos.spines.len(),
                        d.vclos.cross_connects.len()
                    );
                }
                println!("{} job(s)", jobs.len());
            }
            super::fabric::warn_pending(&a.fabric.state, "this list")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
