//! `vclos trace generate | stats`: make and inspect job traces.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use vclos::trace::{self, generate};

#[derive(Debug, Subcommand)]
pub enum TraceCmd {
    /// Write a seeded synthetic Helios-like trace as CSV to stdout (model: docs/traces.md).
    Generate(GenerateArgs),
    /// Check a trace file and print a summary of its jobs.
    Stats {
        file: PathBuf,
        /// Cluster GPUs, to report the offered load.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        gpus: Option<u32>,
    },
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Number of jobs (1 to 10000000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_JOBS))]
    jobs: u32,
    /// GPUs in the target cluster (caps job sizes, sets the arrival rate).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    gpus: u32,
    /// Offered load: sum(gpus * duration) / (gpus * arrival window); finite, > 0.
    #[arg(long, default_value_t = 0.9, value_parser = positive_finite)]
    load: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Size model: `helios` (the Helios-like table, docs/traces.md) or
    /// `uniform` (every multiple of --size-step up to --max-gpus, equally likely).
    #[arg(long, default_value = "helios", value_parser = ["helios", "uniform"])]
    sizes: String,
    /// With `--sizes uniform`: the size step in GPUs (default 8: one server).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    size_step: u32,
    /// With `--sizes uniform`: the largest size (default a quarter of --gpus).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_gpus: Option<u32>,
}

/// `MAX_JOBS` as a clap range bound.
const MAX_JOBS: i64 = trace::MAX_JOBS as i64;

/// A finite number greater than 0 (`--load`): `NaN`, `inf`, 0 and negatives
/// are refused by clap before anything runs.
pub(super) fn positive_finite(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err(format!("`{s}` is not a finite number greater than 0")),
        Err(e) => Err(format!("`{s}` is not a number: {e}")),
    }
}

pub fn run(cmd: TraceCmd) -> Result<ExitCode> {
    match cmd {
        TraceCmd::Generate(a) => {
            let sizes = match a.sizes.as_str() {
                "uniform" => generate::Sizes::Uniform {
                    step: a.size_step,
                    max: a.max_gpus.unwrap_or(a.gpus / 4),
                },
                _ => generate::Sizes::Helios,
            };
            let params = generate::Params {
                jobs: a.jobs,
                gpus: a.gpus,
                load: a.load,
                seed: a.seed,
                sizes,
            };
            let g = generate::generate(&params)?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            writeln!(out, "{}", g.comment(&params))?;
            trace::write_csv(&mut out, &g.jobs)?;
            out.flush()?;
        }
        TraceCmd::Stats { file, gpus } => {
            let jobs = trace::load(&file)?;
            let said = stats(&jobs, gpus);
            print!(
                "{}",
                said.with_context(|| format!("{}: no jobs in the trace", file.display()))?
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn stats(jobs: &[trace::Job], gpus: Option<u32>) -> Option<String> {
    let first = jobs.first()?;
    let last = jobs.last()?;
    let n = jobs.len() as f64;
    let work: f64 = jobs.iter().map(|j| f64::from(j.gpus) * j.duration_s).sum();
    let mut s = format!(
        "jobs {}\narrivals {:.1}s .. {:.1}s (mean gap {:.1}s)\n",
        jobs.len(),
        first.arrival_s,
        last.arrival_s,
        (last.arrival_s - first.arrival_s) / (n - 1.0).max(1.0)
    );
    let single = jobs.iter().filter(|j| j.gpus <= 8).count();
    let max = jobs.iter().map(|j| j.gpus).max().unwrap_or(0);
    s += &format!(
        "sizes: {single} jobs of <= 8 GPUs ({:.1}%), largest {max}\n",
        100.0 * single as f64 / n
    );
    s += &workload_mix(jobs);
    s += &format!(
        "mean duration {:.1}s, {:.0} GPU-hours\n",
        jobs.iter().map(|j| j.duration_s).sum::<f64>() / n,
        work / 3600.0
    );
    if let Some(g) = gpus {
        let window = last.arrival_s - first.arrival_s;
        if window > 0.0 {
            s += &format!(
                "offered load on {g} GPUs: {:.3}\n",
                work / (f64::from(g) * window)
            );
        }
    }
    Some(s)
}

/// `collective: ring N, hd N, alltoall N; mean comm_fraction X`.
fn workload_mix(jobs: &[trace::Job]) -> String {
    let count = |c| jobs.iter().filter(|j| j.workload.collective == c).count();
    let mix: Vec<String> = trace::Collective::ALL
        .iter()
        .map(|&c| format!("{c} {}", count(c)))
        .collect();
    let alpha =
        jobs.iter().map(|j| j.workload.comm_fraction).sum::<f64>() / jobs.len().max(1) as f64;
    format!(
        "collective: {}; mean comm_fraction {alpha:.3}\n",
        mix.join(", ")
    )
}
