//! `vclos replay`: run a job trace through a placement policy and report.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use vclos::network::model::Congestion;
use vclos::network::routes::{Router, Routing};
use vclos::placement::rearrange::Moves;
use vclos::placement::{self, Policy};
use vclos::replay::{self, Backfill, QueuePolicy, ReplayOptions, Report};
use vclos::sharing::profile::Profiles;
use vclos::{topology, trace};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Topology file (YAML).
    #[arg(long)]
    topology: PathBuf,
    /// Trace file (CSV: job_id,arrival_s,gpus,duration_s and optional
    /// columns, docs/traces.md).
    #[arg(long)]
    trace: PathBuf,
    #[arg(long, value_enum)]
    policy: Policy,
    /// Queue order (all with head-of-line blocking unless --backfill).
    #[arg(long, value_parser = parse_queue, default_value = "fifo")]
    queue: QueuePolicy,
    #[command(flatten)]
    backfill: BackfillArgs,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Also write one CSV row per trace job to FILE (arrival, start, end,
    /// wait, JCT, GPUs held, stage, leaves, spines, how it started, refused
    /// attempts; docs/traces.md), as Slurm's `sacct` lists jobs.
    #[arg(long, value_name = "FILE")]
    jobs_out: Option<PathBuf>,
    /// How the engine may shape a job (`rounded_jobs` /
    /// `reserved_idle_gpus` report what `--round-up` took).
    #[command(flatten)]
    slicing: super::fabric::SlicingArgs,
    /// Network model: `fair-share` (jobs sharing links slow each other's
    /// communication, max-min fair; docs/performance.md) or `ideal` (every
    /// job runs for exactly its duration_s).
    #[arg(long, value_enum, default_value_t = NetworkModel::FairShare)]
    network: NetworkModel,
    /// fair-share: how links shared by jobs placed with `--sharing` are
    /// modelled: `fair` (every flow present all the time, as any link),
    /// or played out in time with the jobs at their decisions' time shifts
    /// (`cassini`), at their start times (`random`: sharing without
    /// shifts), or at their start times with MLTCP's unequal division
    /// (`mltcp`); docs/cassini.md.
    #[arg(long, value_enum, default_value_t = Congestion::Fair)]
    congestion: Congestion,
    /// Multi-phase communication profiles by model (YAML or JSON,
    /// docs/cassini.md) for `--sharing`; default: each job's Up-Down
    /// profile from its `comm_fraction` and `iteration_ms`.
    #[arg(long, value_name = "FILE")]
    profiles: Option<PathBuf>,
    /// Seed of the `ecmp` flow hash: the same seed gives the same routes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Place as a real fabric admits jobs (`job submit`, `plan`, the
    /// service): `titan` is then Titan's choice of GPUs isolated by the
    /// fabric's own policy (docs/titan.md 3.4), routed by its decisions'
    /// slices; vclos and ocs-vclos are as without it; the simulation's
    /// baselines are refused.
    #[arg(long)]
    on_fabric: bool,
    /// vclos, ocs-vclos: when the queue's head is blocked on the network
    /// alone, try moving the links of up to N running jobs (fewest GPUs first), one
    /// per try, keeping their GPUs (`rearranged_jobs`, `moved_jobs`;
    /// simulation only: the controller does not move jobs; module doc of
    /// `placement::rearrange`). 0: never, the paper's engine.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=1024))]
    rearrange: u32,
    /// With --rearrange: `make-before-break` (a moved job's new links share
    /// no port with its old ones; it never stops) or `break-before-make`
    /// (the blocked job first, the moved job on what is left, its own old
    /// ports included: it pauses while its links change).
    #[arg(long, value_enum, default_value_t = Moves::MakeBeforeBreak, requires = "rearrange")]
    moves: Moves,
}

/// `--backfill`, `--backfill-depth` (replay and sweep).
#[derive(Debug, Args)]
pub(super) struct BackfillArgs {
    /// `easy`: while the queue head is blocked, start jobs behind it that
    /// end before its reservation or fit in the GPUs it leaves (EASY
    /// backfilling, as Slurm's sched/backfill; docs/performance.md);
    /// `slices`: the same with the head's forecast slice (GPUs, uplinks,
    /// spine and OCS ports) as its reservation, for vclos and ocs-vclos
    /// (others as `easy`); `none`: strict head-of-line blocking (the
    /// paper's scheduler).
    #[arg(long, value_parser = parse_backfill, default_value = "none")]
    backfill: Backfill,
    /// With `--backfill easy|slices`: jobs behind the head tried per change of
    /// the fabric (like Slurm's bf_max_job_test, whose default it shares).
    #[arg(long, value_name = "JOBS", default_value_t = replay::DEFAULT_BACKFILL_DEPTH as u32,
          value_parser = clap::value_parser!(u32).range(1..=100_000), requires = "backfill")]
    backfill_depth: u32,
}

impl BackfillArgs {
    pub(super) fn mode(&self) -> Backfill {
        match self.backfill {
            Backfill::None => Backfill::None,
            Backfill::Easy { .. } => Backfill::Easy {
                depth: self.backfill_depth as usize,
            },
            Backfill::Slices { .. } => Backfill::Slices {
                depth: self.backfill_depth as usize,
            },
        }
    }
}

fn parse_backfill(s: &str) -> Result<Backfill, String> {
    s.parse()
}

/// `--network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum NetworkModel {
    FairShare,
    Ideal,
}

fn parse_queue(s: &str) -> Result<QueuePolicy, String> {
    s.parse()
}

pub fn run(a: ReplayArgs) -> Result<ExitCode> {
    if a.congestion != Congestion::Fair && a.network != NetworkModel::FairShare {
        anyhow::bail!("--congestion models shared links of the fair-share network; it needs --network fair-share");
    }
    if a.slicing.iteration_ms.is_some() || a.slicing.comm_fraction.is_some() {
        anyhow::bail!("--iteration-ms and --comm-fraction are for `job submit` and `plan`: a replay takes each job's from the trace (columns iteration_ms, comm_fraction) or --profiles");
    }
    if a.rearrange > 0 && !matches!(a.policy, Policy::Vclos | Policy::OcsVclos) {
        anyhow::bail!(
            "--rearrange moves isolated slices: it applies to vclos and ocs-vclos, not {}",
            a.policy
        );
    }
    let profiles = a.profiles.as_deref().map(Profiles::read_file).transpose()?;
    let topo = Arc::new(topology::load(&a.topology)?);
    let jobs = trace::load(&a.trace)?;
    let state = vclos::state::FabricState::new(Arc::clone(&topo));
    let placer = if a.on_fabric {
        placement::fabric_placer
    } else {
        placement::placer_on
    };
    let mut placer = placer(a.policy, state, a.slicing.options())
        .with_context(|| format!("cannot replay on {}", a.topology.display()))?;
    // On a fabric every job across leaves has its slice: routed by it.
    let routing = match a.on_fabric {
        true => Routing::Decision,
        false => Routing::for_policy(a.policy, a.seed),
    };
    let opts = ReplayOptions {
        queue: a.queue,
        backfill: a.backfill.mode(),
        network: (a.network == NetworkModel::FairShare).then(|| Router::new(&topo, routing)),
        profiles,
        congestion: a.congestion,
        rearrange: a.rearrange as usize,
        moves: a.moves,
        job_records: a.jobs_out.is_some(),
        ..ReplayOptions::for_topology(&topo)
    };
    let bar = progress_bar(jobs.len(), "jobs");
    let report = replay::replay_with_progress(placer.as_mut(), &jobs, opts, &mut |p| {
        bar.set_position(p.done as u64)
    })?;
    bar.finish_and_clear();
    if let Some(path) = &a.jobs_out {
        write_records(path, &report)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--jobs-out`: the per-job records, written whole or not at all (to a
/// temporary file renamed over `path`).
fn write_records(path: &std::path::Path, report: &Report) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        replay::write_job_records(&report.job_records, file)?;
        std::fs::rename(&tmp, path)
    };
    write().with_context(|| format!("cannot write the job records to {}", path.display()))
}

/// A bar on stderr counting `what`, only when both stdout and stderr are
/// terminals.
pub(super) fn progress_bar(total: usize, what: &str) -> ProgressBar {
    if !(std::io::stdout().is_terminal() && std::io::stderr().is_terminal()) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {what} {{elapsed}}"))
    {
        bar.set_style(style);
    }
    bar
}

fn table(r: &Report) -> String {
    let mut rows = job_rows(r);
    optional_rows(r, &mut rows);
    rows.extend(counter_rows(r));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

/// The report's `backfill` row: mode, jobs started behind the head, the
/// depth tried (when backfilling) and the slice reservations (if any).
fn backfill_row(r: &Report) -> String {
    let mut row = format!("{} ({} jobs", r.backfill, r.backfilled_jobs);
    if r.backfill_depth > 0 {
        row += &format!(", depth {}", r.backfill_depth);
    }
    if r.reservations > 0 {
        row += &format!(
            "; {} slice reservations, {:.0} ms, {} heads started on theirs, {} late",
            r.reservations, r.reservation_ms, r.reserved_starts, r.late_heads
        );
    }
    row + ")"
}

/// The table's first rows: what was replayed and how its jobs fared.
fn job_rows(r: &Report) -> Vec<(&'static str, String)> {
    vec![
        ("policy", r.policy.clone()),
        ("queue", r.queue.to_string()),
        ("backfill", backfill_row(r)),
        ("topology", r.topology.clone()),
        (
            "jobs",
            format!(
                "{} ({} completed, {} rejected, {} unplaceable)",
                r.jobs, r.completed, r.rejected, r.unplaceable
            ),
        ),
        (
            "avg JWT",
            format!(
                "{:.1} s ({:.1} s behind a head blocked on GPUs, {:.1} s on the network)",
                r.avg_jwt_s, r.avg_jwt_gpu_s, r.avg_jwt_network_s
            ),
        ),
        ("avg JCT", format!("{:.1} s", r.avg_jct_s)),
        ("avg JRT", format!("{:.1} s", r.avg_jrt_s)),
        (
            "p99 / max JWT",
            format!("{:.1} / {:.1} s", r.p99_jwt_s, r.max_jwt_s),
        ),
        ("makespan", format!("{:.1} s", r.makespan_s)),
        (
            "network",
            format!(
                "{}{}: slowdown avg {:.4}, p99 {:.4}; {} jobs shared a link",
                r.network,
                match r.congestion.as_str() {
                    "" | "fair" => String::new(),
                    c => format!(" (congestion {c})"),
                },
                r.avg_slowdown,
                r.p99_slowdown,
                r.contended_jobs
            ),
        ),
        (
            "rounded up",
            format!(
                "{} jobs, {} GPUs reserved idle ({:.0} GPU-s)",
                r.rounded_jobs, r.reserved_idle_gpus, r.reserved_idle_gpu_s
            ),
        ),
        (
            "partial servers",
            format!(
                "{} multi-server jobs on partly held servers, {} small jobs split over servers",
                r.partial_server_jobs, r.split_small_jobs
            ),
        ),
    ]
}

/// The rows of the measures a report has only for some replays.
fn optional_rows(r: &Report, rows: &mut Vec<(&'static str, String)>) {
    if r.rearrange > 0 {
        rows.push((
            "rearrange",
            format!(
                "up to {} running jobs tried per block, {}: {} jobs placed by {} moves",
                r.rearrange, r.moves, r.rearranged_jobs, r.moved_jobs
            ),
        ));
    }
    if let Some(u) = r.utilization {
        rows.push(("GPU utilisation", format!("{:.1}%", u * 100.0)));
    }
    if let Some(u) = r.link_utilization {
        rows.push(("link utilisation", format!("{:.1}%", u * 100.0)));
    }
    if let Some(f) = r.gpu_fragmentation {
        rows.push((
            "GPU fragmentation",
            format!("{:.1}% of free GPUs on partly used servers", f * 100.0),
        ));
    }
    if let Some(n) = r.avg_servers_per_multi_server_job {
        rows.push(("servers per job", format!("{n:.2} (multi-server jobs)")));
    }
    if let (Some(u), Some(m)) = (r.avg_used_servers, r.machine_fragmentation) {
        rows.push((
            "servers in use",
            format!("{u:.1} on average, {:.1}% of their GPUs idle", m * 100.0),
        ));
    }
    if let (Some(v), Some(t)) = (r.avg_cross_server_volume, r.cross_server_traffic) {
        rows.push((
            "cross-server volume",
            format!("{v:.2} vectors per job and collective; {t:.1} running on average"),
        ));
    }
}

/// The table's last rows: blocking, decision and consistency counters.
fn counter_rows(r: &Report) -> Vec<(&'static str, String)> {
    vec![
        (
            "blocked (jobs)",
            format!("gpu {}, network {}", r.blocked_gpu, r.blocked_network),
        ),
        (
            "blocked (attempts)",
            format!(
                "gpu {}, network {}",
                r.blocked_attempts_gpu, r.blocked_attempts_network
            ),
        ),
        ("max queue", r.max_queue.to_string()),
        ("deadline misses", r.deadline_misses.to_string()),
        (
            "decision time",
            format!(
                "p50 {:.1} us, p99 {:.1} us, max {:.1} us ({} calls)",
                r.decision_p50_us, r.decision_p99_us, r.decision_max_us, r.place_calls
            ),
        ),
        ("isolation violations", r.isolation_violations.to_string()),
        ("busy rewires", r.busy_rewires.to_string()),
        (
            "shared ports / jobs (agreed)",
            format!("{} / {}", r.shared_ports, r.shared_jobs),
        ),
        ("search cutoffs", r.search_cutoffs.to_string()),
        (
            "unproven network blocks",
            format!("{} of {}", r.unproven_blocks, r.blocked_attempts_network),
        ),
        (
            "gpu conflicts / circuit mismatches",
            format!("{} / {}", r.gpu_conflicts, r.circuit_mismatches),
        ),
        (
            "stages",
            r.stages
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("wall time", format!("{:.0} ms", r.wall_ms)),
    ]
}
