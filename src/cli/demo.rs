//! `vclos demo`: the main job on the embedded default fabric.
//!
//! Until the emulator and controller exist this runs what is real today:
//! it loads every reference topology, validates it, and prints what it found.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use vclos::topology::{self, show};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory holding the reference topologies.
    #[arg(long, default_value = "topologies")]
    topologies: PathBuf,
}

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    println!(
        "vclos demo: loading and validating the reference topologies in {}",
        args.topologies.display()
    );
    let mut names: Vec<PathBuf> = std::fs::read_dir(&args.topologies)
        .with_context(|| format!("reading {}", args.topologies.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    names.sort();
    let mut failed = 0;
    for p in &names {
        let start = std::time::Instant::now();
        match topology::load(p) {
            Ok(t) => println!(
                "  ok   {} ({:.1} ms)\n       {}",
                p.display(),
                start.elapsed().as_secs_f64() * 1e3,
                show::summary(&t)
            ),
            Err(e) => {
                failed += 1;
                println!("  FAIL {e}");
            }
        }
    }
    println!("{} topologies, {} failed", names.len(), failed);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
