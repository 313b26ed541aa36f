//! vclos: a control plane for isolated GPU-cluster fabrics.
//!
//! Data flows one way (see ARCHITECTURE.md):
//! topology -> placement decision -> per-device intent -> rendered dialect
//! -> diff -> transactional apply -> verify.
//!
//! The workspace follows that flow (ARCHITECTURE.md, "Crates"):
//! `vclos-core` (the model: topology to decision to intent, the state, the
//! network model), `vclos-drivers` (transports), `vclos-device` (dialects,
//! diffs, plans, the transactional controller, verification), `vclos-emu`
//! (the emulated fabric), `vclos-server` (the job lifecycle, its stores,
//! the service and its clients), `vclos-sim` (replay and sweeps) and
//! `vclos-tdm` (TDM optical schedules). This crate is the `vclos` binary's
//! CLI (`src/cli`, argument parsing and printing only) and a facade that
//! re-exports the other crates' modules under the paths they always had, so
//! `vclos::placement` is the engine wherever it lives (tests, benches and
//! examples use those paths).

// The model (topology, placement, intent, state, network model) is the
// `vclos-core` crate; re-exported under the paths it always had.
pub use vclos_core::{
    decision, intent, names, network, placement, sharing, state, topology, trace, yaml,
};

// Dialects, diffs, plans, the controller, YANG validation and verification
// are the `vclos-device` crate.
pub use vclos_device::{controller, dialect, diff, plan, schema, verification};

// The emulated fabric is the `vclos-emu` crate.
pub use vclos_emu::emulator;

// The lifecycle, its stores, the service and its clients are the
// `vclos-server` crate.
pub use vclos_server::{client, jobs, server, slurm, store};

// TDM optical schedules are the `vclos-tdm` crate.
pub use vclos_tdm::tdm;

// Trace replay and sweeps are the `vclos-sim` crate.
pub use vclos_sim::{replay, sweep};
