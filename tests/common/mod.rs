//! Shared test helpers: random consistent item sets, golden files.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use proptest::prelude::*;
use vclos::intent::{Description, Hostname, Ipv4Net, Item, PortName, VrfName};
use vclos::names::JobId;

pub fn net(a: u32, len: u8) -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::from(a), len)
}

prop_compose! {
    pub fn word()(s in "[A-Za-z][A-Za-z0-9_-]{0,8}") -> String { s }
}

prop_compose! {
    pub fn description()(s in "[A-Za-z0-9_.:/-]{1,8}( [A-Za-z0-9_.:/-]{1,8}){0,3}") -> Description {
        Description::new(s).unwrap()
    }
}

/// Compare `actual` with the golden file `tests/golden/<rel>`; rewrite it
/// instead when `VCLOS_UPDATE_GOLDEN=1`.
pub fn golden(rel: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(rel);
    if std::env::var("VCLOS_UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with VCLOS_UPDATE_GOLDEN=1",
            path.display()
        )
    });
    if expected != actual {
        let diff = similar::TextDiff::from_lines(expected.as_str(), actual)
            .unified_diff()
            .header("golden", "actual")
            .to_string();
        panic!(
            "{} differs (VCLOS_UPDATE_GOLDEN=1 to accept):\n{diff}",
            path.display()
        );
    }
}

/// A consistent random item set: per port at most one description,
/// address and redirect; redirect uplinks addressed with a /31; policy
/// names unique. Alphanumeric ports also get 802.1Q sub-interfaces (one of
/// the uplink, some redirects go onto it; one of some other ports, with an
/// address); numeric ports get OCS patches instead.
pub fn item_set(numeric_ports: bool) -> impl Strategy<Value = BTreeSet<Item>> {
    let port_names = if numeric_ports {
        prop::collection::btree_set(1u32..500, 2..12)
            .prop_map(|s| s.into_iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .boxed()
    } else {
        prop::collection::btree_set("[A-Za-z][A-Za-z0-9]{0,5}(/[0-9]{1,2}){0,2}", 2..12)
            .prop_map(|s| s.into_iter().collect::<Vec<_>>())
            .boxed()
    };
    let vrfs = prop::collection::btree_set("Vrf-[a-z0-9]{1,8}", 0..4);
    (
        port_names,
        vrfs,
        prop::option::of("[a-z][a-z0-9-]{0,10}"),
        prop::collection::vec(
            (
                any::<bool>(),
                prop::option::of(description()),
                any::<u8>(),
                any::<bool>(),
                0usize..4,
                prop::collection::btree_set(0u32..64, 1..4),
                word(),
            ),
            12,
        ),
        prop::collection::btree_map((0usize..4, 0u32..64), any::<u32>(), 0..6),
    )
        .prop_map(move |(ports, vrfs, host, per_port, routes)| {
            let ports: Vec<PortName> = ports
                .into_iter()
                .map(|p| PortName::new(p).unwrap())
                .collect();
            let vrfs: Vec<VrfName> = vrfs.into_iter().map(|v| VrfName::new(v).unwrap()).collect();
            let mut items = BTreeSet::new();
            if let Some(h) = host {
                items.insert(Item::Hostname {
                    name: Hostname::new(h).unwrap(),
                });
            }
            for v in &vrfs {
                items.insert(Item::Vrf { name: v.clone() });
            }
            // The first port is the uplink every redirect uses: itself,
            // or (a link shared by jobs, alphanumeric ports) its 802.1Q
            // sub-interface `.101`, addressed too.
            let uplink = ports[0].clone();
            items.insert(Item::Address {
                port: uplink.clone(),
                vrf: None,
                net: net(0x0A00_0000, 31),
            });
            let shared_uplink = (!numeric_ports).then(|| {
                // A sub-interface's parent is a routed port.
                items.insert(Item::Routed {
                    port: uplink.clone(),
                });
                let sub = PortName::new(format!("{uplink}.101")).unwrap();
                items.insert(Item::Subinterface {
                    port: sub.clone(),
                    vlan: 101,
                });
                items.insert(Item::Address {
                    port: sub.clone(),
                    vrf: None,
                    net: net(0xAC10_0000, 31),
                });
                sub
            });
            for (i, p) in ports.iter().enumerate().skip(1) {
                let (routed, desc, a, in_vrf, vi, dest, job) = per_port[i % per_port.len()].clone();
                let sub = !numeric_ports && a % 5 == 1;
                if routed || sub {
                    items.insert(Item::Routed { port: p.clone() });
                }
                if let Some(text) = desc {
                    items.insert(Item::Description {
                        port: p.clone(),
                        text,
                    });
                }
                let vrf = if in_vrf && !vrfs.is_empty() {
                    Some(vrfs[vi % vrfs.len()].clone())
                } else {
                    None
                };
                if a % 3 != 0 {
                    items.insert(Item::Address {
                        port: p.clone(),
                        vrf: vrf.clone(),
                        net: net(0x0B00_0000 + 4 * i as u32, 30 + (a % 2)),
                    });
                }
                if sub {
                    // A sub-interface of its own (a spine end of a shared
                    // link), bound to the port's VRF or not.
                    let vlan = 101 + u16::from(a % 8);
                    let sub = PortName::new(format!("{p}.{vlan}")).unwrap();
                    items.insert(Item::Subinterface {
                        port: sub.clone(),
                        vlan,
                    });
                    items.insert(Item::Address {
                        port: sub,
                        vrf,
                        net: net(0xAC10_1000 + 4 * i as u32, 31),
                    });
                }
                if a % 2 == 0 {
                    let onto = match &shared_uplink {
                        Some(sub) if a % 4 == 0 => sub.clone(),
                        _ => uplink.clone(),
                    };
                    items.insert(Item::Redirect {
                        job: JobId::new(job).unwrap(),
                        index: i as u16,
                        port: p.clone(),
                        uplink: onto,
                        destinations: dest
                            .into_iter()
                            .map(|d| net(0x0A80_0000 + 256 * d, 24))
                            .collect(),
                    });
                }
            }
            if !vrfs.is_empty() {
                for ((vi, pfx), nh) in routes {
                    // Several next hops for one prefix (ECMP) are allowed.
                    items.insert(Item::Route {
                        vrf: vrfs[vi % vrfs.len()].clone(),
                        prefix: net(0x0A80_0000 + 256 * pfx, 24),
                        nexthop: Ipv4Addr::from(nh),
                    });
                }
            }
            for pair in ports.chunks(2) {
                if let [a, b] = pair {
                    if numeric_ports {
                        items.insert(Item::patch(a.clone(), b.clone()));
                    }
                }
            }
            items
        })
}

/// The repository root (tests run the binary from there).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Run the built `vclos` binary with `args` from the repository root.
pub fn vclos(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}
