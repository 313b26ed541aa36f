//! One emulated NETCONF device on loopback SSH (admin/admin, any host key
//! accepted), for the tests that drive it with the real driver or raw SSH.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use vclos::emulator::faults::Faults;
use vclos::emulator::netconf::NetconfDevice;
use vclos::emulator::ssh::{serve, Login, Service, SshServer};
use vclos_drivers::netconf::xml::Element;
use vclos_drivers::ssh::{HostKeyCheck, Password, SshOptions};

/// An empty device named `name` and the SSH server serving it.
pub async fn start(name: &str) -> (Arc<NetconfDevice>, SshServer) {
    let dev = NetconfDevice::new(name, Element::new("data"), Arc::new(Faults::new()));
    let srv = serve(Service::Netconf(dev.clone()), Login::default())
        .await
        .unwrap();
    (dev, srv)
}

/// Client options for `srv`: one connection attempt, `timeout` per command.
pub fn options(srv: &SshServer, timeout: Duration) -> SshOptions {
    let mut o = SshOptions::new(
        "127.0.0.1",
        srv.local_addr().port(),
        "admin",
        Password::new("admin"),
        HostKeyCheck::InsecureAcceptAny,
    );
    o.command_timeout = timeout;
    o.connect_retries = 0;
    o
}
