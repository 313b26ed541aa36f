//! From YAML bytes to a validated [`Topology`].
//!
//! Validation collects every problem it can find (not just the first), each
//! with file, line, device and port, so a user fixes a file in one pass,
//! up to [`MAX_PROBLEMS`]: past that it only counts them ("… and M more").
//!
//! Bounds (docs/input-limits.md): the text is checked by
//! [`crate::yaml::check`] under [`TOPOLOGY_LIMITS`] before serde_yaml_ng
//! reads it; port ranges expand to at most [`MAX_TOTAL_PORTS`] names in all;
//! every check is a hash lookup, and the lines of problems (a search of the
//! file) are looked up only for the problems kept, so validation is linear
//! in the file's length however many problems it has.

use std::collections::{BTreeMap, HashMap};

use petgraph::graph::UnGraph;

use super::error::{Problem, TopologyError};
use super::file::{Dialect, FileMgmt, FileOcs, FileServer, FileTopology, PortList, Protocol};
use super::locate::Locator;
use super::ports::expand_ports;
use super::*;
use crate::names::{validate, NameKind};

/// Topology files larger than this are refused before parsing: 70 times
/// the largest reference file (`cluster2048-ocs.yaml`, 238 KB).
pub const MAX_FILE_BYTES: usize = 16 * 1024 * 1024;
/// Bounds of topology YAML: topologies nest 5 levels deep
/// (`leaves[].mgmt.host`); aliases may repeat small parts only.
pub const TOPOLOGY_LIMITS: crate::yaml::Limits = crate::yaml::Limits {
    max_bytes: MAX_FILE_BYTES,
    max_depth: 32,
    max_alias_nodes: 100_000,
};
/// Problems reported with their line; the rest are only counted.
pub const MAX_PROBLEMS: usize = 100;
/// Port names all port lists of a file may expand to, together (a fabric of
/// 100 000 GPUs has about 500 000 ports).
pub const MAX_TOTAL_PORTS: usize = 1 << 20;
const MAX_GPUS_PER_SERVER: u16 = 64;

pub(super) fn build(file: &str, bytes: &[u8]) -> Result<Topology, TopologyError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(TopologyError::TooLarge {
            file: file.into(),
            size: bytes.len(),
            limit: MAX_FILE_BYTES,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| TopologyError::NotUtf8 {
        file: file.into(),
        offset: e.valid_up_to(),
    })?;
    let raw = parse_file(file, text)?;
    let mut b = Builder {
        loc: Locator::new(text),
        problems: Vec::new(),
        more: 0,
        total_ports: 0,
        names: HashMap::new(),
        entries_seen: HashMap::new(),
    };
    let topo = b.topology(raw);
    if b.problems.is_empty() {
        Ok(topo)
    } else {
        Err(TopologyError::Invalid {
            file: file.into(),
            problems: b.problems,
            more: b.more,
        })
    }
}

/// The file as written, read under [`TOPOLOGY_LIMITS`].
pub(super) fn parse_file(file: &str, text: &str) -> Result<FileTopology, TopologyError> {
    crate::yaml::check(text, &TOPOLOGY_LIMITS).map_err(|e| match e {
        crate::yaml::LimitError::TooLarge { size, limit } => TopologyError::TooLarge {
            file: file.into(),
            size,
            limit,
        },
        other => TopologyError::Parse {
            file: file.into(),
            line: other.line(),
            message: other.to_string(),
        },
    })?;
    crate::yaml::from_str(text).map_err(|e| TopologyError::Parse {
        file: file.into(),
        line: e.location().map(|l| l.line()),
        message: e.to_string(),
    })
}

/// What a name in the file refers to.
#[derive(Debug, Clone, Copy)]
enum Named {
    Leaf(LeafId),
    Spine(SpineId),
    Ocs(OcsId),
    Server,
    Chassis(usize),
}

struct Builder<'a> {
    loc: Locator<'a>,
    problems: Vec<Problem>,
    /// Problems past [`MAX_PROBLEMS`], counted only.
    more: usize,
    /// Port names expanded so far, all devices together.
    total_ports: usize,
    names: HashMap<String, (Named, Option<usize>)>,
    /// Entries declared so far per (section, name): the line of a second
    /// declaration is the second `name:` entry.
    entries_seen: HashMap<(String, String), usize>,
}

/// The managed devices built so far, and which of them are chassis.
struct Managed {
    devices: Vec<Device>,
    /// The device of each chassis, by its index under `chassis`.
    chassis_dev: Vec<DeviceId>,
    /// Port names taken on each chassis by its logical switches.
    chassis_ports: HashMap<usize, std::collections::HashSet<Name>>,
}

impl<'a> Builder<'a> {
    fn problem(&mut self, p: Problem) {
        self.problem_at(p, |_| None);
    }

    /// Record a problem whose line takes a search of the file: the search
    /// runs only for the problems kept, so it costs at most
    /// [`MAX_PROBLEMS`] passes over the file.
    fn problem_at(&mut self, p: Problem, line: impl FnOnce(&Locator<'a>) -> Option<usize>) {
        if self.problems.len() < MAX_PROBLEMS {
            let line = line(&self.loc);
            self.problems.push(p.at(line));
        } else {
            self.more += 1;
        }
    }

    /// Register a name in the single fabric-wide namespace.
    fn declare(&mut self, section: &str, name: &str, what: Named) -> Option<usize> {
        let nth = self
            .entries_seen
            .entry((section.into(), name.into()))
            .or_insert(0);
        let line = self.loc.entry_nth(section, name, *nth);
        *nth += 1;
        if let Err(e) = validate(NameKind::Device, name) {
            self.problem(Problem::new(e.to_string()).at(line));
        }
        if let Some((_, first)) = self.names.get(name) {
            let first = first
                .map(|l| format!(" (first declared at line {l})"))
                .unwrap_or_default();
            self.problem(
                Problem::new(format!("name declared twice{first}"))
                    .device(name)
                    .at(line),
            );
        } else {
            self.names.insert(name.to_string(), (what, line));
        }
        line
    }

    fn ports(&mut self, device: &str, line: Option<usize>, list: &PortList) -> Vec<Name> {
        let mut out = Vec::new();
        for item in list.items() {
            if self.total_ports > MAX_TOTAL_PORTS {
                break;
            }
            match expand_ports(item) {
                Ok(v) => {
                    self.total_ports += v.len();
                    if self.total_ports > MAX_TOTAL_PORTS {
                        self.problem(
                            Problem::new(format!(
                                "port lists expand to more than {MAX_TOTAL_PORTS} ports in all \
                                 (the rest of the file's port lists are not expanded)"
                            ))
                            .device(device)
                            .at(line),
                        );
                        break;
                    }
                    out.extend(v.into_iter().map(Name::from));
                }
                Err(e) => self.problem(Problem::new(e).device(device).at(line)),
            }
        }
        if out.len() > u16::MAX as usize {
            self.problem(
                Problem::new(format!("{} ports is more than 65535", out.len()))
                    .device(device)
                    .at(line),
            );
            out.truncate(u16::MAX as usize);
        }
        out
    }

    /// Report invalid or repeated names within one port namespace.
    fn unique_ports<'p>(
        &mut self,
        device: &str,
        line: Option<usize>,
        ports: impl IntoIterator<Item = &'p Name>,
    ) {
        let mut seen = std::collections::HashSet::new();
        for p in ports {
            if let Err(e) = validate(NameKind::Port, p) {
                self.problem(Problem::new(e.to_string()).device(device).at(line));
            } else if !seen.insert(&**p) {
                self.problem(
                    Problem::new("port used twice in the device's port lists")
                        .device(device)
                        .port(p)
                        .at(line),
                );
            }
        }
    }

    fn mgmt(
        &mut self,
        device: &str,
        line: Option<usize>,
        m: &FileMgmt,
        role: Role,
        creds: &BTreeMap<String, Credential>,
    ) -> Mgmt {
        if let Err(e) = validate(NameKind::Host, &m.host) {
            self.problem(Problem::new(format!("mgmt: {e}")).device(device).at(line));
        }
        // A TCP port is 1-65535: 0 is reserved and is never a listening
        // port (RFC 6335 §6; RFC 9293 §3.1 gives ports 16 bits).
        let port = match m.port {
            None => m.protocol.default_port(),
            Some(p) => match u16::try_from(p) {
                Ok(p) if p > 0 => p,
                _ => {
                    self.problem(
                        Problem::new(format!("mgmt: port {p} is not a TCP port (1-65535)"))
                            .device(device)
                            .at(line),
                    );
                    m.protocol.default_port()
                }
            },
        };
        if !creds.contains_key(&m.credential) {
            self.problem(
                Problem::new(format!(
                    "mgmt: credential `{}` is not defined under `credentials`",
                    m.credential
                ))
                .device(device)
                .at(line),
            );
        }
        let ok = match (role, m.protocol, m.dialect) {
            (Role::Ocs, Protocol::TelnetTl1, Dialect::Tl1) => true,
            (Role::Ocs, _, _) => false,
            (_, Protocol::SshCli, Dialect::HuaweiCe | Dialect::Sonic) => true,
            (_, Protocol::Netconf, Dialect::Openconfig) => true,
            _ => false,
        };
        if !ok {
            self.problem(
                Problem::new(format!(
                    "mgmt: protocol `{}` with dialect `{}` is not supported for a {role} \
                     (switches: ssh-cli with huawei-ce or sonic, netconf with openconfig; OCS: telnet-tl1 with tl1)",
                    m.protocol, m.dialect
                ))
                .device(device)
                .at(line),
            );
        }
        Mgmt {
            host: m.host.clone(),
            port,
            protocol: m.protocol,
            dialect: m.dialect,
            credential: m.credential.clone(),
            host_key: m.host_key,
        }
    }

    fn credentials(
        &mut self,
        raw: &BTreeMap<String, file::FileCredential>,
    ) -> BTreeMap<String, Credential> {
        let mut out = BTreeMap::new();
        for (name, c) in raw {
            let line = |loc: &Locator| loc.key(name);
            if let Err(e) = validate(NameKind::Credential, name) {
                self.problem_at(Problem::new(e.to_string()), line);
            }
            if c.password.is_some() {
                self.problem_at(
                    Problem::new(format!(
                        "credential `{name}` has a plain-text `password`; secrets never live in topology files: \
                         use `password_env: VAR` or `password_file: PATH`"
                    )),
                    |loc| loc.key("password"),
                );
            }
            let secret = match (&c.password_env, &c.password_file) {
                (Some(_), Some(_)) => {
                    self.problem_at(
                        Problem::new(format!(
                            "credential `{name}`: give password_env or password_file, not both"
                        )),
                        line,
                    );
                    SecretRef::None
                }
                (Some(v), None) => SecretRef::PasswordEnv(v.clone()),
                (None, Some(f)) => SecretRef::PasswordFile(f.clone()),
                (None, None) => SecretRef::None,
            };
            out.insert(
                name.clone(),
                Credential {
                    username: c.username.clone(),
                    secret,
                },
            );
        }
        out
    }

    fn topology(&mut self, raw: FileTopology) -> Topology {
        let (name, t) = self.fabric_fields(&raw);
        let creds = self.credentials(&raw.credentials);

        // Managed devices: chassis first, then stand-alone switches and OCS.
        let mut managed = self.chassis_devices(&raw, &creds);
        let mut leaves = self.leaves(&raw, t, &creds, &mut managed);
        let mut spines = self.spines(&raw, &creds, &mut managed);
        let mut ocs = self.ocs(&raw, &creds, &mut managed.devices);
        self.chassis_roles(&raw, &mut managed);

        let servers = self.servers(&raw, t, &mut leaves);
        let links = self.links(&raw, &mut leaves, &mut spines, &mut ocs);

        if spines.is_empty() && !ocs.is_empty() {
            self.pod_fabric(&leaves);
        }
        self.patch_loops(&ocs);

        let devices = managed.devices;
        let graph_and_index = build_graph(&leaves, &spines, &ocs, &servers, &links);
        let device_by_name = devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.clone(), DeviceId(i as u32)))
            .collect();
        Topology {
            name,
            gpus_per_server: t,
            allow_oversubscription: raw.allow_oversubscription,
            devices,
            leaves,
            spines,
            ocs,
            servers,
            links,
            credentials: creds,
            known_hosts: raw.known_hosts.clone(),
            graph: graph_and_index.0,
            node_index: graph_and_index.1,
            device_by_name,
        }
    }

    /// The fabric's name and GPUs per server, each checked.
    fn fabric_fields(&mut self, raw: &FileTopology) -> (String, u16) {
        let name = raw.name.clone().unwrap_or_else(|| "fabric".into());
        if let Err(e) = validate(NameKind::Topology, &name) {
            self.problem(Problem::new(e.to_string()).at(self.loc.key("name")));
        }
        let t = raw.gpus_per_server;
        if t == 0 || t > MAX_GPUS_PER_SERVER {
            self.problem(
                Problem::new(format!(
                    "gpus_per_server must be 1..={MAX_GPUS_PER_SERVER}, not {t}"
                ))
                .at(self.loc.key("gpus_per_server")),
            );
        }
        (name, t)
    }

    /// Declare each chassis and make it a managed device.
    fn chassis_devices(
        &mut self,
        raw: &FileTopology,
        creds: &BTreeMap<String, Credential>,
    ) -> Managed {
        let mut devices: Vec<Device> = Vec::new();
        let mut chassis_dev: Vec<DeviceId> = Vec::new();
        for (i, c) in raw.chassis.iter().enumerate() {
            let line = self.declare("chassis", &c.name, Named::Chassis(i));
            // Role is fixed once members are known; Spine is a placeholder.
            let mgmt = self.mgmt(&c.name, line, &c.mgmt, Role::Spine, creds);
            chassis_dev.push(DeviceId(devices.len() as u32));
            devices.push(Device {
                name: c.name.clone(),
                role: Role::Spine,
                mgmt,
                members: vec![],
            });
        }
        Managed {
            devices,
            chassis_dev,
            chassis_ports: HashMap::new(),
        }
    }

    /// Declare each leaf, expand its ports and check their counts.
    fn leaves(
        &mut self,
        raw: &FileTopology,
        t: u16,
        creds: &BTreeMap<String, Credential>,
        managed: &mut Managed,
    ) -> Vec<Leaf> {
        let mut leaves = Vec::new();
        for (i, l) in raw.leaves.iter().enumerate() {
            let id = LeafId(i as u32);
            let line = self.declare("leaves", &l.name, Named::Leaf(id));
            let server_ports = self.ports(&l.name, line, &l.server_ports);
            let uplinks = self.ports(&l.name, line, &l.uplink_ports);
            self.unique_ports(&l.name, line, server_ports.iter().chain(&uplinks));
            let device = self.attach(
                &mut managed.devices,
                &managed.chassis_dev,
                &mut managed.chassis_ports,
                &l.name,
                line,
                &l.mgmt,
                &l.chassis,
                Member::Leaf(id),
                creds,
                &server_ports,
                &uplinks,
                raw,
            );
            if !raw.allow_oversubscription && server_ports.len() != uplinks.len() {
                self.problem(
                    Problem::new(format!(
                        "{} server-facing ports but {} uplinks: a full-bisection leaf needs equal counts \
                         (set `allow_oversubscription: true` to accept this)",
                        server_ports.len(),
                        uplinks.len()
                    ))
                    .device(&l.name)
                    .at(line),
                );
            }
            if t > 0 && !server_ports.len().is_multiple_of(t as usize) {
                self.problem(
                    Problem::new(format!(
                        "{} server-facing ports is not a multiple of gpus_per_server ({t})",
                        server_ports.len()
                    ))
                    .device(&l.name)
                    .at(line),
                );
            }
            leaves.push(Leaf {
                name: Name::from(l.name.as_str()),
                device,
                server_port_owner: vec![None; server_ports.len()],
                uplink_peer: vec![None; uplinks.len()],
                server_ports,
                uplinks,
                servers: vec![],
            });
        }
        leaves
    }

    /// Declare each spine and expand its ports.
    fn spines(
        &mut self,
        raw: &FileTopology,
        creds: &BTreeMap<String, Credential>,
        managed: &mut Managed,
    ) -> Vec<Spine> {
        let mut spines = Vec::new();
        for (i, s) in raw.spines.iter().enumerate() {
            let id = SpineId(i as u32);
            let line = self.declare("spines", &s.name, Named::Spine(id));
            let ports = self.ports(&s.name, line, &s.ports);
            self.unique_ports(&s.name, line, &ports);
            let device = self.attach(
                &mut managed.devices,
                &managed.chassis_dev,
                &mut managed.chassis_ports,
                &s.name,
                line,
                &s.mgmt,
                &s.chassis,
                Member::Spine(id),
                creds,
                &[],
                &ports,
                raw,
            );
            spines.push(Spine {
                name: Name::from(s.name.as_str()),
                device,
                port_peer: vec![None; ports.len()],
                ports,
            });
        }
        spines
    }

    /// Declare each OCS, make it a managed device and resolve its patches.
    fn ocs(
        &mut self,
        raw: &FileTopology,
        creds: &BTreeMap<String, Credential>,
        devices: &mut Vec<Device>,
    ) -> Vec<Ocs> {
        let mut ocs = Vec::new();
        for (i, o) in raw.ocs.iter().enumerate() {
            let id = OcsId(i as u32);
            let line = self.declare("ocs", &o.name, Named::Ocs(id));
            let ports = self.ports(&o.name, line, &o.ports);
            self.unique_ports(&o.name, line, &ports);
            let mgmt = self.mgmt(&o.name, line, &o.mgmt, Role::Ocs, creds);
            let device = DeviceId(devices.len() as u32);
            devices.push(Device {
                name: o.name.clone(),
                role: Role::Ocs,
                mgmt,
                members: vec![Member::Ocs(id)],
            });
            let patches = self.patches(o, line, &ports);
            ocs.push(Ocs {
                name: Name::from(o.name.as_str()),
                device,
                port_peer: vec![None; ports.len()],
                ports,
                patches,
            });
        }
        ocs
    }

    /// Resolve an OCS's patches to pairs of port indices, lower first; a
    /// patch naming a missing port, a port twice or a port already patched
    /// is a problem and is left out.
    fn patches(&mut self, o: &FileOcs, line: Option<usize>, ports: &[Name]) -> Vec<(u16, u16)> {
        let index: HashMap<&str, u16> = ports
            .iter()
            .enumerate()
            .map(|(i, p)| (&**p, i as u16))
            .collect();
        let mut patched: HashMap<u16, usize> = HashMap::new();
        let mut patches = Vec::new();
        for (pi, (a, b)) in o.patches.iter().enumerate() {
            let entry = line;
            let line = |loc: &Locator| loc.item(entry, "patches", pi).or(entry);
            let resolve = |p: &str, this: &mut Self| match index.get(p) {
                Some(&i) => Some(i),
                None => {
                    this.problem_at(
                        Problem::new("patch names a port the OCS does not have")
                            .device(&o.name)
                            .port(p),
                        line,
                    );
                    None
                }
            };
            let (Some(ia), Some(ib)) = (resolve(a, self), resolve(b, self)) else {
                continue;
            };
            if ia == ib {
                self.problem_at(
                    Problem::new("a port cannot be patched to itself")
                        .device(&o.name)
                        .port(a),
                    line,
                );
                continue;
            }
            let mut clash = false;
            for (p, name) in [(ia, a), (ib, b)] {
                if let Some(first) = patched.insert(p, pi) {
                    clash = true;
                    let (fa, fb) = &o.patches[first];
                    self.problem_at(
                        Problem::new(format!(
                            "OCS port patched twice (also in patch [{fa}, {fb}])"
                        ))
                        .device(&o.name)
                        .port(name),
                        line,
                    );
                }
            }
            if !clash {
                patches.push((ia.min(ib), ia.max(ib)));
            }
        }
        patches
    }

    /// Fix each chassis's role from its members, which must be all leaves or all spines.
    fn chassis_roles(&mut self, raw: &FileTopology, managed: &mut Managed) {
        for (i, dev) in raw.chassis.iter().enumerate() {
            let d = &mut managed.devices[managed.chassis_dev[i].index()];
            let line = self.loc.entry("chassis", &dev.name);
            if d.members.is_empty() {
                self.problem(
                    Problem::new("chassis hosts no leaf or spine (refer to it with `chassis:`)")
                        .device(&dev.name)
                        .at(line),
                );
            } else if d.members.iter().any(|m| matches!(m, Member::Leaf(_))) {
                if d.members.iter().any(|m| matches!(m, Member::Spine(_))) {
                    self.problem(
                        Problem::new("a chassis may host leaves or spines, not both")
                            .device(&dev.name)
                            .at(line),
                    );
                }
                d.role = Role::Leaf;
            }
        }
    }

    /// Declare each server and attach it to its leaf's server-facing ports.
    fn servers(&mut self, raw: &FileTopology, t: u16, leaves: &mut [Leaf]) -> Vec<Server> {
        let index = LeafPortIndex::new(leaves);
        let mut servers = Vec::new();
        for s in &raw.servers {
            if let Some(server) = self.server(s, t, leaves, &index, &servers) {
                servers.push(server);
            }
        }
        servers
    }

    /// Declare one server and claim its leaf ports; `None` if its leaf is
    /// not a declared leaf. `servers` are those already built.
    fn server(
        &mut self,
        s: &FileServer,
        t: u16,
        leaves: &mut [Leaf],
        index: &LeafPortIndex,
        servers: &[Server],
    ) -> Option<Server> {
        let line = self.declare("servers", &s.name, Named::Server);
        let sid = ServerId(servers.len() as u32);
        let Some(&(Named::Leaf(lid), _)) = self.names.get(&s.leaf) else {
            self.problem(
                Problem::new(format!("server's leaf `{}` is not a declared leaf", s.leaf))
                    .device(&s.name)
                    .at(line),
            );
            return None;
        };
        let names = self.ports(&s.name, line, &s.ports);
        if names.len() != t as usize {
            self.problem(
                Problem::new(format!("{} leaf ports listed but gpus_per_server is {t} (one NIC and leaf port per GPU)", names.len()))
                    .device(&s.name)
                    .at(line),
            );
        }
        let leaf = &mut leaves[lid.index()];
        let mut ports = Vec::new();
        for (gpu, p) in names.iter().enumerate() {
            match index.server[lid.index()].get(p).copied() {
                None => {
                    let hint = if index.uplinks[lid.index()].contains(p) {
                        " (it is an uplink)"
                    } else {
                        ""
                    };
                    self.problem(
                        Problem::new(format!("server `{}` uses a port that is not a server-facing port of the leaf{hint}", s.name))
                            .device(&leaf.name)
                            .port(p)
                            .at(line),
                    );
                }
                Some(i) => match leaf.server_port_owner[i] {
                    Some((other, _)) => {
                        let other = &servers
                            .get(other.index())
                            .map(|s: &Server| s.name.clone())
                            .unwrap_or_default();
                        self.problem(
                            Problem::new(format!(
                                "port used twice: by server `{other}` and server `{}`",
                                s.name
                            ))
                            .device(&leaf.name)
                            .port(p)
                            .at(line),
                        );
                    }
                    None => {
                        leaf.server_port_owner[i] = Some((sid, gpu as u16));
                        ports.push(i as u16);
                    }
                },
            }
        }
        leaf.servers.push(sid);
        Some(Server {
            name: Name::from(s.name.as_str()),
            leaf: lid,
            ports,
        })
    }

    /// Resolve the cables of `links` and record each end as the other's peer.
    fn links(
        &mut self,
        raw: &FileTopology,
        leaves: &mut [Leaf],
        spines: &mut [Spine],
        ocs: &mut [Ocs],
    ) -> Vec<Link> {
        // Cables. Lines are looked up only for problems, so that a file with
        // thousands of cables validates in milliseconds.
        let maps = PortMaps::new(leaves, spines, ocs);
        let mut links = Vec::new();
        let mut seen_ep: HashMap<&str, usize> = HashMap::new();
        let mut used: HashMap<PortRef, (&str, usize)> = HashMap::new();
        for (a, b) in &raw.links {
            let ends: Vec<Option<PortRef>> = [a, b]
                .iter()
                .map(|ep| self.link_end(ep.as_str(), &mut seen_ep, &mut used, &maps))
                .collect();
            let (Some(ea), Some(eb)) = (ends[0], ends[1]) else {
                continue;
            };
            let kind_ok = matches!(
                (ea, eb),
                (PortRef::Leaf(..), PortRef::Spine(..) | PortRef::Ocs(..))
                    | (PortRef::Spine(..), PortRef::Leaf(..) | PortRef::Ocs(..))
                    | (PortRef::Ocs(..), PortRef::Leaf(..) | PortRef::Spine(..))
            );
            if !kind_ok {
                let nth = seen_ep[a.as_str()] - 1;
                self.problem_at(
                    Problem::new(format!(
                        "link [{a}, {b}]: a cable joins two of: a leaf uplink, a spine port, an OCS port"
                    )),
                    |loc| loc.token(a, nth),
                );
                continue;
            }
            for (p, q) in [(ea, eb), (eb, ea)] {
                match p {
                    PortRef::Leaf(l, i) => leaves[l.index()].uplink_peer[i as usize] = Some(q),
                    PortRef::Spine(s, i) => spines[s.index()].port_peer[i as usize] = Some(q),
                    PortRef::Ocs(o, i) => ocs[o.index()].port_peer[i as usize] = Some(q),
                }
            }
            links.push(Link { a: ea, b: eb });
        }
        links
    }

    /// Resolve one end of a cable, `None` with a problem if it is not a
    /// fabric port or the port is already cabled. `seen_ep` counts each
    /// end's text so far; `used` holds the ports cabled so far.
    fn link_end<'r>(
        &mut self,
        ep: &'r str,
        seen_ep: &mut HashMap<&'r str, usize>,
        used: &mut HashMap<PortRef, (&'r str, usize)>,
        maps: &PortMaps,
    ) -> Option<PortRef> {
        let nth = seen_ep.entry(ep).or_insert(0);
        let here = (ep, *nth);
        *nth += 1;
        let r = self.endpoint(ep, here.1, maps)?;
        if let Some((first_ep, first_nth)) = used.insert(r, here) {
            let (dev, port) = ep.split_once(':').unwrap_or((ep, ""));
            if self.problems.len() >= MAX_PROBLEMS {
                self.more += 1;
                return None;
            }
            let first = self
                .loc
                .token(first_ep, first_nth)
                .map(|l| format!(" (first cabled at line {l})"))
                .unwrap_or_default();
            self.problem_at(
                Problem::new(format!("port used twice in links{first}"))
                    .device(dev)
                    .port(port),
                |loc| loc.token(ep, here.1),
            );
            return None;
        }
        Some(r)
    }

    /// Report OCS patches that join two ports of one switch.
    fn patch_loops(&mut self, ocs: &[Ocs]) {
        // Leaf-to-leaf or spine-to-spine patches are allowed (the two-leaf
        // OCS-vClos case); a patch must still not join two ports of one switch.
        for o in ocs {
            for &(a, b) in &o.patches {
                if let (Some(pa), Some(pb)) = (o.port_peer[a as usize], o.port_peer[b as usize]) {
                    if same_switch(pa, pb) {
                        self.problem(
                            Problem::new(format!(
                                "patch [{}, {}] loops a switch back to itself",
                                o.ports[a as usize], o.ports[b as usize]
                            ))
                            .device(&o.name)
                            .at(self.loc.entry("ocs", &o.name)),
                        );
                    }
                }
            }
        }
    }

    /// A spine-less fabric (leaves as "pods" interconnected only through
    /// OCS devices, issue 19 item 1; seed 003 Section IV-A): every leaf
    /// uplink must be cabled to an OCS port, or the pod has a port that can
    /// carry no circuit.
    fn pod_fabric(&mut self, leaves: &[Leaf]) {
        for l in leaves {
            for (port, peer) in l.uplinks.iter().zip(&l.uplink_peer) {
                if !matches!(peer, Some(PortRef::Ocs(..))) {
                    self.problem_at(
                        Problem::new(
                            "uplink not cabled to an OCS port: in a fabric without spines \
                             every leaf uplink goes to an OCS",
                        )
                        .device(&l.name)
                        .port(port),
                        |loc| loc.entry("leaves", &l.name),
                    );
                }
            }
        }
    }

    /// Resolve the management device of a leaf or spine: its own `mgmt`, or a chassis.
    #[allow(clippy::too_many_arguments)]
    fn attach(
        &mut self,
        devices: &mut Vec<Device>,
        chassis_dev: &[DeviceId],
        chassis_ports: &mut HashMap<usize, std::collections::HashSet<Name>>,
        name: &str,
        line: Option<usize>,
        mgmt: &Option<FileMgmt>,
        chassis: &Option<String>,
        member: Member,
        creds: &BTreeMap<String, Credential>,
        ports_a: &[Name],
        ports_b: &[Name],
        raw: &FileTopology,
    ) -> DeviceId {
        let role = if matches!(member, Member::Leaf(_)) {
            Role::Leaf
        } else {
            Role::Spine
        };
        match (mgmt, chassis) {
            (Some(m), None) => {
                let mgmt = self.mgmt(name, line, m, role, creds);
                devices.push(Device {
                    name: name.to_string(),
                    role,
                    mgmt,
                    members: vec![member],
                });
                DeviceId(devices.len() as u32 - 1)
            }
            (None, Some(c)) => match self.names.get(c) {
                Some(&(Named::Chassis(ci), _)) => {
                    let dev = chassis_dev[ci];
                    devices[dev.index()].members.push(member);
                    // Logical switches on one chassis share its port namespace.
                    let taken = chassis_ports.entry(ci).or_default();
                    for p in ports_a.iter().chain(ports_b) {
                        if !taken.insert(p.clone()) {
                            self.problem(
                                Problem::new(format!(
                                    "port used twice on chassis `{}` (by two logical switches)",
                                    raw.chassis[ci].name
                                ))
                                .device(name)
                                .port(p)
                                .at(line),
                            );
                        }
                    }
                    dev
                }
                _ => {
                    self.problem(
                        Problem::new(format!("chassis `{c}` is not declared under `chassis`"))
                            .device(name)
                            .at(line),
                    );
                    DeviceId(u32::MAX)
                }
            },
            (Some(_), Some(_)) => {
                self.problem(
                    Problem::new("give either `mgmt` or `chassis`, not both")
                        .device(name)
                        .at(line),
                );
                DeviceId(u32::MAX)
            }
            (None, None) => {
                self.problem(
                    Problem::new("no management endpoint: add `mgmt` or `chassis`")
                        .device(name)
                        .at(line),
                );
                DeviceId(u32::MAX)
            }
        }
    }

    /// Resolve `device:port`; `nth` says which occurrence of that text this
    /// is, so a problem can name its line.
    fn endpoint(&mut self, ep: &str, nth: usize, maps: &PortMaps) -> Option<PortRef> {
        let Some((dev, port)) = ep.split_once(':') else {
            self.problem_at(
                Problem::new(format!("link end {ep:?} must be `device:port`")),
                |loc| loc.token(ep, nth),
            );
            return None;
        };
        let found: Result<(), &str> = match self.names.get(dev).map(|n| n.0) {
            Some(Named::Leaf(l)) => match maps.leaf[l.index()].get(port) {
                Some(&i) => return Some(PortRef::Leaf(l, i)),
                None if maps.server[l.index()].contains(port) => {
                    Err("a server-facing port cannot be cabled to the fabric")
                }
                None => Err("link to a missing port: the device has no such port"),
            },
            Some(Named::Spine(s)) => match maps.spine[s.index()].get(port) {
                Some(&i) => return Some(PortRef::Spine(s, i)),
                None => Err("link to a missing port: the device has no such port"),
            },
            Some(Named::Ocs(o)) => match maps.ocs[o.index()].get(port) {
                Some(&i) => return Some(PortRef::Ocs(o, i)),
                None => Err("link to a missing port: the device has no such port"),
            },
            Some(Named::Server | Named::Chassis(_)) => Err(
                "links join leaves, spines and OCS; servers attach through `servers:` \
                 and chassis through their logical switches",
            ),
            None => Err("link names an unknown device"),
        };
        if let Err(message) = found {
            self.problem_at(Problem::new(message).device(dev).port(port), |loc| {
                loc.token(ep, nth)
            });
        }
        None
    }
}

/// Port name -> index per device, so link ends resolve in O(1).
struct PortMaps {
    leaf: Vec<HashMap<Name, u16>>,
    server: Vec<std::collections::HashSet<Name>>,
    spine: Vec<HashMap<Name, u16>>,
    ocs: Vec<HashMap<Name, u16>>,
}

impl PortMaps {
    fn new(leaves: &[Leaf], spines: &[Spine], ocs: &[Ocs]) -> Self {
        fn index(ports: &[Name]) -> HashMap<Name, u16> {
            ports
                .iter()
                .enumerate()
                .map(|(i, p)| (p.clone(), i as u16))
                .collect()
        }
        PortMaps {
            leaf: leaves.iter().map(|l| index(&l.uplinks)).collect(),
            server: leaves
                .iter()
                .map(|l| l.server_ports.iter().cloned().collect())
                .collect(),
            spine: spines.iter().map(|s| index(&s.ports)).collect(),
            ocs: ocs.iter().map(|o| index(&o.ports)).collect(),
        }
    }
}

/// Port name -> index of every leaf's server-facing ports, and its
/// uplinks (for the hint), so each server port resolves in O(1).
struct LeafPortIndex {
    server: Vec<HashMap<Name, usize>>,
    uplinks: Vec<std::collections::HashSet<Name>>,
}

impl LeafPortIndex {
    /// Index the server-facing ports and uplinks of `leaves`.
    fn new(leaves: &[Leaf]) -> Self {
        let server = leaves
            .iter()
            .map(|l| {
                l.server_ports
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.clone(), i))
                    .collect()
            })
            .collect();
        let uplinks = leaves
            .iter()
            .map(|l| l.uplinks.iter().cloned().collect())
            .collect();
        LeafPortIndex { server, uplinks }
    }
}

fn same_switch(a: PortRef, b: PortRef) -> bool {
    match (a, b) {
        (PortRef::Leaf(x, _), PortRef::Leaf(y, _)) => x == y,
        (PortRef::Spine(x, _), PortRef::Spine(y, _)) => x == y,
        _ => false,
    }
}

type GraphAndIndex = (
    UnGraph<Node, Edge>,
    HashMap<Node, petgraph::graph::NodeIndex>,
);

fn build_graph(
    leaves: &[Leaf],
    spines: &[Spine],
    ocs: &[Ocs],
    servers: &[Server],
    links: &[Link],
) -> GraphAndIndex {
    let mut g = UnGraph::with_capacity(0, 0);
    let mut idx = HashMap::new();
    let nodes = (0..servers.len())
        .map(|i| Node::Server(ServerId(i as u32)))
        .chain((0..leaves.len()).map(|i| Node::Leaf(LeafId(i as u32))))
        .chain((0..spines.len()).map(|i| Node::Spine(SpineId(i as u32))))
        .chain((0..ocs.len()).map(|i| Node::Ocs(OcsId(i as u32))));
    for n in nodes {
        idx.insert(n, g.add_node(n));
    }
    let node_of = |p: PortRef| match p {
        PortRef::Leaf(l, _) => Node::Leaf(l),
        PortRef::Spine(s, _) => Node::Spine(s),
        PortRef::Ocs(o, _) => Node::Ocs(o),
    };
    for (si, s) in servers.iter().enumerate() {
        let sid = ServerId(si as u32);
        for gpu in 0..s.ports.len() {
            g.add_edge(
                idx[&Node::Server(sid)],
                idx[&Node::Leaf(s.leaf)],
                Edge::Nic {
                    server: sid,
                    gpu: gpu as u16,
                },
            );
        }
    }
    for l in links {
        g.add_edge(idx[&node_of(l.a)], idx[&node_of(l.b)], Edge::Fabric(*l));
    }
    (g, idx)
}

#[cfg(test)]
mod tests {
    use super::super::locate::SEARCHES;
    use super::*;

    const TESTBED: &str = include_str!("../../../topologies/testbed.yaml");

    /// Build `text`, counting the searches of the file it makes.
    fn build_counting(text: &str) -> (Result<Topology, TopologyError>, usize) {
        SEARCHES.with(|c| c.set(0));
        let r = build("t.yaml", text.as_bytes());
        (r, SEARCHES.with(|c| c.get()))
    }

    #[test]
    fn a_valid_file_needs_no_search_however_many_credentials() {
        let creds: String = (0..2000)
            .map(|i| format!("  c{i}: {{username: u, password_env: V}}\n"))
            .collect();
        let text = TESTBED.replacen(
            "  lab: {username: admin, password_env: VCLOS_PASSWORD}\n",
            &format!("  lab: {{username: admin, password_env: VCLOS_PASSWORD}}\n{creds}"),
            1,
        );
        let (r, searches) = build_counting(&text);
        assert_eq!(r.expect("valid").credentials.len(), 2001);
        assert_eq!(searches, 0);
    }

    #[test]
    fn a_credential_written_as_a_value_is_never_quoted() {
        let lab = "  lab: {username: admin, password_env: VCLOS_PASSWORD}\n";
        for (bad, named) in [
            ("  lab: hunter2SECRET\n", "must be a mapping"),
            ("  lab: [hunter2SECRET]\n", "must be a mapping"),
            (
                "  lab: {username: admin, password_env: [hunter2SECRET]}\n",
                "must be a mapping",
            ),
            (
                "  lab: {username: admin, pass: hunter2SECRET}\n",
                "unknown field `pass`",
            ),
        ] {
            let e = build("t.yaml", TESTBED.replacen(lab, bad, 1).as_bytes()).unwrap_err();
            let e = e.to_string();
            assert!(!e.contains("hunter2"), "{e}");
            assert!(e.contains("credentials.lab: ") && e.contains(named), "{e}");
        }
    }

    #[test]
    fn a_name_declared_twice_is_reported_at_its_second_entry() {
        let text = TESTBED.replacen("  - name: leaf2\n", "  - name: leaf1\n", 1);
        let e = build("t.yaml", text.as_bytes()).unwrap_err().to_string();
        let second = 1 + TESTBED
            .lines()
            .position(|l| l == "  - name: leaf2")
            .unwrap();
        let first = 1 + TESTBED
            .lines()
            .position(|l| l == "  - name: leaf1")
            .unwrap();
        let said = format!(
            "t.yaml:{second}: device `leaf1`: name declared twice (first declared at line {first})"
        );
        assert!(e.contains(&said), "{e}");
    }

    #[test]
    fn names_in_problems_cannot_forge_lines_or_drive_a_terminal() {
        let forged =
            r#"  - {name: srv1, leaf: "leaf1\e[2J\nx.yaml:1: all good", ports: "100GE1/0/[1-4]"}"#;
        let text = TESTBED.replacen(
            r#"  - {name: srv1, leaf: leaf1, ports: "100GE1/0/[1-4]"}"#,
            forged,
            1,
        );
        let e = build("t.yaml", text.as_bytes()).unwrap_err().to_string();
        assert!(!e.contains('\u{1b}'), "{e}");
        assert!(e.contains(r"leaf1\u{1b}[2J\nx.yaml:1: all good"), "{e}");
        assert!(!e.lines().any(|l| l.starts_with("x.yaml")), "{e}");
    }

    #[test]
    fn line_searches_stop_at_the_problems_kept() {
        for n in [1_000, 20_000] {
            let mut text = TESTBED.to_string();
            // Each line: an unknown device, and a port cabled a second time.
            for i in 0..n {
                text.push_str(&format!("  - [nodev{i}:p1, leaf1:100GE1/0/17]\n"));
            }
            let (r, searches) = build_counting(&text);
            let Err(TopologyError::Invalid { problems, more, .. }) = r else {
                panic!("{r:?}");
            };
            assert_eq!(problems.len() + more, 2 * n);
            assert_eq!(problems.len(), MAX_PROBLEMS);
            // One search per kept problem, two for a port cabled twice.
            assert!(
                searches <= 2 * MAX_PROBLEMS,
                "{n} links: {searches} searches"
            );
        }
    }
}
