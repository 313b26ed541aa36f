//! Reservations: what a decision *would* hold, kept out of placement
//! without holding it (issue 13, `vclos replay --backfill slices`).
//!
//! A blocked queue head's forecast slice is placed on a future state
//! (`crate::placement::forecast`), so some of its GPUs and ports are still
//! held by running jobs now. A job backfilled behind the head and running
//! past the head's reserved time must share none of it. Slurm's backfill
//! scheduler does the same with the nodes it reserves for a pending job:
//! they are not offered to a job that would still run at the reservation's
//! start (`sched/backfill`, "bf_window"). Here that is a mask: every
//! resource of the reservation that is free now is masked for one
//! placement call ([`FabricState::mask`]) and freed again after it
//! ([`FabricState::unmask`]), so the placer finds a slice apart from the
//! reservation instead of one that a check would then refuse.

use std::sync::Arc;

use super::{fresh_version, FabricState, MaskMemo, Resources, FREE, MASKED};
use crate::decision::Decision;
use crate::names::JobId;
use crate::topology::{ServerId, Topology};

use super::StateError;

/// A decision's GPUs and link ports by flat index, resolved by name once
/// ([`FabricState::reservation`]), whether or not they are free now.
/// Equal when they name the same resources in the same order.
#[derive(Debug, Clone, Default)]
pub struct Reservation {
    /// Which reservation this is (a clone is the same one; 0: none): a
    /// state masked twice by one reservation from one version holds the
    /// same, so it takes the same version again ([`FabricState::mask`]).
    pub(super) id: u64,
    pub(super) gpus: Vec<(ServerId, u16)>,
    pub(super) uplinks: Vec<usize>,
    pub(super) spine_ports: Vec<usize>,
    pub(super) ocs_ports: Vec<usize>,
}

impl PartialEq for Reservation {
    fn eq(&self, other: &Self) -> bool {
        (self.gpus == other.gpus && self.uplinks == other.uplinks)
            && (self.spine_ports == other.spine_ports && self.ocs_ports == other.ocs_ports)
    }
}

impl Eq for Reservation {}

impl Reservation {
    /// The GPUs and link ports of typed resources `res`, those of links it
    /// shares included, as a new reservation.
    fn of(res: &Resources) -> Self {
        let mut r = Reservation {
            id: fresh_version(),
            gpus: res.gpus.clone(),
            uplinks: res.uplinks.clone(),
            spine_ports: res.spine_ports.clone(),
            ocs_ports: res.ocs_ports.clone(),
        };
        for l in &res.shared {
            r.uplinks.push(l.uplink);
            r.spine_ports.push(l.spine_port);
            r.ocs_ports.extend(&l.ocs_ports);
        }
        r
    }

    /// The GPUs it names, free or not.
    pub fn gpus(&self) -> &[(ServerId, u16)] {
        &self.gpus
    }

    /// Whether the two name a GPU, uplink, spine port or OCS port in
    /// common.
    pub fn overlaps(&self, other: &Reservation) -> bool {
        fn meet<T: Ord + Copy>(a: &[T], b: &[T]) -> bool {
            let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
            let mut large = large.to_vec();
            large.sort_unstable();
            small.iter().any(|x| large.binary_search(x).is_ok())
        }
        meet(&self.gpus, &other.gpus)
            || meet(&self.uplinks, &other.uplinks)
            || meet(&self.spine_ports, &other.spine_ports)
            || meet(&self.ocs_ports, &other.ocs_ports)
    }
}

/// What an admitted job holds on one copy of a fabric, typed, to admit its
/// decision on another copy without resolving a name
/// ([`FabricState::held_admission`], [`FabricState::admit_held`]): a
/// forecast's slice, placed on a future state, is started on the real one
/// when it is free there (a 2 048-GPU decision names thousands of ports,
/// and resolving them took longer than the search that found the slice).
#[derive(Debug, Clone)]
pub struct Admission {
    /// The fabric it was held on: indices mean nothing on another.
    topology: Arc<Topology>,
    res: Resources,
    /// Each OCS port its links pass through without a cross-connect of
    /// their own (flat index), with the port it is patched to there: the
    /// circuit must be there on the other copy too.
    circuits: Vec<(usize, u32)>,
}

impl Admission {
    /// The reservation of what it holds ([`FabricState::held_reservation`]
    /// on the copy it was held on).
    pub fn reservation(&self) -> Reservation {
        Reservation::of(&self.res)
    }
}

impl PartialEq for Admission {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.topology, &other.topology)
            && (self.res == other.res && self.circuits == other.circuits)
    }
}

impl Eq for Admission {}

/// What one [`FabricState::mask`] masked, for [`FabricState::unmask`].
#[derive(Debug, Default)]
#[must_use = "unmask what was masked"]
pub struct Masked {
    /// The state's versions before and right after the mask: unmasking a
    /// state nothing else changed in between restores the first.
    versions: (u64, u64),
    gpus: Vec<(ServerId, u16)>,
    uplinks: Vec<usize>,
    spine_ports: Vec<usize>,
    ocs_ports: Vec<usize>,
}

impl FabricState {
    /// The GPUs and link ports `d` names (its links' uplinks, far ends and
    /// OCS hops), resolved against the topology only: whether they are
    /// free is not checked. An unknown name is an error naming it.
    pub fn reservation(&self, d: &Decision) -> Result<Reservation, StateError> {
        let names = &self.names;
        let unknown = |kind: &'static str, name: &str| StateError::UnknownDevice {
            job: d.job.clone(),
            kind,
            name: name.to_owned(),
        };
        let no_port = |device: &str, port: &str| StateError::UnknownPort {
            job: d.job.clone(),
            device: device.to_owned(),
            kind: "port",
            port: port.to_owned(),
        };
        let mut r = Reservation {
            id: fresh_version(),
            ..Reservation::default()
        };
        for g in &d.gpus {
            let s = *names
                .server
                .get(&g.server)
                .ok_or_else(|| unknown("server", &g.server))?;
            if g.gpu >= self.topo.gpus_per_server {
                return Err(StateError::UnknownPort {
                    job: d.job.clone(),
                    device: g.server.to_string(),
                    kind: "GPU",
                    port: g.gpu.to_string(),
                });
            }
            r.gpus.push((s, g.gpu));
        }
        let ends = d.vclos.links.iter().flat_map(|l| l.ends());
        for (dev, port) in ends {
            let lay = &self.layout;
            let found = if let Some(&l) = names.leaf.get(dev) {
                let u = names.uplink[l.index()].get(port);
                u.map(|&u| r.uplinks.push(lay.uplink(l, u)))
            } else if let Some(&s) = names.spine.get(dev) {
                let p = names.spine_port[s.index()].get(port);
                p.map(|&p| r.spine_ports.push(lay.spine_port(s, p)))
            } else if let Some(&o) = names.ocs.get(dev) {
                let p = names.ocs_port[o.index()].get(port);
                p.map(|&p| r.ocs_ports.push(lay.ocs_port(o, p)))
            } else {
                return Err(unknown("device", dev));
            };
            found.ok_or_else(|| no_port(dev, port))?;
        }
        Ok(r)
    }

    /// What admitted job `job` holds here, for [`FabricState::admit_held`]
    /// on another copy of this fabric; `None` for a job not admitted.
    pub fn held_admission(&self, job: &JobId) -> Option<Admission> {
        let res = self.held_resources(job)?.clone();
        let lay = &self.layout;
        let mut rewired: Vec<usize> = (res.cross.iter())
            .flat_map(|&(o, a, b)| [lay.ocs_port(o, a), lay.ocs_port(o, b)])
            .collect();
        rewired.sort_unstable();
        let circuits = (res.ocs_ports.iter())
            .filter(|p| rewired.binary_search(p).is_err())
            .map(|&p| (p, self.occ.patch[p]))
            .collect();
        Some(Admission {
            topology: Arc::clone(&self.topo),
            res,
            circuits,
        })
    }

    /// Admit `d` with what it holds on another copy of this fabric
    /// ([`FabricState::held_admission`] there), if all of it is free here
    /// and every OCS circuit its links use as patched is patched here as
    /// there (its own cross-connects are made on admission); `false`, with
    /// nothing changed, otherwise. On the same topology those are the
    /// whole of [`FabricState::admit`]'s checks for a decision that
    /// admitted there (cabling is the topology's); debug builds (every
    /// test) also resolve `d` by name and panic unless it validates to the
    /// very same resources. A decision sharing links, or held on a copy
    /// of another topology, is admitted by name.
    pub fn admit_held(&mut self, d: &Arc<Decision>, held: &Admission) -> bool {
        if !held.res.shared.is_empty() || !Arc::ptr_eq(&held.topology, &self.topo) {
            return self.admit(d).is_ok();
        }
        let patched =
            |st: &Self| (held.circuits.iter()).all(|&(p, to)| st.occ.patch.get(p) == Some(&to));
        if self.by_id.contains_key(&d.job) || !self.all_free(&held.res) || !patched(self) {
            return false;
        }
        self.admit_typed(Arc::clone(d), held.res.clone()).is_ok()
    }

    /// What admitted job `job` holds, as the reservation of its decision
    /// ([`FabricState::reservation`] resolves the same by name): its GPUs
    /// and its links' ports, those of links it shares included. Typed, so
    /// no name is looked up: a forecast placed on a copy of the state
    /// reads its slice from there (a 2 048-GPU decision has thousands of
    /// names). `None` for a job not admitted.
    pub fn held_reservation(&self, job: &JobId) -> Option<Reservation> {
        self.held_resources(job).map(Reservation::of)
    }

    /// The typed resources admitted job `job` holds.
    fn held_resources(&self, job: &JobId) -> Option<&Resources> {
        let slot = *self.by_id.get(job)?;
        Some(&self.slots[slot as usize].as_ref()?.res)
    }

    /// Mask every resource of `r` that is free now: no placement stage
    /// takes it and admitting a decision that names it is refused, until
    /// [`FabricState::unmask`]. Resources held now stay as they are. A
    /// masked state is a view for placement only: never save it.
    pub fn mask(&mut self, r: &Reservation) -> Masked {
        let before = self.version;
        let gpus: Vec<(ServerId, u16)> = (r.gpus.iter().copied())
            .filter(|&(s, g)| self.occ.gpu[self.layout.gpu(s, g)] == FREE)
            .collect();
        self.mask_gpus(&gpus);
        self.touch();
        let o = &mut self.occ;
        let take = |ports: &mut Vec<u32>, list: &[usize]| -> Vec<usize> {
            let free: Vec<usize> = list.iter().copied().filter(|&i| ports[i] == FREE).collect();
            for &i in &free {
                ports[i] = MASKED;
            }
            free
        };
        let uplinks = take(&mut o.uplink, &r.uplinks);
        let spine_ports = take(&mut o.spine_port, &r.spine_ports);
        let ocs_ports = take(&mut o.ocs_port, &r.ocs_ports);
        // The same mask of the same state: the same contents as then.
        let again = MaskMemo {
            base: before,
            reservation: r.id,
            masked: self.version,
        };
        match self.mask_memo {
            Some(m) if r.id != 0 && (m.base, m.reservation) == (before, r.id) => {
                self.version = m.masked;
            }
            _ => self.mask_memo = Some(again),
        }
        Masked {
            versions: (before, self.version),
            uplinks,
            spine_ports,
            ocs_ports,
            gpus,
        }
    }

    /// Free again what [`FabricState::mask`] masked. When nothing else
    /// changed since, the state is as before the mask and takes back its
    /// version then ([`FabricState::version`]).
    pub fn unmask(&mut self, m: Masked) {
        let untouched = self.version == m.versions.1;
        self.unmask_gpus(&m.gpus);
        self.touch();
        (self.occ).unmask_ports([&m.uplinks, &m.spine_ports, &m.ocs_ports]);
        if untouched {
            self.version = m.versions.0;
        }
    }
}
