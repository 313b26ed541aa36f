//! The whole emulated fabric of a topology, served on loopback.
//!
//! [`EmulatedFabric::start`] builds every device's model and starts its
//! protocol endpoint: each OCS is an [`OcsModel`] behind a TL1/Telnet server.
//! It keeps the models (so tests and verification read device state directly),
//! one [`Faults`] per device (so tests and `emu serve --fault` can arm them)
//! and a [`StaticBusy`] for test traffic, which together with the switches'
//! own configuration decides which OCS links are busy.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use super::busy::{AnyBusy, BusyOracle, StaticBusy};
use super::faults::Faults;
use super::ocs::OcsModel;
use super::tl1::{self, Login, Tl1Options, Tl1Server};
use crate::topology::{OcsId, Protocol, Topology};

/// How to serve a fabric.
#[derive(Debug, Clone)]
pub struct FabricOptions {
    /// Address every endpoint binds to (ephemeral ports).
    pub listen: IpAddr,
    /// OCS switching delay.
    pub switch_delay: Duration,
    /// The one login every emulated device accepts.
    pub login: Login,
}

impl Default for FabricOptions {
    fn default() -> Self {
        FabricOptions {
            listen: IpAddr::from([127, 0, 0, 1]),
            switch_delay: super::ocs::DEFAULT_SWITCHING_DELAY,
            login: Login {
                username: "admin".into(),
                password: "admin".into(),
            },
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
    #[error("unknown device `{0}`")]
    UnknownDevice(String),
}

/// A running emulated fabric. Dropping it stops every endpoint.
#[derive(Debug)]
pub struct EmulatedFabric {
    topology: Arc<Topology>,
    ocs: Vec<Arc<OcsModel>>,
    faults: BTreeMap<String, Arc<Faults>>,
    traffic: Arc<StaticBusy>,
    endpoints: BTreeMap<String, Endpoint>,
    _tl1: Vec<Tl1Server>,
}

impl EmulatedFabric {
    /// Build every device of `topology` and start its endpoint.
    pub async fn start(topology: Arc<Topology>, opts: FabricOptions) -> Result<Self, EmuError> {
        let traffic = Arc::new(StaticBusy::new());
        let busy: Arc<dyn BusyOracle> = Arc::new(AnyBusy(vec![traffic.clone()]));
        let faults: BTreeMap<String, Arc<Faults>> = topology
            .devices
            .iter()
            .map(|d| (d.name.clone(), Arc::new(Faults::new())))
            .collect();
        let mut ocs = Vec::new();
        let mut servers = Vec::new();
        let mut endpoints = BTreeMap::new();
        for (i, o) in topology.ocs.iter().enumerate() {
            let model = Arc::new(
                OcsModel::new(OcsId(i as u32), o, busy.clone())
                    .with_switching_delay(opts.switch_delay),
            );
            let bind = SocketAddr::new(opts.listen, 0);
            let options = Tl1Options {
                bind,
                login: opts.login.clone(),
                faults: faults[&o.name].clone(),
            };
            let server =
                tl1::serve(model.clone(), options)
                    .await
                    .map_err(|source| EmuError::Bind {
                        device: o.name.clone(),
                        addr: bind,
                        source,
                    })?;
            endpoints.insert(
                o.name.clone(),
                Endpoint {
                    protocol: Protocol::TelnetTl1,
                    host: server.local_addr().ip().to_string(),
                    port: server.local_addr().port(),
                },
            );
            ocs.push(model);
            servers.push(server);
        }
        Ok(EmulatedFabric {
            topology,
            ocs,
            faults,
            traffic,
            endpoints,
            _tl1: servers,
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

    /// The fault switches of a device.
    pub fn faults(&self, device: &str) -> Result<&Arc<Faults>, EmuError> {
        self.faults
            .get(device)
            .ok_or_else(|| EmuError::UnknownDevice(device.to_string()))
    }

    /// Test traffic: ports marked here count as busy for the idle-only rule.
    pub fn traffic(&self) -> &Arc<StaticBusy> {
        &self.traffic
    }
}
