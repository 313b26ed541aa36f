//! What the emulated switch accepts as config_db: the checks the Generic
//! Config Updater (GCU) makes, applied to the whole document a patch,
//! replace or rollback would produce, so a bad change is refused before
//! anything is written. Also the hardware part of a fresh switch's config.
//!
//! # How the real GCU decides
//! sonic-net/sonic-utilities `generic_config_updater`:
//! * `generic_updater.py` `PatchApplier.apply`: the patch is applied to a
//!   copy of running (`simulate_patch`); a result with an empty table is
//!   refused ("given patch is not valid because it will result in empty
//!   tables") — [`vclos_drivers::configdb::apply`] does that check.
//! * `patch_sorter.py` `StrictPatchSorter.sort`: a patch changing a table
//!   that has no YANG model is refused ("Given patch is not valid because it
//!   has changes to tables without YANG models"); then the *whole* target
//!   config is validated (`ConfigWrapper.validate_config_db_config` in
//!   `gu_common.py`: `sonic_yang.loadData`, which translates config_db to
//!   YANG data and has libyang validate it, plus `validate_lanes`), and any
//!   error is "Given patch will produce invalid config. Error: ...". Tables
//!   without models are cropped before validation, so they are not checked.
//! * `-i PATH` (`IgnorePathsFromYangConfigSplitter`): the JSON Pointers given
//!   are cut out of the validated document.
//!
//! Translation (sonic-net/sonic-buildimage `src/sonic-yang-mgmt/
//! sonic_yang_ext.py`): a key is split at `|` into exactly the YANG list's
//! keys (`_extractKey`: "Value not found for ... in ..."); a field with no
//! leaf in the model fails the entry (`_findYangTypedValue` raises, then
//! `_xlateContainer`: "All Keys are not parsed in TABLE"); an empty
//! leaf-list whose leaf has a default (`ACL_TABLE` `ports`) is refused.
//!
//! # Model rules encoded here
//! sonic-net/sonic-buildimage `src/sonic-yang-models/`, revision
//! 2019-07-01 of each module (the models keep that revision date while
//! changing; read at commit 086b03bd70f9):
//! * `yang-models/sonic-port.yang`, `/sonic-port/PORT/PORT_LIST`: `lanes`
//!   mandatory (string, length 1..128; gu_common.py `validate_lanes`: every
//!   lane a number, no lane used twice), `speed` mandatory (uint32
//!   1..1600000), `mtu` uint16 68..9216, `admin_status` `up`|`down`
//!   (sonic-types `admin_status`), `alias` length 1..128, `description`
//!   length 0..255; only the model's leaves.
//! * `yang-models/sonic-device_metadata.yang`: `hostname` (length 1..255;
//!   vclos requires one: the prompt shows it).
//! * `yang-models/sonic-vrf.yang`, `VRF_LIST` key `name`: pattern
//!   `Vrf[a-zA-Z0-9_-]+`; leaves `fallback`, `vni`. (Linux limits the
//!   interface name to 15 characters; SONiC's vrfmgrd makes one per VRF.)
//! * `yang-models/sonic-interface.yang`, `INTERFACE_LIST` (key `name`, a
//!   port: leafref) and `INTERFACE_IPPREFIX_LIST` (key `name ip-prefix`);
//!   `vrf_name` a leafref to `VRF`.
//! * `yang-models/sonic-vlan-sub-interface.yang`, `VLAN_SUB_INTERFACE`:
//!   see `super::subif` (names, parents, `vlan`, leafrefs, addresses).
//! * `yang-models/sonic-static-route.yang`, `STATIC_ROUTE_LIST` key
//!   `vrf_name prefix` (`default`, `mgmt` or `Vrf...`); `nexthop` a
//!   comma-separated address list.
//! * `yang-templates/sonic-acl.yang.j2`, `/sonic-acl/ACL_TABLE/ACL_TABLE_LIST`:
//!   `type` mandatory, a `stypes:acl_table_type` (sonic-types.yang.j2) or an
//!   `ACL_TABLE_TYPE` name; `stage` `ingress|egress|INGRESS|EGRESS`;
//!   `policy_desc` length 1..255; `ports` leafrefs to `PORT` or
//!   `PORTCHANNEL`; `CTRLPLANE` needs `services` (`must`).
//! * the same, `ACL_RULE/ACL_RULE_LIST`, key `ACL_TABLE_NAME RULE_NAME`
//!   (config_db `TABLE|RULE`), `ACL_TABLE_NAME` a leafref to `ACL_TABLE`,
//!   `RULE_NAME` length 1..255; `PRIORITY` **mandatory**, uint32
//!   **0..999999**; `PACKET_ACTION` a `stypes:packet_action`: `DROP`,
//!   `ACCEPT`, `FORWARD`, `REDIRECT`, `DO_NOT_NAT`, `DISABLE_TRIM` — so
//!   `REDIRECT:Ethernet8` is not a value; `IP_TYPE` a `stypes:ip_type`;
//!   `SRC_IP`/`DST_IP` `inet:ipv4-prefix`, `SRC_IPV6`/`DST_IPV6`
//!   `inet:ipv6-prefix`; only the model's leaves: there is **no
//!   `REDIRECT_ACTION` leaf**. A rule of a `CTRLPLANE` table needs a
//!   `PACKET_ACTION` (`must`).
//!
//! # What orchagent would do with ACL rules
//! A redirect therefore cannot pass the models (see docs/devices/sonic.md):
//! vclos writes `REDIRECT_ACTION` and passes `-i /ACL_RULE`. On a real box
//! the GCU then writes the rules unchecked and orchagent's aclorch programs
//! them or logs an error (sonic-net/sonic-swss `orchagent/aclorch.cpp`). The
//! emulator refuses at apply time what aclorch would not program, so the
//! failure is seen rather than logged — stricter than a real switch:
//! `AclRulePacket::validateAddAction`: `PACKET_ACTION` one of `FORWARD`,
//! `DROP`, `COPY` (`aclPacketActionLookup`), `REDIRECT:<target>` (legacy,
//! a target after the colon), `DO_NOT_NAT`, `DISABLE_TRIM`, or a
//! `REDIRECT_ACTION: <target>`; `getRedirectObjectId`: the target is a
//! physical port or a LAG — a sub-interface is refused — or a next hop
//! `<ip>[@<alias>]` that exists on the switch (`super::subif`);
//! `AclRule::validateAddPriority`: a priority in the switch's range (the
//! model's 0..999999 here); and a rule needs a priority and an action.
//! Likewise a sub-interface intfmgrd could not create (a second one with
//! the same VLAN on a parent, `super::subif`) is refused.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{json, Map, Value};
use vclos_drivers::configdb::ConfigDb;

use super::subif;

/// The JSON Pointer vclos passes to `-i`: ACL rules are not validated
/// against the models (which cannot express a redirect).
pub const IGNORE_ACL_RULE: &str = "/ACL_RULE";

/// Tables the emulated GCU has YANG models for (the ones vclos touches and
/// the ones a fresh switch holds): a patch changing any other table is
/// refused, as by `StrictPatchSorter`.
const MODELLED: [&str; 10] = [
    "DEVICE_METADATA",
    "PORT",
    "PORTCHANNEL",
    "VRF",
    "INTERFACE",
    super::subif::SUBIF,
    "STATIC_ROUTE",
    "ACL_TABLE",
    "ACL_TABLE_TYPE",
    "ACL_RULE",
];

/// The leaves of `PORT_LIST` (sonic-port.yang).
const PORT_FIELDS: [&str; 31] = [
    "core_id",
    "core_port_id",
    "num_voq",
    "alias",
    "lanes",
    "mode",
    "description",
    "speed",
    "dhcp_rate_limit",
    "link_training",
    "autoneg",
    "adv_speeds",
    "interface_type",
    "adv_interface_types",
    "mtu",
    "subport",
    "index",
    "asic_port_name",
    "role",
    "admin_status",
    "fec",
    "dom_polling",
    "pfc_asym",
    "tpid",
    "mux_cable",
    "macsec",
    "tx_power",
    "laser_freq",
    "fast_linkup",
    "parent_port",
    "channel",
];

/// The leaves of `INTERFACE_LIST` and `INTERFACE_IPPREFIX_LIST`
/// (sonic-interface.yang).
const INTERFACE_FIELDS: [&str; 9] = [
    "vrf_name",
    "vnet_name",
    "nat_zone",
    "mpls",
    "ipv6_use_link_local_only",
    "mac_addr",
    "loopback_action",
    "scope",
    "family",
];

/// The leaves of `STATIC_ROUTE_LIST` (sonic-static-route.yang).
const ROUTE_FIELDS: [&str; 7] = [
    "nexthop",
    "ifname",
    "advertise",
    "distance",
    "nexthop-vrf",
    "blackhole",
    "bfd",
];

/// The leaves of `ACL_TABLE_LIST` (sonic-acl.yang.j2).
const ACL_TABLE_FIELDS: [&str; 5] = ["policy_desc", "type", "stage", "services", "ports"];

/// `stypes:acl_table_type` (sonic-types.yang.j2).
const ACL_TABLE_TYPES: [&str; 11] = [
    "L2",
    "L3",
    "L3V6",
    "L3V4V6",
    "MIRROR",
    "MIRRORV6",
    "MIRROR_DSCP",
    "CTRLPLANE",
    "PFCWD",
    "MCLAG",
    "DTEL_FLOW_WATCHLIST",
];

/// The leaves of `ACL_RULE_LIST` besides its keys (sonic-acl.yang.j2).
const ACL_RULE_FIELDS: [&str; 40] = [
    "PACKET_ACTION",
    "MIRROR_INGRESS_ACTION",
    "MIRROR_EGRESS_ACTION",
    "INNER_SRC_MAC_REWRITE_ACTION",
    "IP_TYPE",
    "PRIORITY",
    "SRC_MAC",
    "DST_MAC",
    "SRC_IP",
    "DST_IP",
    "INNER_SRC_IP",
    "SRC_IPV6",
    "DST_IPV6",
    "INNER_SRC_IPV6",
    "IN_PORTS",
    "OUT_PORTS",
    "L4_SRC_PORT",
    "L4_SRC_PORT_RANGE",
    "L4_DST_PORT",
    "L4_DST_PORT_RANGE",
    "ETHER_TYPE",
    "IP_PROTOCOL",
    "TCP_FLAGS",
    "DSCP",
    "TC",
    "ICMP_TYPE",
    "ICMP_CODE",
    "ICMPV6_TYPE",
    "ICMPV6_CODE",
    "INNER_ETHER_TYPE",
    "INNER_IP_PROTOCOL",
    "INNER_L4_SRC_PORT",
    "INNER_L4_DST_PORT",
    "VLAN_ID",
    "TUNNEL_VNI",
    "PCP",
    "DEI",
    "BTH_OPCODE",
    "AETH_SYNDROME",
    "TUNNEL_TERM",
];

/// `stypes:packet_action` (sonic-types.yang.j2).
const PACKET_ACTIONS: [&str; 6] = [
    "DROP",
    "ACCEPT",
    "FORWARD",
    "REDIRECT",
    "DO_NOT_NAT",
    "DISABLE_TRIM",
];

/// `stypes:ip_type` (sonic-types.yang.j2).
const IP_TYPES: [&str; 12] = [
    "ANY", "IP", "NON_IP", "IPV4", "IPV6", "IPv4ANY", "IPV4ANY", "NON_IP4", "IPv6ANY", "IPV6ANY",
    "NON_IPv6", "ARP",
];

/// `PRIORITY`'s range (sonic-acl.yang.j2 `range 0..999999`).
const MAX_PRIORITY: u32 = 999_999;

/// Why a document is refused.
pub(super) type Check = Result<(), String>;

pub(super) fn keys<'a>(db: &'a ConfigDb, table: &str) -> BTreeSet<&'a str> {
    db.get(table)
        .and_then(Value::as_object)
        .map(|t| t.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

pub(super) fn entries<'a>(
    db: &'a ConfigDb,
    table: &str,
) -> impl Iterator<Item = (&'a str, &'a Map<String, Value>)> {
    db.get(table)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_object()?)))
}

pub(super) fn field<'a>(e: &'a Map<String, Value>, f: &str) -> Option<&'a str> {
    e.get(f).and_then(Value::as_str)
}

/// An address with a prefix length: `10.0.0.1/31`, `fc00::1/126`.
pub(super) fn prefix(s: &str) -> bool {
    let Some((a, len)) = s.split_once('/') else {
        return false;
    };
    match (a.parse::<IpAddr>(), len.parse::<u8>()) {
        (Ok(IpAddr::V4(_)), Ok(l)) => l <= 32,
        (Ok(IpAddr::V6(_)), Ok(l)) => l <= 128,
        _ => false,
    }
}

/// `inet:ipv4-prefix` (`a.b.c.d/len`, len 0..32).
fn ipv4_prefix(s: &str) -> bool {
    s.split_once('/').is_some_and(|(a, l)| {
        a.parse::<Ipv4Addr>().is_ok() && l.parse::<u8>().is_ok_and(|l| l <= 32)
    })
}

/// `inet:ipv6-prefix`.
fn ipv6_prefix(s: &str) -> bool {
    s.split_once('/').is_some_and(|(a, l)| {
        a.parse::<Ipv6Addr>().is_ok() && l.parse::<u8>().is_ok_and(|l| l <= 128)
    })
}

/// A decimal number in `lo..=hi` (YANG integer types with a range).
pub(super) fn in_range(s: &str, lo: u64, hi: u64) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit())
        && s.parse::<u64>().is_ok_and(|n| (lo..=hi).contains(&n))
}

/// Whether `after` (what a change of `before` would make) is acceptable;
/// `ignore` are the `-i` JSON Pointers. The error is the GCU's message.
pub fn check(before: &ConfigDb, after: &ConfigDb, ignore: &[String]) -> Check {
    let invalid = |e: String| format!("Given patch will produce invalid config. Error: {e}");
    shape(after).map_err(invalid)?;
    let tables: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    if tables
        .into_iter()
        .any(|t| !MODELLED.contains(&t.as_str()) && before.get(t) != after.get(t))
    {
        return Err(
            "Given patch is not valid because it has changes to tables without YANG models".into(),
        );
    }
    let (ports, old_ports) = (keys(after, "PORT"), keys(before, "PORT"));
    if let Some(p) = ports.symmetric_difference(&old_ports).next() {
        return Err(invalid(format!(
            "PORT|{p}: ports are hardware; entries cannot be added or removed (emulator)"
        )));
    }
    let mut doc = after.clone();
    for p in ignore {
        remove_pointer(&mut doc, p);
    }
    models(&doc).map_err(|e| invalid(format!("Data Loading Failed: {e}")))?;
    subif::intfmgrd(after)
        .map_err(|e| format!("emulator: intfmgrd would not create this sub-interface: {e}"))?;
    orchagent(after)
        .map_err(|e| format!("emulator: orchagent would not program this configuration: {e}"))
}

/// Cut the JSON Pointer `p` out of `doc` (a missing path is skipped, as
/// `IgnorePathsFromYangConfigSplitter` does); `""` is the whole document.
fn remove_pointer(doc: &mut ConfigDb, p: &str) {
    if p.is_empty() {
        doc.clear();
        return;
    }
    let tokens: Vec<String> = p
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = tokens.split_last() else {
        return;
    };
    let mut cur = doc;
    for t in parents {
        match cur.get_mut(t).and_then(Value::as_object_mut) {
            Some(m) => cur = m,
            None => return,
        }
    }
    cur.remove(last);
}

/// The model checks of the tables vclos writes, on the validated document.
fn models(db: &ConfigDb) -> Check {
    let host = entries(db, "DEVICE_METADATA")
        .find(|(k, _)| *k == "localhost")
        .and_then(|(_, e)| field(e, "hostname"));
    if host.is_none_or(|h| h.is_empty() || h.len() > 255) {
        return Err("DEVICE_METADATA|localhost: hostname is required (length 1..255)".into());
    }
    ports(db)?;
    let (ports, lags) = (keys(db, "PORT"), keys(db, "PORTCHANNEL"));
    let vrfs = keys(db, "VRF");
    for (v, e) in entries(db, "VRF") {
        vrf_name(v).map_err(|e| format!("VRF|{v}: {e}"))?;
        known_fields(&format!("VRF|{v}"), e, &["fallback", "vni"])?;
    }
    interfaces(db, &ports, &vrfs)?;
    let parents = subif::Parents {
        ports: &ports,
        lags: &lags,
    };
    subif::model(db, &parents, &vrfs)?;
    routes(db, &vrfs)?;
    acl_tables(db, &ports, &lags)?;
    acl_rules(db)
}

/// `sonic_yang_ext`: a field with no leaf fails the whole table.
pub(super) fn known_fields(entry: &str, e: &Map<String, Value>, allowed: &[&str]) -> Check {
    match e.keys().find(|f| !allowed.contains(&f.as_str())) {
        Some(f) => Err(format!(
            "{entry}: All Keys are not parsed: field {f} has no leaf in the YANG model"
        )),
        None => Ok(()),
    }
}

fn vrf_name(v: &str) -> Check {
    let tail = v.strip_prefix("Vrf").unwrap_or("");
    if tail.is_empty()
        || !tail
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "VRF name {v:?} does not match the pattern Vrf[a-zA-Z0-9_-]+"
        ));
    }
    if v.len() > 15 {
        return Err(format!("VRF name {v:?} is longer than 15 characters"));
    }
    Ok(())
}

/// Every table an object of entries, every entry an object of string (or
/// string-list) fields, as config_db holds them.
fn shape(db: &ConfigDb) -> Check {
    for (t, table) in db {
        let table = table
            .as_object()
            .ok_or_else(|| format!("{t}: a table must be an object of entries"))?;
        for (k, e) in table {
            let e = e
                .as_object()
                .ok_or_else(|| format!("{t}|{k}: an entry must be an object of fields"))?;
            for (f, v) in e {
                let ok =
                    v.is_string() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
                if !ok {
                    return Err(format!(
                        "{t}|{k}: field {f} must be a string or a list of strings"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// sonic-port.yang `PORT_LIST` and gu_common.py `validate_lanes`.
fn ports(db: &ConfigDb) -> Check {
    let mut used: BTreeSet<u64> = BTreeSet::new();
    for (p, e) in entries(db, "PORT") {
        let err = |m: String| Err(format!("PORT|{p}: {m}"));
        known_fields(&format!("PORT|{p}"), e, &PORT_FIELDS)?;
        let Some(lanes) = field(e, "lanes") else {
            return err("Mandatory node \"lanes\" instance does not exist.".into());
        };
        if lanes.is_empty() || lanes.len() > 128 {
            return err(format!("lanes {lanes:?}: length must be 1..128"));
        }
        for lane in lanes.split(',').map(str::trim) {
            if lane.is_empty() {
                return err("PORT has an empty lane".into());
            }
            let Ok(n) = lane.parse::<u64>() else {
                return err(format!("PORT has an invalid lane '{lane}'"));
            };
            if !used.insert(n) {
                return err(format!("lane {n} is used by another port"));
            }
        }
        match field(e, "speed") {
            Some(s) if in_range(s, 1, 1_600_000) => {}
            Some(s) => return err(format!("speed {s:?} is not in the range 1..1600000")),
            None => return err("Mandatory node \"speed\" instance does not exist.".into()),
        }
        if let Some(m) = field(e, "mtu").filter(|m| !in_range(m, 68, 9216)) {
            return err(format!("mtu {m:?} is not in the range 68..9216"));
        }
        if let Some(a) = field(e, "admin_status").filter(|a| !["up", "down"].contains(a)) {
            return err(format!("admin_status {a:?} is not up or down"));
        }
        if let Some(a) = field(e, "alias").filter(|a| a.is_empty() || a.len() > 128) {
            return err(format!("alias {a:?}: length must be 1..128"));
        }
        if field(e, "description").is_some_and(|d| d.len() > 255) {
            return err("description is longer than 255 characters".into());
        }
    }
    Ok(())
}

fn interfaces(db: &ConfigDb, ports: &BTreeSet<&str>, vrfs: &BTreeSet<&str>) -> Check {
    let ifaces = keys(db, "INTERFACE");
    for (k, e) in entries(db, "INTERFACE") {
        let err = |m: String| Err(format!("INTERFACE|{k}: {m}"));
        known_fields(&format!("INTERFACE|{k}"), e, &INTERFACE_FIELDS)?;
        let (port, addr) = match k.split_once('|') {
            Some((p, a)) => (p, Some(a)),
            None => (k, None),
        };
        if !ports.contains(port) {
            return err(format!("leafref: no port {port}"));
        }
        match addr {
            Some(a) if a.contains('|') => {
                return err("Value not found for name ip-prefix: too many key parts".into())
            }
            Some(a) if !prefix(a) => return err(format!("{a:?} is not an address/length")),
            Some(_) if !ifaces.contains(port) => {
                return err(format!("the address needs the entry INTERFACE|{port}"))
            }
            _ => {}
        }
        if let Some(v) = field(e, "vrf_name") {
            if !vrfs.contains(v) {
                return err(format!("leafref: vrf_name {v}: no such VRF"));
            }
        }
    }
    Ok(())
}

fn routes(db: &ConfigDb, vrfs: &BTreeSet<&str>) -> Check {
    for (k, e) in entries(db, "STATIC_ROUTE") {
        let err = |m: String| Err(format!("STATIC_ROUTE|{k}: {m}"));
        known_fields(&format!("STATIC_ROUTE|{k}"), e, &ROUTE_FIELDS)?;
        let (vrf, p) = k.split_once('|').unwrap_or(("default", k));
        if !["default", "mgmt"].contains(&vrf) && !vrfs.contains(vrf) {
            return err(format!("no VRF {vrf}"));
        }
        if !prefix(p) {
            return err(format!("{p:?} is not a prefix"));
        }
        let nhs = field(e, "nexthop").unwrap_or_default();
        if nhs
            .split(',')
            .any(|nh| nh.trim().parse::<IpAddr>().is_err())
        {
            return err(format!("nexthop {nhs:?} is not a list of addresses"));
        }
    }
    Ok(())
}

fn acl_tables(db: &ConfigDb, ports: &BTreeSet<&str>, lags: &BTreeSet<&str>) -> Check {
    let custom = keys(db, "ACL_TABLE_TYPE");
    for (k, e) in entries(db, "ACL_TABLE") {
        let err = |m: String| Err(format!("ACL_TABLE|{k}: {m}"));
        known_fields(&format!("ACL_TABLE|{k}"), e, &ACL_TABLE_FIELDS)?;
        match field(e, "type") {
            Some(t) if ACL_TABLE_TYPES.contains(&t) || custom.contains(t) => {}
            Some(t) => {
                return err(format!(
                    "type {t:?} is not an acl_table_type ({}) or an ACL_TABLE_TYPE",
                    ACL_TABLE_TYPES.join(", ")
                ))
            }
            None => return err("Mandatory node \"type\" instance does not exist.".into()),
        }
        if let Some(s) = field(e, "stage") {
            if !["ingress", "egress", "INGRESS", "EGRESS"].contains(&s) {
                return err(format!(
                    "stage {s:?} does not match ingress|egress|INGRESS|EGRESS"
                ));
            }
        }
        if field(e, "policy_desc").is_some_and(|d| d.is_empty() || d.len() > 255) {
            return err("policy_desc: length must be 1..255".into());
        }
        if field(e, "type") == Some("CTRLPLANE") && !e.contains_key("services") {
            return err("a CTRLPLANE table needs services".into());
        }
        if let Some(bound) = e.get("ports").and_then(Value::as_array) {
            if bound.is_empty() {
                return err(
                    "Empty leaf-list at ports: schema declares a default; remove the field instead of leaving it empty"
                        .into(),
                );
            }
            let names = bound.iter().filter_map(Value::as_str);
            if let Some(p) = names
                .filter(|p| !p.is_empty())
                .find(|p| !ports.contains(p) && !lags.contains(p))
            {
                return err(format!(
                    "Invalid leafref value \"{p}\" - no target instance in PORT or PORTCHANNEL"
                ));
            }
        }
    }
    Ok(())
}

fn acl_rules(db: &ConfigDb) -> Check {
    let tables = keys(db, "ACL_TABLE");
    for (k, e) in entries(db, "ACL_RULE") {
        let err = |m: String| Err(format!("ACL_RULE|{k}: {m}"));
        let table = match k.split('|').collect::<Vec<_>>().as_slice() {
            [t, r] if !t.is_empty() && !r.is_empty() && r.len() <= 255 => *t,
            _ => {
                return err(format!(
                "Value not found for ACL_TABLE_NAME RULE_NAME in {k} (the key must be TABLE|RULE)"
            ))
            }
        };
        if !tables.contains(table) {
            return err(format!(
                "Invalid leafref value \"{table}\" - no target instance in ACL_TABLE"
            ));
        }
        known_fields(&format!("ACL_RULE|{k}"), e, &ACL_RULE_FIELDS)?;
        match field(e, "PRIORITY") {
            None => return err("Mandatory node \"PRIORITY\" instance does not exist.".into()),
            Some(p) if !in_range(p, 0, u64::from(MAX_PRIORITY)) => {
                return err(format!(
                "Value \"{p}\" does not satisfy the range constraint 0..{MAX_PRIORITY} (PRIORITY)"
            ))
            }
            Some(_) => {}
        }
        match field(e, "PACKET_ACTION") {
            Some(a) if !PACKET_ACTIONS.contains(&a) => {
                return err(format!(
                    "Invalid enumeration value \"{a}\" (PACKET_ACTION: {})",
                    PACKET_ACTIONS.join(", ")
                ))
            }
            None if db.get("ACL_TABLE").and_then(|t| {
                t.pointer(&format!(
                    "/{}/type",
                    table.replace('~', "~0").replace('/', "~1")
                ))
            }) == Some(&json!("CTRLPLANE")) =>
            {
                return err("a rule of a CTRLPLANE table needs a PACKET_ACTION".into())
            }
            _ => {}
        }
        if let Some(t) = field(e, "IP_TYPE").filter(|t| !IP_TYPES.contains(t)) {
            return err(format!("Invalid enumeration value \"{t}\" (IP_TYPE)"));
        }
        for (f, ok) in [
            ("SRC_IP", ipv4_prefix as fn(&str) -> bool),
            ("DST_IP", ipv4_prefix),
            ("SRC_IPV6", ipv6_prefix),
            ("DST_IPV6", ipv6_prefix),
        ] {
            if let Some(v) = field(e, f).filter(|v| !ok(v)) {
                return err(format!(
                    "{f} {v:?} is not an {}",
                    if f.ends_with("V6") {
                        "ipv6-prefix"
                    } else {
                        "ipv4-prefix"
                    }
                ));
            }
        }
    }
    Ok(())
}

/// aclorch's checks of every ACL rule (on the whole document, ignored
/// paths included): see the module doc.
fn orchagent(db: &ConfigDb) -> Check {
    for (k, e) in entries(db, "ACL_RULE") {
        let err = |m: String| Err(format!("ACL_RULE|{k}: {m}"));
        match field(e, "PRIORITY") {
            Some(p) if in_range(p, 0, u64::from(MAX_PRIORITY)) => {}
            Some(p) => {
                return err(format!(
                    "Priority value {p} is out of supported priority range 0-{MAX_PRIORITY}"
                ))
            }
            None => return err("a rule needs a PRIORITY".into()),
        }
        let mut actions = 0;
        if let Some(a) = field(e, "PACKET_ACTION") {
            actions += 1;
            let up = a.to_ascii_uppercase();
            match up.strip_prefix("REDIRECT") {
                _ if ["FORWARD", "DROP", "COPY", "DO_NOT_NAT", "DISABLE_TRIM"]
                    .contains(&up.as_str()) => {}
                Some(rest) => match rest.strip_prefix(':') {
                    None => return err("Redirect action rule must have ':' after REDIRECT".into()),
                    Some("") => {
                        return err(
                            "Redirect action rule must have a target after 'REDIRECT:' action"
                                .into(),
                        )
                    }
                    Some(_) => subif::redirect_target(db, &a["REDIRECT:".len()..]).or_else(err)?,
                },
                None => {
                    return err(format!(
                        "Unknown or invalid rule attribute 'PACKET_ACTION : {a}'"
                    ))
                }
            }
        }
        if let Some(t) = field(e, "REDIRECT_ACTION") {
            actions += 1;
            subif::redirect_target(db, t).or_else(err)?;
        }
        let mirrors = [
            "MIRROR_INGRESS_ACTION",
            "MIRROR_EGRESS_ACTION",
            "MIRROR_ACTION",
        ];
        actions += mirrors.iter().filter(|m| e.contains_key(**m)).count();
        if actions == 0 {
            return err("a rule needs an action".into());
        }
        if let Some(f) = e.keys().find(|f| {
            f.as_str() != "REDIRECT_ACTION"
                && f.as_str() != "MIRROR_ACTION"
                && !ACL_RULE_FIELDS.contains(&f.as_str())
        }) {
            return err(format!("Unknown or invalid rule attribute '{f}'"));
        }
    }
    Ok(())
}

/// The lanes of each port of a fresh switch: the topology names ports but
/// gives no lanes, so each port gets four consecutive SerDes lanes (a 100G
/// port of 4x25G), numbered from 1 in port order (`EthernetN` by N, other
/// names after them by name) — unique, as `validate_lanes` requires, and
/// `EthernetN` gets lanes N+1..N+4 when ports are `Ethernet0`, `Ethernet4`,
/// ... as on a 32x100G box.
fn lanes_by_port(ports: &Map<String, Value>) -> Vec<(String, String)> {
    let mut names: Vec<(u64, &String)> = ports
        .keys()
        .map(|n| {
            let num = n
                .strip_prefix("Ethernet")
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(u64::MAX);
            (num, n)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .enumerate()
        .map(|(i, (_, n))| {
            let first = 4 * i as u64 + 1;
            let lanes: Vec<String> = (first..first + 4).map(|l| l.to_string()).collect();
            (n.clone(), lanes.join(","))
        })
        .collect()
}

/// A fresh switch: `rendered` (vclos's baseline in config_db form) on top of
/// what a real box holds besides — platform metadata, port hardware
/// settings (lanes, speed, MTU, alias), and an ACL table vclos does not
/// manage, so a change that would wipe unmanaged entries shows up in tests.
pub fn initial(mut db: ConfigDb, kind: &str) -> ConfigDb {
    if let Value::Object(meta) = db.entry("DEVICE_METADATA").or_insert_with(|| json!({})) {
        if let Value::Object(m) = meta.entry("localhost").or_insert_with(|| json!({})) {
            for (f, v) in [
                ("hwsku", "Accton-AS7726-32X"),
                ("platform", "x86_64-accton_as7726_32x-r0"),
                ("type", kind),
                ("bgp_asn", "65100"),
            ] {
                m.entry(f).or_insert_with(|| json!(v));
            }
        }
    }
    if let Some(Value::Object(ports)) = db.get_mut("PORT") {
        let lanes = lanes_by_port(ports);
        for (i, (name, lanes)) in lanes.into_iter().enumerate() {
            if let Some(Value::Object(p)) = ports.get_mut(&name) {
                for (f, v) in [
                    ("admin_status", "up".to_string()),
                    ("alias", format!("etp{}", i + 1)),
                    ("lanes", lanes),
                    ("mtu", "9100".to_string()),
                    ("speed", "100000".to_string()),
                ] {
                    p.entry(f).or_insert_with(|| json!(v));
                }
            }
        }
    }
    if let Value::Object(t) = db.entry("ACL_TABLE").or_insert_with(|| json!({})) {
        // Bound to no port: `ports` left out (an empty list is refused).
        t.entry("DATAACL")
            .or_insert_with(|| json!({"policy_desc": "DATAACL", "stage": "ingress", "type": "L3"}));
    }
    db
}
