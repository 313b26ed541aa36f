//! `vclos tdm`: TDM schedules for pod groups (issue 19; docs/tdm.md).

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use super::tdm_apply::{self, ApplyArgs};

#[derive(Debug, Subcommand)]
pub enum TdmCmd {
    /// Install a schedule on the OCS and switch at every stage barrier,
    /// touching only the ports that change (`--dry-run`: print the TL1
    /// commands instead).
    Apply(ApplyArgs),
}

pub fn run(cmd: TdmCmd) -> Result<ExitCode> {
    match cmd {
        TdmCmd::Apply(a) => tdm_apply::run(a),
    }
}
