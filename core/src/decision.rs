//! The decision: the seam between the scheduler and the controller.
//!
//! A decision says, for one job, which GPUs it gets and which slice of the
//! fabric (its virtual Clos) carries its traffic: the leaves and their
//! server-facing ports, the spines used as virtual spines, the physical
//! leaf-spine links reserved (through an OCS where there is one), the OCS
//! cross-connects to make, and the source-routing map of every leaf
//! (server-facing port -> uplink, one-to-one; paper Section 5.2).
//!
//! Decisions are written by the placement engine and may also be written by
//! hand ("connect these"), so they use device and port *names* and are
//! serialisable as YAML or JSON. Everything in one is checked against the
//! topology and the current fabric state before it is used.
//!
//! The format is closed: every struct here refuses unknown fields
//! (`#[serde(deny_unknown_fields)]`, serde's container attribute:
//! <https://serde.rs/container-attrs.html#deny_unknown_fields>), so a
//! misspelt key (`vclso:`, `source_route:`) is an error naming the key, in
//! a hand-written YAML/JSON decision, in `state.json` and in
//! `journal.json` alike, never a section silently left empty. `vclos` and
//! `source_routes` may be omitted (they default to empty) because jobs in
//! one server or under one leaf have none; whether a decision's shape
//! needs them is checked on admission (`crate::state`, rules in
//! docs/decisions.md).
//!
//! OCS semantics: a cross-connect `a~b` replaces whatever patches ports `a`
//! and `b` had (those partners go dark); only idle ports may be rewired. When
//! the job is released its cross-connects are removed and the topology's
//! initial patches are restored where their ports are free again.

use serde::{Deserialize, Serialize};

use crate::names::JobId;
use crate::topology::Name;

mod read;
pub use read::{
    from_bytes, from_text, read_file, DecisionError, DECISION_LIMITS, MAX_DECISION_BYTES,
};

/// Which stage of the algorithm produced a decision (paper Sections 6-7).
///
/// The stage must agree with where the GPUs are (checked on admission,
/// `crate::state`): `server` is one server, `leaf` several servers under
/// one leaf, and the network stages need GPUs under two leaves or more and
/// a complete virtual Clos. `manual` is checked for completeness only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Stage 0: inside one server; no network configuration at all.
    Server,
    /// Stage 1: whole servers under one leaf; traffic never leaves the leaf.
    Leaf,
    /// vClos Stage 2: l virtual leaves x s virtual spines over unused links
    /// (never rewires an OCS: no cross-connects).
    Vclos,
    /// OCS-vClos Stage 2: one spine, reached by rewiring idle OCS ports.
    OcsSpine,
    /// OCS-vClos two-leaf case: two leaves joined through the OCS, no spine.
    OcsTwoLeaf,
    /// OCS-vClos Stage 3: several spines with rewiring (Appendix A.3).
    OcsVclos,
    /// Baselines and hand-written decisions: any placement, but a job under
    /// two leaves or more still needs a complete virtual Clos (except in
    /// the baselines' own ideal-network model), and a job under one leaf
    /// may carry one only if it is complete.
    Manual,
}

impl Stage {
    /// The stage as written in a decision file (`server`, `ocs-two-leaf`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Server => "server",
            Stage::Leaf => "leaf",
            Stage::Vclos => "vclos",
            Stage::OcsSpine => "ocs-spine",
            Stage::OcsTwoLeaf => "ocs-two-leaf",
            Stage::OcsVclos => "ocs-vclos",
            Stage::Manual => "manual",
        }
    }
}

/// One GPU: a server and the GPU's index in it (0-based).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRef {
    pub server: Name,
    pub gpu: u16,
}

/// A leaf taking part in the job, with the server-facing ports it uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VirtualLeaf {
    pub leaf: Name,
    pub server_ports: Vec<Name>,
}

/// An OCS hop of a reserved link: the leaf-side and far-side OCS ports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcsHop {
    pub ocs: Name,
    /// OCS port cabled to the leaf uplink.
    pub leaf_side: Name,
    /// OCS port cabled to the far end (a spine port, or another leaf's uplink).
    pub far_side: Name,
}

/// A physical connection reserved for the job, from a leaf uplink to a spine
/// port (or, in the OCS two-leaf case, to another leaf's uplink).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservedLink {
    pub leaf: Name,
    pub uplink: Name,
    /// Far end device: a spine, or a leaf in the OCS two-leaf case.
    pub peer: Name,
    pub peer_port: Name,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<OcsHop>,
}

impl ReservedLink {
    /// Every `(device, port)` the link holds: the leaf uplink, the far
    /// end, and the OCS ports of its hop, if any.
    pub fn ends(&self) -> impl Iterator<Item = (&Name, &Name)> {
        let hop = self
            .via
            .iter()
            .flat_map(|h| [(&h.ocs, &h.leaf_side), (&h.ocs, &h.far_side)]);
        [(&self.leaf, &self.uplink), (&self.peer, &self.peer_port)]
            .into_iter()
            .chain(hop)
    }
}

/// An OCS cross-connect to make for the job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossConnect {
    pub ocs: Name,
    pub a: Name,
    pub b: Name,
}

/// The leaf source-routing entry: traffic entering `server_port` leaves the
/// leaf by `uplink` (when it is not for a server on the same leaf).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRoute {
    pub leaf: Name,
    pub server_port: Name,
    pub uplink: Name,
}

/// The job's slice of the fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VirtualClos {
    pub leaves: Vec<VirtualLeaf>,
    /// Spines used as virtual spines (one VRF per job on each).
    pub spines: Vec<Name>,
    pub links: Vec<ReservedLink>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_connects: Vec<CrossConnect>,
}

/// Everything decided for one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub job: JobId,
    pub stage: Stage,
    pub gpus: Vec<GpuRef>,
    #[serde(default)]
    pub vclos: VirtualClos,
    #[serde(default)]
    pub source_routes: Vec<SourceRoute>,
    /// GPUs the job asked for, when the engine made the decision: `gpus`
    /// lists every GPU it holds, which is more when the job does not fill
    /// its last server (the paper's `ReqSevNum`, whole servers) or was
    /// placed in a larger slice shape (issue 13: a size with no shape of
    /// its own, or `--round-up`). Absent in hand-written decisions and in
    /// state saved before it existed: then every held GPU was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_gpus: Option<u32>,
    /// Present when the job was placed in a sharing mode (issue 16,
    /// `--sharing cassini`): it agreed to share links with compatible jobs
    /// and to start its iterations at the phase the scheduler is told.
    /// Absent in every isolated decision, so they read as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<Box<Sharing>>,
}

/// A job's part in link sharing (Cassini, seed 001 Chapter 4; the rules
/// are in `crate::placement::shared`'s module doc and docs/cassini.md).
///
/// The job starts each training iteration when the fabric's clock (Unix
/// time in ms) modulo `iteration_ms` equals `time_shift_ms` (Eq. 4.5: a
/// time shift is a rotation within one iteration). Jobs placed in a
/// sharing mode all carry this, shared or not, so a later job can be
/// scored against their phase; a running job's shift never changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sharing {
    /// The phase at which the job's iterations start, ms, `< iteration_ms`.
    pub time_shift_ms: u32,
    /// The compatibility score (Eq. 4.2) of its worst shared link at this
    /// shift; 1 for a job that shares nothing.
    pub score: f64,
    /// Its periodic demand over one iteration (Section 4.1, Fig. 4.3):
    /// what later jobs are scored against. The iteration lasts the sum.
    pub profile: Vec<SharingPhase>,
    /// The reserved links (of `vclos.links`) it shares with jobs that held
    /// them when it was admitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<SharedLink>,
    /// `titan` (which reserves no links): the directed fabric links its
    /// routes time-share with jobs routed over them before it
    /// (`crate::placement::titan`, "Time-shared links"); the replay's
    /// router lends these and no others to its flows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_shared: Vec<TimeSharedLink>,
}

/// A directed leaf-spine link a `titan` job time-shares, by its leaf end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeSharedLink {
    pub leaf: Name,
    pub uplink: Name,
    /// Out of the leaf (`true`) or into it.
    pub up: bool,
}

// `score` and the demands are finite (checked on admission), so equality
// is reflexive.
impl Eq for Sharing {}

/// One phase of a sharing job's iteration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharingPhase {
    pub ms: u32,
    /// Share of the line rate, `[0, 1]`.
    pub demand: f64,
}

/// A reserved link shared with the jobs `with` (by its leaf end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedLink {
    pub leaf: Name,
    pub uplink: Name,
    /// The jobs holding the link when this one was admitted.
    pub with: Vec<JobId>,
    /// The 802.1Q VLAN of this job's sub-interfaces on the link (both
    /// ends), one of [`SHARED_VLANS`](crate::intent::addressing::SHARED_VLANS),
    /// unique among the link's holders; the job that held the link first
    /// keeps the untagged main interface (docs/cassini.md, section 2).
    pub vlan: u16,
}

impl Sharing {
    /// The iteration time its profile adds up to, ms.
    pub fn iteration_ms(&self) -> u64 {
        self.profile.iter().map(|p| u64::from(p.ms)).sum()
    }

    /// Whether the decision lists `(leaf, uplink)` as shared.
    pub fn shares(&self, leaf: &str, uplink: &str) -> bool {
        self.links
            .iter()
            .any(|l| &*l.leaf == leaf && &*l.uplink == uplink)
    }
}

impl Decision {
    /// GPUs held but not asked for (0 when `requested_gpus` is absent).
    pub fn reserved_idle_gpus(&self) -> u32 {
        self.requested_gpus
            .map_or(0, |r| (self.gpus.len() as u32).saturating_sub(r))
    }

    /// Whether the decision needs any device configuration at all.
    pub fn touches_network(&self) -> bool {
        !self.vclos.links.is_empty() || !self.vclos.cross_connects.is_empty()
    }
}

#[cfg(any(test, feature = "test-fixtures"))]
impl Decision {
    /// A stored decision for unit tests: `job` on GPU 0 of `srv1-1`.
    #[allow(clippy::unwrap_used)]
    pub fn one_gpu(job: &str) -> Decision {
        Decision {
            requested_gpus: None,
            sharing: None,
            job: JobId::new(job).unwrap(),
            stage: Stage::Server,
            gpus: vec![GpuRef {
                server: "srv1-1".into(),
                gpu: 0,
            }],
            vclos: Default::default(),
            source_routes: vec![],
        }
    }
}
