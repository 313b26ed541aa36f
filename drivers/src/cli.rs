//! What every SSH CLI driver shares: one SSH session with one interactive
//! shell, opened on demand, errors naming the device and step, and a
//! transport failure dropping the connection so the next step reconnects.
//! Each vendor driver (Huawei CE, SONiC) brings its own prompt and commands.

use tracing::debug;

use crate::ssh::{self, Shell, SshOptions, SshSession};
use crate::{DriverError, ErrorKind, Step};

/// A device's CLI over SSH.
#[derive(Debug)]
pub struct CliLink {
    device: String,
    opts: SshOptions,
    is_prompt: fn(&str) -> bool,
    conn: Option<(SshSession, Shell)>,
}

impl CliLink {
    /// Nothing is connected until [`CliLink::open`]. `is_prompt` tells the
    /// device's prompt line from output.
    pub fn new(device: impl Into<String>, opts: SshOptions, is_prompt: fn(&str) -> bool) -> Self {
        Self {
            device: device.into(),
            opts,
            is_prompt,
            conn: None,
        }
    }

    pub fn device(&self) -> &str {
        &self.device
    }

    pub fn err(&self, step: Step, kind: ErrorKind) -> DriverError {
        DriverError {
            device: self.device.clone(),
            step,
            kind,
        }
    }

    pub fn is_open(&self) -> bool {
        self.conn.is_some()
    }

    /// The prompt seen last (empty when not connected).
    pub fn prompt(&self) -> &str {
        self.conn.as_ref().map_or("", |(_, s)| s.prompt())
    }

    /// Connect and open the shell (positioned after the first prompt).
    pub async fn open(&mut self, step: Step) -> Result<(), DriverError> {
        let session = ssh::connect(&self.opts)
            .await
            .map_err(|k| self.err(step, k))?;
        match session.open_shell(self.is_prompt).await {
            Ok(shell) => {
                self.conn = Some((session, shell));
                Ok(())
            }
            Err(k) => {
                session.close().await;
                Err(self.err(step, k))
            }
        }
    }

    /// Open unless already connected (after a dropped connection the
    /// controller still reads running and rolls back through the driver).
    pub async fn ensure_open(&mut self, step: Step) -> Result<(), DriverError> {
        if self.conn.is_none() {
            self.open(step).await?;
        }
        Ok(())
    }

    /// Run one command line; a transport failure drops the connection.
    pub async fn cmd(&mut self, step: Step, cmd: &str) -> Result<String, DriverError> {
        let Some((_, shell)) = self.conn.as_mut() else {
            return Err(self.err(step, ErrorKind::Disconnected("not open".into())));
        };
        debug!(device = %self.device, %cmd, "send");
        match shell.command(cmd).await {
            Ok(out) => Ok(out),
            Err(kind) => {
                self.conn = None;
                Err(self.err(step, kind))
            }
        }
    }

    /// Run several command lines in one write ([`crate::pipeline`]); a
    /// transport failure drops the connection.
    pub async fn batch(&mut self, step: Step, cmds: &[&str]) -> Result<Vec<String>, DriverError> {
        let Some((_, shell)) = self.conn.as_mut() else {
            return Err(self.err(step, ErrorKind::Disconnected("not open".into())));
        };
        debug!(device = %self.device, lines = cmds.len(), "send batch");
        match shell.commands(cmds).await {
            Ok(outs) => Ok(outs),
            Err(kind) => {
                self.conn = None;
                Err(self.err(step, kind))
            }
        }
    }

    /// Send `farewell` (best effort) and disconnect.
    pub async fn close(&mut self, farewell: Option<&str>) {
        if let Some((session, mut shell)) = self.conn.take() {
            if let Some(f) = farewell {
                let _ = shell.command(f).await;
            }
            session.close().await;
        }
    }
}
