//! The emulated optical circuit switch: a symmetric patch table with a
//! switching delay and the idle-links-only rule.
//!
//! Model, not protocol: the TL1 server ([`super::tl1`]) and the rest of the
//! emulator drive the same [`OcsModel`]. Any port may be patched to any other
//! port (the paper's two-leaf OCS-vClos case joins two leaf uplinks), never to
//! itself, and a port is in at most one patch.
//!
//! Physics the emulator enforces whoever talks to it:
//! - A new connection takes the switching delay (50 ms by default, the
//!   paper's MEMS OCS): its ports are dark and it carries light only once the
//!   delay has passed; every pair of one command switches together, as the
//!   mirrors of a MEMS OCS move in parallel. A disconnection takes effect at
//!   once (the light stops; there is nothing to settle), so the port is dark
//!   and free for the next connection immediately. Time is tokio time, so
//!   tests can `tokio::time::pause()` and `advance()` through the dark window.
//! - A change that would move a busy link is refused (paper Section 7: only
//!   idle links are rewired). Moving a link means disconnecting a patch one of
//!   whose ports is busy, or (in replace mode) connecting a port whose current
//!   patch is busy. Busy comes from a [`BusyOracle`] because the switch
//!   configs that make a link busy live outside the OCS.
//! - A port still switching refuses further changes until it settles.
//!
//! Changes are validated as a whole before anything moves, so a refused
//! change leaves the table untouched.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use thiserror::Error;
use tokio::time::Instant;

use super::busy::BusyOracle;
use crate::topology::{Ocs, OcsId, Topology};

/// The paper's MEMS OCS switching time.
pub const DEFAULT_SWITCHING_DELAY: Duration = Duration::from_millis(50);

/// What a port's link is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// No patch: dark.
    Unpatched,
    /// A change is in progress: dark until it completes. `peer` is the patch
    /// the port will have afterwards, if any.
    Switching { peer: Option<u16> },
    /// Patched and carrying light.
    Lit { peer: u16 },
}

impl LinkState {
    pub fn is_lit(self) -> bool {
        matches!(self, LinkState::Lit { .. })
    }
}

/// A change to the patch table, as one unit (validated whole, then applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Make these patches. With `replace`, ports already patched lose their
    /// old patch first (old partners go dark); without it, a patched port is
    /// an error (TL1 `ENT-PATCH` semantics).
    Connect {
        pairs: Vec<(u16, u16)>,
        replace: bool,
    },
    /// Remove the patch of each listed port (listing both ends is fine).
    Disconnect(Vec<u16>),
    /// Remove every patch.
    DisconnectAll,
}

/// Why a change was refused. Ports are named as the topology names them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OcsError {
    #[error("{device}: port {port} does not exist")]
    NoSuchPort { device: String, port: String },
    #[error("{device}: port {port} cannot be patched to itself")]
    SelfPatch { device: String, port: String },
    #[error("{device}: port {port} appears twice in one change")]
    Repeated { device: String, port: String },
    #[error("{device}: port {port} is already patched to {partner}")]
    AlreadyPatched {
        device: String,
        port: String,
        partner: String,
    },
    #[error("{device}: port {port} is not patched")]
    NotPatched { device: String, port: String },
    #[error("{device}: the link on port {port} is busy; only idle links may be rewired")]
    Busy { device: String, port: String },
    #[error("{device}: port {port} is still switching")]
    Switching { device: String, port: String },
}

#[derive(Debug)]
struct State {
    partner: Vec<Option<u16>>,
    /// When each port's last change completes (dark until then).
    settles_at: Vec<Option<Instant>>,
}

/// One emulated OCS. Cheap to share: every method takes `&self`, and the
/// lock is never held across an `.await`.
pub struct OcsModel {
    id: OcsId,
    name: String,
    ports: Vec<String>,
    by_name: HashMap<String, u16>,
    delay: Duration,
    busy: Arc<dyn BusyOracle>,
    state: Mutex<State>,
}

impl std::fmt::Debug for OcsModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OcsModel")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("ports", &self.ports.len())
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}

impl OcsModel {
    /// Build from a topology OCS: its ports and initial patches, with the
    /// default switching delay. Ports beyond u16 range are not addressable
    /// (the topology loader keeps OCS port counts far below that).
    pub fn new(id: OcsId, ocs: &Ocs, busy: Arc<dyn BusyOracle>) -> Self {
        let ports: Vec<String> = ocs
            .ports
            .iter()
            .take(usize::from(u16::MAX))
            .map(|p| p.to_string())
            .collect();
        let by_name = ports
            .iter()
            .enumerate()
            .filter_map(|(i, p)| u16::try_from(i).ok().map(|i| (p.clone(), i)))
            .collect();
        let mut partner = vec![None; ports.len()];
        for &(a, b) in &ocs.patches {
            if usize::from(a.max(b)) < ports.len() && a != b {
                partner[usize::from(a)] = Some(b);
                partner[usize::from(b)] = Some(a);
            }
        }
        let settles_at = vec![None; ports.len()];
        Self {
            id,
            name: ocs.name.to_string(),
            ports,
            by_name,
            delay: DEFAULT_SWITCHING_DELAY,
            busy,
            state: Mutex::new(State {
                partner,
                settles_at,
            }),
        }
    }

    /// The model of OCS `id` of a topology.
    pub fn from_topology(topo: &Topology, id: OcsId, busy: Arc<dyn BusyOracle>) -> Option<Self> {
        topo.ocs.get(id.index()).map(|o| Self::new(id, o, busy))
    }

    /// Use another switching delay (tests, or a slower OCS such as Calient's).
    pub fn with_switching_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn id(&self) -> OcsId {
        self.id
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn switching_delay(&self) -> Duration {
        self.delay
    }
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }
    /// The topology name of port index `p` (`#p` if out of range).
    pub fn port_name(&self, p: u16) -> String {
        self.ports
            .get(usize::from(p))
            .cloned()
            .unwrap_or_else(|| format!("#{p}"))
    }
    /// The index of the port named `name`.
    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.by_name.get(name).copied()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the table half-written
        // (every write happens after validation), so recover the guard.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current patches as `(a, b)` with `a < b`, sorted. Includes patches
    /// still switching (they are in the table; they just carry no light yet).
    pub fn patches(&self) -> Vec<(u16, u16)> {
        let st = self.lock();
        st.partner
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let i = u16::try_from(i).ok()?;
                p.filter(|&q| i < q).map(|q| (i, q))
            })
            .collect()
    }

    /// The port `p` is patched to (switching or lit).
    pub fn partner(&self, p: u16) -> Option<u16> {
        self.lock().partner.get(usize::from(p)).copied().flatten()
    }

    /// Whether port `p` is dark, switching or lit, now (tokio time).
    pub fn link_state(&self, p: u16) -> Result<LinkState, OcsError> {
        let st = self.lock();
        let i = usize::from(p);
        let Some(&peer) = st.partner.get(i) else {
            return Err(self.no_such(p));
        };
        let switching = st.settles_at[i].is_some_and(|t| Instant::now() < t);
        Ok(match (switching, peer) {
            (true, peer) => LinkState::Switching { peer },
            (false, Some(peer)) => LinkState::Lit { peer },
            (false, None) => LinkState::Unpatched,
        })
    }

    /// Connect `a` and `b` (both must be unpatched) and wait out the switch.
    pub async fn connect(&self, a: u16, b: u16) -> Result<(), OcsError> {
        self.apply(Change::Connect {
            pairs: vec![(a, b)],
            replace: false,
        })
        .await
    }

    /// Disconnect the patch of `p` and wait out the switch.
    pub async fn disconnect(&self, p: u16) -> Result<(), OcsError> {
        self.apply(Change::Disconnect(vec![p])).await
    }

    /// Disconnect every patch (refused whole if any patch is busy).
    pub async fn disconnect_all(&self) -> Result<(), OcsError> {
        self.apply(Change::DisconnectAll).await
    }

    /// Validate and apply a change, then wait until it has settled.
    pub async fn apply(&self, change: Change) -> Result<(), OcsError> {
        let done = self.start(change)?;
        // A disconnection is immediate: no timer (tokio's would still round
        // a zero wait up to its next millisecond tick).
        if done > Instant::now() {
            tokio::time::sleep_until(done).await;
        }
        Ok(())
    }

    /// Validate and apply a change without waiting: the table is updated at
    /// once, the affected ports are dark until the returned instant.
    pub fn start(&self, change: Change) -> Result<Instant, OcsError> {
        let now = Instant::now();
        let mut st = self.lock();
        let affected = self.validate(&st, &change, now)?;
        let done = now + self.delay;
        // Only ports being connected settle; disconnected ports are just dark.
        let mut settling: Vec<u16> = Vec::new();
        match change {
            Change::Connect { pairs, .. } => {
                for &p in &affected {
                    st.partner[usize::from(p)] = None;
                }
                for (a, b) in pairs {
                    st.partner[usize::from(a)] = Some(b);
                    st.partner[usize::from(b)] = Some(a);
                    settling.extend([a, b]);
                }
            }
            Change::Disconnect(_) | Change::DisconnectAll => {
                for &p in &affected {
                    st.partner[usize::from(p)] = None;
                }
            }
        }
        for &p in &settling {
            st.settles_at[usize::from(p)] = Some(done);
        }
        if settling.is_empty() {
            return Ok(now);
        }
        tracing::debug!(device = %self.name, ports = settling.len(), "ocs switching");
        Ok(done)
    }

    /// Check a change against the table; return every port it darkens.
    fn validate(
        &self,
        st: &State,
        change: &Change,
        now: Instant,
    ) -> Result<BTreeSet<u16>, OcsError> {
        let mut affected = BTreeSet::new();
        let settled = |p: u16| -> Result<(), OcsError> {
            match st.settles_at[usize::from(p)] {
                Some(t) if now < t => Err(OcsError::Switching {
                    device: self.name.clone(),
                    port: self.port_name(p),
                }),
                _ => Ok(()),
            }
        };
        let idle = |p: u16, q: u16| -> Result<(), OcsError> {
            for x in [p, q] {
                if self.busy.busy(self.id, x) {
                    return Err(OcsError::Busy {
                        device: self.name.clone(),
                        port: self.port_name(x),
                    });
                }
            }
            Ok(())
        };
        match change {
            Change::Connect { pairs, replace } => {
                let mut seen = BTreeSet::new();
                for &(a, b) in pairs {
                    self.exists(a)?;
                    self.exists(b)?;
                    if a == b {
                        return Err(OcsError::SelfPatch {
                            device: self.name.clone(),
                            port: self.port_name(a),
                        });
                    }
                    for p in [a, b] {
                        if !seen.insert(p) {
                            return Err(OcsError::Repeated {
                                device: self.name.clone(),
                                port: self.port_name(p),
                            });
                        }
                    }
                }
                for &p in &seen {
                    settled(p)?;
                    affected.insert(p);
                    if let Some(q) = st.partner[usize::from(p)] {
                        // Re-making an existing patch is still a switch of a
                        // live link, so it is checked like any other move.
                        idle(p, q)?;
                        if !replace {
                            return Err(OcsError::AlreadyPatched {
                                device: self.name.clone(),
                                port: self.port_name(p),
                                partner: self.port_name(q),
                            });
                        }
                        settled(q)?;
                        affected.insert(q);
                    }
                }
            }
            Change::Disconnect(ports) => {
                for &p in ports {
                    self.exists(p)?;
                }
                for &p in ports {
                    let Some(q) = st.partner[usize::from(p)] else {
                        return Err(OcsError::NotPatched {
                            device: self.name.clone(),
                            port: self.port_name(p),
                        });
                    };
                    settled(p)?;
                    settled(q)?;
                    idle(p, q)?;
                    affected.insert(p);
                    affected.insert(q);
                }
            }
            Change::DisconnectAll => {
                for (i, q) in st.partner.iter().enumerate() {
                    let (Ok(p), Some(q)) = (u16::try_from(i), q) else {
                        continue;
                    };
                    settled(p)?;
                    idle(p, *q)?;
                    affected.insert(p);
                }
            }
        }
        Ok(affected)
    }

    fn exists(&self, p: u16) -> Result<(), OcsError> {
        if usize::from(p) < self.ports.len() {
            Ok(())
        } else {
            Err(self.no_such(p))
        }
    }

    fn no_such(&self, p: u16) -> OcsError {
        OcsError::NoSuchPort {
            device: self.name.clone(),
            port: self.port_name(p),
        }
    }
}
