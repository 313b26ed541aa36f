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

/// The spine end of a link shared by jobs `a` (main interface, VRF
/// `Vrf-a-1`) and `b` (sub-interface `Ethernet64.101`, VLAN 101, VRF
/// `Vrf-b-1`, a route back through the leaf's sub-interface address), as
/// intent makes it (issue 16).
pub fn shared_spine() -> std::collections::BTreeSet<vclos::intent::Item> {
    serde_yaml_ng::from_str(
        "
- {kind: subinterface, port: Ethernet64.101, vlan: 101}
- {kind: vrf, name: Vrf-a-1}
- {kind: vrf, name: Vrf-b-1}
- {kind: address, port: Ethernet64, vrf: Vrf-a-1, net: 10.0.0.1/31}
- {kind: address, port: Ethernet64.101, vrf: Vrf-b-1, net: 172.16.0.1/31}
- {kind: route, vrf: Vrf-b-1, prefix: 10.128.0.0/24, nexthop: 172.16.0.0}
",
    )
    .unwrap()
}
