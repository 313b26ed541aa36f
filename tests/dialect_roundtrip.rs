//! Every dialect reads back what it writes: `parse(render(i)) == i` for
//! item sets made of the kinds it claims, and every claimed kind renders.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use proptest::prelude::*;

mod common;
use common::{item_set, net};
use vclos::dialect::{all, claimed};
use vclos::intent::{Description, Hostname, Item, ItemKind, PortName, VrfName};
use vclos::names::JobId;

/// One sample item of each kind, consistent enough for every dialect.
fn samples() -> BTreeSet<Item> {
    let p = |s: &str| PortName::new(s).unwrap();
    let vrf = VrfName::new("Vrf-j1-2").unwrap();
    [
        Item::Hostname {
            name: Hostname::new("leaf1").unwrap(),
        },
        Item::Description {
            port: p("Ethernet0"),
            text: Description::new("srv1 gpu0").unwrap(),
        },
        Item::Routed {
            port: p("Ethernet0"),
        },
        Item::Vrf { name: vrf.clone() },
        Item::Address {
            port: p("Ethernet0"),
            vrf: None,
            net: net(0x0A80_0000, 31),
        },
        Item::Address {
            port: p("Ethernet8"),
            vrf: None,
            net: net(0x0A00_0000, 31),
        },
        Item::Address {
            port: p("Ethernet4"),
            vrf: Some(vrf.clone()),
            net: net(0x0A00_0201, 31),
        },
        Item::Route {
            vrf,
            prefix: net(0x0A80_0100, 24),
            nexthop: Ipv4Addr::new(10, 0, 2, 0),
        },
        Item::Redirect {
            job: JobId::new("j1").unwrap(),
            index: 1,
            port: p("Ethernet0"),
            uplink: p("Ethernet8"),
            destinations: vec![net(0x0A80_0100, 24)],
        },
        // A shared link: a second job's sub-interface of the uplink, its
        // source route onto it, and a spine-side sub-interface in a VRF
        // (the parent of a sub-interface is a routed port).
        Item::Routed {
            port: p("Ethernet8"),
        },
        Item::Routed {
            port: p("Ethernet4"),
        },
        Item::Subinterface {
            port: p("Ethernet8.101"),
            vlan: 101,
        },
        Item::Address {
            port: p("Ethernet8.101"),
            vrf: None,
            net: net(0xAC10_0000, 31),
        },
        Item::Redirect {
            job: JobId::new("j2").unwrap(),
            index: 2,
            port: p("Ethernet1"),
            uplink: p("Ethernet8.101"),
            destinations: vec![net(0x0A80_0100, 24)],
        },
        Item::Subinterface {
            port: p("Ethernet4.102"),
            vlan: 102,
        },
        Item::Address {
            port: p("Ethernet4.102"),
            vrf: Some(VrfName::new("Vrf-j1-2").unwrap()),
            net: net(0xAC10_0003, 31),
        },
        Item::patch(p("3"), p("35")),
    ]
    .into_iter()
    .collect()
}

#[test]
fn every_claimed_kind_renders_and_round_trips() {
    let items = samples();
    for d in all() {
        let mut claimed_any = false;
        for kind in ItemKind::ALL {
            if !d.claims(kind) {
                continue;
            }
            claimed_any = true;
            let of_kind: Vec<&Item> = items.iter().filter(|i| i.kind() == kind).collect();
            assert!(!of_kind.is_empty(), "no sample of {kind:?}");
            // Rendering the whole set must mention every item of the kind.
            let mine = claimed(d, &items);
            let text = d.render(&mine);
            let back = d.parse("dev", &text).unwrap();
            for i in of_kind {
                assert!(back.contains(i), "{:?} lost {i} in\n{text}", d.id());
            }
            // Adding the kind alone produces commands.
            let without: BTreeSet<Item> =
                mine.iter().filter(|i| i.kind() != kind).cloned().collect();
            assert!(
                !d.changes(&without, &mine).is_empty(),
                "{:?} has no commands for {kind:?}",
                d.id()
            );
        }
        assert!(claimed_any, "{:?} claims nothing", d.id());
    }
}

#[test]
fn unclaimed_kinds_are_not_rendered() {
    let items = samples();
    for d in all() {
        let text = d.render(&items);
        assert_eq!(text, d.render(&claimed(d, &items)), "{:?}", d.id());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn render_then_parse_is_identity(items in item_set(false), numeric in item_set(true)) {
        for d in all() {
            for set in [&items, &numeric] {
                let mine = claimed(d, set);
                let text = d.render(&mine);
                let back = d.parse("dev", &text).unwrap_or_else(|e| panic!("{:?}: {e}\n{text}", d.id()));
                prop_assert_eq!(&back, &mine, "{:?}\n{}", d.id(), text);
            }
        }
    }

    #[test]
    fn changes_from_empty_and_back_touch_everything(items in item_set(true)) {
        for d in all() {
            let mine = claimed(d, &items);
            let none = BTreeSet::new();
            let add = d.changes(&none, &mine);
            let del = d.changes(&mine, &none);
            prop_assert_eq!(add.is_empty(), mine.is_empty());
            prop_assert_eq!(del.is_empty(), mine.is_empty());
            prop_assert!(d.changes(&mine, &mine).is_empty());
        }
    }

    #[test]
    fn parsers_never_panic(text in "(?s).{0,400}") {
        for d in all() {
            let _ = d.parse("dev", &text);
        }
    }
}
