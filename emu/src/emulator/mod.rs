//! The emulated fabric: vclos's embedded default.
//!
//! Every switch and OCS of a topology is emulated in memory and served on
//! loopback with its real protocol (SSH CLI, NETCONF, Telnet/TL1), so the
//! real drivers and standard clients (OpenSSH, telnet) talk to it. The
//! emulator enforces the fabric's physical rules itself (only idle OCS links
//! may move; an OCS switch takes time), whoever talks to it.

pub mod busy;
pub mod cli;
pub mod fabric;
pub mod faults;
pub mod netconf;
pub mod ocs;
pub mod shell;
pub mod slots;
pub mod sonic;
pub mod ssh;
pub mod steering;
pub mod timeouts;
pub mod tl1;
pub mod vrp;
#[cfg(test)]
mod vrp_dialect_tests;

/// The one account every emulated device accepts (emulator only; the
/// default is admin/admin). `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub username: String,
    pub password: String,
}

impl Default for Login {
    fn default() -> Self {
        Login {
            username: "admin".into(),
            password: "admin".into(),
        }
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}
