//! Uniform Leaf-Spine topologies, optionally through a layer of OCS devices.
//!
//! The output is YAML text in the documented file format (flow style for
//! links and patches so a 2048-GPU fabric stays reviewable), and it always
//! loads back through the validating loader: the tests check that.

use std::fmt::Write as _;

use thiserror::Error;

/// Generator parameters (the `vclos topology generate` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub name: String,
    pub leaves: u32,
    pub spines: u32,
    pub gpus_per_server: u32,
    /// Servers per leaf; default: `spines / gpus_per_server` (the paper's shape).
    pub servers_per_leaf: Option<u32>,
    /// Number of OCS devices between leaves and spines (0: direct cables).
    pub ocs: u32,
    pub allow_oversubscription: bool,
}

impl Params {
    /// The paper's shape: servers per leaf from the spine count, no
    /// oversubscription.
    pub fn uniform(name: &str, leaves: u32, spines: u32, gpus_per_server: u32, ocs: u32) -> Self {
        Params {
            name: name.into(),
            leaves,
            spines,
            gpus_per_server,
            servers_per_leaf: None,
            ocs,
            allow_oversubscription: false,
        }
    }
}

/// A loaded uniform fabric, for the library's unit tests.
#[cfg(any(test, feature = "test-fixtures"))]
pub fn uniform_topology(
    leaves: u32,
    spines: u32,
    gpus_per_server: u32,
    ocs: u32,
) -> std::sync::Arc<super::Topology> {
    loaded(&Params::uniform("g", leaves, spines, gpus_per_server, ocs))
}

/// A loaded fabric of `leaves` leaves with `servers` servers of `t` GPUs
/// each and `spines` spines (oversubscribed when fewer spines than GPUs
/// per leaf), for unit tests.
#[cfg(any(test, feature = "test-fixtures"))]
pub fn leaf_spine_topology(
    leaves: u32,
    servers: u32,
    t: u32,
    spines: u32,
) -> std::sync::Arc<super::Topology> {
    loaded(&Params {
        name: "leaf-spine".into(),
        leaves,
        spines,
        gpus_per_server: t,
        servers_per_leaf: Some(servers),
        ocs: 0,
        allow_oversubscription: spines < servers * t,
    })
}

/// A loaded fabric with fewer uplinks than server ports, for unit tests:
/// 3 leaves x 2 servers x 4 GPUs, 4 spines. A virtual leaf then has at most
/// 4 uplinks (one server) and a slice at most 3 leaves, so 4, 5 and 6
/// servers have no vClos slice at all.
#[cfg(any(test, feature = "test-fixtures"))]
pub fn narrow_topology() -> std::sync::Arc<super::Topology> {
    loaded(&Params {
        name: "narrow".into(),
        leaves: 3,
        spines: 4,
        gpus_per_server: 4,
        servers_per_leaf: Some(2),
        ocs: 0,
        allow_oversubscription: true,
    })
}

/// A loaded pod fabric of `pods` pods (16 uplinks and 16 GPUs each, 8 per
/// 128-port OCS), for the library's unit tests.
#[cfg(any(test, feature = "test-fixtures"))]
pub fn pod_topology(pods: u32) -> super::Topology {
    #[allow(clippy::unwrap_used)]
    let text = generate_pods(&PodParams {
        name: "pods".into(),
        pods,
        pod_uplinks: 16,
        ocs_ports: 128,
        gpus_per_server: 8,
        servers_per_pod: None,
        allow_oversubscription: false,
    })
    .unwrap();
    #[allow(clippy::unwrap_used)]
    super::from_str("pods.yaml", &text).unwrap()
}

/// A loaded fabric from `params`, for the library's unit tests.
#[cfg(any(test, feature = "test-fixtures"))]
pub fn loaded(params: &Params) -> std::sync::Arc<super::Topology> {
    #[allow(clippy::unwrap_used)]
    let text = generate(params).unwrap();
    #[allow(clippy::unwrap_used)]
    std::sync::Arc::new(super::from_str("g.yaml", &text).unwrap())
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum GenerateError {
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("{what} = {value} is more than the supported {max}")]
    TooLarge {
        what: &'static str,
        value: u64,
        max: u64,
    },
    #[error(
        "each leaf has one uplink per spine ({spines}), so by default {spines} server-facing ports; \
         {gpus} GPUs per server does not divide {spines}: pass --servers-per-leaf"
    )]
    Indivisible { spines: u32, gpus: u32 },
    #[error(
        "{servers} servers x {gpus} GPUs = {ports} server-facing ports per leaf but {spines} uplinks: \
         not full bisection (pass --allow-oversubscription to generate it anyway)"
    )]
    NotBisection {
        servers: u32,
        gpus: u32,
        ports: u32,
        spines: u32,
    },
    #[error("{ocs} OCS devices cannot spread leaf uplinks and spine downlinks evenly: it must divide both leaves ({leaves}) and spines ({spines})")]
    OcsUneven { ocs: u32, leaves: u32, spines: u32 },
    #[error("{pods} pods of {uplinks} uplinks cannot fill OCS devices of {ocs_ports} ports with whole pods: --pod-uplinks must divide --ocs-ports and the pods per OCS must divide --leaves")]
    PodsUneven {
        pods: u32,
        uplinks: u32,
        ocs_ports: u32,
    },
    #[error("invalid topology name: {0}")]
    Name(String),
}

const MAX_SWITCHES: u32 = 1024;
const MAX_PORTS: u64 = 4096;

impl Params {
    fn check(&self) -> Result<u32, GenerateError> {
        crate::names::validate(crate::names::NameKind::Topology, &self.name)
            .map_err(|e| GenerateError::Name(e.to_string()))?;
        for (what, v) in [
            ("--leaves", self.leaves),
            ("--spines", self.spines),
            ("--gpus-per-server", self.gpus_per_server),
        ] {
            if v == 0 {
                return Err(GenerateError::Zero(what));
            }
        }
        for (what, v, max) in [
            ("--leaves", self.leaves, MAX_SWITCHES),
            ("--spines", self.spines, MAX_SWITCHES),
            ("--gpus-per-server", self.gpus_per_server, 64),
        ] {
            if v > max {
                return Err(GenerateError::TooLarge {
                    what,
                    value: v.into(),
                    max: max.into(),
                });
            }
        }
        let n = match self.servers_per_leaf {
            Some(0) => return Err(GenerateError::Zero("--servers-per-leaf")),
            Some(n) => n,
            None if !self.spines.is_multiple_of(self.gpus_per_server) => {
                return Err(GenerateError::Indivisible {
                    spines: self.spines,
                    gpus: self.gpus_per_server,
                })
            }
            None => self.spines / self.gpus_per_server,
        };
        let ports = u64::from(n) * u64::from(self.gpus_per_server);
        if ports + u64::from(self.spines) > MAX_PORTS {
            return Err(GenerateError::TooLarge {
                what: "ports per leaf",
                value: ports + u64::from(self.spines),
                max: MAX_PORTS,
            });
        }
        if ports != u64::from(self.spines) && !self.allow_oversubscription {
            return Err(GenerateError::NotBisection {
                servers: n,
                gpus: self.gpus_per_server,
                ports: ports as u32,
                spines: self.spines,
            });
        }
        if self.ocs > 0
            && (!self.leaves.is_multiple_of(self.ocs) || !self.spines.is_multiple_of(self.ocs))
        {
            return Err(GenerateError::OcsUneven {
                ocs: self.ocs,
                leaves: self.leaves,
                spines: self.spines,
            });
        }
        Ok(n)
    }
}

const SWITCH_MGMT: &str =
    "{host: 127.0.0.1, protocol: ssh-cli, dialect: huawei-ce, credential: lab}";

/// The file's settings and its one credential.
fn preamble(w: &mut String, name: &str, t: u32, oversubscribed: bool) {
    let _ = writeln!(w, "name: {name}");
    let _ = writeln!(w, "gpus_per_server: {t}");
    if oversubscribed {
        let _ = writeln!(w, "allow_oversubscription: true");
    }
    let _ = writeln!(
        w,
        "credentials:\n  lab: {{username: admin, password_env: VCLOS_PASSWORD}}"
    );
}

/// `n` servers of `t` GPUs on each of the leaves `{leaf}1..{leaf}l`.
fn servers(w: &mut String, leaf: &str, l: u32, n: u32, t: u32) {
    let _ = writeln!(w, "servers:");
    for i in 1..=l {
        for m in 0..n {
            let first = m * t + 1;
            let _ = writeln!(
                w,
                "  - {{name: srv{i}-{}, leaf: {leaf}{i}, ports: \"100GE1/0/[{first}-{}]\"}}",
                m + 1,
                first + t - 1
            );
        }
    }
}

/// Render the topology described by `p` as YAML.
pub fn generate(p: &Params) -> Result<String, GenerateError> {
    let n = p.check()?;
    let (l, s, t, k) = (p.leaves, p.spines, p.gpus_per_server, p.ocs);
    let server_ports = n * t;
    let mut y = String::new();
    let w = &mut y;
    let _ = writeln!(w, "# Generated by `vclos topology generate --leaves {l} --spines {s} --gpus-per-server {t} --servers-per-leaf {n} --ocs {k}`.");
    let _ = writeln!(
        w,
        "# Uniform Leaf-Spine: one link per leaf-spine pair{}.",
        if k > 0 {
            format!(", each through one of {k} OCS devices")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        w,
        "# Management endpoints are loopback placeholders: point them at real devices,"
    );
    let _ = writeln!(
        w,
        "# or let `vclos emu serve --write-topology` point them at the emulator."
    );
    preamble(w, &p.name, t, p.allow_oversubscription);
    leaves(w, "leaf", l, server_ports, s);
    let _ = writeln!(w, "spines:");
    for j in 1..=s {
        let _ = writeln!(
            w,
            "  - {{name: spine{j}, mgmt: {SWITCH_MGMT}, ports: \"100GE1/0/[1-{l}]\"}}"
        );
    }
    // Link (leaf i, spine j) goes through OCS (i + j) mod k, so every leaf
    // and every spine reaches every OCS with the same number of ports.
    let per_ocs = (l * s).checked_div(k).unwrap_or(0);
    let mut next = vec![0u32; k as usize];
    let mut links = Vec::new();
    let mut patches = vec![Vec::new(); k as usize];
    for i in 0..l {
        for j in 0..s {
            let leaf_end = format!("leaf{}:100GE1/0/{}", i + 1, server_ports + j + 1);
            let spine_end = format!("spine{}:100GE1/0/{}", j + 1, i + 1);
            if k == 0 {
                links.push((leaf_end, spine_end));
            } else {
                let o = ((i + j) % k) as usize;
                next[o] += 1;
                let (down, up) = (next[o], per_ocs + next[o]);
                links.push((leaf_end, format!("ocs{}:{down}", o + 1)));
                links.push((format!("ocs{}:{up}", o + 1), spine_end));
                patches[o].push((down, up));
            }
        }
    }
    if k > 0 {
        let _ = writeln!(w, "ocs:");
        for (o, pp) in patches.iter().enumerate() {
            let _ = writeln!(w, "  - name: ocs{}", o + 1);
            let _ = writeln!(w, "    mgmt: {{host: 127.0.0.1, protocol: telnet-tl1, dialect: tl1, credential: lab}}");
            let _ = writeln!(
                w,
                "    # ports 1-{per_ocs} face the leaves, {}-{} the spines",
                per_ocs + 1,
                2 * per_ocs
            );
            let _ = writeln!(w, "    ports: \"[1-{}]\"", 2 * per_ocs);
            let _ = writeln!(w, "    patches:");
            for (a, b) in pp {
                let _ = writeln!(w, "      - [\"{a}\", \"{b}\"]");
            }
        }
    }
    servers(w, "leaf", l, n, t);
    let _ = writeln!(w, "links:");
    for (a, b) in &links {
        let _ = writeln!(w, "  - [\"{a}\", \"{b}\"]");
    }
    Ok(y)
}

/// A spine-less pod fabric (issue 19 item 1; seed 003 Section IV-A): `pods`
/// leaves whose uplinks all go to OCS devices of `ocs_ports` ports. Each OCS
/// serves `ocs_ports / pod_uplinks` whole pods (003's pod group: one OXC of
/// 128 ports per group of 8 pods with 16 ports each), so the pod groups are
/// the OCS devices. No OCS cross-connects are patched: the TDM planner
/// (`vclos tdm plan`) decides them per stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodParams {
    pub name: String,
    pub pods: u32,
    pub pod_uplinks: u32,
    pub ocs_ports: u32,
    pub gpus_per_server: u32,
    /// Servers per pod; default: `pod_uplinks / gpus_per_server` (1:1).
    pub servers_per_pod: Option<u32>,
    pub allow_oversubscription: bool,
}

impl PodParams {
    /// Servers per pod and pods per OCS, or why the shape is impossible.
    fn check(&self) -> Result<(u32, u32), GenerateError> {
        crate::names::validate(crate::names::NameKind::Topology, &self.name)
            .map_err(|e| GenerateError::Name(e.to_string()))?;
        for (what, v, max) in [
            ("--leaves", self.pods, MAX_SWITCHES),
            ("--pod-uplinks", self.pod_uplinks, MAX_PORTS as u32),
            ("--ocs-ports", self.ocs_ports, MAX_PORTS as u32),
            ("--gpus-per-server", self.gpus_per_server, 64),
        ] {
            if v == 0 {
                return Err(GenerateError::Zero(what));
            }
            if v > max {
                return Err(GenerateError::TooLarge {
                    what,
                    value: v.into(),
                    max: max.into(),
                });
            }
        }
        let per_ocs = self.ocs_ports / self.pod_uplinks;
        if per_ocs == 0
            || !self.ocs_ports.is_multiple_of(self.pod_uplinks)
            || !self.pods.is_multiple_of(per_ocs)
        {
            return Err(GenerateError::PodsUneven {
                pods: self.pods,
                uplinks: self.pod_uplinks,
                ocs_ports: self.ocs_ports,
            });
        }
        let bisection = Params {
            name: self.name.clone(),
            leaves: self.pods,
            spines: self.pod_uplinks,
            gpus_per_server: self.gpus_per_server,
            servers_per_leaf: self.servers_per_pod,
            ocs: 0,
            allow_oversubscription: self.allow_oversubscription,
        };
        Ok((bisection.check()?, per_ocs))
    }
}

/// The `leaves:` section: `count` switches named `{prefix}1..`, each with
/// `server_ports` server-facing ports then `uplinks` uplinks.
fn leaves(w: &mut String, prefix: &str, count: u32, server_ports: u32, uplinks: u32) {
    let _ = writeln!(w, "leaves:");
    for i in 1..=count {
        let _ = writeln!(
            w,
            "  - {{name: {prefix}{i}, mgmt: {SWITCH_MGMT}, server_ports: \"100GE1/0/[1-{server_ports}]\", uplink_ports: \"100GE1/0/[{}-{}]\"}}",
            server_ports + 1,
            server_ports + uplinks
        );
    }
}

/// Render the spine-less pod fabric described by `p` as YAML.
pub fn generate_pods(p: &PodParams) -> Result<String, GenerateError> {
    let (n, per_ocs) = p.check()?;
    let (l, u, t) = (p.pods, p.pod_uplinks, p.gpus_per_server);
    let server_ports = n * t;
    let k = l / per_ocs;
    let mut y = String::new();
    let w = &mut y;
    let _ = writeln!(w, "# Generated by `vclos topology generate --spines 0 --leaves {l} --pod-uplinks {u} --ocs-ports {} --gpus-per-server {t} --servers-per-leaf {n}`.", p.ocs_ports);
    let _ = writeln!(w, "# Spine-less pod fabric: every pod (leaf) uplink goes to an OCS; {k} OCS of {} ports, {per_ocs} pods each (one pod group per OCS).", p.ocs_ports);
    let _ = writeln!(w, "# Management endpoints are loopback placeholders.");
    preamble(w, &p.name, t, p.allow_oversubscription);
    leaves(w, "pod", l, server_ports, u);
    let _ = writeln!(w, "ocs:");
    for o in 1..=k {
        let _ = writeln!(w, "  - {{name: ocs{o}, mgmt: {{host: 127.0.0.1, protocol: telnet-tl1, dialect: tl1, credential: lab}}, ports: \"[1-{}]\"}}", p.ocs_ports);
    }
    servers(w, "pod", l, n, t);
    let _ = writeln!(w, "links:");
    for i in 0..l {
        let (o, slot) = (i / per_ocs + 1, i % per_ocs);
        for j in 0..u {
            let _ = writeln!(
                w,
                "  - [\"pod{}:100GE1/0/{}\", \"ocs{o}:{}\"]",
                i + 1,
                server_ports + j + 1,
                slot * u + j + 1
            );
        }
    }
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods(l: u32, u: u32, ports: u32) -> PodParams {
        PodParams {
            name: "pods".into(),
            pods: l,
            pod_uplinks: u,
            ocs_ports: ports,
            gpus_per_server: 8,
            servers_per_pod: None,
            allow_oversubscription: false,
        }
    }

    #[test]
    fn pod_fabrics_load_with_one_ocs_per_pod_group() {
        let text = generate_pods(&pods(16, 16, 128)).unwrap();
        let t = crate::topology::from_str("pods.yaml", &text).unwrap();
        assert_eq!((t.leaves.len(), t.spines.len(), t.ocs.len()), (16, 0, 2));
        assert_eq!(t.servers.len(), 32);
        for (i, leaf) in t.leaves.iter().enumerate() {
            assert_eq!(leaf.uplinks.len(), 16);
            for peer in &leaf.uplink_peer {
                let Some(crate::topology::PortRef::Ocs(o, _)) = peer else {
                    panic!("{} uplink not on an OCS", leaf.name);
                };
                assert_eq!(o.index(), i / 8);
            }
        }
        assert!(t
            .ocs
            .iter()
            .all(|o| o.port_peer.iter().all(Option::is_some)));
    }

    #[test]
    fn a_pod_uplink_off_the_ocs_is_named_with_its_line() {
        let text = generate_pods(&pods(8, 16, 128)).unwrap();
        let cut = text.replace("  - [\"pod3:100GE1/0/20\", \"ocs1:36\"]\n", "");
        assert_ne!(cut, text);
        let err = crate::topology::from_str("pods.yaml", &cut)
            .unwrap_err()
            .to_string();
        let line = text
            .lines()
            .position(|l| l.contains("name: pod3,"))
            .unwrap()
            + 1;
        assert!(
            err.contains(&format!("pods.yaml:{line}: device `pod3` port `100GE1/0/20`: uplink not cabled to an OCS port")),
            "{err}"
        );
        // With a spine the same file is a (partly cabled) Leaf-Spine fabric.
        let spine = cut.replace("ocs:\n", "spines:\n  - {name: s1, mgmt: {host: 127.0.0.1, protocol: ssh-cli, dialect: huawei-ce, credential: lab}, ports: \"p1\"}\nocs:\n");
        assert!(crate::topology::from_str("pods.yaml", &spine).is_ok());
    }

    #[test]
    fn impossible_pod_shapes_are_errors() {
        assert!(matches!(
            generate_pods(&pods(12, 16, 128)),
            Err(GenerateError::PodsUneven { .. })
        ));
        assert!(matches!(
            generate_pods(&pods(8, 16, 100)),
            Err(GenerateError::PodsUneven { .. })
        ));
        assert!(matches!(
            generate_pods(&pods(8, 0, 128)),
            Err(GenerateError::Zero("--pod-uplinks"))
        ));
        let mut p = pods(8, 16, 128);
        p.servers_per_pod = Some(1);
        assert!(matches!(
            generate_pods(&p),
            Err(GenerateError::NotBisection { .. })
        ));
    }

    fn params(l: u32, s: u32, t: u32, k: u32) -> Params {
        Params::uniform("t", l, s, t, k)
    }

    #[test]
    fn impossible_combinations_are_errors() {
        assert!(matches!(
            generate(&params(4, 6, 4, 0)),
            Err(GenerateError::Indivisible { .. })
        ));
        assert!(matches!(
            generate(&params(0, 4, 4, 0)),
            Err(GenerateError::Zero("--leaves"))
        ));
        assert!(matches!(
            generate(&params(4, 4, 4, 3)),
            Err(GenerateError::OcsUneven { .. })
        ));
        let mut p = params(4, 8, 4, 0);
        p.servers_per_leaf = Some(3);
        assert!(matches!(
            generate(&p),
            Err(GenerateError::NotBisection { .. })
        ));
        p.allow_oversubscription = true;
        assert!(generate(&p).is_ok());
    }
}
