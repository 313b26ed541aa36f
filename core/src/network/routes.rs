//! Which fabric links each flow of a job crosses, per routing policy.
//!
//! Links are directed: every fabric link has at least one leaf end (leaf to
//! spine, or leaf to leaf through an OCS circuit), so link `g` (the `g`-th
//! uplink of the fabric, leaves in order) is two directed links, `2g` away
//! from that leaf and `2g + 1` into it; traffic on a leaf-to-leaf circuit
//! is counted on the sending leaf's `2g` (the receiving port belongs to the
//! same circuit, which nobody else can use). A flow between GPUs under
//! different leaves crosses one link up and one down (or one leaf-to-leaf
//! link); a flow inside a leaf crosses none: the leaf switches it locally
//! (the source routes match only traffic to the job's other leaves, paper
//! Section 5.2).
//!
//! * [`Routing::Decision`] (`vclos`, `ocs-vclos`, `sr`): up through the
//!   uplink the decision source-routes the GPU's server port to (paper
//!   Section 5.2), to the far end the decision's reserved link names; down
//!   from that spine through the decision's reserved link to the
//!   destination leaf (the spine VRF's static route to the leaf's GPU
//!   prefix, Section 6; where the decision gives the spine several links to
//!   that leaf, the destination GPU's host route,
//!   [`crate::intent::spine_downlink`], the very rule the intent
//!   configures), or, for a spine the decision reserves no link on, the
//!   fabric's own links (the default routing table), among which the flow
//!   hash chooses as the spine's ECMP would.
//! * [`Routing::Ecmp`]: each flow hashed onto one of the source leaf's
//!   uplinks that reach the destination leaf, then onto one of that spine's
//!   links down to it (paper Section 3.1: the switches hash the 5-tuple; the
//!   hash here is SplitMix64 of the seed, the job and the GPU pair, standing
//!   for the 5-tuple with its ephemeral source port, so runs with the same
//!   `--seed` are identical).
//! * [`Routing::Balanced`]: each flow, in the job's flow order, on the
//!   equal-cost path whose busier link carries the least weight at that
//!   moment (paper Section 9.3, "Balanced ECMP"), ties to the lowest uplink.
//!   A run of consecutive flows of one leaf pair and one weight (an
//!   all-to-all job's flows from one server to a leaf's servers: 512 at
//!   4096 GPUs) is routed at once where the pair's paths share no link
//!   (`Router::fill`, with the argument why its choices are the
//!   one-at-a-time ones to the bit), flow by flow otherwise.
//! * [`Routing::Peak`] (`titan`): each flow on the first equal-cost path
//!   (in the order above) on whose links the routed jobs' per-phase peaks
//!   leave room for it in its phase: Hedera's Global First Fit with
//!   Titan's phases ([`super::peak`], whose module doc gives the rule, its
//!   sources and why a run of flows is routed with a pointer).
//! * [`Routing::None`] (`best`): the ideal non-blocking fabric; no link is
//!   ever shared, so flows cross no modelled link.
//!
//! Paths are the fabric as initially cabled and patched
//! ([`Topology::initial_fabric_links`]) except where a decision's reserved
//! links say otherwise (OCS-vClos rewires).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use super::fairshare::Class;
use super::peak::Peaks;
use super::runs::{JobRuns, Run, Tally};
use super::sums::Sums;
use super::traffic::{Block, Share, Traffic};
use crate::decision::{Decision, TimeSharedLink};
use crate::topology::{LeafId, Name, PortRef, ServerId, SpineId, Topology};
use crate::trace::Collective;

/// A directed fabric link.
pub type LinkId = u32;

/// The directed links one flow crosses: one or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Path([LinkId; 2], u8);

impl Path {
    pub fn links(&self) -> &[LinkId] {
        &self.0[..usize::from(self.1)]
    }
}

/// How flows are routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// The decision's source routes and reserved links.
    Decision,
    /// Per-flow hashing, seeded.
    Ecmp { seed: u64 },
    /// Least-loaded equal-cost path at the flow's start.
    Balanced,
    /// First fit by per-phase peaks ([`super::peak`]).
    Peak,
    /// Non-blocking: no shared link.
    None,
}

impl Routing {
    /// How `policy`'s flows are routed (module doc); `seed` seeds ECMP.
    pub fn for_policy(policy: crate::placement::Policy, seed: u64) -> Routing {
        use crate::placement::Policy;
        match policy {
            Policy::Vclos | Policy::OcsVclos | Policy::Sr => Routing::Decision,
            Policy::Best => Routing::None,
            Policy::Ecmp => Routing::Ecmp { seed },
            Policy::BalancedEcmp | Policy::HivedLike | Policy::TiresiasLike => Routing::Balanced,
            Policy::Titan => Routing::Peak,
        }
    }
}

/// Where an uplink leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Far {
    Spine(SpineId),
    Leaf(LeafId, u16),
}

/// The fabric's names and links, indexed once per replay.
#[derive(Debug, Clone)]
pub struct Fabric {
    /// Server name -> (id, leaf, the leaf port of each GPU).
    servers: HashMap<Name, (ServerId, LeafId, Vec<u16>)>,
    leaves: HashMap<Name, LeafId>,
    spines: HashMap<Name, SpineId>,
    uplink: Vec<HashMap<Name, u16>>,
    server_port: Vec<HashMap<Name, u16>>,
    /// Global number of leaf `l`'s first uplink.
    offset: Vec<u32>,
    /// Far end of each uplink (global numbering) as initially patched.
    far: Vec<Option<Far>>,
    /// `(spine, leaf)` -> the leaf's uplinks reaching that spine.
    down: HashMap<(SpineId, LeafId), Vec<u16>>,
    /// Directed links in all.
    links: usize,
}

impl Fabric {
    pub fn new(topo: &Topology) -> Self {
        let mut offset = Vec::with_capacity(topo.leaves.len());
        let mut n = 0u32;
        for l in &topo.leaves {
            offset.push(n);
            n += l.uplinks.len() as u32;
        }
        let mut far = vec![None; n as usize];
        let mut down: HashMap<(SpineId, LeafId), Vec<u16>> = HashMap::new();
        for (here, there) in topo.initial_fabric_links() {
            let PortRef::Leaf(l, u) = here else { continue };
            let g = (offset[l.index()] + u32::from(u)) as usize;
            match there {
                PortRef::Spine(s, _) => {
                    far[g] = Some(Far::Spine(s));
                    down.entry((s, l)).or_default().push(u);
                }
                PortRef::Leaf(l2, u2) => {
                    far[g] = Some(Far::Leaf(l2, u2));
                    let g2 = (offset[l2.index()] + u32::from(u2)) as usize;
                    far[g2] = Some(Far::Leaf(l, u));
                }
                PortRef::Ocs(..) => {}
            }
        }
        let index = |names: &[Name]| -> HashMap<Name, u16> {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i as u16))
                .collect()
        };
        Fabric {
            servers: topo
                .servers
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        s.name.clone(),
                        (ServerId(i as u32), s.leaf, s.ports.clone()),
                    )
                })
                .collect(),
            leaves: topo
                .leaves
                .iter()
                .enumerate()
                .map(|(i, l)| (l.name.clone(), LeafId(i as u32)))
                .collect(),
            spines: topo
                .spines
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), SpineId(i as u32)))
                .collect(),
            uplink: topo.leaves.iter().map(|l| index(&l.uplinks)).collect(),
            server_port: topo.leaves.iter().map(|l| index(&l.server_ports)).collect(),
            offset,
            far,
            down,
            links: 2 * n as usize,
        }
    }

    /// Directed links in the fabric (link ids are below this).
    pub fn links(&self) -> usize {
        self.links
    }

    fn global(&self, l: LeafId, u: u16) -> u32 {
        self.offset[l.index()] + u32::from(u)
    }

    /// The directed link out of leaf `l` through its uplink `u`.
    fn out_of(&self, l: LeafId, u: u16) -> LinkId {
        2 * self.global(l, u)
    }

    /// The directed link into leaf `l` through its uplink `u`.
    fn into(&self, l: LeafId, u: u16) -> LinkId {
        2 * self.global(l, u) + 1
    }

    /// Link `k`'s leaf end: (leaf, uplink, out of the leaf).
    fn end(&self, k: LinkId) -> (LeafId, u16, bool) {
        let g = k / 2;
        let l = self.offset.partition_point(|&o| o <= g) - 1;
        (
            LeafId(l as u32),
            (g - self.offset[l]) as u16,
            k.is_multiple_of(2),
        )
    }
}

/// Why a decision could not be routed: a name it uses that the topology
/// does not have (decisions are validated before they are held, so this is
/// a hand-made decision or a placer bug).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job `{job}`: {what} `{name}` is not in the topology")]
pub struct Unknown {
    pub job: String,
    pub what: &'static str,
    pub name: String,
}

/// A decision's own routing, resolved to indices.
#[derive(Debug, Default)]
struct Own {
    /// (leaf, server port) -> uplink.
    route: HashMap<(LeafId, u16), u16>,
    /// (leaf, uplink) -> far end, for the decision's reserved links.
    far: HashMap<(LeafId, u16), Far>,
    /// (spine, leaf) -> the leaf's reserved uplinks on that spine.
    down: HashMap<(SpineId, LeafId), Vec<u16>>,
}

/// Routes jobs' flows and keeps the weight every directed link carries.
#[derive(Debug, Clone)]
pub struct Router {
    fabric: Fabric,
    routing: Routing,
    load: Vec<f64>,
    /// [`Routing::Balanced`] and [`Routing::Peak`]: every equal-cost path
    /// from leaf `a` to leaf `b` at `a * leaves + b`, in the order the
    /// least-loaded choice and the first fit scan them (uplinks in order,
    /// then each spine's links down), built once: scanning the uplinks and
    /// their spines per flow was most of a balanced replay (an all-to-all
    /// job of 256 GPUs has 63 000 flows).
    paths: Vec<Vec<Path>>,
    /// Scratch of [`Router::route_placed`]: per link, the weight of the
    /// job being routed, and the links it touched.
    sum: Vec<f64>,
    touched: Vec<u32>,
    /// Per leaf pair (as `paths`): whether its paths share no link, so
    /// that choosing one changes no other's load ([`Router::fill`]).
    disjoint: Vec<bool>,
    /// Balanced flows routed in runs ([`Router::route_run`]); `false` only
    /// for the one-at-a-time reference ([`Router::one_flow_at_a_time`]).
    runs: bool,
    /// Scratch of [`Router::balanced`]: the leaf pair of the current run
    /// of flows, and its paths by how loaded they are.
    run: Option<(LeafId, LeafId)>,
    by_load: BinaryHeap<Reverse<(u64, u32)>>,
    /// Scratch of [`Router::fill`]: the pair's paths not yet chosen and
    /// those chosen, each in choice order, and the flows each path takes.
    waiting: Vec<Slot>,
    chosen: VecDeque<Slot>,
    picks: Vec<u32>,
    /// [`Routing::Peak`] only: the routed jobs' peaks, and whether a flow
    /// that fits no path stops the route ([`Router::strict`]).
    peaks: Option<Peaks>,
    strict: bool,
    /// Whether a strict route is refused on [`Router::leaves_have_room`]
    /// before its search (always, but for the test that checks the
    /// refusal is the search's), and how many were.
    precheck: bool,
    prechecked: u64,
    /// Scratch of [`Router::leaves_have_room`].
    tally: Tally,
    /// Repeated adds of a flow weight to `sum` ([`Sums`]).
    sums: Sums,
    /// [`Router::resume_lent_routes`]: whether a lent route goes on from
    /// where the strict route of the same job stopped; that point, and
    /// the run being routed (its index in the route, and the run a strict
    /// route stopped at).
    resumable: bool,
    resume: VecDeque<Resume>,
    /// A strict router's last routed jobs' runs ([`JobRuns`]), at most
    /// [`JOBS`]: a candidate is routed again, lent after strict.
    jobs: VecDeque<JobRuns>,
    run_index: usize,
    stopped_at: Option<usize>,
    /// Per leaf pair (as `paths`), where path `i` is uplink `i` up and
    /// down for every path (one link per spine): its sides for the masked
    /// search ([`Peaks::mask_sides`]) and its paths without reading them.
    aligned: Vec<Option<Aligned>>,
    /// [`Routing::Peak`] in runs, for a job whose weight on a link is its
    /// rate there ([`JobRuns::weight_is_rate`]): its weights per link are
    /// its peaks, taken from them at the end of the route instead of
    /// added up beside them (`sum` stays empty).
    links_are_peaks: bool,
    /// Scratch of [`Router::route_run_peak`]: (path, flows) in choice order.
    peak_picks: Vec<(Path, u32)>,
    /// [`Router::without_spines`]: per leaf, its links up (`[2 l]`) and
    /// down (`[2 l + 1]`) as one-link paths; empty otherwise.
    sides: Vec<Vec<Path>>,
}

/// A leaf pair `a` to `b` whose path `i` is uplink `i` of `a` up and
/// uplink `i` of `b` down (`Router::aligned`).
#[derive(Debug, Clone, Copy)]
pub struct Aligned {
    /// The leaf sides (`2 a` up, `2 b + 1` down).
    sides: [u32; 2],
    /// Path 0's links; path `i`'s are `2 i` further (links are numbered
    /// by uplink within a leaf, two per uplink).
    first: [LinkId; 2],
}

impl Aligned {
    /// Path `i`, as `Router::paths` holds it (computed: the hot loop of
    /// a run need not read the 4096-pair table).
    fn path(&self, i: usize) -> Path {
        let d = 2 * i as LinkId;
        Path([self.first[0] + d, self.first[1] + d], 2)
    }
}

/// The paths a first fit searches ([`super::peak::Peaks::first_fit`]), in
/// order: a leaf pair's or side's from the table, or an [`Aligned`]
/// pair's, computed.
#[derive(Debug, Clone, Copy)]
pub enum Paths<'a> {
    Table(&'a [Path]),
    Aligned(Aligned, usize),
}

impl Paths<'_> {
    pub fn len(&self) -> usize {
        match self {
            Paths::Table(t) => t.len(),
            Paths::Aligned(_, n) => *n,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Path `i` (`i < len`).
    pub fn get(&self, i: usize) -> Path {
        match self {
            Paths::Table(t) => t[i],
            Paths::Aligned(a, _) => a.path(i),
        }
    }
}

/// The paths a [`Routing::Peak`] run is fitted on: a leaf pair's
/// equal-cost paths, or (for [`Router::without_spines`]) one leaf's links
/// up (`2 l`) or down (`2 l + 1`).
#[derive(Debug, Clone, Copy)]
enum Fits {
    Pair(usize),
    Side(usize),
}

/// What `admit` of [`Router::route_gpus`] sees: `n` flows of one share
/// routed on one path.
pub type Admit<'a> = dyn FnMut(&Share, &Path, u32) -> bool + 'a;

/// Where a strict route of a job stopped ([`Router::resume_lent_routes`]):
/// the job, the held peaks' version, the run that fitted no path, and
/// the job's peaks and sums before it.
#[derive(Debug, Clone)]
struct Resume {
    placed: Vec<(ServerId, LeafId, u16)>,
    collective: Collective,
    version: u64,
    run: usize,
    peaks: super::peak::Snapshot,
    sums: Vec<(u32, f64)>,
}

/// Jobs' runs a strict router keeps at most.
const JOBS: usize = 8;

/// Stopped strict routes kept at most (a titan call routes a few
/// candidates strictly, then lends to each in turn).
const RESUMES: usize = 8;

/// A path in [`Router::fill`]: its key, index and busiest link's
/// load (not clamped at 0: the key is [`load_key`] of it).
#[derive(Debug, Clone, Copy)]
struct Slot {
    key: u64,
    path: u32,
    busiest: f64,
}

impl Slot {
    /// The order of choice: least loaded, then lowest index.
    fn rank(&self) -> (u64, u32) {
        (self.key, self.path)
    }
}

/// A path's busiest link load as a heap key: the bits of the load, every
/// load at or below 0 taken as 0 (the least-loaded scan takes the first
/// idle path it meets, whatever float residue it has). For non-negative
/// floats the bit patterns order as the numbers do.
fn load_key(busiest: f64) -> u64 {
    if busiest <= 0.0 {
        0
    } else {
        busiest.to_bits()
    }
}

/// A strict [`Routing::Peak`] route met a flow with no path within line
/// rate.
#[derive(Debug, Clone, Copy)]
struct Over;

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a fixed, well-mixed hash of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Router {
    pub fn new(topo: &Topology, routing: Routing) -> Self {
        let fabric = Fabric::new(topo);
        let load = vec![0.0; fabric.links];
        let mut r = Router {
            sum: vec![0.0; fabric.links],
            touched: Vec::new(),
            disjoint: Vec::new(),
            runs: true,
            run: None,
            by_load: BinaryHeap::new(),
            waiting: Vec::new(),
            chosen: VecDeque::new(),
            picks: Vec::new(),
            peaks: (routing == Routing::Peak).then(|| Peaks::new(fabric.links)),
            strict: false,
            precheck: true,
            prechecked: 0,
            tally: Tally::default(),
            sums: Sums::default(),
            resumable: false,
            resume: VecDeque::new(),
            jobs: VecDeque::new(),
            run_index: 0,
            stopped_at: None,
            aligned: Vec::new(),
            links_are_peaks: false,
            peak_picks: Vec::new(),
            sides: Vec::new(),
            fabric,
            routing,
            load,
            paths: Vec::new(),
        };
        if matches!(routing, Routing::Balanced | Routing::Peak) {
            let n = topo.leaves.len() as u32;
            r.paths = (0..n)
                .flat_map(|a| (0..n).map(move |b| (LeafId(a), LeafId(b))))
                .map(|(a, b)| r.equal_cost(a, b))
                .collect();
            r.aligned = (r.paths.iter().enumerate())
                .map(|(pair, ps)| r.aligned(pair, ps))
                .collect();
            if let Some(p) = &mut r.peaks {
                let at = (0..r.fabric.links as u32).map(|k| {
                    let (l, u, up) = r.fabric.end(k);
                    (2 * l.0 + u32::from(!up), u32::from(u))
                });
                p.mask_sides(at.collect());
            }
            r.disjoint = r
                .paths
                .iter()
                .map(|ps| {
                    let mut links: Vec<LinkId> =
                        ps.iter().flat_map(|p| p.links()).copied().collect();
                    let all = links.len();
                    links.sort_unstable();
                    links.dedup();
                    links.len() == all
                })
                .collect();
        }
        r
    }

    /// A measuring tool, not a router (issue 15): [`Routing::Peak`] with
    /// the spines taken out, so that a flow needs only room on some link up
    /// from its leaf and on some link down into the other, each chosen by
    /// first fit on its own, not on two links meeting at one spine. The
    /// real router's paths use links up and down with room, and within a
    /// phase a job's flows have one rate, so first fit on each side packs
    /// as many of them as any choice of links could: any job the real
    /// router fits, this fits on the same peaks (tested), and a placer
    /// checked by it admits at least what the real check admits on any one
    /// state. It stands for a perfect router ([`crate::placement::titan::TitanPlacer::without_spines`]).
    pub fn without_spines(&mut self) {
        let f = &self.fabric;
        self.sides = (0..f.leaves.len() as u32)
            .flat_map(|l| {
                let n = f.uplink[l as usize].len() as u16;
                let l = LeafId(l);
                [
                    (0..n).map(|u| Path([f.out_of(l, u), 0], 1)).collect(),
                    (0..n).map(|u| Path([f.into(l, u), 0], 1)).collect(),
                ]
            })
            .collect();
    }

    /// [`Aligned`] when path `i` of leaf pair `pair` (`a` to `b`) is
    /// uplink `i` of `a` up and uplink `i` of `b` down, for every path.
    fn aligned(&self, pair: usize, paths: &[Path]) -> Option<Aligned> {
        let n = self.fabric.leaves.len();
        let (a, b) = (LeafId((pair / n) as u32), LeafId((pair % n) as u32));
        let f = &self.fabric;
        let each = paths.iter().enumerate().all(|(i, p)| {
            let u = u16::try_from(i).ok();
            p.links().len() == 2 && u.is_some_and(|u| p.links() == [f.out_of(a, u), f.into(b, u)])
        });
        (each && a != b && !paths.is_empty()).then(|| Aligned {
            sides: [2 * a.0, 2 * b.0 + 1],
            first: [f.out_of(a, 0), f.into(b, 0)],
        })
    }

    /// Every path from leaf `from` to leaf `to` (as cabled and patched).
    fn equal_cost(&self, from: LeafId, to: LeafId) -> Vec<Path> {
        let f = &self.fabric;
        let mut out = Vec::new();
        for (u, far) in self.candidates(from, to) {
            let up = f.out_of(from, u);
            match far {
                Far::Leaf(..) => out.push(Path([up, 0], 1)),
                Far::Spine(s) => {
                    if let Some(ds) = f.down.get(&(s, to)) {
                        out.extend(ds.iter().map(|&d| Path([up, f.into(to, d)], 2)));
                    }
                }
            }
        }
        out
    }

    /// Directed links (capacities are indexed by [`LinkId`]).
    pub fn links(&self) -> usize {
        self.fabric.links
    }

    /// The load a job's `collective` under decision `d` puts on each link
    /// (its flows' weights added up per link, in link order), counted in
    /// the link loads until [`Router::unroute`]. `key` tells jobs apart in
    /// the ECMP hash.
    pub fn route(
        &mut self,
        key: u64,
        d: &Decision,
        collective: Collective,
    ) -> Result<Class, Unknown> {
        let placed = self.resolve(d)?;
        let own = match self.routing {
            Routing::Decision => self.own(d),
            _ => Own::default(),
        };
        // A job placed in a sharing mode is lent exactly its time-shared
        // links; others, every link (they never need one).
        let lendable = match (&d.sharing, &mut self.peaks) {
            (Some(s), Some(_)) => Some(self.time_shared(d, &s.time_shared)?),
            _ => None,
        };
        if let Some(p) = &mut self.peaks {
            p.lendable(lendable);
        }
        let class = self.route_placed(key, &placed, &own, collective, &mut |_, _, _| true);
        if let Some(p) = &mut self.peaks {
            p.lendable(None);
        }
        Ok(class.unwrap_or_default())
    }

    /// [`Router::route`] for GPUs given as (server, leaf, server port) in
    /// rank order, with no routing of their own (every policy but
    /// [`Routing::Decision`]). `admit` sees the flows with their paths as
    /// they are routed, `n` flows of one [`Share`] on one path at a time
    /// (in order on every link: the flows on a link are those before them
    /// in the job's flow order); when it answers `false` routing stops and
    /// `None` is returned, with part of the job still counted in the loads
    /// (restore them with [`Router::loads`] / [`Router::restore`]).
    pub fn route_gpus(
        &mut self,
        key: u64,
        placed: &[(ServerId, LeafId, u16)],
        collective: Collective,
        admit: &mut Admit<'_>,
    ) -> Option<Class> {
        self.route_placed(key, placed, &Own::default(), collective, admit)
    }

    /// Balanced routing one flow at a time, as the model states it, instead
    /// of in runs (`Router::route_run`): the reference the runs are
    /// tested against (the choices, loads and sums are the same).
    pub fn one_flow_at_a_time(&mut self) {
        self.runs = false;
    }

    /// [`Routing::Peak`]: with `true`, a route stops (`None`) at the first
    /// flow that fits no path (every path would take a link past its line
    /// rate in the flow's phase, given the routed jobs' peaks); nothing of
    /// it is counted then.
    /// A replay's router is not strict (it routes what was placed).
    pub fn strict(&mut self, on: bool) {
        self.strict = on;
    }

    /// [`Routing::Peak`], strict, with an `admit` that accepts every flow
    /// (titan's): a route with links lent goes on from where the strict
    /// route of the same job, on the same held peaks, stopped. Until the
    /// run whose flows fitted no path, every run of the lent route finds
    /// strict fits, the same as the strict route's (lent fits are tried
    /// only where no strict fit is left), so it starts at that run with
    /// the job's peaks and sums as they were before it (the stopped run's
    /// charges taken back), and gives the route from the first run's
    /// answer (tested).
    pub fn resume_lent_routes(&mut self) {
        self.resumable = true;
    }

    /// [`Routing::Peak`]: with `Some(links)`, a strict route puts a flow
    /// that fits no path on a path where the held peaks of `links` (by
    /// link id) are not counted, the least held first, as a replay's
    /// router does with a decision's time-shared links (`super::peak`,
    /// "Time-shared links"); `None` turns it off.
    pub fn lend(&mut self, links: Option<Vec<usize>>) {
        if let Some(p) = &mut self.peaks {
            p.lendable(links);
        }
    }

    /// Link `k`'s leaf end: (leaf, uplink, out of the leaf).
    pub fn link_end(&self, k: LinkId) -> (LeafId, u16, bool) {
        self.fabric.end(k)
    }

    /// Leaf `l`'s directed links, in id order: out of and into it through
    /// uplink 0, then uplink 1, ...
    pub fn leaf_links(&self, l: LeafId) -> std::ops::Range<usize> {
        let f = &self.fabric;
        match f.uplink.get(l.index()).map_or(0, |u| u.len() as u16) {
            0 => 0..0,
            n => f.out_of(l, 0) as usize..Fabric::into(f, l, n - 1) as usize + 1,
        }
    }

    /// The link ids of a decision's time-shared links (`super::peak`,
    /// "Time-shared links").
    fn time_shared(&self, d: &Decision, shared: &[TimeSharedLink]) -> Result<Vec<usize>, Unknown> {
        let f = &self.fabric;
        let unknown = |what, name: &str| Unknown {
            job: d.job.to_string(),
            what,
            name: name.to_string(),
        };
        let mut ids = Vec::with_capacity(shared.len());
        for t in shared {
            let l = *f
                .leaves
                .get(&t.leaf)
                .ok_or_else(|| unknown("leaf", &t.leaf))?;
            let u = *(f.uplink[l.index()].get(&t.uplink))
                .ok_or_else(|| unknown("uplink of leaf", &t.uplink))?;
            let id = if t.up {
                f.out_of(l, u)
            } else {
                Fabric::into(f, l, u)
            };
            ids.push(id as usize);
        }
        Ok(ids)
    }

    /// [`Routing::Peak`]: the routed jobs' peaks added up, per link.
    pub fn held_peaks(&self) -> &[f64] {
        self.peaks.as_ref().map_or(&[], Peaks::held)
    }

    /// [`Routing::Peak`]: how much of a new job's traffic, in line rates,
    /// leaf `l` can still send and receive over its uplinks in flows of
    /// `rate` each: per uplink, as many such flows as fit beside the held
    /// peaks in both directions, times `rate`, added up. An upper bound on
    /// what a route will find (the spines' links down to the far leaves
    /// count too), for choosing leaves; a route still checks every link.
    pub fn leaf_room(&self, l: LeafId, rate: f64) -> f64 {
        let f = &self.fabric;
        let uplinks = f.uplink.get(l.index()).map_or(0, |u| u.len() as u16);
        let held = self.held_peaks();
        let at = |k: LinkId| held.get(k as usize).copied().unwrap_or(0.0);
        (0..uplinks)
            .map(|u| {
                let busy = at(f.out_of(l, u)).max(at(Fabric::into(f, l, u)));
                f64::from(super::peak::whole((1.0 - busy + super::peak::SLACK) / rate)) * rate
            })
            .sum()
    }

    /// A strict [`Routing::Peak`] router: whether every leaf's uplinks
    /// have room, in every phase, for the flows the job sends up from it
    /// and down into it ([`Peaks::room`] of each uplink for that phase's
    /// rate, added up). Every path out of a leaf starts on one of its
    /// uplinks and every path into one ends on one, and a phase's flows
    /// of a job add up on a link ([`super::peak`]), so this is necessary
    /// for a route to fit: a route refused by it is refused before any
    /// flow is searched for, with the answer the search would give. Other
    /// routers (which never refuse) pass.
    fn leaves_have_room(&mut self, job: &mut JobRuns) -> bool {
        if self.peaks.is_none() || !self.strict {
            return true;
        }
        let leaves = self.fabric.leaves.len();
        let most = job.most(&mut self.tally, leaves);
        let (f, peaks) = (&self.fabric, self.peaks.as_ref().expect("checked above"));
        most.iter().all(|(side, rates)| {
            let (l, up) = (LeafId((side / 2) as u32), side % 2 == 0);
            let uplinks = f.uplink.get(l.index()).map_or(0, |u| u.len() as u16);
            let link = |u| {
                if up {
                    f.out_of(l, u)
                } else {
                    Fabric::into(f, l, u)
                }
            };
            rates.iter().all(|&(rate, n)| {
                let mut room = 0u32;
                (0..uplinks).any(|u| {
                    room = room.saturating_add(peaks.room(link(u) as usize, rate));
                    room >= n
                })
            })
        })
    }

    fn route_placed(
        &mut self,
        key: u64,
        placed: &[(ServerId, LeafId, u16)],
        own: &Own,
        collective: Collective,
        admit: &mut Admit<'_>,
    ) -> Option<Class> {
        if self.routing == Routing::None {
            return Some(Class::default()); // no flow crosses a link
        }
        // Loads may have moved since the last call (unroute, restore).
        self.run = None;
        self.links_are_peaks = false;
        let by_runs = matches!(self.routing, Routing::Balanced | Routing::Peak) && self.runs;
        if !by_runs && self.peaks.is_none() {
            // Flow by flow, with no leaf check and no masks: no runs read.
            let servers: Vec<ServerId> = placed.iter().map(|p| p.0).collect();
            let traffic = Traffic::new(&servers);
            let admitted = self.route_each(key, placed, own, &traffic.blocks(collective), admit);
            return self.finish_route(admitted);
        }
        let kept = (self.jobs.iter())
            .position(|j| by_runs && j.is(placed, collective))
            .and_then(|i| self.jobs.remove(i));
        let servers: Vec<ServerId>;
        let traffic;
        let (mut job, blocks) = match kept {
            Some(job) => (job, Vec::new()),
            None => {
                servers = placed.iter().map(|p| p.0).collect();
                traffic = Traffic::new(&servers);
                // In runs, an all-to-all job's blocks are only counted.
                let fast = (by_runs && collective == Collective::Alltoall)
                    .then(|| JobRuns::alltoall(placed, traffic.servers()))
                    .flatten();
                match fast {
                    Some(job) => (job, Vec::new()),
                    None => {
                        let blocks = traffic.blocks(collective);
                        (JobRuns::new(placed, collective, &blocks), blocks)
                    }
                }
            }
        };
        self.links_are_peaks = by_runs && self.peaks.is_some() && job.weight_is_rate;
        let admitted = if self.strict && self.precheck && !self.leaves_have_room(&mut job) {
            self.prechecked += 1;
            None // what the search would find, sooner
        } else {
            self.mask_route(&job);
            Some(if by_runs {
                self.route_job(&job, admit)
            } else {
                self.route_each(key, placed, own, &blocks, admit)
            })
        };
        if self.strict {
            if self.jobs.len() == JOBS {
                self.jobs.pop_front();
            }
            self.jobs.push_back(job);
        }
        self.finish_route(admitted?)
    }

    /// The route's class from the job's sums and peaks (scratch cleared),
    /// counted in the loads and held peaks when `admitted`.
    fn finish_route(&mut self, admitted: bool) -> Option<Class> {
        self.touched.sort_unstable();
        let links: Vec<(usize, f64)> = self
            .touched
            .drain(..)
            .map(|l| (l as usize, std::mem::take(&mut self.sum[l as usize])))
            .collect();
        let peaks = self.peaks.as_mut().map(Peaks::finish).unwrap_or_default();
        if !admitted {
            return None;
        }
        let links = if self.links_are_peaks {
            peaks.clone()
        } else {
            links
        };
        let class = Class { links, peaks };
        if self.routing != Routing::Balanced {
            self.add(&class, 1.0);
        }
        if let Some(p) = &mut self.peaks {
            p.hold(&class.peaks, 1.0);
        }
        Some(class)
    }

    /// `job` routed in runs, resumed where a lent route may
    /// ([`Router::resume_lent_routes`]); `false` when refused.
    fn route_job(&mut self, job: &JobRuns, admit: &mut Admit<'_>) -> bool {
        let skip = self.resume_from(&job.placed, job.collective);
        let admitted = self.route_runs(&job.runs, admit, skip);
        if !admitted {
            self.keep_resume(&job.placed, job.collective);
        }
        admitted
    }

    /// [`Routing::Peak`]: the masks for this route (`super::masks`): its
    /// rate (a job's flows have one; searches for another scan), phases,
    /// whether it lends, and its leaves' sides.
    fn mask_route(&mut self, job: &JobRuns) {
        let (Some(p), Some(rate)) = (&mut self.peaks, job.rate) else {
            return;
        };
        let lend = !self.strict || p.lending();
        p.mask_route(rate, job.phases, lend, &job.sides);
    }

    /// Whether this route keeps an undo log to resume from: a strict
    /// route, not lending, of a router that resumes lent routes.
    fn resumes(&self) -> Option<bool> {
        let p = self
            .peaks
            .as_ref()
            .filter(|_| self.resumable && self.strict)?;
        (self.sides.is_empty() && self.runs).then(|| p.lending())
    }

    /// The runs a route of `placed` skips: with links lent, those of the
    /// strict route of the same job on the same held peaks before it
    /// stopped, the job's peaks and sums restored to that point; else none
    /// (and a strict route keeps an undo log).
    fn resume_from(&mut self, placed: &[(ServerId, LeafId, u16)], collective: Collective) -> usize {
        self.stopped_at = None;
        let Some(lending) = self.resumes() else {
            return 0;
        };
        let p = self.peaks.as_mut().expect("resumes() checked");
        p.keep_undo(!lending);
        let (version, ours) = (p.version(), |r: &&Resume| {
            r.collective == collective && r.placed == placed
        });
        self.resume.retain(|r| r.version == version);
        let Some(r) = self.resume.iter().find(ours).filter(|_| lending) else {
            return 0;
        };
        p.restore(&r.peaks);
        for &(l, x) in &r.sums {
            self.sum[l as usize] = x;
            self.touched.push(l);
        }
        r.run
    }

    /// After a strict route stopped at a run that fitted no path: where
    /// a lent route of the same job resumes ([`Router::resume_from`]).
    fn keep_resume(&mut self, placed: &[(ServerId, LeafId, u16)], collective: Collective) {
        let (Some(false), Some(run)) = (self.resumes(), self.stopped_at) else {
            return;
        };
        let p = self.peaks.as_ref().expect("resumes() checked");
        if self.resume.len() == RESUMES {
            self.resume.pop_front();
        }
        self.resume.push_back(Resume {
            placed: placed.to_vec(),
            collective,
            version: p.version(),
            run,
            peaks: p.snapshot(),
            sums: (self.touched.iter())
                .map(|&l| (l, self.sum[l as usize]))
                .collect(),
        });
    }

    /// Route `blocks` flow by flow; `false` when `admit` refused one.
    fn route_each(
        &mut self,
        key: u64,
        placed: &[(ServerId, LeafId, u16)],
        own: &Own,
        blocks: &[Block<'_>],
        admit: &mut Admit<'_>,
    ) -> bool {
        for f in blocks.iter().flat_map(Block::flows) {
            let (src, dst) = (placed[f.src as usize], placed[f.dst as usize]);
            if src.1 == dst.1 {
                continue; // switched inside the leaf
            }
            let h = mix(key ^ mix(u64::from(f.src) << 32 | u64::from(f.dst)));
            let share = f.share();
            let path = match self.routing {
                Routing::Peak => match self.peak_path(src.1, dst.1, &share) {
                    Ok(p) => p,
                    Err(Over) => return false,
                },
                _ => self.path(own, (src.1, src.2), (dst.1, dst.2), h, share.weight),
            };
            if let Some(path) = path {
                if !self.charge(&path, &share, 1, admit) {
                    return false;
                }
            }
        }
        true
    }

    /// A job's runs ([`JobRuns`]: consecutive flows of one leaf pair and
    /// one share) in order, each by [`Router::route_run`] but the first
    /// `skip`; `false` when `admit` refused.
    fn route_runs(&mut self, runs: &[Run], admit: &mut Admit<'_>, skip: usize) -> bool {
        self.run_index = 0;
        runs.iter().all(|r| self.route_nth(r, skip, admit))
    }

    /// The next run, routed unless among the first `skip` (resumed from).
    fn route_nth(&mut self, r: &Run, skip: usize, admit: &mut Admit<'_>) -> bool {
        let at = self.run_index;
        self.run_index += 1;
        at < skip || self.route_run(r, admit)
    }

    /// Route the run `r`, each flow on the least-loaded path as
    /// [`Router::balanced`] chooses it: where the leaf pair's paths share
    /// no link and the run is long, by [`Router::fill`] and the loads and
    /// sums charged path by path; else flow by flow.
    fn route_run(&mut self, r: &Run, admit: &mut Admit<'_>) -> bool {
        let pair = r.from.index() * self.fabric.leaves.len() + r.to.index();
        let n = self.paths[pair].len();
        if self.routing == Routing::Peak {
            return self.route_run_peak(pair, r, admit);
        }
        if !self.disjoint[pair] || (r.flows as usize) < n.div_ceil(2) {
            for _ in 0..r.flows {
                let Some(p) = self.balanced(r.from, r.to, r.share.weight) else {
                    return true; // no path: the flows are not routed
                };
                if !self.charge(&p, &r.share, 1, admit) {
                    return false;
                }
            }
            return true;
        }
        self.run = None; // the heap of `balanced` would go stale
        self.fill(pair, r.share.weight, r.flows);
        for i in 0..n {
            let (times, p) = (self.picks[i], self.paths[pair][i]);
            if times == 0 {
                continue;
            }
            for &l in p.links() {
                let load = &mut self.load[l as usize];
                for _ in 0..times {
                    *load += r.share.weight;
                }
            }
            if !self.charge(&p, &r.share, times, admit) {
                return false;
            }
        }
        true
    }

    /// [`Routing::Peak`]: the run `r` of leaf pair `pair`, as many flows
    /// on each first fitting path as fit it ([`super::peak`], "Runs");
    /// `false` when a strict route meets a flow that fits no path, or
    /// `admit` refused. [`Router::without_spines`] runs the same first fit
    /// twice instead, over the links up from `r`'s leaf and then down into
    /// the other, each a one-link path.
    fn route_run_peak(&mut self, pair: usize, r: &Run, admit: &mut Admit<'_>) -> bool {
        if self.sides.is_empty() {
            return self.first_fit_run(Fits::Pair(pair), r, admit);
        }
        let (up, down) = (2 * r.from.index(), 2 * r.to.index() + 1);
        self.first_fit_run(Fits::Side(up), r, admit)
            && self.first_fit_run(Fits::Side(down), r, admit)
    }

    /// [`Router::route_run_peak`] over the paths `which` names.
    fn first_fit_run(&mut self, which: Fits, r: &Run, admit: &mut Admit<'_>) -> bool {
        let paths = match which {
            Fits::Pair(i) => &self.paths[i],
            Fits::Side(i) => &self.sides[i],
        };
        let peaks = self.peaks.as_mut().expect("Routing::Peak keeps peaks");
        if paths.is_empty() {
            return true; // no path: the flows are not routed
        }
        let mut picks = std::mem::take(&mut self.peak_picks);
        picks.clear();
        peaks.run_starts();
        // Strict fits first; then, where lending, fits that count only the
        // job's own peaks (`super::peak`, "Time-shared links"). Each kind's
        // first fitting path only moves on within a run.
        let lend = !self.strict || peaks.lending();
        let (side, aligned);
        let sides = match which {
            Fits::Pair(i) => {
                aligned = self.aligned[i];
                aligned.as_ref().map(|a| &a.sides[..])
            }
            Fits::Side(i) => {
                (side, aligned) = ([i as u32], None);
                Some(&side[..])
            }
        };
        let paths = match aligned {
            Some(a) => Paths::Aligned(a, paths.len()),
            None => Paths::Table(paths),
        };
        let (mut left, mut from, mut lent_after) = (r.flows, 0, None);
        while left > 0 {
            let fit = match peaks.first_fit(paths, from, &r.share, sides) {
                Some(i) => Some((i, false)),
                None if lend => {
                    from = paths.len();
                    let at = peaks.first_fit_lent(paths, lent_after, &r.share, sides);
                    lent_after = at;
                    at.map(|(_, i)| (i, true))
                }
                None => None,
            };
            let Some((i, lent)) = fit else {
                if self.strict {
                    peaks.undo_run(); // the job as before this run
                    self.stopped_at = Some(self.run_index - 1);
                    self.peak_picks = picks;
                    return false;
                }
                let first = paths.get(0);
                peaks.charge(&first, &r.share, left); // fits nowhere: the first
                picks.push((first, left));
                break;
            };
            let path = paths.get(i);
            let k = peaks.take(&path, &r.share, left, lent);
            picks.push((path, k));
            left -= k;
            if !lent {
                from = i + 1;
            }
        }
        let mut ok = true;
        for (p, times) in &picks {
            ok = ok && self.charge(p, &r.share, *times, admit);
        }
        self.peak_picks = picks;
        ok
    }

    /// Count `times` flows of `share` on `p` in the job's sums, then ask
    /// `admit`.
    fn charge(&mut self, p: &Path, share: &Share, times: u32, admit: &mut Admit<'_>) -> bool {
        if !self.links_are_peaks {
            for &l in p.links() {
                let sum = &mut self.sum[l as usize];
                if *sum == 0.0 {
                    self.touched.push(l);
                }
                *sum = self.sums.add(*sum, share.weight, times);
            }
        }
        admit(share, p, times)
    }

    /// The link loads now, to [`Router::restore`] after a trial route.
    pub fn loads(&self) -> Vec<f64> {
        self.load.clone()
    }

    /// Put back the loads [`Router::loads`] returned, exactly (a trial
    /// route and its unroute could leave float residue that tips a later
    /// least-loaded choice the other way).
    pub fn restore(&mut self, loads: Vec<f64>) {
        self.load = loads;
    }

    /// Forget a routed job's load (and its peaks).
    pub fn unroute(&mut self, class: &Class) {
        self.add(class, -1.0);
        if let Some(p) = &mut self.peaks {
            p.hold(&class.peaks, -1.0);
        }
    }

    fn add(&mut self, class: &Class, sign: f64) {
        for &(l, w) in &class.links {
            self.load[l] += sign * w;
        }
    }

    /// The weight directed link `l` carries now.
    pub fn load(&self, l: LinkId) -> f64 {
        self.load.get(l as usize).copied().unwrap_or(0.0)
    }

    /// Each GPU's (server, leaf, server port).
    fn resolve(&self, d: &Decision) -> Result<Vec<(ServerId, LeafId, u16)>, Unknown> {
        let unknown = |what, name: &str| Unknown {
            job: d.job.to_string(),
            what,
            name: name.to_string(),
        };
        d.gpus
            .iter()
            .map(|g| {
                let (id, leaf, ports) = self
                    .fabric
                    .servers
                    .get(&g.server)
                    .ok_or_else(|| unknown("server", &g.server))?;
                let port = ports
                    .get(usize::from(g.gpu))
                    .ok_or_else(|| unknown("GPU of server", &g.server))?;
                Ok((*id, *leaf, *port))
            })
            .collect()
    }

    fn own(&self, d: &Decision) -> Own {
        let f = &self.fabric;
        let mut own = Own::default();
        for r in &d.source_routes {
            let Some(&l) = f.leaves.get(&r.leaf) else {
                continue;
            };
            if let (Some(&p), Some(&u)) = (
                f.server_port[l.index()].get(&r.server_port),
                f.uplink[l.index()].get(&r.uplink),
            ) {
                own.route.insert((l, p), u);
            }
        }
        for k in &d.vclos.links {
            let Some(&l) = f.leaves.get(&k.leaf) else {
                continue;
            };
            let Some(&u) = f.uplink[l.index()].get(&k.uplink) else {
                continue;
            };
            let far = if let Some(&s) = f.spines.get(&k.peer) {
                own.down.entry((s, l)).or_default().push(u);
                Far::Spine(s)
            } else if let Some((l2, u2)) = f
                .leaves
                .get(&k.peer)
                .and_then(|&l2| Some((l2, *f.uplink[l2.index()].get(&k.peer_port)?)))
            {
                // A circuit between two leaves serves both directions.
                own.far.insert((l2, u2), Far::Leaf(l, u));
                Far::Leaf(l2, u2)
            } else {
                continue;
            };
            own.far.insert((l, u), far);
        }
        own
    }

    /// The links from `(leaf, server port)` to the GPU on `(leaf, server
    /// port)` `to`, if it is reached.
    fn path(
        &mut self,
        own: &Own,
        (from, port): (LeafId, u16),
        to: (LeafId, u16),
        h: u64,
        weight: f64,
    ) -> Option<Path> {
        let f = &self.fabric;
        match self.routing {
            Routing::None => None,
            Routing::Peak => None, // routed by `peak_path`, which knows the phase
            Routing::Decision => match own.route.get(&(from, port)) {
                Some(&u) => {
                    let far = own
                        .far
                        .get(&(from, u))
                        .copied()
                        .or(f.far[f.global(from, u) as usize])?;
                    self.via(own, from, u, far, to, h)
                }
                // A port the decision does not steer follows the default
                // routing table: ECMP.
                None => self.ecmp(from, to.0, h),
            },
            Routing::Ecmp { seed } => self.ecmp(from, to.0, mix(seed ^ h)),
            Routing::Balanced => self.balanced(from, to.0, weight),
        }
    }

    /// [`Routing::Peak`]: the first fitting path from leaf `from` to leaf
    /// `to` for one flow of `share`, counted in the job's peaks; when none
    /// fits and the router lends (`super::peak`, "Time-shared links"), the
    /// first that fits the job's own peaks; then the first path when the
    /// router is not strict; `Err` when a strict route finds none.
    fn peak_path(&mut self, from: LeafId, to: LeafId, share: &Share) -> Result<Option<Path>, Over> {
        let pair = from.index() * self.fabric.leaves.len() + to.index();
        let (paths, peaks) = (Paths::Table(&self.paths[pair]), self.peaks.as_mut());
        let peaks = peaks.expect("Routing::Peak keeps peaks");
        let lend = !self.strict || peaks.lending();
        let fit = peaks.first_fit(paths, 0, share, None);
        let lent = || {
            peaks
                .first_fit_lent(paths, None, share, None)
                .map(|(_, i)| i)
        };
        let fit = fit.or_else(|| lend.then(lent).flatten());
        let i = match fit {
            Some(i) => i,
            None if self.strict => return Err(Over),
            None if paths.is_empty() => return Ok(None),
            None => 0,
        };
        peaks.charge(&paths.get(i), share, 1);
        Ok(Some(paths.get(i)))
    }

    /// Up `from`'s uplink `u` (leading to `far`), then down to the GPU on
    /// `(leaf, server port)` `to` (the port matters where the decision
    /// routes per GPU).
    fn via(
        &self,
        own: &Own,
        from: LeafId,
        u: u16,
        far: Far,
        (to, port): (LeafId, u16),
        h: u64,
    ) -> Option<Path> {
        let f = &self.fabric;
        let up = f.out_of(from, u);
        match far {
            Far::Leaf(l2, _) if l2 == to => Some(Path([up, 0], 1)),
            Far::Leaf(..) => None,
            Far::Spine(s) => {
                let d = match own.down.get(&(s, to)).filter(|d| !d.is_empty()) {
                    // The decision's VRF: its route to the leaf, or to the GPU.
                    Some(ups) => {
                        let mut ups: Vec<usize> = ups.iter().map(|&u| usize::from(u)).collect();
                        ups.sort_unstable();
                        let mine = own.route.get(&(to, port)).map(|&u| usize::from(u));
                        crate::intent::spine_downlink(&ups, mine, usize::from(port)) as u16
                    }
                    None => {
                        let downs = f.down.get(&(s, to))?;
                        downs[(h % downs.len() as u64) as usize]
                    }
                };
                Some(Path([up, f.into(to, d)], 2))
            }
        }
    }

    /// The uplinks of `from` that reach `to` (as cabled and patched).
    fn candidates(&self, from: LeafId, to: LeafId) -> Vec<(u16, Far)> {
        let f = &self.fabric;
        let n = f.uplink[from.index()].len() as u16;
        (0..n)
            .filter_map(|u| {
                let far = f.far[f.global(from, u) as usize]?;
                let reaches = match far {
                    Far::Spine(s) => f.down.contains_key(&(s, to)),
                    Far::Leaf(l2, _) => l2 == to,
                };
                reaches.then_some((u, far))
            })
            .collect()
    }

    fn ecmp(&self, from: LeafId, to: LeafId, h: u64) -> Option<Path> {
        let c = self.candidates(from, to);
        if c.is_empty() {
            return None;
        }
        let (u, far) = c[(h % c.len() as u64) as usize];
        // The spine hashes again, with its own seed (a different mix); the
        // default table has no per-GPU routes, so the port plays no part.
        self.via(&Own::default(), from, u, far, (to, 0), mix(h))
    }

    /// The least-loaded path from `from` to `to` (the first of the
    /// busiest-link minima in path order), charged `weight`.
    ///
    /// Consecutive flows of one leaf pair (an all-to-all job's flows come
    /// server pair by server pair) share a min-heap of the pair's paths by
    /// load instead of a scan of every path per flow. Within such a run
    /// loads only grow (weights are positive), so a heap entry is never
    /// above its path's real load: an entry popped whose load is still
    /// current is the minimum, and a stale one is pushed back with its
    /// load now. Ties go to the lower path index, as the scan's did, so
    /// the choice is exactly the scan's.
    fn balanced(&mut self, from: LeafId, to: LeafId, weight: f64) -> Option<Path> {
        let n = self.fabric.leaves.len();
        let paths = &self.paths[from.index() * n + to.index()];
        let busiest = |load: &[f64], p: &Path| {
            p.links()
                .iter()
                .map(|&l| load[l as usize])
                .fold(0.0, f64::max)
        };
        if self.run != Some((from, to)) {
            self.run = Some((from, to));
            self.by_load.clear();
            self.by_load.extend(
                paths
                    .iter()
                    .enumerate()
                    .map(|(i, p)| Reverse((load_key(busiest(&self.load, p)), i as u32))),
            );
        }
        let (p, i) = loop {
            let Reverse((key, i)) = self.by_load.pop()?;
            let p = paths[i as usize];
            let now = load_key(busiest(&self.load, &p));
            if now == key {
                break (p, i);
            }
            self.by_load.push(Reverse((now, i)));
        };
        for &l in p.links() {
            self.load[l as usize] += weight;
        }
        self.by_load
            .push(Reverse((load_key(busiest(&self.load, &p)), i)));
        Some(p)
    }

    /// How many of `flows` consecutive flows of weight `w` from leaf pair
    /// `pair` (whose paths share no link) [`Router::balanced`] would put on
    /// each path, one at a time: into `picks`, the loads left as they are.
    ///
    /// Why this is that choice, exactly. The one-at-a-time choice takes the
    /// path of least rank `(key, index)`, the key of a path being its
    /// busiest link's load ([`load_key`]), and adds `w` to each of its
    /// links. Paths sharing no link, a choice changes the chosen path's
    /// key only. After `j` choices of path `p` its links hold `f^j(u)` and
    /// `f^j(d)`, with `f(x) = fl(x + w)` (the float sum, rounded to
    /// nearest), and since rounding is monotone, `max(f(a), f(b)) =
    /// f(max(a, b))`: the busiest load is `f^j(m)` for `m` its busiest load
    /// before the run, one add per choice on one number. So the choices
    /// are a merge of the paths' rank sequences, each nondecreasing (as
    /// `f(x)` is at least `x`): the ranks not yet chosen are the paths
    /// never chosen in this run (`waiting`, sorted once, taken from the front) and the chosen
    /// ones at their new rank (`chosen`, kept sorted), and each choice is
    /// the lower of the two fronts. A path stays chosen while its new rank
    /// is below both fronts (while the least-loaded paths fill up to the
    /// others), then joins `chosen`; its new rank is at least that of every
    /// path chosen before it (their ranks were at most its own, `f` is
    /// monotone) except where keys tie at 0 over loads at or below 0 or
    /// where the indices break a tie, so it goes to the back in O(1) but
    /// for those (a binary search). Charging a path's links `picks[p]`
    /// times `w` afterwards gives each link the same float adds in the
    /// same order, hence the same bits, as charging them flow by flow
    /// (each link is on one path of the pair, so the order between paths
    /// does not matter). Tested against [`Router::balanced`] and the scan
    /// it replaced.
    ///
    /// A k-way merge (Knuth, TAOCP vol. 3, 5.4.1) whose queue is a sorted
    /// deque rather than a heap: O(1) per flow in the round-robin regime
    /// that all-to-all jobs spend most flows in (64 paths, runs of 512
    /// flows at 4096 GPUs), where a heap costs O(log paths).
    fn fill(&mut self, pair: usize, w: f64, flows: u32) {
        let (paths, load) = (&self.paths[pair], &self.load);
        let (waiting, chosen) = (&mut self.waiting, &mut self.chosen);
        self.picks.clear();
        self.picks.resize(paths.len(), 0);
        waiting.clear();
        waiting.extend(paths.iter().enumerate().map(|(i, p)| {
            let busiest = p
                .links()
                .iter()
                .map(|&l| load[l as usize])
                .fold(f64::NEG_INFINITY, f64::max);
            Slot {
                key: load_key(busiest),
                path: i as u32,
                busiest,
            }
        }));
        waiting.sort_unstable_by_key(Slot::rank);
        chosen.clear();
        let mut next = 0; // waiting[..next] have been chosen
        let mut left = flows;
        while left > 0 {
            let s = match lower_front(chosen, &waiting[next..]) {
                Some((true, _)) => chosen.pop_front(),
                Some((false, _)) => {
                    next += 1;
                    Some(waiting[next - 1])
                }
                None => None,
            };
            let Some(mut s) = s else {
                return; // no path
            };
            loop {
                self.picks[s.path as usize] += 1;
                left -= 1;
                s.busiest += w;
                s.key = load_key(s.busiest);
                let below = |(_, f): (bool, (u64, u32))| f < s.rank();
                if left == 0 || lower_front(chosen, &waiting[next..]).is_some_and(below) {
                    break;
                }
            }
            if chosen.back().is_none_or(|b| b.rank() < s.rank()) {
                chosen.push_back(s);
            } else {
                let at = chosen.partition_point(|x| x.rank() < s.rank());
                chosen.insert(at, s);
            }
        }
    }
}

/// Of [`Router::fill`]'s chosen and waiting paths, whether the next
/// choice is the front of `chosen`, and its rank (`None`: no path left).
fn lower_front(chosen: &VecDeque<Slot>, waiting: &[Slot]) -> Option<(bool, (u64, u32))> {
    match (chosen.front(), waiting.first()) {
        (Some(c), Some(w)) if w.rank() < c.rank() => Some((false, w.rank())),
        (Some(c), _) => Some((true, c.rank())),
        (None, w) => w.map(|w| (false, w.rank())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;

    use super::*;
    use crate::names::JobId;
    use crate::network::fairshare;
    use crate::placement::{placer, JobRequest, Outcome, Policy};
    use crate::topology::generate::uniform_topology;

    /// Place `sizes` (GPUs) in order with `policy`; the decisions.
    fn placed(policy: Policy, topo: &std::sync::Arc<Topology>, sizes: &[u32]) -> Vec<Decision> {
        place_all(placer(policy, topo.clone()).unwrap().as_mut(), sizes)
    }

    /// Place `sizes` (GPUs) in order with `p`; the decisions.
    fn place_all(p: &mut dyn crate::placement::Placer, sizes: &[u32]) -> Vec<Decision> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &gpus)| {
                let id = JobId::new(format!("j{i}")).unwrap();
                match p.place(&JobRequest::new(id, gpus)).unwrap() {
                    Outcome::Placed(d) => std::sync::Arc::unwrap_or_clone(d),
                    Outcome::Blocked(b) => panic!("job {i} ({gpus} GPUs) blocked: {b:?}"),
                }
            })
            .collect()
    }

    /// A decision's time-shared links are resolved by name: each is lent
    /// as the link its leaf end names (up or down), and a name the
    /// topology does not have is refused naming the job and the name.
    #[test]
    fn time_shared_links_are_resolved_by_name_and_unknown_ones_refused() {
        use crate::decision::TimeSharedLink;
        let topo = uniform_topology(2, 2, 2, 2);
        let mut d = placed(Policy::Best, &topo, &[4]).remove(0);
        let leaf = &topo.leaves[1];
        let link = |uplink: &Name, up| TimeSharedLink {
            leaf: leaf.name.clone(),
            uplink: uplink.clone(),
            up,
        };
        let profile = crate::sharing::profile::Profile::up_down(250, 0.3);
        let mut sharing = crate::placement::shared::alone(&profile);
        sharing.time_shared = vec![link(&leaf.uplinks[1], false)];
        d.sharing = Some(Box::new(sharing));
        let r = Router::new(&topo, Routing::Peak);
        let lent = r
            .time_shared(&d, &d.sharing.as_ref().unwrap().time_shared)
            .unwrap();
        let want = Fabric::into(&r.fabric, LeafId(1), 1) as usize;
        assert_eq!(lent, vec![want]);
        let bad = vec![link(&"nowhere".into(), true)];
        let e = r.time_shared(&d, &bad).unwrap_err();
        assert_eq!((e.what, e.name.as_str()), ("uplink of leaf", "nowhere"));
        assert!(e.to_string().contains(&format!("job `{}`", d.job)), "{e}");
    }

    /// Route every decision with `collective`; per link, the jobs on it.
    fn route_all(
        r: &mut Router,
        ds: &[Decision],
        collective: Collective,
    ) -> (Vec<Class>, HashMap<usize, Vec<usize>>) {
        let mut on: HashMap<usize, Vec<usize>> = HashMap::new();
        let all: Vec<Class> = ds
            .iter()
            .enumerate()
            .map(|(j, d)| {
                let c = r.route(j as u64, d, collective).unwrap();
                for &(l, _) in &c.links {
                    on.entry(l).or_default().push(j);
                }
                c
            })
            .collect();
        (all, on)
    }

    fn lambdas(r: &Router, all: &[Class]) -> Vec<f64> {
        fairshare::solve(&vec![1.0; r.links()], all)
    }

    #[test]
    fn vclos_slices_share_no_link_and_run_at_full_rate() {
        // 8 leaves x 4 servers x 2 GPUs, 8 spines: jobs over several leaves.
        let topo = uniform_topology(8, 8, 2, 0);
        let ds = placed(Policy::Vclos, &topo, &[12, 20, 8, 16]);
        for c in Collective::ALL {
            let mut r = Router::new(&topo, Routing::Decision);
            let (all, on) = route_all(&mut r, &ds, c);
            assert!(
                all.iter().filter(|j| !j.links.is_empty()).count() >= 3,
                "{c}"
            );
            assert!(on.values().all(|jobs| jobs.len() == 1), "{c}: {on:?}");
            for l in 0..r.links() {
                assert!(r.load(l as LinkId) <= 1.0 + 1e-9, "{c}: link {l}");
            }
            assert!(lambdas(&r, &all).iter().all(|&x| x == 1.0), "{c}");
        }
    }

    #[test]
    fn partial_server_slices_share_no_link_with_other_jobs() {
        // 8 leaves x 4 servers x 2 GPUs, 8 spines; GPU 0 of every server
        // held, so only partial-server slices exist (issue 15, item 2).
        use crate::decision::{GpuRef, Stage, VirtualClos};
        use crate::placement::{placer_on, SliceOptions};
        use crate::state::FabricState;
        let topo = uniform_topology(8, 8, 2, 0);
        let mut st = FabricState::new(topo.clone());
        for (i, s) in topo.servers.iter().enumerate() {
            st.admit(&Decision {
                requested_gpus: None,
                sharing: None,
                job: JobId::new(format!("one{i}")).unwrap(),
                stage: Stage::Server,
                gpus: vec![GpuRef {
                    server: s.name.clone(),
                    gpu: 0,
                }],
                vclos: VirtualClos::default(),
                source_routes: vec![],
            })
            .unwrap();
        }
        let partial = SliceOptions {
            partial_servers: true,
            ..SliceOptions::default()
        };
        let mut p = placer_on(Policy::Vclos, st, partial).unwrap();
        let ds = place_all(p.as_mut(), &[8, 6, 12]);
        assert!(ds.iter().all(|d| d.touches_network()));
        for c in Collective::ALL {
            let mut r = Router::new(&topo, Routing::Decision);
            let (all, on) = route_all(&mut r, &ds, c);
            assert!(on.values().all(|jobs| jobs.len() == 1), "{c}: {on:?}");
            // One GPU per server: rails line up leaf by leaf, so the
            // slices run at full rate as whole-server ones do.
            assert!(lambdas(&r, &all).iter().all(|&x| x == 1.0), "{c}");
        }
    }

    /// The most any link carries in any one phase when `d`'s job runs
    /// `collective` alone on its slice.
    fn phase_peak(topo: &Topology, d: &Decision, collective: Collective) -> f64 {
        let mut r = Router::new(topo, Routing::Decision);
        let placed = r.resolve(d).unwrap();
        let own = r.own(d);
        let mut per: HashMap<(LinkId, u16), f64> = HashMap::new();
        r.route_placed(1, &placed, &own, collective, &mut |s, path, n| {
            for &l in path.links() {
                *per.entry((l, s.phase)).or_default() += s.rate * f64::from(n);
            }
            true
        });
        per.values().copied().fold(0.0, f64::max)
    }

    #[test]
    fn halving_doubling_slices_get_a_rank_order_with_no_phase_over_a_link() {
        // 8 leaves x 8 servers x 4 GPUs, 32 spines. 80 GPUs = 4 leaves x 5
        // servers: listed leaf by leaf, HD's distance-4 phase sends two
        // flows down one link; in the rank order of `order_for_hd`, none.
        let topo = uniform_topology(8, 32, 4, 0);
        let job = |gpus: u32, c: Option<Collective>| {
            let mut p = placer(Policy::Vclos, topo.clone()).unwrap();
            let mut req = JobRequest::new(JobId::new("j").unwrap(), gpus);
            req.collective = c;
            match p.place(&req).unwrap() {
                Outcome::Placed(d) => std::sync::Arc::unwrap_or_clone(d),
                Outcome::Blocked(b) => panic!("{gpus}: {b:?}"),
            }
        };
        let leafwise = job(80, None);
        assert_eq!(leafwise.vclos.leaves.len(), 4);
        assert_eq!(phase_peak(&topo, &leafwise, Collective::Hd), 2.0);
        let hd = job(80, Some(Collective::Hd));
        assert_eq!(phase_peak(&topo, &hd, Collective::Hd), 1.0);
        // Same GPUs, links and routes; only the rank order differs.
        let set = |d: &Decision| {
            let mut g: Vec<_> = d.gpus.iter().map(|g| (g.server.clone(), g.gpu)).collect();
            g.sort();
            g
        };
        assert_eq!(set(&hd), set(&leafwise));
        assert_eq!(hd.vclos, leafwise.vclos);
        assert_eq!(hd.source_routes, leafwise.source_routes);
        assert_ne!(hd.gpus, leafwise.gpus);
        // Power-of-two servers per leaf: leaf by leaf is already right.
        let eight = job(96 + 32, Some(Collective::Hd));
        assert_eq!(phase_peak(&topo, &eight, Collective::Hd), 1.0);
        assert_eq!(eight.gpus, job(128, None).gpus);
    }

    #[test]
    fn source_routing_without_isolation_shares_links_and_slows_jobs() {
        let topo = uniform_topology(8, 8, 2, 0);
        let ds = placed(Policy::Sr, &topo, &[12, 20, 8, 16]);
        let mut r = Router::new(&topo, Routing::Decision);
        let (all, on) = route_all(&mut r, &ds, Collective::Ring);
        assert!(on.values().any(|jobs| jobs.len() > 1), "{on:?}");
        // Two rings meet on a link: both run at half rate there.
        assert_eq!(lambdas(&r, &all).iter().copied().fold(1.0, f64::min), 0.5);
        // Sharing slows a job exactly when a link carries more than its capacity.
        for c in Collective::ALL {
            let mut r = Router::new(&topo, Routing::Decision);
            let (all, _) = route_all(&mut r, &ds, c);
            let busiest = (0..r.links())
                .map(|l| r.load(l as LinkId))
                .fold(0.0, f64::max);
            let slowed = lambdas(&r, &all).iter().any(|&x| x < 1.0);
            assert_eq!(slowed, busiest > 1.0 + 1e-9, "{c}: busiest {busiest}");
        }
        // Every flow leaves by the uplink its port is source-routed to.
        let own = r.own(&ds[1]);
        let resolved = r.resolve(&ds[1]).unwrap();
        let up_links: Vec<LinkId> = resolved
            .iter()
            .filter_map(|&(_, l, p)| own.route.get(&(l, p)).map(|&u| r.fabric.out_of(l, u)))
            .collect();
        // Even-numbered links leave a leaf: each is a source-routed uplink.
        for &(l, _) in all[1].links.iter().filter(|(l, _)| l % 2 == 0) {
            assert!(up_links.contains(&(l as LinkId)), "{l}");
        }
    }

    #[test]
    fn ecmp_is_the_same_for_the_same_seed_only() {
        let topo = uniform_topology(8, 8, 2, 0);
        let ds = placed(Policy::Best, &topo, &[24, 16]);
        let run = |seed| {
            let mut r = Router::new(&topo, Routing::Ecmp { seed });
            route_all(&mut r, &ds, Collective::Ring).0
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        // Nothing is routed on the ideal fabric.
        let mut r = Router::new(&topo, Routing::None);
        assert!(route_all(&mut r, &ds, Collective::Ring)
            .0
            .iter()
            .all(|j| j.links.is_empty()));
    }

    #[test]
    fn balanced_ecmp_spreads_where_hashing_collides() {
        let topo = uniform_topology(8, 8, 2, 0);
        let ds = placed(Policy::Best, &topo, &[24, 16, 20]);
        let mut b = Router::new(&topo, Routing::Balanced);
        let (_, _) = route_all(&mut b, &ds, Collective::Ring);
        let busiest = |r: &Router| {
            (0..r.links())
                .map(|l| r.load(l as LinkId))
                .fold(0.0, f64::max)
        };
        // A ring sends one unit per GPU: balanced, no link needs more.
        assert!(busiest(&b) <= 1.0 + 1e-9, "{}", busiest(&b));
        let collided = (1..20).any(|seed| {
            let mut e = Router::new(&topo, Routing::Ecmp { seed });
            route_all(&mut e, &ds, Collective::Ring);
            busiest(&e) > 1.0 + 1e-9
        });
        assert!(collided, "hashing never collided");
        // Unrouting gives every link back.
        let before: Vec<f64> = (0..b.links()).map(|l| b.load(l as LinkId)).collect();
        let (all, _) = route_all(&mut b, &ds, Collective::Alltoall);
        let total = |r: &Router| (0..r.links()).map(|l| r.load(l as LinkId)).sum::<f64>();
        assert!(total(&b) > before.iter().sum::<f64>() + 1.0);
        for j in &all {
            b.unroute(j);
        }
        for (l, w) in before.iter().enumerate() {
            assert!((b.load(l as LinkId) - w).abs() < 1e-9, "link {l}");
        }
    }
}

#[cfg(test)]
mod ocs_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::decision::Stage;
    use crate::names::JobId;
    use crate::network::fairshare;
    use crate::placement::{placer, JobRequest, Outcome, Policy};
    use crate::topology::generate::uniform_topology;

    /// OCS-vClos decisions on cluster512-ocs where a leaf reaches a spine
    /// over several links (what issue 14's model found slowed alone).
    fn parallel() -> (Topology, Vec<Decision>) {
        let t = crate::topology::from_str(
            "cluster512-ocs.yaml",
            include_str!("../../../topologies/cluster512-ocs.yaml"),
        )
        .unwrap();
        let mut p = placer(Policy::OcsVclos, std::sync::Arc::new(t.clone())).unwrap();
        let sizes = [64, 40, 24, 48, 16, 96, 32, 56, 72, 24, 88, 40];
        let mut out = Vec::new();
        for (i, gpus) in sizes.into_iter().cycle().take(60).enumerate() {
            let id = JobId::new(format!("j{i}")).unwrap();
            if let Outcome::Placed(d) = p.place(&JobRequest::new(id, gpus)).unwrap() {
                let mut per: HashMap<(&str, &str), usize> = HashMap::new();
                for l in &d.vclos.links {
                    *per.entry((&*l.leaf, &*l.peer)).or_default() += 1;
                }
                if per.values().any(|&n| n > 1) {
                    out.push(std::sync::Arc::unwrap_or_clone(d));
                }
            }
        }
        (t, out)
    }

    /// The least-loaded scan the heap of [`Router::balanced`] replaced.
    fn scan(r: &Router, from: LeafId, to: LeafId) -> Option<Path> {
        let n = r.fabric.leaves.len();
        let mut best: Option<(f64, Path)> = None;
        for &p in &r.paths[from.index() * n + to.index()] {
            let busiest = p
                .links()
                .iter()
                .map(|&l| r.load[l as usize])
                .fold(0.0, f64::max);
            if best.is_none_or(|(b, _)| busiest < b) {
                best = Some((busiest, p));
                if busiest <= 0.0 {
                    break;
                }
            }
        }
        best.map(|b| b.1)
    }

    /// 3 leaves with two uplinks each to each of 2 spines: a leaf pair's
    /// paths share links, so one choice changes the load of the others.
    fn par_topology() -> Topology {
        let mgmt = "mgmt: {host: 127.0.0.1, port: 22, protocol: ssh-cli, dialect: huawei-ce, credential: c}";
        let mut y = String::from(
            "name: par\ngpus_per_server: 4\ncredentials:\n  c: {username: a, password_env: P}\nleaves:\n",
        );
        for l in 1..=3 {
            y += &format!(
                "  - {{name: l{l}, {mgmt}, server_ports: \"e[1-4]\", uplink_ports: \"u[1-4]\"}}\n"
            );
        }
        y += "spines:\n";
        for s in 1..=2 {
            y += &format!("  - {{name: s{s}, {mgmt}, ports: \"e[1-6]\"}}\n");
        }
        y += "servers:\n";
        for l in 1..=3 {
            y += &format!("  - {{name: h{l}, leaf: l{l}, ports: \"e[1-4]\"}}\n");
        }
        y += "links:\n";
        for l in 1..=3u32 {
            for (u, s, p) in [
                (1, 1, 2 * l - 1),
                (2, 1, 2 * l),
                (3, 2, 2 * l - 1),
                (4, 2, 2 * l),
            ] {
                y += &format!("  - [l{l}:u{u}, s{s}:e{p}]\n");
            }
        }
        crate::topology::from_str("par.yaml", &y).unwrap()
    }

    #[test]
    fn balanced_choice_is_the_least_loaded_scan_even_where_paths_share_links() {
        let t = par_topology();
        let mut r = Router::new(&t, Routing::Balanced);
        assert_eq!(r.paths[1].len(), 8, "2 x 2 paths per spine");
        let mut rng = crate::placement::Rng(5);
        for i in 0..3000 {
            if i % 500 == 0 {
                r.run = None; // as a new job's routing starts
            }
            // Runs of one pair, then another.
            let from = LeafId(rng.below(3) as u32);
            let to = LeafId((from.0 + 1 + rng.below(2) as u32) % 3);
            for _ in 0..1 + rng.below(6) {
                let w = (1 + rng.below(4)) as f64 / 8.0;
                let want = scan(&r, from, to);
                assert_eq!(r.balanced(from, to, w), want, "step {i}");
            }
        }
    }

    /// A float from a few that tie, float residue around 0, or any.
    fn some_load(rng: &mut crate::placement::Rng) -> f64 {
        match rng.below(6) {
            0 => 0.0,
            1 => [-1e-17, 1e-17, -0.0][rng.below(3) as usize],
            2 | 3 => rng.below(9) as f64 / 8.0,
            _ => rng.below(1 << 20) as f64 / f64::from(1 << 20),
        }
    }

    #[test]
    fn fill_counts_the_one_at_a_time_choices() {
        let t = uniform_topology(6, 8, 2, 0);
        let mut r = Router::new(&t, Routing::Balanced);
        assert!(r.disjoint.iter().all(|&d| d), "one link per spine");
        let n = t.leaves.len();
        let mut rng = crate::placement::Rng(0x0f11_5eed);
        let (mut spread, mut all_once) = (0, 0);
        for step in 0..400 {
            for l in r.load.iter_mut() {
                *l = some_load(&mut rng);
            }
            let a = rng.below(n as u64) as usize;
            let b = (a + 1 + rng.below(n as u64 - 1) as usize) % n;
            // Weights that tie, that do not, and one too small to move a
            // loaded link (fl(x + w) = x).
            let w = [0.125, 1.0 / 3.0, 1.0 / 7.0, 1e-20, 0.01][rng.below(5) as usize];
            let flows = 1 + rng.below(60) as u32;
            let mut one = r.clone();
            let mut want = vec![0u32; one.paths[a * n + b].len()];
            for _ in 0..flows {
                let p = one.balanced(LeafId(a as u32), LeafId(b as u32), w).unwrap();
                let i = one.paths[a * n + b].iter().position(|&q| q == p).unwrap();
                want[i] += 1;
            }
            r.fill(a * n + b, w, flows);
            assert_eq!(r.picks, want, "step {step}: w {w}, {flows} flows");
            spread += usize::from(want.iter().any(|&c| c > 1 + flows / 8));
            all_once += usize::from(want.iter().all(|&c| c > 0));
        }
        assert!(spread > 50 && all_once > 50, "{spread} {all_once}");
    }

    /// A random job on `t`: some servers in random order, some GPUs of
    /// each; as (server, leaf, port) in rank order.
    fn some_job(t: &Topology, rng: &mut crate::placement::Rng) -> Vec<(ServerId, LeafId, u16)> {
        let mut servers: Vec<usize> = (0..t.servers.len()).collect();
        for i in (1..servers.len()).rev() {
            servers.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let m = 2 + rng.below(servers.len() as u64 - 1) as usize;
        let mut out = Vec::new();
        for &s in &servers[..m] {
            let srv = &t.servers[s];
            let whole = rng.below(2) == 0;
            let g = if whole {
                srv.ports.len()
            } else {
                1 + rng.below(srv.ports.len() as u64) as usize
            };
            out.extend(
                srv.ports[..g]
                    .iter()
                    .map(|&p| (ServerId(s as u32), srv.leaf, p)),
            );
        }
        out
    }

    /// Route `job` with a titan-like check: no link's sum per phase over
    /// `cap`. The class, or `None` when refused.
    fn checked(
        r: &mut Router,
        job: &[(ServerId, LeafId, u16)],
        c: Collective,
        cap: f64,
    ) -> Option<Class> {
        let mut sums: HashMap<(LinkId, u16), f64> = HashMap::new();
        r.route_gpus(0, job, c, &mut |s, p, n| {
            p.links().iter().all(|&l| {
                let sum = sums.entry((l, s.phase)).or_default();
                for _ in 0..n {
                    *sum += s.rate;
                }
                *sum <= cap
            })
        })
    }

    fn bits(loads: &[f64]) -> Vec<u64> {
        loads.iter().map(|x| x.to_bits()).collect()
    }

    /// A job's class to the bit: its links' weights and peaks.
    type ClassBits = (Vec<(usize, u64)>, Vec<(usize, u64)>);

    fn class_bits(k: &Option<Class>) -> Option<ClassBits> {
        let b = |v: &[(usize, f64)]| v.iter().map(|&(l, w)| (l, w.to_bits())).collect();
        k.as_ref().map(|k| (b(&k.links), b(&k.peaks)))
    }

    /// Routes one job (GPUs as (server, leaf, port)) on the router in runs
    /// and the one flow at a time.
    type TwinRoute<'a> = dyn FnMut(
            &mut Router,
            &mut Router,
            &[(ServerId, LeafId, u16)],
            Collective,
            &mut crate::placement::Rng,
        ) -> Option<Class>
        + 'a;

    /// Random jobs (and releases) routed in runs and one flow at a time by
    /// `routing` on three fabrics, one with parallel links (paths sharing
    /// links): `route` routes a job on both routers and returns the class
    /// admitted, or `None` with both routers as before; classes and loads
    /// must agree to the bit. (refused, admitted).
    fn twin_routes(routing: Routing, seed: u64, route: &mut TwinRoute<'_>) -> (u32, u32) {
        let fabrics = [
            uniform_topology(4, 8, 4, 0),
            uniform_topology(8, 8, 2, 0),
            std::sync::Arc::new(par_topology()),
        ];
        let mut rng = crate::placement::Rng(seed);
        let (mut refused, mut admitted) = (0, 0);
        for t in &fabrics {
            let mut runs = Router::new(t, routing);
            runs.strict(true);
            let mut one = runs.clone();
            one.one_flow_at_a_time();
            let mut held: Vec<Class> = Vec::new();
            for step in 0..300 {
                if release_some(&mut rng, &mut held, [&mut runs, &mut one]) {
                    continue;
                }
                let job = some_job(t, &mut rng);
                let c = Collective::ALL[rng.below(3) as usize];
                match route(&mut runs, &mut one, &job, c, &mut rng) {
                    Some(k) => {
                        admitted += 1;
                        held.push(k);
                    }
                    None => refused += 1,
                }
                assert_eq!(bits(&runs.load), bits(&one.load), "step {step}: {c}");
                let peaks = (bits(runs.held_peaks()), bits(one.held_peaks()));
                assert_eq!(peaks.0, peaks.1, "step {step}: {c}");
            }
        }
        (refused, admitted)
    }

    /// One time in three (when jobs are held), a random held job leaves
    /// both routers; `true` if one did.
    fn release_some(
        rng: &mut crate::placement::Rng,
        held: &mut Vec<Class>,
        routers: [&mut Router; 2],
    ) -> bool {
        if held.is_empty() || rng.below(3) != 0 {
            return false;
        }
        let c = held.swap_remove(rng.below(held.len() as u64) as usize);
        for r in routers {
            r.unroute(&c);
        }
        true
    }

    /// [`Router::without_spines`] is a relaxation: on the same held peaks,
    /// every job the real strict router admits it admits too, and it
    /// admits some the real one refuses (their links up and down do not
    /// meet at a spine with room).
    #[test]
    fn routing_without_spines_admits_whatever_the_spines_admit() {
        let mut rng = crate::placement::Rng(0x5b1e_0001);
        let (mut both, mut only_relaxed) = (0, 0);
        for t in [uniform_topology(4, 8, 4, 0), uniform_topology(8, 8, 2, 0)] {
            let mut real = Router::new(&t, Routing::Peak);
            real.strict(true);
            let mut relaxed = real.clone();
            relaxed.without_spines();
            let mut held: Vec<Class> = Vec::new();
            for step in 0..400 {
                if release_some(&mut rng, &mut held, [&mut real, &mut relaxed]) {
                    continue;
                }
                let job = some_job(&t, &mut rng);
                let c = Collective::ALL[rng.below(3) as usize];
                let relaxed_admits = relaxed
                    .clone()
                    .route_gpus(0, &job, c, &mut |_, _, _| true)
                    .is_some();
                match real.route_gpus(0, &job, c, &mut |_, _, _| true) {
                    Some(k) => {
                        assert!(relaxed_admits, "step {step}: {c} admitted with spines only");
                        both += 1;
                        // The relaxed router holds exactly the real peaks.
                        relaxed.add(&k, 1.0);
                        relaxed.peaks.as_mut().expect("peak").hold(&k.peaks, 1.0);
                        held.push(k);
                    }
                    None => only_relaxed += u32::from(relaxed_admits),
                }
                assert_eq!(bits(real.held_peaks()), bits(relaxed.held_peaks()));
            }
        }
        assert!(
            both > 100 && only_relaxed >= 10,
            "{both} both, {only_relaxed} relaxed only"
        );
    }

    #[test]
    fn runs_route_jobs_exactly_as_one_flow_at_a_time() {
        let (refused, admitted) = twin_routes(
            Routing::Balanced,
            0x0a11_2a11,
            &mut |runs, one, job, c, rng| {
                let cap = [f64::INFINITY, 0.5, 1.0, 2.0][rng.below(4) as usize];
                let before = runs.loads();
                let got = checked(runs, job, c, cap);
                assert_eq!(
                    class_bits(&got),
                    class_bits(&checked(one, job, c, cap)),
                    "{c}, cap {cap}"
                );
                if got.is_none() {
                    runs.restore(before.clone());
                    one.restore(before);
                }
                got
            },
        );
        assert!(
            refused > 50 && admitted > 300,
            "{refused} refused, {admitted} admitted"
        );
    }

    /// Peak routing (`titan`, strict): jobs routed in runs get the very
    /// classes and peaks of the one-flow-at-a-time first-fit search, on
    /// fabrics with one link per spine and with parallel links (paths that
    /// share links); a refused job changes nothing; held peaks never pass
    /// a link; a job's peak on a link is at least its merged weight there.
    #[test]
    fn peak_runs_route_jobs_exactly_as_one_flow_at_a_time() {
        let (refused, admitted) =
            twin_routes(Routing::Peak, 0x9ea4_0001, &mut |runs, one, job, c, _| {
                let (loads, peaks) = (bits(&runs.load), bits(runs.held_peaks()));
                let got = runs.route_gpus(0, job, c, &mut |_, _, _| true);
                let want = one.route_gpus(0, job, c, &mut |_, _, _| true);
                assert_eq!(class_bits(&got), class_bits(&want), "{c}");
                match &got {
                    Some(k) => {
                        let on: Vec<usize> = k.links.iter().map(|x| x.0).collect();
                        let peaked: Vec<usize> = k.peaks.iter().map(|x| x.0).collect();
                        assert_eq!(on, peaked);
                        for (&(_, w), &(_, p)) in k.links.iter().zip(&k.peaks) {
                            assert!(w <= p + 1e-12, "weight {w} over peak {p}");
                        }
                    }
                    None => {
                        assert_eq!(bits(&runs.load), loads, "refused, loads moved");
                        assert_eq!(bits(runs.held_peaks()), peaks, "refused, peaks moved");
                    }
                }
                let held = runs.held_peaks();
                assert!(held.iter().all(|&x| x <= 1.0 + 1e-9), "{held:?}");
                got
            });
        assert!(
            refused > 100 && admitted > 150,
            "{refused} refused, {admitted} admitted"
        );
    }

    /// With links lent (`Router::lend`, random links, as a sharing placer
    /// lends them after a strict route failed), jobs routed in runs (the
    /// searches read from `crate::network::masks` on fabrics with one link
    /// per spine, scanned on the one with parallel links; a lent route
    /// resumed from where the strict one stopped, `Router::resume_lent_routes`)
    /// still get the very classes and peaks of the one-flow-at-a-time
    /// search, which scans and starts from the first flow.
    #[test]
    fn lent_peak_runs_route_jobs_exactly_as_one_flow_at_a_time() {
        let mut resumed = 0;
        let (refused, admitted) =
            twin_routes(Routing::Peak, 0x9ea4_0003, &mut |runs, one, job, c, rng| {
                runs.resume_lent_routes();
                runs.precheck = false; // strict routes stop in the search
                let strict = runs.route_gpus(0, job, c, &mut |_, _, _| true);
                let want = one.route_gpus(0, job, c, &mut |_, _, _| true);
                assert_eq!(class_bits(&strict), class_bits(&want), "{c}");
                if strict.is_some() || rng.below(4) == 0 {
                    return strict;
                }
                let lent: Vec<usize> = (0..runs.links()).filter(|_| rng.below(3) == 0).collect();
                runs.lend(Some(lent.clone()));
                one.lend(Some(lent));
                let ours = |r: &Resume| r.placed == job && r.collective == c;
                resumed += u32::from(runs.resume.iter().any(ours));
                let got = runs.route_gpus(0, job, c, &mut |_, _, _| true);
                let want = one.route_gpus(0, job, c, &mut |_, _, _| true);
                runs.lend(None);
                one.lend(None);
                assert_eq!(class_bits(&got), class_bits(&want), "{c}");
                got
            });
        assert!(
            refused > 50 && admitted > 150 && resumed > 50,
            "{refused} refused, {admitted} admitted, {resumed} resumed"
        );
    }

    /// A strict route refused because some leaf's uplinks lack room
    /// (`Router::leaves_have_room`) is one the full search refuses too, and
    /// one it lets through routes as it would without the check: with and
    /// without it, and with random links lent, the same classes to the bit
    /// on random jobs and releases; and the check does refuse routes.
    #[test]
    fn leaf_room_refuses_only_routes_the_search_refuses() {
        let mut prechecked = 0;
        let (refused, admitted) = twin_routes(
            Routing::Peak,
            0x9ea4_0002,
            &mut |with, without, job, c, rng| {
                without.precheck = false;
                let lend = rng.below(2) == 0;
                let mask: Vec<usize> = (0..with.links()).filter(|_| rng.below(3) == 0).collect();
                with.lend(lend.then(|| mask.clone()));
                without.lend(lend.then_some(mask));
                let before = with.prechecked;
                let got = with.route_gpus(0, job, c, &mut |_, _, _| true);
                let want = without.route_gpus(0, job, c, &mut |_, _, _| true);
                prechecked += with.prechecked - before;
                with.lend(None);
                without.lend(None);
                assert_eq!(class_bits(&got), class_bits(&want), "{c}");
                assert_eq!(without.prechecked, 0);
                got
            },
        );
        assert!(
            prechecked > 50 && u64::from(refused) > prechecked && admitted > 150,
            "{prechecked} prechecked, {refused} refused, {admitted} admitted"
        );
    }

    /// First fit in path order: on an empty fabric a ring between two whole
    /// servers under two leaves puts its rails on the first uplinks, one
    /// each (each rail runs at the full line rate), and a second such ring
    /// takes the next ones; a halving-doubling job of one GPU on each of
    /// four servers, ranked so that both its exchanges cross the leaves,
    /// sends its second exchange on the links of its first (its phases are
    /// disjoint in time), where merged-load balancing spreads them.
    #[test]
    fn peak_routing_packs_first_paths_and_shares_a_jobs_links_across_phases() {
        let t = uniform_topology(2, 8, 4, 0); // 2 leaves x 2 servers x 4 GPUs, 8 spines
        let whole = |servers: &[usize]| -> Vec<(ServerId, LeafId, u16)> {
            servers
                .iter()
                .flat_map(|&s| {
                    let srv = &t.servers[s];
                    srv.ports
                        .iter()
                        .map(move |&p| (ServerId(s as u32), srv.leaf, p))
                })
                .collect()
        };
        let (a0, a1, b0, b1) = (0, 1, 2, 3); // servers 0, 1 under leaf 0; 2, 3 under leaf 1
        assert_eq!(t.servers[a1].leaf, t.servers[a0].leaf);
        assert_eq!(t.servers[b0].leaf, t.servers[b1].leaf);
        assert_ne!(t.servers[a0].leaf, t.servers[b0].leaf);
        let mut r = Router::new(&t, Routing::Peak);
        r.strict(true);
        let up = |k: &Class| -> Vec<usize> {
            let mut v: Vec<usize> = k
                .links
                .iter()
                .map(|x| x.0)
                .filter(|l| l % 2 == 0)
                .map(|l| l / 2)
                .collect();
            v.sort_unstable();
            v
        };
        let ring1 = r
            .route_gpus(0, &whole(&[a0, b0]), Collective::Ring, &mut |_, _, _| true)
            .unwrap();
        let ring2 = r
            .route_gpus(0, &whole(&[a1, b1]), Collective::Ring, &mut |_, _, _| true)
            .unwrap();
        // Uplinks are numbered leaf by leaf: leaf 0's are 0..8.
        let leaf0_up = |k: &Class| -> Vec<usize> { up(k).into_iter().filter(|&u| u < 8).collect() };
        assert_eq!(leaf0_up(&ring1), [0, 1, 2, 3]);
        assert_eq!(leaf0_up(&ring2), [4, 5, 6, 7]);
        // Every uplink of leaf 0 now carries a rail at line rate: a third
        // ring is refused, and routing it counted nothing.
        let held = bits(r.held_peaks());
        assert!(r
            .route_gpus(0, &whole(&[a0, b1]), Collective::Ring, &mut |_, _, _| true)
            .is_none());
        assert_eq!(bits(r.held_peaks()), held);
        r.unroute(&ring2);
        let hd = r
            .route_gpus(0, &whole(&[a1, b1]), Collective::Hd, &mut |_, _, _| true)
            .unwrap();
        assert_eq!(
            hd.peaks
                .iter()
                .filter(|&&(l, _)| l % 2 == 0 && l / 2 < 8)
                .count(),
            4
        );
        // Ranks a0, b0, b1, a1: distance 2 pairs a0-b1 and b0-a1, distance
        // 1 pairs a0-b0 and b1-a1; two flows leave each leaf per exchange.
        let ones: Vec<(ServerId, LeafId, u16)> = [a0, b0, b1, a1]
            .iter()
            .map(|&s| (ServerId(s as u32), t.servers[s].leaf, t.servers[s].ports[0]))
            .collect();
        let mut balanced = Router::new(&t, Routing::Balanced);
        let spread = balanced
            .route_gpus(0, &ones, Collective::Hd, &mut |_, _, _| true)
            .unwrap();
        let mut peak = Router::new(&t, Routing::Peak);
        let shared = peak
            .route_gpus(0, &ones, Collective::Hd, &mut |_, _, _| true)
            .unwrap();
        assert_eq!(
            up(&shared),
            [0, 1, 8, 9],
            "two uplinks per leaf, the first ones"
        );
        assert!(up(&spread).len() > 4, "balanced: {:?}", up(&spread));
        assert!(
            shared.peaks.iter().all(|&(_, p)| p == 1.0),
            "{:?}",
            shared.peaks
        );
    }

    #[test]
    fn parallel_spine_links_keep_rings_and_halving_doubling_at_full_rate() {
        let (t, ds) = parallel();
        let stages: Vec<Stage> = ds.iter().map(|d| d.stage).collect();
        assert!(
            stages.contains(&Stage::OcsSpine) && stages.contains(&Stage::OcsVclos),
            "{stages:?}"
        );
        for d in &ds {
            let mut cs = vec![Collective::Ring, Collective::Hd];
            if d.stage == Stage::OcsSpine {
                cs.push(Collective::Alltoall);
            }
            for c in cs {
                let mut r = Router::new(&t, Routing::Decision);
                let job = r.route(0, d, c).unwrap();
                let lambda = fairshare::solve(&vec![1.0; r.links()], &[job])[0];
                assert_eq!(lambda, 1.0, "{} {:?} {c}", d.job, d.stage);
            }
        }
    }
}
