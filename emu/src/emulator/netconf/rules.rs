//! Device rules no YANG model states, checked on every datastore the
//! emulated device would hold (after the models' own checks).
//!
//! **One subinterface per 802.1Q tag on a port.** openconfig-vlan 1.0.2
//! (2016-05-26) puts the tag of a subinterface at
//! `/interfaces/interface/subinterfaces/subinterface/vlan/config/vlan-id`
//! and has no `unique` statement over it; its description even calls the
//! id "scoped to the subinterface", repeatable on different
//! subinterfaces. A device still cannot terminate one tag on two
//! subinterfaces of the same port: the tag is what demultiplexes an
//! incoming frame to a subinterface. Junos binds "a VLAN ID ... to a
//! logical interface", one logical interface per VLAN of a port
//! (Junos OS "Binding VLAN IDs to Logical Interfaces", juniper.net); Arista
//! EOS maps the packets matching a subinterface's `encapsulation dot1q
//! vlan` to that interface (EOS Subinterfaces TOI, arista.com); the vppcfg
//! validator (git.ipng.ch/ipng/vppcfg) refuses two sub-interfaces of one
//! parent with the same encapsulation. None of these is an OpenConfig
//! text, so the rule is the emulator's stated assumption of what an
//! OpenConfig device does: refused with `operation-failed`, the tag RFC
//! 7950 Section 15.1 gives a `unique` violation (`data-not-unique`).
//! The same tag on subinterfaces of different ports is fine.

use std::collections::BTreeMap;

use vclos_drivers::netconf::xml::Element;

/// A subinterface tagging a VLAN another subinterface of the same
/// interface already terminates: the message names both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateVlan {
    /// The data path of the second subinterface's `vlan-id`.
    pub path: String,
    pub message: String,
}

/// Check every `interfaces/interface` of datastore `data` (its top-level
/// elements) for two subinterfaces with the same `vlan/config/vlan-id`.
pub fn unique_vlans(data: &Element) -> Result<(), DuplicateVlan> {
    let mut interfaces = data
        .children
        .iter()
        .filter(|c| c.local() == "interfaces")
        .flat_map(|c| c.children.iter().filter(|i| i.local() == "interface"));
    interfaces.try_for_each(one_interface)
}

fn one_interface(i: &Element) -> Result<(), DuplicateVlan> {
    let name = leaf(i, "name").unwrap_or("?");
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let subs = i
        .children
        .iter()
        .filter(|c| c.local() == "subinterfaces")
        .flat_map(|c| c.children.iter().filter(|s| s.local() == "subinterface"));
    for s in subs {
        let Some(vlan) = s
            .find("vlan")
            .and_then(|v| v.find("config"))
            .and_then(|c| leaf(c, "vlan-id"))
        else {
            continue;
        };
        let index = leaf(s, "index").unwrap_or("?");
        if let Some(first) = seen.insert(vlan, index) {
            return Err(DuplicateVlan {
                path: format!(
                    "/interfaces/interface[name='{name}']/subinterfaces/subinterface[index='{index}']/vlan/config/vlan-id"
                ),
                message: format!(
                    "VLAN {vlan} of interface {name} is already terminated by subinterface {first}; subinterface {index} cannot tag it too"
                ),
            });
        }
    }
    Ok(())
}

fn leaf<'a>(e: &'a Element, name: &str) -> Option<&'a str> {
    e.children
        .iter()
        .find(|c| c.children.is_empty() && c.local() == name)
        .map(|c| c.text.trim())
}
