//! The whole emulated fabric of a topology, served on loopback.
//!
//! [`EmulatedFabric::start`] builds every device's model and starts its
//! protocol endpoint: each OCS is an [`OcsModel`] behind a TL1/Telnet server;
//! each switch (or chassis) is a [`SwitchDevice`] behind an SSH server with
//! the Huawei CE CLI, a [`SonicDevice`] behind an SSH server with the SONiC
//! shell, or a [`NetconfDevice`] behind the SSH `netconf` subsystem. Every SSH server has a fresh host key; [`EmulatedFabric::known_hosts`]
//! lists them so clients verify keys as they would in a lab.
//! It keeps the models (so tests and verification read device state directly),
//! one [`Faults`] per device (so tests and `emu serve --fault` can arm them)
//! and a [`StaticBusy`] for test traffic, which together with the switches'
//! own running configuration ([`SteeredBusy`]) decides which OCS links are
//! busy. Switches start from the topology's baseline intent rendered in their
//! dialect, so a fresh fabric looks like a lab after day-0 provisioning.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use vclos_drivers::netconf::xml::Element;

use super::busy::{AnyBusy, BusyOracle, StageBusy, StaticBusy};
use super::cli::SwitchDevice;
use super::faults::Faults;
use super::netconf::NetconfDevice;
use super::ocs::OcsModel;
use super::sonic::{validate, SonicDevice};
use super::ssh::{self, Service, SshServer};
use super::steering::SteeredBusy;
use super::timeouts::SessionTimeouts;
use super::tl1::{self, Tl1Options, Tl1Server};
use super::vrp::VrpConfig;
use super::Login;
use crate::dialect::{self, Dialect as _, ParseError};
use crate::intent::{self, IntentError, Item, PortName};
use crate::topology::retarget::{retarget, CredentialRef, Target};
use crate::topology::{Dialect, OcsId, Protocol, Role, Topology};
use crate::verification::{forwarding_from_configs, ForwardingState, VerifyError};

/// How to serve a fabric.
#[derive(Debug, Clone)]
pub struct FabricOptions {
    /// Address every endpoint binds to (ephemeral ports).
    pub listen: IpAddr,
    /// OCS switching delay.
    pub switch_delay: Duration,
    /// The one login every emulated device accepts.
    pub login: Login,
    /// Login grace and idle timeouts of every endpoint (SSH and TL1).
    pub timeouts: SessionTimeouts,
}

impl Default for FabricOptions {
    fn default() -> Self {
        FabricOptions {
            listen: IpAddr::from([127, 0, 0, 1]),
            switch_delay: super::ocs::DEFAULT_SWITCHING_DELAY,
            login: Login::default(),
            timeouts: SessionTimeouts::default(),
        }
    }
}

/// Where a device's emulated management endpoint listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Error)]
pub enum EmuError {
    #[error("{device}: cannot listen on {addr}: {source}")]
    Bind {
        device: String,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{device}: cannot start the SSH server: {message}")]
    Ssh { device: String, message: String },
    #[error("{device}: the {dialect} dialect over {protocol} is not emulated (huawei-ce and sonic over ssh-cli, openconfig over netconf are)")]
    Unsupported {
        device: String,
        dialect: Dialect,
        protocol: Protocol,
    },
    #[error("unknown device `{0}`")]
    UnknownDevice(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
    #[error("baseline configuration: {0}")]
    Baseline(#[source] IntentError),
    #[error("{device}: the rendered baseline configuration does not load: {message}")]
    BaselineConfig { device: String, message: String },
}

/// An emulated switch's state, whichever protocol serves it.
#[derive(Debug, Clone)]
pub enum Switch {
    Cli(Arc<SwitchDevice>),
    Sonic(Arc<SonicDevice>),
    Netconf(Arc<NetconfDevice>),
}

impl Switch {
    /// Changes whenever the running configuration changes.
    pub fn running_version(&self) -> u64 {
        match self {
            Switch::Cli(d) => d.running_version(),
            Switch::Sonic(d) => d.running_version(),
            Switch::Netconf(d) => d.running_version(),
        }
    }

    /// The running configuration as the device prints it (`display
    /// current-configuration`, `show runningconfiguration all`, or the
    /// `<data>` of a NETCONF `get-config`).
    pub fn running_text(&self) -> String {
        match self {
            Switch::Cli(d) => d.running_config().render(),
            Switch::Sonic(d) => d.running_text(),
            Switch::Netconf(d) => d.running().to_xml(),
        }
    }

    /// The running configuration parsed by `dialect`.
    pub fn items(&self, dialect: Dialect) -> Result<BTreeSet<Item>, ParseError> {
        let name = match self {
            Switch::Cli(d) => d.name(),
            Switch::Sonic(d) => d.name(),
            Switch::Netconf(d) => d.name(),
        };
        dialect::dialect(dialect).parse(name, &self.running_text())
    }
}

/// A running emulated fabric. Dropping it stops every endpoint.
#[derive(Debug)]
pub struct EmulatedFabric {
    topology: Arc<Topology>,
    ocs: Vec<Arc<OcsModel>>,
    faults: BTreeMap<String, Arc<Faults>>,
    traffic: Arc<StaticBusy>,
    stage: Arc<StageBusy>,
    endpoints: BTreeMap<String, Endpoint>,
    switches: BTreeMap<String, Switch>,
    known_hosts: String,
    username: String,
    _tl1: Vec<Tl1Server>,
    _ssh: Vec<SshServer>,
}

/// Every switch port the topology gives `device` (its physical interfaces).
fn device_ports(topo: &Topology, device: &crate::topology::Device) -> Vec<String> {
    use crate::topology::Member;
    let mut ports = Vec::new();
    for m in &device.members {
        match *m {
            Member::Leaf(l) => {
                let leaf = topo.leaf(l);
                ports.extend(
                    leaf.server_ports
                        .iter()
                        .chain(&leaf.uplinks)
                        .map(|p| p.to_string()),
                );
            }
            Member::Spine(s) => ports.extend(topo.spine(s).ports.iter().map(|p| p.to_string())),
            Member::Ocs(_) => {}
        }
    }
    ports
}

/// Every switch's model (OCSes skipped), loaded from its baseline
/// configuration rendered in its dialect.
fn baseline_switches(
    topology: &Topology,
    baseline: &intent::FabricIntent,
    faults: &BTreeMap<String, Arc<Faults>>,
) -> Result<BTreeMap<String, Switch>, EmuError> {
    let mut switches = BTreeMap::new();
    for (d, want) in topology.devices.iter().zip(&baseline.devices) {
        if d.role == Role::Ocs {
            continue;
        }
        let f = faults[&d.name].clone();
        let switch = baseline_switch(topology, d, &want.items, f)?;
        switches.insert(d.name.clone(), switch);
    }
    Ok(switches)
}

/// One switch's model for its protocol and dialect, loaded from `items`
/// rendered in that dialect.
fn baseline_switch(
    topology: &Topology,
    d: &crate::topology::Device,
    items: &BTreeSet<Item>,
    f: Arc<Faults>,
) -> Result<Switch, EmuError> {
    let text = dialect::dialect(d.mgmt.dialect).render(items);
    let bad = |message: String| EmuError::BaselineConfig {
        device: d.name.clone(),
        message,
    };
    let switch = match (d.mgmt.protocol, d.mgmt.dialect) {
        (Protocol::SshCli, Dialect::HuaweiCe) => {
            let initial =
                VrpConfig::parse(&text).map_err(|(line, e)| bad(format!("line {line}: {e}")))?;
            Switch::Cli(SwitchDevice::with_interfaces(
                &d.name,
                initial,
                f,
                device_ports(topology, d),
            ))
        }
        (Protocol::SshCli, Dialect::Sonic) => {
            let db = vclos_drivers::configdb::parse(&text).map_err(bad)?;
            let kind = match d.role {
                Role::Spine => "SpineRouter",
                _ => "ToRRouter",
            };
            let initial = validate::initial(db, kind);
            Switch::Sonic(SonicDevice::new(&d.name, initial, f).map_err(bad)?)
        }
        (Protocol::Netconf, Dialect::Openconfig) => {
            let initial = Element::parse(&text).map_err(|e| bad(e.to_string()))?;
            Switch::Netconf(NetconfDevice::new(&d.name, initial, f))
        }
        (protocol, dialect) => {
            return Err(EmuError::Unsupported {
                device: d.name.clone(),
                dialect,
                protocol,
            })
        }
    };
    Ok(switch)
}

/// Every OCS's model behind a TL1 server, its endpoint added to `endpoints`.
async fn serve_ocs(
    topology: &Topology,
    busy: &Arc<dyn BusyOracle>,
    faults: &BTreeMap<String, Arc<Faults>>,
    opts: &FabricOptions,
    endpoints: &mut BTreeMap<String, Endpoint>,
) -> Result<(Vec<Arc<OcsModel>>, Vec<Tl1Server>), EmuError> {
    let mut ocs = Vec::new();
    let mut servers = Vec::new();
    for (i, o) in topology.ocs.iter().enumerate() {
        let model = Arc::new(
            OcsModel::new(OcsId(i as u32), o, busy.clone()).with_switching_delay(opts.switch_delay),
        );
        let bind = SocketAddr::new(opts.listen, 0);
        let options = Tl1Options {
            bind,
            login: opts.login.clone(),
            faults: faults[&*o.name].clone(),
            timeouts: opts.timeouts,
            ..Tl1Options::new(opts.login.clone())
        };
        let server = tl1::serve(model.clone(), options)
            .await
            .map_err(|source| EmuError::Bind {
                device: o.name.to_string(),
                addr: bind,
                source,
            })?;
        endpoints.insert(
            o.name.to_string(),
            Endpoint {
                protocol: Protocol::TelnetTl1,
                host: server.local_addr().ip().to_string(),
                port: server.local_addr().port(),
            },
        );
        ocs.push(model);
        servers.push(server);
    }
    Ok((ocs, servers))
}

/// Every switch behind an SSH server, its endpoint added to `endpoints`;
/// also the servers' known_hosts lines.
async fn serve_switches(
    switches: &BTreeMap<String, Switch>,
    opts: &FabricOptions,
    endpoints: &mut BTreeMap<String, Endpoint>,
) -> Result<(Vec<SshServer>, String), EmuError> {
    let mut ssh_servers = Vec::new();
    let mut known_hosts = String::new();
    for (name, switch) in switches {
        let service = match switch {
            Switch::Cli(dev) => Service::Cli(dev.clone()),
            Switch::Sonic(dev) => Service::Cli(dev.clone()),
            Switch::Netconf(dev) => Service::Netconf(dev.clone()),
        };
        let bind = SocketAddr::new(opts.listen, 0).to_string();
        let server = ssh::serve_with(&bind, service, opts.login.clone(), opts.timeouts)
            .await
            .map_err(|e| EmuError::Ssh {
                device: name.clone(),
                message: e.to_string(),
            })?;
        known_hosts.push_str(&server.known_hosts_line());
        known_hosts.push('\n');
        let protocol = match switch {
            Switch::Cli(_) | Switch::Sonic(_) => Protocol::SshCli,
            Switch::Netconf(_) => Protocol::Netconf,
        };
        endpoints.insert(
            name.clone(),
            Endpoint {
                protocol,
                host: server.local_addr().ip().to_string(),
                port: server.local_addr().port(),
            },
        );
        ssh_servers.push(server);
    }
    Ok((ssh_servers, known_hosts))
}

impl EmulatedFabric {
    /// Build every device of `topology` and start its endpoint. Every
    /// switch starts from the topology's baseline configuration (rendered in
    /// its dialect), as a lab fabric does after day-0 provisioning.
    pub async fn start(topology: Arc<Topology>, opts: FabricOptions) -> Result<Self, EmuError> {
        let baseline = intent::baseline(&topology).map_err(EmuError::Baseline)?;
        let faults: BTreeMap<String, Arc<Faults>> = topology
            .devices
            .iter()
            .map(|d| (d.name.clone(), Arc::new(Faults::new())))
            .collect();
        // Switch models first: the OCS's busy oracle reads their configs.
        let switches = baseline_switches(&topology, &baseline, &faults)?;
        let traffic = Arc::new(StaticBusy::new());
        let steered = Arc::new(SteeredBusy::new(topology.clone(), |name| {
            switches.get(name).cloned()
        }));
        let stage = Arc::new(StageBusy::new());
        let busy: Arc<dyn BusyOracle> =
            Arc::new(AnyBusy(vec![traffic.clone(), stage.clone(), steered]));
        let mut endpoints = BTreeMap::new();
        let (ocs, servers) = serve_ocs(&topology, &busy, &faults, &opts, &mut endpoints).await?;
        let (ssh_servers, known_hosts) = serve_switches(&switches, &opts, &mut endpoints).await?;
        Ok(EmulatedFabric {
            topology,
            ocs,
            faults,
            traffic,
            stage,
            endpoints,
            switches,
            known_hosts,
            username: opts.login.username.clone(),
            _tl1: servers,
            _ssh: ssh_servers,
        })
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// Every served device's endpoint, by device name.
    pub fn endpoints(&self) -> &BTreeMap<String, Endpoint> {
        &self.endpoints
    }

    /// The model of an emulated OCS.
    pub fn ocs(&self, id: OcsId) -> &Arc<OcsModel> {
        &self.ocs[id.index()]
    }

    /// Aim the topology file `text` (read from `file`) at this fabric, as
    /// `vclos emu serve --write-topology` does: writes the fabric's SSH host
    /// keys to `known_hosts` and returns the retargeted YAML, whose devices
    /// use the emulator's login with the password read from `password_env`.
    pub fn aim(
        &self,
        file: &str,
        text: &str,
        known_hosts: &Path,
        password_env: &str,
    ) -> Result<String, EmuError> {
        std::fs::write(known_hosts, &self.known_hosts).map_err(|source| EmuError::Write {
            path: known_hosts.display().to_string(),
            source,
        })?;
        let targets = self
            .endpoints
            .iter()
            .map(|(d, e)| {
                (
                    d.clone(),
                    Target {
                        host: e.host.clone(),
                        port: e.port,
                    },
                )
            })
            .collect();
        let cred = CredentialRef {
            name: "emulator".into(),
            username: self.username.clone(),
            password_env: password_env.into(),
        };
        Ok(retarget(
            file,
            text,
            &targets,
            &cred,
            Some(&known_hosts.display().to_string()),
        )?)
    }

    /// An emulated switch (or chassis) by device name.
    pub fn switch(&self, device: &str) -> Option<&Switch> {
        self.switches.get(device)
    }

    /// known_hosts lines for every SSH endpoint (OpenSSH format).
    pub fn known_hosts(&self) -> &str {
        &self.known_hosts
    }

    /// The fault switches of a device.
    pub fn faults(&self, device: &str) -> Result<&Arc<Faults>, EmuError> {
        self.faults
            .get(device)
            .ok_or_else(|| EmuError::UnknownDevice(device.to_string()))
    }

    /// Every device's running configuration as its real driver's
    /// `get_config` returns it (switches: their CLI/NETCONF text; OCS: the
    /// `RTRV-PATCH` data lines), for [`crate::verification::verify_fabric`].
    pub fn running_configs(&self) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = self
            .switches
            .iter()
            .map(|(name, s)| (name.clone(), s.running_text()))
            .collect();
        for m in &self.ocs {
            let patches = m
                .patches()
                .into_iter()
                .filter_map(|(a, b)| {
                    let port = |p| PortName::new(m.port_name(p)).ok();
                    Some(Item::patch(port(a)?, port(b)?))
                })
                .collect();
            out.insert(m.name().to_string(), dialect::tl1::Tl1.render(&patches));
        }
        out
    }

    /// The forwarding state the devices' running configurations define.
    pub fn forwarding_state(&self) -> Result<ForwardingState, VerifyError> {
        forwarding_from_configs(&self.topology, &self.running_configs())
    }

    /// Test traffic: ports marked here count as busy for the idle-only rule.
    pub fn traffic(&self) -> &Arc<StaticBusy> {
        &self.traffic
    }

    /// The links a running TDM stage uses (issue 19): set by the hosts (or
    /// a test standing in for them); they count as busy for the idle-only
    /// rule, so the OCS itself refuses a transition cutting one.
    pub fn stage_busy(&self) -> &Arc<StageBusy> {
        &self.stage
    }
}
