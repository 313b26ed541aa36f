//! `vclos device get-config`: a device's running configuration through its
//! real driver (what the controller itself reads).

use std::process::ExitCode;
use std::sync::Arc;

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use vclos::controller::{DriverFactory, TopologyDrivers};
use vclos::jobs::devices;

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
            if topo.device_id(&a.device).is_none() {
                bail!("unknown device `{}` in {}", a.device, a.topology.display());
            }
            // No state is read: the device's own driver, nothing else.
            let factory: Arc<dyn DriverFactory> = Arc::new(TopologyDrivers::new(topo));
            let text = runtime()?.block_on(devices::get_config(
                &factory,
                &a.device,
                Duration::from_secs(30),
            ))?;
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
