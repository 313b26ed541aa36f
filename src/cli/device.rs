//! `vclos device get-config`: a device's running configuration through its
//! real driver (what the controller itself reads).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, Subcommand};
use vclos::jobs::Fabric;

use super::fabric::runtime;

#[derive(Debug, Subcommand)]
pub enum DeviceCmd {
    /// Print a device's running configuration.
    GetConfig(GetConfigArgs),
}

#[derive(Debug, Args)]
pub struct GetConfigArgs {
    /// Device name (as in the topology).
    device: String,
    #[arg(long)]
    topology: std::path::PathBuf,
}

pub fn run(cmd: DeviceCmd) -> Result<ExitCode> {
    match cmd {
        DeviceCmd::GetConfig(a) => {
            let topo = Arc::new(vclos::topology::load(&a.topology)?);
            // No state is read: a scratch directory that is never written.
            let f = Fabric::load(topo, std::env::temp_dir().join("vclos-no-state"))?;
            let text = runtime()?.block_on(async {
                let text = f.device_config(&a.device).await;
                f.shutdown().await;
                text
            })?;
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
