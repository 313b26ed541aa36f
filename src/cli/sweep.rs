//! `vclos sweep`: a grid of replays in parallel; CSV and SVG charts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use vclos::placement::Policy;
use vclos::replay::QueuePolicy;
use vclos::sweep::{self, chart, Grid, Variant};
use vclos::topology;
use vclos::trace::generate::Sizes;

use super::replay::{progress_bar, NetworkModel};

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Topology file (YAML); traces are generated for its GPU count.
    #[arg(long)]
    topology: PathBuf,
    /// Directory for sweep.csv, times.svg and the charts against load
    /// (jct_vs_load.svg, used_servers_vs_load.svg,
    /// machine_fragmentation_vs_load.svg, cross_server_traffic_vs_load.svg);
    /// created.
    #[arg(long)]
    out: PathBuf,
    /// Jobs per generated trace.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    jobs: u32,
    /// Policies, comma-separated (default: every policy the fabric has;
    /// ocs-vclos only with OCS devices); `NAME+partial` is the policy with
    /// `--partial-servers`, `NAME+fabric` the policy as a real fabric
    /// admits jobs (`replay --on-fabric`, e.g. `titan+fabric`), and a last
    /// `+cassini`, `+random` or `+mltcp` the policy with `--sharing
    /// cassini` and the `--congestion` of that name (e.g.
    /// `vclos,vclos+partial,vclos+cassini,best,titan,titan+fabric`); at the
    /// default `--min-score`, except simulated titan's at 1 (docs/titan.md 6.8).
    #[arg(long, value_delimiter = ',', value_parser = parse_variant)]
    policies: Vec<Variant>,
    /// Offered loads, comma-separated (each finite, > 0).
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.7,0.9", value_parser = super::trace::positive_finite)]
    loads: Vec<f64>,
    /// Queues, comma-separated (fifo, sf, edf).
    #[arg(long, value_delimiter = ',', default_value = "fifo", value_parser = parse_queue)]
    queues: Vec<QueuePolicy>,
    #[command(flatten)]
    backfill: super::replay::BackfillArgs,
    /// vclos / ocs-vclos, in every replay: when no slice of a job's size is
    /// free now, take up to this many more whole servers if that has one
    /// (as `vclos replay --round-up`); 0 (default) waits instead.
    #[arg(long, value_name = "SERVERS", default_value_t = 0)]
    round_up: u32,
    /// Trace seeds, comma-separated (each also seeds ECMP).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    seeds: Vec<u64>,
    /// Size model of the traces: `helios` or `uniform` (every multiple of
    /// --size-step GPUs up to --max-gpus; docs/traces.md).
    #[arg(long, default_value = "helios", value_parser = ["helios", "uniform"])]
    sizes: String,
    /// With `--sizes uniform`: job sizes are multiples of this many GPUs
    /// (default: a server's GPUs).
    #[arg(long, value_name = "GPUS", value_parser = clap::value_parser!(u32).range(1..))]
    size_step: Option<u32>,
    /// With `--sizes uniform`: the largest job (default: a quarter of the
    /// fabric).
    #[arg(long, value_name = "GPUS", value_parser = clap::value_parser!(u32).range(1..))]
    max_gpus: Option<u32>,
    /// Network model (as `vclos replay --network`).
    #[arg(long, value_enum, default_value_t = NetworkModel::FairShare)]
    network: NetworkModel,
    /// Worker threads (0: one per core; at most 256: each runs a whole
    /// replay, so more threads than cores only add memory).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=256))]
    threads: u16,
    /// TDM mode (issue 19, docs/tdm.md): on a pod fabric, plan and replay
    /// 003's default job mix per pod group over --tdm-jobs x --contexts x
    /// --seeds; writes tdm.csv, round_vs_jobs.svg and round_vs_context.svg
    /// (TDM against the non-TDM baseline). The replay flags above are unused.
    #[arg(long)]
    tdm: bool,
    /// With --tdm: jobs drawn per pod group, comma-separated.
    #[arg(long = "tdm-jobs", value_delimiter = ',', default_value = "2,4,8,12,16", value_parser = clap::value_parser!(u32).range(1..=1000))]
    tdm_jobs: Vec<u32>,
    /// With --tdm: context lengths (tokens), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128,512,2048,8192", value_parser = clap::value_parser!(u64).range(1..=1_073_741_824))]
    contexts: Vec<u64>,
    /// With --tdm: the drafts' scheme (`tdm`: 003, `bi-stage`: 004).
    #[arg(long = "tdm-variant", default_value = "tdm", value_parser = ["tdm", "bi-stage"])]
    tdm_variant: String,
    /// With --tdm: one OCS reconfiguration, milliseconds.
    #[arg(long = "switch-ms", default_value_t = 50.0)]
    switch_ms: f64,
}

fn parse_queue(s: &str) -> Result<QueuePolicy, String> {
    s.parse()
}

fn parse_variant(s: &str) -> Result<Variant, String> {
    s.parse()
}

pub fn run(a: SweepArgs) -> Result<ExitCode> {
    let topo = Arc::new(topology::load(&a.topology)?);
    if a.tdm {
        return tdm_sweep(&a, &topo);
    }
    let policies = if a.policies.is_empty() {
        Policy::ALL
            .into_iter()
            .filter(|p| *p != Policy::OcsVclos || !topo.ocs.is_empty())
            .map(Variant::from)
            .collect()
    } else {
        a.policies
    };
    let gpus = u32::try_from(topo.gpu_count()).unwrap_or(u32::MAX);
    let grid = Grid {
        policies,
        loads: a.loads,
        queues: a.queues,
        seeds: a.seeds,
        jobs: a.jobs,
        sizes: match a.sizes.as_str() {
            "uniform" => Sizes::Uniform {
                step: a
                    .size_step
                    .unwrap_or_else(|| u32::from(topo.gpus_per_server)),
                max: a.max_gpus.unwrap_or(gpus / 4),
            },
            _ => Sizes::Helios,
        },
        fair_share: a.network == NetworkModel::FairShare,
        backfill: a.backfill.mode(),
        round_up: a.round_up,
    };
    let bar = progress_bar(grid.runs(), "replays");
    let rows = sweep::run(&topo, &grid, usize::from(a.threads), &|| bar.inc(1))?;
    bar.finish_and_clear();
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let write = |name: &str, text: &str| {
        let path = a.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("sweep.csv", &sweep::csv(&rows))?;
    for c in &chart::LOAD_CHARTS {
        write(c.file, &chart::vs_load(&rows, &grid, c)?)?;
    }
    write("times.svg", &chart::times(&rows, &grid)?)?;
    print!("{}", summary(&rows, &grid));
    println!(
        "{} replays; wrote {}/sweep.csv, times.svg and *_vs_load.svg",
        rows.len(),
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Avg JCT per policy and load (mean over seeds), first queue.
fn summary(rows: &[sweep::Row], grid: &Grid) -> String {
    let queue = grid.queues.first().copied().unwrap_or_default();
    let mut out = format!(
        "avg JCT (s), {queue}, mean over {} seed(s)\n",
        grid.seeds.len()
    );
    out += &format!("{:<18}", "policy");
    for l in &grid.loads {
        out += &format!("{:>14}", format!("load {l}"));
    }
    out.push('\n');
    for (p, points) in sweep::means(rows, grid, queue, |r| r.avg_jct_s) {
        out += &format!("{:<18}", p.to_string());
        for (_, v) in points {
            out += &format!("{v:>14.1}");
        }
        out.push('\n');
    }
    out
}

/// `vclos sweep --tdm` (issue 19 item 5).
fn tdm_sweep(a: &SweepArgs, topo: &topology::Topology) -> Result<ExitCode> {
    use vclos::tdm::sweep::{self as tdm_sweep, Axis, TdmGrid};
    use vclos::tdm::{Settings, Variant as TdmVariant};
    let grid = TdmGrid {
        jobs_per_group: a.tdm_jobs.iter().map(|&j| j as usize).collect(),
        contexts: a.contexts.clone(),
        seeds: a.seeds.clone(),
        settings: Settings {
            variant: if a.tdm_variant == "bi-stage" {
                TdmVariant::BiStage
            } else {
                TdmVariant::Tdm
            },
            switch_ms: a.switch_ms,
            ..Settings::default()
        },
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(usize::from(a.threads))
        .build()
        .context("cannot start the worker threads")?;
    let rows = pool.install(|| tdm_sweep::run(topo, &grid))?;
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let write = |name: &str, text: &str| {
        let path = a.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("tdm.csv", &tdm_sweep::csv(&rows))?;
    let range = |v: &[f64]| {
        v.iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)))
    };
    let jobs_x: Vec<f64> = grid.jobs_per_group.iter().map(|&j| j as f64).collect();
    let ctx_x: Vec<f64> = grid.contexts.iter().map(|&c| c as f64).collect();
    let first_ctx = grid.contexts.first().copied().unwrap_or(0);
    let last_jobs = grid.jobs_per_group.last().copied().unwrap_or(0);
    let charts = [
        (
            "round_vs_jobs.svg",
            format!("round time vs jobs per pod group (context {first_ctx} tokens)"),
            "jobs per pod group",
            range(&jobs_x),
            Axis::Jobs,
        ),
        (
            "round_vs_context.svg",
            format!("round time vs context length ({last_jobs} jobs per pod group)"),
            "context length (tokens)",
            range(&ctx_x),
            Axis::Context,
        ),
    ];
    for (file, caption, x, range, axis) in charts {
        let lines = tdm_sweep::lines(&rows, &grid, axis);
        let svg = chart::line_chart(
            "tdm round",
            &caption,
            (x, "round time, replayed (s)"),
            range,
            &lines,
        )?;
        write(file, &svg)?;
    }
    println!(
        "{:>6} {:>8} {:>6} {:>12} {:>12} {:>12} {:>12}",
        "jobs/g", "tokens", "seed", "round_s", "baseline_s", "replay_s", "replay_base"
    );
    for r in &rows {
        println!(
            "{:>6} {:>8} {:>6} {:>12.3} {:>12.3} {:>12.3} {:>12.3}",
            r.jobs_per_group,
            r.tokens,
            r.seed,
            r.round_s,
            r.baseline_round_s,
            r.replay_round_s,
            r.replay_baseline_s
        );
    }
    println!(
        "{} points; wrote {}/tdm.csv, round_vs_jobs.svg and round_vs_context.svg",
        rows.len(),
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
