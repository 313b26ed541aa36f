//! No name can inject a command: every name is checked when it is built
//! (including when it is deserialised), renderers accept only checked
//! types, and no accepted name adds a line break, `;` or markup to what is
//! rendered for any dialect.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use proptest::prelude::*;
use vclos::decision::Decision;
use vclos::dialect::{all, claimed};
use vclos::intent::{Description, Hostname, Ipv4Net, Item, PortName, VrfName};
use vclos::names::JobId;

const EVIL: [&str; 6] = ["j1\nreboot", "j1;reload", "j1\rx", "j1 x", "j1\"", "j1<x>"];

#[test]
fn decisions_with_injected_job_ids_do_not_deserialise() {
    for bad in EVIL {
        let json = serde_json::json!({"job": bad, "stage": "manual", "gpus": []}).to_string();
        let e = serde_json::from_str::<Decision>(&json).unwrap_err();
        assert!(e.to_string().contains("invalid job id"), "{bad:?}: {e}");
        let yaml = format!(
            "job: {}\nstage: manual\ngpus: []\n",
            serde_json::to_string(bad).unwrap()
        );
        assert!(
            serde_yaml_ng::from_str::<Decision>(&yaml).is_err(),
            "{bad:?}"
        );
    }
    // A good id passes, so the refusals above are about the id.
    let ok: Decision = serde_json::from_str(r#"{"job":"j1","stage":"manual","gpus":[]}"#).unwrap();
    assert_eq!(ok.job.as_str(), "j1");
}

#[test]
fn every_name_type_rejects_injection() {
    for bad in EVIL {
        assert!(JobId::new(bad).is_err(), "{bad:?}");
        assert!(PortName::new(bad).is_err(), "{bad:?}");
        assert!(Hostname::new(bad).is_err(), "{bad:?}");
        assert!(VrfName::new(format!("Vrf-{bad}")).is_err(), "{bad:?}");
        if bad != "j1 x" {
            assert!(Description::new(bad).is_err(), "{bad:?}");
        }
    }
    // Item fields deserialise through the same checks.
    let item = r#"{"kind":"patch","a":"1\nDLT-PATCH::ALL:1;","b":"2"}"#;
    assert!(serde_json::from_str::<Item>(item).is_err());
}

/// One item of every kind, with `s` in the field `field` (0..=4) and a
/// fixed harmless value elsewhere. `None` when a name check refuses `s`.
fn items_with(field: usize, s: &str) -> Option<BTreeSet<Item>> {
    let pick = |f: usize, plain: &str| {
        if f == field {
            s.to_string()
        } else {
            plain.to_string()
        }
    };
    let port = PortName::new(pick(0, "e1")).ok()?;
    let host = Hostname::new(pick(1, "h1")).ok()?;
    let vrf = VrfName::new(format!("Vrf-{}", pick(2, "v1"))).ok()?;
    let text = Description::new(pick(3, "d1")).ok()?;
    let job = JobId::new(pick(4, "j1")).ok()?;
    let uplink = PortName::new("u1").unwrap();
    let net = |a: u32, l: u8| Ipv4Net::new(Ipv4Addr::from(a), l);
    Some(
        [
            Item::Hostname { name: host },
            Item::Description {
                port: port.clone(),
                text,
            },
            Item::Routed { port: port.clone() },
            Item::Vrf { name: vrf.clone() },
            Item::Address {
                port: port.clone(),
                vrf: Some(vrf.clone()),
                net: net(0x0B00_0000, 31),
            },
            Item::Address {
                port: uplink.clone(),
                vrf: None,
                net: net(0x0A00_0000, 31),
            },
            Item::Route {
                vrf,
                prefix: net(0x0A80_0100, 24),
                nexthop: Ipv4Addr::new(10, 0, 0, 1),
            },
            Item::Redirect {
                job,
                index: 1,
                port: port.clone(),
                uplink,
                destinations: vec![net(0x0A80_0100, 24)],
            },
            Item::patch(port, PortName::new("99").unwrap()),
        ]
        .into_iter()
        .collect(),
    )
}

fn check_no_injection(field: usize, s: &str) -> Result<(), TestCaseError> {
    let Some(items) = items_with(field, s) else {
        return Ok(()); // refused before anything could be rendered
    };
    let reference = items_with(field, "x1").unwrap();
    for d in all() {
        let (mine, plain) = (claimed(d, &items), claimed(d, &reference));
        // Same shape: the name added no line of its own.
        prop_assert_eq!(
            d.render(&mine).lines().count(),
            d.render(&plain).lines().count(),
            "{:?} {:?}",
            d.id(),
            s
        );
        let none = BTreeSet::new();
        let cmds = d.changes(&none, &mine);
        prop_assert_eq!(cmds.len(), d.changes(&none, &plain).len());
        for c in cmds.iter().chain(d.changes(&mine, &none).iter()) {
            prop_assert!(
                !c.contains('\n') && !c.contains('\r'),
                "{:?}: {:?}",
                d.id(),
                c
            );
            match d.id() {
                vclos::topology::Dialect::Tl1 => prop_assert_eq!(c.matches(';').count(), 1),
                vclos::topology::Dialect::HuaweiCe => prop_assert!(!c.contains(';')),
                _ => {}
            }
        }
        // And it reads back as the same items.
        prop_assert_eq!(d.parse("dev", &d.render(&mine)).unwrap(), mine);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_names_are_rejected_or_harmless(field in 0usize..5, s in "\\PC{0,12}|[a-zA-Z0-9 ;\n\r<>&\"'/:._-]{1,12}") {
        check_no_injection(field, &s)?;
    }
}

#[test]
fn injection_strings_never_render() {
    for field in 0..5 {
        for bad in EVIL {
            if field == 3 && bad == "j1 x" {
                continue; // a space inside a description is plain text
            }
            assert!(
                items_with(field, bad).is_none(),
                "field {field} accepted {bad:?}"
            );
        }
    }
}
