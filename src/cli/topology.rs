//! `vclos topology validate | show | generate | export`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use vclos::topology::{self, generate, show, ExportFormat};

#[derive(Debug, Subcommand)]
pub enum TopologyCmd {
    /// Check a topology file; print a one-line summary, or every problem found.
    Validate { file: PathBuf },
    /// Print a topology as text, JSON or Graphviz DOT.
    Show {
        file: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Print a uniform Leaf-Spine topology (optionally through OCS devices),
    /// or with `--spines 0` a spine-less pod fabric, as YAML.
    Generate(GenerateArgs),
    /// Print the fabric for a cluster scheduler: Slurm topology.yaml, Volcano
    /// HyperNodes or a Kueue Topology with its node labels (docs/topology.md).
    Export {
        file: PathBuf,
        #[arg(long, value_enum)]
        format: ExportFormat,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Dot,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Leaves (with `--spines 0`: pods; `--pods` is an alias).
    #[arg(long, alias = "pods")]
    leaves: u32,
    /// Spines; 0 makes a spine-less pod fabric whose leaf uplinks all go to
    /// OCS devices (TDM, docs/tdm.md): then pass `--pod-uplinks`.
    #[arg(long)]
    spines: u32,
    /// With `--spines 0`: uplinks per pod, all cabled to one OCS.
    #[arg(long = "pod-uplinks")]
    pod_uplinks: Option<u32>,
    /// With `--spines 0`: ports per OCS device (003's OXC: 128).
    #[arg(long = "ocs-ports", default_value_t = 128)]
    ocs_ports: u32,
    #[arg(long = "gpus-per-server")]
    gpus_per_server: u32,
    /// Servers per leaf (default: spines / gpus-per-server, the paper's full-bisection shape).
    #[arg(long = "servers-per-leaf")]
    servers_per_leaf: Option<u32>,
    /// Put this many OCS devices between leaves and spines.
    #[arg(long, default_value_t = 0)]
    ocs: u32,
    /// Accept leaves whose server-facing and uplink port counts differ.
    #[arg(long)]
    allow_oversubscription: bool,
    /// Topology name written into the file.
    #[arg(long, default_value = "fabric")]
    name: String,
}

pub fn run(cmd: TopologyCmd) -> Result<ExitCode> {
    match cmd {
        TopologyCmd::Validate { file } => match topology::load(&file) {
            Ok(t) => {
                println!("{}: valid: {}", file.display(), show::summary(&t));
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(ExitCode::FAILURE)
            }
        },
        TopologyCmd::Show { file, format } => {
            let t = topology::load(&file)?;
            match format {
                Format::Text => print!("{}", show::text(&t)),
                Format::Json => println!("{}", serde_json::to_string_pretty(&show::json(&t))?),
                Format::Dot => print!("{}", show::dot(&t)),
            }
            Ok(ExitCode::SUCCESS)
        }
        TopologyCmd::Generate(a) => {
            print!("{}", generated(a)?);
            Ok(ExitCode::SUCCESS)
        }
        TopologyCmd::Export { file, format } => {
            let t = topology::load(&file)?;
            print!("{}", topology::export(&t, format)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn generated(a: GenerateArgs) -> Result<String> {
    match (a.spines, a.pod_uplinks) {
        (0, None) => anyhow::bail!("--spines 0 makes a spine-less pod fabric: pass --pod-uplinks"),
        (0, Some(u)) => {
            if a.ocs != 0 {
                anyhow::bail!("--spines 0: the OCS count follows from --leaves, --pod-uplinks and --ocs-ports; drop --ocs");
            }
            Ok(generate::generate_pods(&generate::PodParams {
                name: a.name,
                pods: a.leaves,
                pod_uplinks: u,
                ocs_ports: a.ocs_ports,
                gpus_per_server: a.gpus_per_server,
                servers_per_pod: a.servers_per_leaf,
                allow_oversubscription: a.allow_oversubscription,
            })?)
        }
        (_, Some(_)) => anyhow::bail!("--pod-uplinks needs --spines 0 (a spine-less pod fabric)"),
        (_, None) => Ok(generate::generate(&generate::Params {
            name: a.name,
            leaves: a.leaves,
            spines: a.spines,
            gpus_per_server: a.gpus_per_server,
            servers_per_leaf: a.servers_per_leaf,
            ocs: a.ocs,
            allow_oversubscription: a.allow_oversubscription,
        })?),
    }
}
