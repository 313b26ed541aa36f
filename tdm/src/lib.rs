//! vclos-tdm: time-division optical schedules for pod groups (seeds 003
//! and 004; design and readings in docs/tdm.md).
//!
//! Planning is pure: a jobs file and a spine-less pod fabric in, one
//! `Schedule` per pod group out (traffic Eq. 4-5, stage times Eq. 2-3,
//! hill-climbing grouping, Algorithm 2 circuits, Algorithm 3 rings), and
//! each planned round replayed on the network model's max-min fair sharing
//! (`vclos_core::network`). Applying (`tdm::run`) checks a schedule against
//! the topology, then at every stage barrier switches only the ports whose
//! cross-connects change through the OCS drivers, waits the switching
//! delay and reads every table back; the idle-link rule is checked before
//! anything moves.
//!
//! Why a crate of its own: TDM is a second way of using the OCS layer, next
//! to OCS-vClos's rewiring of idle links, with its own model and its own
//! runner; it depends on the model (`vclos-core`), the device side
//! (`vclos-device`: TL1 dialect, controller) and the drivers, and nothing
//! but the CLI depends on it.

// The model and the device side under the paths the modules were written
// against.
use vclos_core::{intent, network, topology, yaml};
use vclos_device::{controller, dialect};

pub mod tdm;
