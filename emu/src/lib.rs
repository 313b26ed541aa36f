//! vclos-emu: the emulated fabric the tests and `vclos demo` run against.
//!
//! Every device of a topology on a real loopback socket, speaking what the
//! device speaks: Huawei CE (VRP CLI over SSH), SONiC (bash, `config`
//! and the Generic Config Updater over SSH), OpenConfig (NETCONF over SSH,
//! every edit validated against the published YANG models when the `yang`
//! feature is on) and the OCS (TL1 over Telnet, idle-only rewiring, 50 ms
//! switching). The rule for this crate: whatever a real device would refuse
//! or ignore, the emulator refuses or ignores too, by the same rule source
//! where one exists (the vendor's YANG models, its documented syntax), so a
//! test cannot pass only because the emulator is lenient. The module doc
//! of [`emulator`] maps its parts.
//!
//! Why a crate of its own: it depends on the model (`vclos-core`), the
//! dialects and schema seam (`vclos-device`, to start switches from their
//! baseline intent and to validate), and the drivers' wire formats
//! (`vclos-drivers`), and nothing in the control plane depends on it but
//! tests, `vclos emu serve` and `vclos demo`.

// The model and the device side under the paths the modules were written
// against.
use vclos_core::{intent, topology};
use vclos_device::{dialect, schema, verification};

pub mod emulator;
