//! The fabric model: servers, leaves, spines, optical circuit switches, the
//! cables between them and how each managed device is reached.
//!
//! A [`Topology`] is built only by [`load`]/[`from_str`] (YAML, validated) or
//! by the [`generate`] module, so every value in it is consistent: ports are
//! unique, every link end exists, every OCS patch joins two cabled ports.
//!
//! The placement engine works on typed indices ([`LeafId`], [`SpineId`],
//! [`OcsId`], [`ServerId`]) into the vectors here and never on strings; names
//! appear only at the edges (files, CLI, rendered configs). The physical graph
//! is also kept in petgraph ([`Topology::graph`]) for whole-fabric questions
//! and the DOT picture.

mod build;
mod error;
pub mod export;
mod file;
pub mod generate;
mod locate;
mod ports;
pub mod retarget;
pub mod show;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use petgraph::graph::{NodeIndex, UnGraph};
use serde::{Deserialize, Serialize};

pub use build::{MAX_FILE_BYTES, MAX_PROBLEMS, MAX_TOTAL_PORTS, TOPOLOGY_LIMITS};
pub use error::{Problem, TopologyError};
pub use export::{export, ExportError, ExportFormat};
pub use file::{Dialect, HostKeyPolicy, Protocol};
pub use ports::expand_ports;

/// A leaf, spine, OCS or server name, or a port name on one of them.
///
/// Shared (`Arc<str>`) rather than owned: every [`crate::decision::Decision`]
/// names its servers, leaves, ports and cross-connects, and a large job's
/// decision holds tens of thousands of them (a 2048-GPU job about 28 000).
/// Copying each out of the topology as a fresh `String` was 30% of all
/// placement time at 8192 GPUs (issue 13); cloning a `Name` is a reference
/// count increment. With serde's `rc` feature it reads and writes exactly
/// as a string, so files and JSON output are unchanged.
pub type Name = std::sync::Arc<str>;

macro_rules! typed_id {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize { self.0 as usize }
        }
    )*};
}

typed_id!(
    /// Index into [`Topology::leaves`].
    LeafId,
    /// Index into [`Topology::spines`] (a logical spine: several may share one chassis).
    SpineId,
    /// Index into [`Topology::ocs`].
    OcsId,
    /// Index into [`Topology::servers`].
    ServerId,
    /// Index into [`Topology::devices`]: something with a management endpoint.
    DeviceId,
);

/// One end of a fabric cable. Leaf ports here are always uplinks (index into
/// [`Leaf::uplinks`]); server-facing ports are reached through [`Server::ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PortRef {
    Leaf(LeafId, u16),
    Spine(SpineId, u16),
    Ocs(OcsId, u16),
}

/// A physical cable between two fabric ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub a: PortRef,
    pub b: PortRef,
}

/// Role of a managed device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leaf,
    Spine,
    Ocs,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Leaf => "leaf",
            Role::Spine => "spine",
            Role::Ocs => "ocs",
        })
    }
}

/// How a device is reached. Credentials are a reference into
/// [`Topology::credentials`]; secrets themselves never live in the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mgmt {
    pub host: String,
    pub port: u16,
    pub protocol: Protocol,
    pub dialect: Dialect,
    pub credential: String,
    pub host_key: HostKeyPolicy,
}

/// Where a credential's secret comes from. Plain-text passwords are rejected
/// by the loader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub username: String,
    pub secret: SecretRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretRef {
    /// Name of an environment variable holding the password.
    PasswordEnv(String),
    /// Path of a file whose first line is the password.
    PasswordFile(String),
    /// No password (e.g. key-based or agent authentication).
    None,
}

/// Something with a management endpoint: a switch, a chassis hosting several
/// logical switches (VRF-virtualised spines), or an OCS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub name: String,
    pub role: Role,
    pub mgmt: Mgmt,
    /// Logical switches configured on this device (one, unless it is a chassis).
    pub members: Vec<Member>,
}

/// A logical switch hosted by a [`Device`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Member {
    Leaf(LeafId),
    Spine(SpineId),
    Ocs(OcsId),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leaf {
    pub name: Name,
    pub device: DeviceId,
    /// Server-facing ports, in file order.
    pub server_ports: Vec<Name>,
    /// Which server GPU sits behind each server-facing port.
    pub server_port_owner: Vec<Option<(ServerId, u16)>>,
    /// Spine-facing ports, in file order.
    pub uplinks: Vec<Name>,
    /// What each uplink is cabled to (a spine port or an OCS port).
    pub uplink_peer: Vec<Option<PortRef>>,
    /// Servers attached to this leaf.
    pub servers: Vec<ServerId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spine {
    pub name: Name,
    pub device: DeviceId,
    pub ports: Vec<Name>,
    /// What each port is cabled to (a leaf uplink or an OCS port).
    pub port_peer: Vec<Option<PortRef>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ocs {
    pub name: Name,
    pub device: DeviceId,
    /// Port names (usually "1".."N").
    pub ports: Vec<Name>,
    /// What each OCS port is cabled to (a leaf uplink or a spine port).
    pub port_peer: Vec<Option<PortRef>>,
    /// Cross-connects present when the fabric was cabled, as port indices
    /// with `a < b`; the live table is device state, not topology.
    pub patches: Vec<(u16, u16)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Server {
    pub name: Name,
    pub leaf: LeafId,
    /// Leaf server-port index of GPU `i`'s NIC (one NIC and one port per GPU).
    pub ports: Vec<u16>,
}

/// A node of the physical graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    Server(ServerId),
    Leaf(LeafId),
    Spine(SpineId),
    Ocs(OcsId),
}

/// An edge of the physical graph: a fabric cable, or a server's NIC cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    Fabric(Link),
    Nic { server: ServerId, gpu: u16 },
}

/// A validated fabric.
#[derive(Debug, Clone)]
pub struct Topology {
    pub name: String,
    pub gpus_per_server: u16,
    /// The file allowed leaves whose server-facing and uplink counts differ.
    pub allow_oversubscription: bool,
    pub devices: Vec<Device>,
    pub leaves: Vec<Leaf>,
    pub spines: Vec<Spine>,
    pub ocs: Vec<Ocs>,
    pub servers: Vec<Server>,
    pub links: Vec<Link>,
    pub credentials: std::collections::BTreeMap<String, Credential>,
    /// SSH known_hosts file used to verify host keys (None: the user's default).
    pub known_hosts: Option<String>,
    /// Physical graph: servers, leaves, spines and OCS as nodes; cables as edges.
    pub graph: UnGraph<Node, Edge>,
    node_index: HashMap<Node, NodeIndex>,
    device_by_name: HashMap<String, DeviceId>,
}

/// Load and validate a topology file.
pub fn load(path: &Path) -> Result<Topology, TopologyError> {
    let bytes = crate::yaml::read_capped(path, build::MAX_FILE_BYTES).map_err(|source| {
        TopologyError::Io {
            file: path.display().to_string(),
            source,
        }
    })?;
    from_bytes(&path.display().to_string(), &bytes)
}

/// Parse and validate topology YAML; `file` is used only in error messages.
pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Topology, TopologyError> {
    build::build(file, bytes)
}

/// The bundled `topologies/testbed-ocs.yaml`, for unit tests.
#[cfg(any(test, feature = "test-fixtures"))]
#[allow(clippy::unwrap_used)]
pub fn testbed_ocs() -> Topology {
    from_str(
        "testbed-ocs.yaml",
        include_str!("../../../topologies/testbed-ocs.yaml"),
    )
    .unwrap()
}

/// Parse and validate topology YAML text.
pub fn from_str(file: &str, text: &str) -> Result<Topology, TopologyError> {
    build::build(file, text.as_bytes())
}

impl Topology {
    pub fn leaf(&self, id: LeafId) -> &Leaf {
        &self.leaves[id.index()]
    }
    pub fn spine(&self, id: SpineId) -> &Spine {
        &self.spines[id.index()]
    }
    pub fn ocs_dev(&self, id: OcsId) -> &Ocs {
        &self.ocs[id.index()]
    }
    pub fn server(&self, id: ServerId) -> &Server {
        &self.servers[id.index()]
    }
    pub fn device(&self, id: DeviceId) -> &Device {
        &self.devices[id.index()]
    }

    /// Look up a managed device by name.
    pub fn device_id(&self, name: &str) -> Option<DeviceId> {
        self.device_by_name.get(name).copied()
    }

    pub fn leaf_id(&self, name: &str) -> Option<LeafId> {
        self.leaves
            .iter()
            .position(|l| &*l.name == name)
            .map(|i| LeafId(i as u32))
    }
    pub fn spine_id(&self, name: &str) -> Option<SpineId> {
        self.spines
            .iter()
            .position(|s| &*s.name == name)
            .map(|i| SpineId(i as u32))
    }
    pub fn ocs_id(&self, name: &str) -> Option<OcsId> {
        self.ocs
            .iter()
            .position(|o| &*o.name == name)
            .map(|i| OcsId(i as u32))
    }
    pub fn server_id(&self, name: &str) -> Option<ServerId> {
        self.servers
            .iter()
            .position(|s| &*s.name == name)
            .map(|i| ServerId(i as u32))
    }

    /// Total GPUs (servers x GPUs per server).
    pub fn gpu_count(&self) -> usize {
        self.servers.len() * self.gpus_per_server as usize
    }

    /// The petgraph node of a fabric element.
    pub fn node(&self, node: Node) -> NodeIndex {
        self.node_index[&node]
    }

    /// What the fabric port `p` is cabled to.
    pub fn peer(&self, p: PortRef) -> Option<PortRef> {
        match p {
            PortRef::Leaf(l, i) => self.leaf(l).uplink_peer[i as usize],
            PortRef::Spine(s, i) => self.spine(s).port_peer[i as usize],
            PortRef::Ocs(o, i) => self.ocs_dev(o).port_peer[i as usize],
        }
    }

    /// `device:port` as written in topology files, for messages and configs.
    pub fn port_label(&self, p: PortRef) -> String {
        match p {
            PortRef::Leaf(l, i) => {
                format!("{}:{}", self.leaf(l).name, self.leaf(l).uplinks[i as usize])
            }
            PortRef::Spine(s, i) => {
                format!("{}:{}", self.spine(s).name, self.spine(s).ports[i as usize])
            }
            PortRef::Ocs(o, i) => format!(
                "{}:{}",
                self.ocs_dev(o).name,
                self.ocs_dev(o).ports[i as usize]
            ),
        }
    }

    /// The leaf-spine (or leaf-leaf) connections as the fabric is cabled and
    /// initially patched: direct cables, plus paths through one OCS patch.
    pub fn initial_fabric_links(&self) -> Vec<(PortRef, PortRef)> {
        let mut out = Vec::new();
        for (li, leaf) in self.leaves.iter().enumerate() {
            for (ui, peer) in leaf.uplink_peer.iter().enumerate() {
                let here = PortRef::Leaf(LeafId(li as u32), ui as u16);
                match peer {
                    Some(p @ PortRef::Spine(..)) => out.push((here, *p)),
                    Some(PortRef::Ocs(o, port)) => {
                        let ocs = self.ocs_dev(*o);
                        let other = ocs.patches.iter().find_map(|&(a, b)| {
                            (a == *port).then_some(b).or((b == *port).then_some(a))
                        });
                        if let Some(far) = other.and_then(|b| ocs.port_peer[b as usize]) {
                            // Leaf-to-leaf patches appear once, from the lower end.
                            if !matches!(far, PortRef::Leaf(..)) || here < far {
                                out.push((here, far));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        out
    }
}
