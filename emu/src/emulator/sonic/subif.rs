//! Sub-interfaces on the emulated switch: the model of `VLAN_SUB_INTERFACE`
//! (what the Generic Config Updater validates), what intfmgrd does with an
//! entry (one VLAN per parent), and the next hops an ACL redirect may name.
//!
//! # The model
//! sonic-net/sonic-buildimage `src/sonic-yang-models/yang-models/
//! sonic-vlan-sub-interface.yang` (read at commit 022dec1f9d1e), container
//! `VLAN_SUB_INTERFACE`:
//! * `VLAN_SUB_INTERFACE_LIST`, key `name`: pattern
//!   `(\w+)\.([1-9][0-9]{0,2}|[1-3][0-9]{3}|40[0-8][0-9]|409[0-4])` (a
//!   parent of word characters, a dot, an id 1..4094 without leading zero;
//!   XSD's `\w` excludes punctuation, so the parent holds no dot, dash,
//!   slash or underscore: letters and digits here); `must`: at most 15
//!   characters (the Linux netdev name) and the part before the dot a `PORT`
//!   or `PORTCHANNEL` name, or its short form (`Eth<n>` for
//!   `Ethernet<n>`, `Po<n>` for `PortChannel<n>`): "Must condition not
//!   satisfied, please follow vlan sub interface naming convention"; the
//!   list's `must`: a short name needs `vlan` ("... no encap vlan provided
//!   for short-name format vlan sub interface").
//! * its leaves: `admin_status` (`stypes:admin_status`: `up`|`down`),
//!   `vrf_name` (leafref to `VRF`), `vnet_name` (leafref to `VNET`),
//!   `ipv6_use_link_local_only` (`stypes:mode-status`: `enable`|`disable`),
//!   `loopback_action` (`stypes:loopback_action`: `drop|forward`), `vlan`
//!   (uint16 1..4094), `send_redirects` (boolean: `true`|`false`); no other
//!   field (sonic_yang_ext, see [`super::validate`]).
//! * `VLAN_SUB_INTERFACE_IPPREFIX_LIST`, key `name ip-prefix` (config_db
//!   `NAME|PREFIX`): `name` a leafref to `VLAN_SUB_INTERFACE_LIST/name`,
//!   `ip-prefix` a `stypes:sonic-ip-prefix`; no other leaf.
//!
//! # What intfmgrd would not create
//! sonic-net/SONiC `doc/subport/sonic-sub-port-intf-hld.md` (Scope): sub
//! port interfaces of one parent "share the same VLAN id space and must
//! have different VLAN ids". sonic-net/sonic-swss `cfgmgr/intfmgr.cpp`
//! (`doIntfGeneralTask`, `addHostSubIntf`) creates each as `ip link add link
//! <parent> name <sub> type vlan id <vlan>`, which Linux refuses for a VLAN
//! the parent already has (net/8021q `vlan_check_real_dev`: -EEXIST); the
//! VLAN is the name's suffix for a long name (intfmgrd appends it after the
//! fields) and the `vlan` field for a short one. The models allow it; the
//! emulator refuses it at apply time, as it refuses ACL rules aclorch would
//! not program (stricter than a real switch, which would log and retry).
//!
//! # Redirect targets
//! sonic-net/sonic-swss `orchagent/aclorch.cpp` `getRedirectObjectId`: a
//! target that `PortsOrch::getPort` knows must be a physical port or a LAG
//! ("Wrong port type for REDIRECT action. Only physical ports and LAG ports
//! are supported"); a sub-interface is such a port (`PortsOrch::addSubPort`
//! makes a `Port::SUBPORT`), so it is refused. Otherwise the target is a
//! next hop, `NextHopKey` `<ip>` or `<ip>@<alias>`, that must exist on the
//! switch (`NeighOrch::hasNextHop`: "ACL Redirect action target next hop
//! ip: '...' doesn't exist on the switch"). The emulator has no neighbour
//! table: a next hop exists when an address of a routed interface
//! (`INTERFACE`) or sub-interface (`VLAN_SUB_INTERFACE`) — of `alias`, when
//! given — has a subnet holding `ip` that is not its own address (on a /31
//! the far end, the one possible neighbour).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use serde_json::{Map, Value};
use vclos_drivers::configdb::ConfigDb;

use super::validate::{entries, field, in_range, keys, known_fields, prefix, Check};

/// The table.
pub(super) const SUBIF: &str = "VLAN_SUB_INTERFACE";

/// The leaves of `VLAN_SUB_INTERFACE_LIST` besides its key.
const FIELDS: [&str; 7] = [
    "admin_status",
    "vrf_name",
    "vnet_name",
    "ipv6_use_link_local_only",
    "loopback_action",
    "vlan",
    "send_redirects",
];

/// The enumerated leaves and their values.
const ENUMS: [(&str, &[&str]); 4] = [
    ("admin_status", &["up", "down"]),
    ("ipv6_use_link_local_only", &["enable", "disable"]),
    ("loopback_action", &["drop", "forward"]),
    ("send_redirects", &["true", "false"]),
];

/// Linux's interface name limit (IFNAMSIZ - 1).
const MAX_NAME: usize = 15;

/// The parts of a name matching the model's pattern: (parent, id).
fn split(name: &str) -> Option<(&str, u16)> {
    let (parent, id) = name.split_once('.')?;
    let parent_ok = !parent.is_empty() && parent.chars().all(char::is_alphanumeric);
    let id_ok = !id.starts_with('0') && in_range(id, 1, 4094);
    (parent_ok && id_ok).then(|| (parent, id.parse().unwrap_or(0)))
}

/// The interfaces sub-interfaces may hang off: `PORT` and `PORTCHANNEL`.
pub(super) struct Parents<'a> {
    pub ports: &'a BTreeSet<&'a str>,
    pub lags: &'a BTreeSet<&'a str>,
}

impl Parents<'_> {
    /// Whether `p` is a parent by its own name (a long sub-interface name).
    fn named(&self, p: &str) -> bool {
        self.ports.contains(p) || self.lags.contains(p)
    }

    /// The port or LAG the part before the dot names, by name or short form.
    fn resolve(&self, p: &str) -> Option<String> {
        if self.named(p) {
            return Some(p.to_string());
        }
        let long = [
            ("Eth", "Ethernet", self.ports),
            ("Po", "PortChannel", self.lags),
        ];
        long.into_iter().find_map(|(short, full, set)| {
            let l = format!("{full}{}", p.strip_prefix(short)?);
            set.contains(l.as_str()).then_some(l)
        })
    }
}

/// The model checks of `VLAN_SUB_INTERFACE` (module doc).
pub(super) fn model(db: &ConfigDb, parents: &Parents, vrfs: &BTreeSet<&str>) -> Check {
    let names: BTreeSet<&str> = keys(db, SUBIF)
        .into_iter()
        .filter(|k| !k.contains('|'))
        .collect();
    let vnets = keys(db, "VNET");
    for (k, e) in entries(db, SUBIF) {
        let entry = format!("{SUBIF}|{k}");
        match k.split_once('|') {
            Some((name, p)) => address(&entry, e, name, p, &names),
            None => sub_interface(&entry, k, e, parents)
                .and_then(|()| references(&entry, e, vrfs, &vnets)),
        }?;
    }
    Ok(())
}

/// One `VLAN_SUB_INTERFACE_IPPREFIX_LIST` entry.
fn address(
    entry: &str,
    e: &Map<String, Value>,
    name: &str,
    p: &str,
    names: &BTreeSet<&str>,
) -> Check {
    known_fields(entry, e, &[])?;
    let err = |m: String| Err(format!("{entry}: {m}"));
    if p.contains('|') {
        return err("Value not found for name ip-prefix: too many key parts".into());
    }
    if !prefix(p) {
        return err(format!("{p:?} is not a sonic-ip-prefix"));
    }
    if !names.contains(name) {
        return err(format!(
            "Invalid leafref value \"{name}\" - no target instance in VLAN_SUB_INTERFACE_LIST"
        ));
    }
    Ok(())
}

/// One `VLAN_SUB_INTERFACE_LIST` entry: its name, `vlan` and enumerations.
fn sub_interface(entry: &str, name: &str, e: &Map<String, Value>, parents: &Parents) -> Check {
    known_fields(entry, e, &FIELDS)?;
    let err = |m: String| Err(format!("{entry}: {m}"));
    let Some((parent, _)) = split(name) else {
        return err(format!(
            "name {name:?} does not match the pattern (\\w+)\\.(1..4094)"
        ));
    };
    if name.len() > MAX_NAME || parents.resolve(parent).is_none() {
        return err(
            "Must condition not satisfied, please follow vlan sub interface naming convention"
                .into(),
        );
    }
    match field(e, "vlan") {
        None if !parents.named(parent) => err(
            "Must condition not satisfied, no encap vlan provided for short-name format vlan sub interface"
                .into(),
        ),
        Some(v) if !in_range(v, 1, 4094) => {
            err(format!("vlan {v:?} does not satisfy the range constraint 1..4094"))
        }
        _ => Ok(()),
    }?;
    for (f, values) in ENUMS {
        if let Some(v) = field(e, f).filter(|v| !values.contains(v)) {
            return err(format!(
                "Invalid value \"{v}\" of {f} ({})",
                values.join(", ")
            ));
        }
    }
    Ok(())
}

/// The leafrefs `vrf_name` and `vnet_name`.
fn references(
    entry: &str,
    e: &Map<String, Value>,
    vrfs: &BTreeSet<&str>,
    vnets: &BTreeSet<&str>,
) -> Check {
    for (f, table, set) in [("vrf_name", "VRF", vrfs), ("vnet_name", "VNET", vnets)] {
        if let Some(v) = field(e, f).filter(|v| !set.contains(v)) {
            return Err(format!(
                "{entry}: Invalid leafref value \"{v}\" of {f} - no target instance in {table}"
            ));
        }
    }
    Ok(())
}

/// intfmgrd: one VLAN per parent (module doc), on the whole document.
pub(super) fn intfmgrd(db: &ConfigDb) -> Check {
    let (ports, lags) = (keys(db, "PORT"), keys(db, "PORTCHANNEL"));
    let parents = Parents {
        ports: &ports,
        lags: &lags,
    };
    let mut seen: std::collections::BTreeMap<(String, u16), &str> = Default::default();
    for (k, e) in entries(db, SUBIF).filter(|(k, _)| !k.contains('|')) {
        let Some((parent, id)) = split(k) else {
            continue;
        };
        let vlan = match parents.named(parent) {
            true => Some(id),
            false => field(e, "vlan").and_then(|v| v.parse().ok()),
        };
        let (Some(vlan), Some(real)) = (vlan, parents.resolve(parent)) else {
            continue;
        };
        if let Some(other) = seen.insert((real.clone(), vlan), k) {
            return Err(format!(
                "{SUBIF}|{k}: ip link add link {real} name {k} type vlan id {vlan}: RTNETLINK answers: File exists (VLAN {vlan} of {real} is {other}'s)"
            ));
        }
    }
    Ok(())
}

/// aclorch's `getRedirectObjectId` on `target` (module doc).
pub(super) fn redirect_target(db: &ConfigDb, target: &str) -> Check {
    if keys(db, "PORT").contains(target) || keys(db, "PORTCHANNEL").contains(target) {
        return Ok(());
    }
    if keys(db, SUBIF).contains(target) {
        return Err(format!(
            "redirect target {target}: Wrong port type for REDIRECT action. Only physical ports and LAG ports are supported"
        ));
    }
    let (ip, alias) = match target.split_once('@') {
        Some((ip, alias)) => (ip, Some(alias)),
        None => (target, None),
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return Err(format!(
            "redirect target {target}: no such port, LAG or next hop"
        ));
    };
    if neighbour(db, ip, alias) {
        Ok(())
    } else {
        Err(format!(
            "ACL Redirect action target next hop ip: '{target}' doesn't exist on the switch"
        ))
    }
}

/// Whether `ip` can be a neighbour of an address of a routed interface or
/// sub-interface (of `alias` when given): in its subnet, not itself.
fn neighbour(db: &ConfigDb, ip: IpAddr, alias: Option<&str>) -> bool {
    let IpAddr::V4(ip) = ip else {
        return false;
    };
    ["INTERFACE", SUBIF]
        .into_iter()
        .flat_map(|t| keys(db, t))
        .filter_map(|k| k.split_once('|'))
        .filter(|(i, _)| alias.is_none_or(|a| a == *i))
        .any(|(_, p)| holds(p, ip))
}

/// Whether the IPv4 interface address `p` (`a.b.c.d/len`) has `ip` in its
/// subnet and is not `ip` itself.
fn holds(p: &str, ip: Ipv4Addr) -> bool {
    let Some((a, len)) = p.split_once('/') else {
        return false;
    };
    let (Ok(a), Ok(len)) = (a.parse::<Ipv4Addr>(), len.parse::<u32>()) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - len.min(32)).unwrap_or(0);
    a != ip && u32::from(a) & mask == u32::from(ip) & mask
}
