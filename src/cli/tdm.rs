//! `vclos tdm plan` and `vclos tdm apply`: TDM schedules for pod groups
//! (issue 19; docs/tdm.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use vclos::tdm::{self, Jobs, Schedule, Settings, Variant};
use vclos::topology;

use super::tdm_apply::{self, ApplyArgs};

#[derive(Debug, Subcommand)]
pub enum TdmCmd {
    /// Group the jobs of each pod group, plan the OCS circuits of every
    /// stage and print the schedules (one per pod group with jobs).
    Plan(PlanArgs),
    /// Install a schedule on the OCS and switch at every stage barrier,
    /// touching only the ports that change (`--dry-run`: print the TL1
    /// commands instead).
    Apply(ApplyArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum VariantArg {
    /// 003: four stages, half-duplex circuits (Eq. 6).
    Tdm,
    /// 004: two stages, full-duplex symmetric circuits, aggregation at the ToR.
    BiStage,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Topology file: pods (leaves) whose uplinks go to OCS devices.
    #[arg(long)]
    topology: PathBuf,
    /// Jobs file (YAML; docs/tdm.md).
    #[arg(long)]
    jobs: PathBuf,
    /// Print the schedules as a JSON array.
    #[arg(long)]
    json: bool,
    /// Also write each schedule to DIR/<first OCS of the group>.json (created).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = VariantArg::Tdm)]
    variant: VariantArg,
    /// One OCS reconfiguration, milliseconds (50: MEMS).
    #[arg(long = "switch-ms", default_value_t = 50.0)]
    switch_ms: f64,
    /// Bandwidth of an OCS port and of a server port, Gbit/s (003: 150).
    #[arg(long = "port-gbps", default_value_t = 150.0)]
    port_gbps: f64,
}

pub fn run(cmd: TdmCmd) -> Result<ExitCode> {
    match cmd {
        TdmCmd::Plan(a) => plan(a),
        TdmCmd::Apply(a) => tdm_apply::run(a),
    }
}

fn plan(a: PlanArgs) -> Result<ExitCode> {
    let t = topology::load(&a.topology)?;
    let jobs = Jobs::load(&a.jobs)?;
    let settings = Settings {
        variant: match a.variant {
            VariantArg::Tdm => Variant::Tdm,
            VariantArg::BiStage => Variant::BiStage,
        },
        switch_ms: a.switch_ms,
        port_gbps: a.port_gbps,
    };
    let schedules = tdm::plan(&t, &jobs, &a.jobs.display().to_string(), settings)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for s in &schedules {
            let name = s.stages.iter().flat_map(|st| st.ocs.keys()).min().cloned();
            let path = dir.join(format!("{}.json", name.unwrap_or_else(|| "idle".into())));
            let text = serde_json::to_string_pretty(s)? + "\n";
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&schedules)?);
    } else {
        print!("{}", text(&schedules));
    }
    Ok(ExitCode::SUCCESS)
}

/// The human-readable table: one block per pod group.
fn text(schedules: &[Schedule]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (g, s) in schedules.iter().enumerate() {
        let ocs: std::collections::BTreeSet<&String> =
            s.stages.iter().flat_map(|st| st.ocs.keys()).collect();
        let gain = if s.baseline_round_s > 0.0 {
            100.0 * (1.0 - s.round_s / s.baseline_round_s)
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "pod group {} ({}): round {:.3} s, baseline {:.3} s, gain {gain:.1}% \
             (reconfiguration {:.3} s included, {} ms per switch)",
            g + 1,
            ocs.into_iter().cloned().collect::<Vec<_>>().join(", "),
            s.round_s,
            s.baseline_round_s,
            s.reconfiguration_s,
            s.switch_ms
        );
        for (k, st) in s.stages.iter().enumerate() {
            let circuits: usize = st.ocs.values().map(Vec::len).sum();
            let jobs = if st.jobs.is_empty() {
                "-".to_string()
            } else {
                st.jobs.join(", ")
            };
            let _ = writeln!(
                out,
                "  stage {}: {:>10.3} s  {circuits:>4} circuits  communicating: {jobs}",
                k + 1,
                st.time_s
            );
        }
    }
    out
}
