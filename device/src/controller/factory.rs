//! Real drivers for the devices of a topology.
//!
//! The one place where a device's management endpoint, protocol, dialect and
//! credential reference become a connected transport: ssh-cli + huawei-ce is
//! [`HuaweiCeDriver`], ssh-cli + sonic is [`SonicDriver`], netconf +
//! openconfig is [`NetconfDriver`], telnet-tl1 + tl1 is [`Tl1Driver`]. Secrets are read from the referenced environment
//! variable or file when a driver is made, never stored in the topology and
//! never logged; host keys are checked against the topology's known_hosts
//! (or `~/.ssh/known_hosts`) unless the device opts out.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use vclos_drivers::huawei_ce::HuaweiCeDriver;
use vclos_drivers::netconf::NetconfDriver;
use vclos_drivers::sonic::SonicDriver;
use vclos_drivers::ssh::{HostKeyCheck, Password, SshOptions};
use vclos_drivers::telnet::TelnetConfig;
use vclos_drivers::tl1::{Tl1Config, Tl1Driver};
use vclos_drivers::{Driver, DriverError, ErrorKind, Step};

use super::DriverFactory;
use crate::topology::{Dialect, HostKeyPolicy, Protocol, SecretRef, Topology};

/// Largest password file read (its first line is the password).
const MAX_PASSWORD_FILE: usize = 64 * 1024;

/// Makes a fresh driver for any managed device of a topology.
#[derive(Debug, Clone)]
pub struct TopologyDrivers {
    topology: Arc<Topology>,
    /// Bound on each command / RPC round trip.
    pub command_timeout: Duration,
    pub connect_timeout: Duration,
}

impl TopologyDrivers {
    pub fn new(topology: Arc<Topology>) -> Self {
        TopologyDrivers {
            topology,
            command_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }

    fn known_hosts(&self) -> PathBuf {
        match &self.topology.known_hosts {
            Some(p) => PathBuf::from(p),
            None => std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join(".ssh/known_hosts"),
        }
    }
}

fn open_error(device: &str, kind: ErrorKind) -> DriverError {
    DriverError {
        device: device.to_string(),
        step: Step::Open,
        kind,
    }
}

/// Read a credential's secret. The error names the variable or file, never a value.
fn secret(device: &str, credential: &str, s: &SecretRef) -> Result<String, DriverError> {
    let fail = |why: String| {
        open_error(
            device,
            ErrorKind::Connect(format!("credential `{credential}`: {why}")),
        )
    };
    match s {
        SecretRef::None => Ok(String::new()),
        SecretRef::PasswordEnv(var) => {
            std::env::var(var).map_err(|_| fail(format!("environment variable {var} is not set")))
        }
        SecretRef::PasswordFile(path) => {
            vclos_core::yaml::read_text_capped(std::path::Path::new(path), MAX_PASSWORD_FILE)
                .map(|t| t.lines().next().unwrap_or("").to_string())
                .map_err(|e| fail(format!("cannot read password file {path}: {e}")))
        }
    }
}

impl DriverFactory for TopologyDrivers {
    fn driver(&self, device: &str) -> Result<Box<dyn Driver>, DriverError> {
        let t = &self.topology;
        let id = t.device_id(device).ok_or_else(|| {
            open_error(
                device,
                ErrorKind::Connect("not a device of the topology".into()),
            )
        })?;
        let m = &t.device(id).mgmt;
        let cred = t.credentials.get(&m.credential).ok_or_else(|| {
            open_error(
                device,
                ErrorKind::Connect(format!("credential `{}` is not defined", m.credential)),
            )
        })?;
        let password = secret(device, &m.credential, &cred.secret)?;
        let host_key = match m.host_key {
            HostKeyPolicy::Verify => HostKeyCheck::KnownHosts(self.known_hosts()),
            HostKeyPolicy::InsecureAcceptAny => HostKeyCheck::InsecureAcceptAny,
        };
        let ssh = || {
            let mut o = SshOptions::new(
                m.host.clone(),
                m.port,
                cred.username.clone(),
                Password::new(password.clone()),
                host_key.clone(),
            );
            o.command_timeout = self.command_timeout;
            o.connect_timeout = self.connect_timeout;
            o
        };
        match (m.protocol, m.dialect) {
            (Protocol::SshCli, Dialect::HuaweiCe) => {
                Ok(Box::new(HuaweiCeDriver::new(device, ssh())))
            }
            (Protocol::SshCli, Dialect::Sonic) => Ok(Box::new(SonicDriver::new(device, ssh()))),
            (Protocol::Netconf, Dialect::Openconfig) => {
                Ok(Box::new(NetconfDriver::new(device, ssh())))
            }
            (Protocol::TelnetTl1, Dialect::Tl1) => {
                let telnet = TelnetConfig {
                    command_timeout: self.command_timeout,
                    connect_timeout: self.connect_timeout,
                    ..TelnetConfig::default()
                };
                Ok(Box::new(Tl1Driver::new(
                    device,
                    Tl1Config {
                        host: m.host.clone(),
                        port: m.port,
                        username: cred.username.clone(),
                        password,
                        telnet,
                    },
                )))
            }
            _ => Err(open_error(
                device,
                ErrorKind::Unsupported("no driver for this protocol/dialect pair"),
            )),
        }
    }
}
