//! vclos-sim: what a placement policy does to a cluster over time.
//!
//! - [`replay`]: a discrete-event replay of a job trace through one
//!   [`vclos_core::placement::Placer`] (FIFO, shortest-first or EDF queues,
//!   head-of-line blocking or EASY backfilling), on the network model of
//!   `vclos_core::network` or an ideal fabric, with an isolation audit
//!   (`replay::Ledger`) that re-checks every decision by name, independently
//!   of the engine that made it; the report (JCT/JWT/JRT, blocking by cause,
//!   fragmentation, decision-time percentiles) is what `vclos replay`
//!   prints and docs/performance.md quotes.
//! - [`sweep`]: a grid of replays (policies x loads x queues x seeds) on
//!   rayon, rows in grid order and without timings (the same grid gives the
//!   same bytes), and SVG charts (plotters).
//!
//! Why a crate of its own: a replay reads the model and calls the placer
//! exactly as `vclos job submit` does, and nothing that configures a device
//! may depend on it. It depends on `vclos-core` only; the CLI (`vclos`)
//! and the benches sit on top.

// The model under the paths the modules were written against.
use vclos_core::{decision, names, network, placement, sharing, state, topology, trace};

pub mod replay;
pub mod sweep;
