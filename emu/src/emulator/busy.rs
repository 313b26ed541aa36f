//! Which OCS links carry traffic: the oracle the emulated OCS consults
//! before every change.
//!
//! The paper (Section 7) rewires idle links only: an OCS switch darkens the
//! ports for ~50 ms, which would drop packets of a running job. The emulator
//! enforces that rule itself, whoever talks to it, but whether a link is busy
//! depends on the *switch* configs (a leaf redirect onto the uplink, a spine
//! VRF binding the port) and on test traffic, which live outside the OCS. So
//! the OCS asks a [`BusyOracle`]; the emulator wires one built from the
//! switch configs, tests use [`StaticBusy`].
//!
//! Ports are OCS port *indices* (as in [`PortRef::Ocs`](crate::topology::PortRef)),
//! not TL1 port numbers.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::topology::OcsId;

/// Answers "does the link through this OCS port carry traffic?".
///
/// `port` is the OCS port index. The answer covers the cable on that port
/// (the switch port at its other end steers traffic onto it, or test traffic
/// runs over it); the OCS checks both ports of a patch itself.
pub trait BusyOracle: Send + Sync {
    fn busy(&self, ocs: OcsId, port: u16) -> bool;
}

/// Nothing is ever busy (an emulator without switches).
#[derive(Debug, Default, Clone, Copy)]
pub struct NeverBusy;

impl BusyOracle for NeverBusy {
    fn busy(&self, _ocs: OcsId, _port: u16) -> bool {
        false
    }
}

/// A settable oracle: ports marked busy by hand, plus counted test-traffic
/// markers (several flows may share a port; it stays busy until the last
/// one stops).
#[derive(Debug, Default)]
pub struct StaticBusy {
    marked: Mutex<HashSet<(OcsId, u16)>>,
    traffic: Mutex<HashMap<(OcsId, u16), u32>>,
}

impl StaticBusy {
    pub fn new() -> Self {
        Self::default()
    }

    /// Mark (or unmark) a port as steered onto by a switch.
    pub fn set_busy(&self, ocs: OcsId, port: u16, busy: bool) {
        if let Ok(mut m) = self.marked.lock() {
            if busy {
                m.insert((ocs, port));
            } else {
                m.remove(&(ocs, port));
            }
        }
    }

    /// Test traffic starts over the link through `port`.
    pub fn start_traffic(&self, ocs: OcsId, port: u16) {
        if let Ok(mut t) = self.traffic.lock() {
            *t.entry((ocs, port)).or_insert(0) += 1;
        }
    }

    /// One test flow over `port` stops.
    pub fn stop_traffic(&self, ocs: OcsId, port: u16) {
        if let Ok(mut t) = self.traffic.lock() {
            if let Some(n) = t.get_mut(&(ocs, port)) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    t.remove(&(ocs, port));
                }
            }
        }
    }

    /// Start test traffic and stop it when the guard drops.
    pub fn traffic(self: &Arc<Self>, ocs: OcsId, port: u16) -> TrafficGuard {
        self.start_traffic(ocs, port);
        TrafficGuard {
            oracle: Arc::clone(self),
            ocs,
            port,
        }
    }

    /// Forget every mark and every flow.
    pub fn clear(&self) {
        if let Ok(mut m) = self.marked.lock() {
            m.clear();
        }
        if let Ok(mut t) = self.traffic.lock() {
            t.clear();
        }
    }
}

impl BusyOracle for StaticBusy {
    fn busy(&self, ocs: OcsId, port: u16) -> bool {
        let marked = self
            .marked
            .lock()
            .map(|m| m.contains(&(ocs, port)))
            .unwrap_or(true);
        let flowing = self
            .traffic
            .lock()
            .map(|t| t.contains_key(&(ocs, port)))
            .unwrap_or(true);
        // A poisoned lock answers "busy": refusing a change is the safe side.
        marked || flowing
    }
}

/// The links of a TDM stage's communicating jobs (issue 19): a busy set
/// replaced as a whole whenever the hosts' phase changes. During stage `k`
/// the hosts mark every circuit carrying a job; at the barrier ending it,
/// only the circuits of jobs that keep communicating into stage `k + 1`
/// (`vclos::tdm::transition::busy_at_barrier`). The OCS then refuses, by
/// itself, a transition that would cut a link in use.
#[derive(Debug, Default)]
pub struct StageBusy {
    ports: Mutex<HashSet<(OcsId, u16)>>,
}

impl StageBusy {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replace the busy set.
    pub fn set(&self, ports: impl IntoIterator<Item = (OcsId, u16)>) {
        if let Ok(mut p) = self.ports.lock() {
            *p = ports.into_iter().collect();
        }
    }

    /// Nothing busy (no stage running).
    pub fn clear(&self) {
        self.set([]);
    }
}

impl BusyOracle for StageBusy {
    fn busy(&self, ocs: OcsId, port: u16) -> bool {
        // A poisoned lock answers "busy", as StaticBusy's does.
        self.ports
            .lock()
            .map(|p| p.contains(&(ocs, port)))
            .unwrap_or(true)
    }
}

/// Test traffic over one port for as long as the guard lives.
#[derive(Debug)]
pub struct TrafficGuard {
    oracle: Arc<StaticBusy>,
    ocs: OcsId,
    port: u16,
}

impl Drop for TrafficGuard {
    fn drop(&mut self) {
        self.oracle.stop_traffic(self.ocs, self.port);
    }
}

/// Busy if any of the inner oracles says so (switch configs + test traffic).
#[derive(Default, Clone)]
pub struct AnyBusy(pub Vec<Arc<dyn BusyOracle>>);

impl std::fmt::Debug for AnyBusy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AnyBusy({} oracles)", self.0.len())
    }
}

impl BusyOracle for AnyBusy {
    fn busy(&self, ocs: OcsId, port: u16) -> bool {
        self.0.iter().any(|o| o.busy(ocs, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_and_counted_traffic() {
        let b = Arc::new(StaticBusy::new());
        let o = OcsId(0);
        assert!(!b.busy(o, 3));
        b.set_busy(o, 3, true);
        assert!(b.busy(o, 3));
        assert!(!b.busy(OcsId(1), 3), "ports are per OCS");
        b.set_busy(o, 3, false);
        assert!(!b.busy(o, 3));

        let g1 = b.traffic(o, 5);
        let g2 = b.traffic(o, 5);
        drop(g1);
        assert!(b.busy(o, 5), "one flow still runs");
        drop(g2);
        assert!(!b.busy(o, 5));
    }

    #[test]
    fn any_busy_ors_its_oracles() {
        let a = Arc::new(StaticBusy::new());
        let any = AnyBusy(vec![Arc::new(NeverBusy), a.clone()]);
        assert!(!any.busy(OcsId(0), 1));
        a.start_traffic(OcsId(0), 1);
        assert!(any.busy(OcsId(0), 1));
    }

    #[test]
    fn a_stage_busy_set_is_replaced_whole() {
        let s = StageBusy::new();
        s.set([(OcsId(0), 1), (OcsId(0), 17)]);
        assert!(s.busy(OcsId(0), 17) && !s.busy(OcsId(0), 2));
        s.set([(OcsId(0), 2)]);
        assert!(!s.busy(OcsId(0), 1) && s.busy(OcsId(0), 2));
        s.clear();
        assert!(!s.busy(OcsId(0), 2));
    }
}
