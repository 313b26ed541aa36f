//! What the emulated switch accepts as config_db: the checks SONiC's YANG
//! models make on the tables vclos writes, applied to the whole document a
//! patch or replace would produce, so a bad change is refused before
//! anything is written. Also the hardware part of a fresh switch's config.
//!
//! Checked: every table an object of entries, every entry an object of
//! string (or string-list) fields; `DEVICE_METADATA|localhost` keeps a
//! hostname; `PORT` entries are hardware (none added or removed); `VRF`
//! names start with `Vrf` and fit a Linux interface name (15 characters);
//! `INTERFACE`, `STATIC_ROUTE`, `ACL_TABLE` and `ACL_RULE` entries refer only
//! to ports, VRFs and tables that exist and hold well-formed addresses,
//! prefixes and actions. Other tables are taken as they are.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::{json, Map, Value};
use vclos_drivers::configdb::ConfigDb;

/// Why a document is refused: the table, key and what is wrong.
type Check = Result<(), String>;

fn keys<'a>(db: &'a ConfigDb, table: &str) -> BTreeSet<&'a str> {
    db.get(table)
        .and_then(Value::as_object)
        .map(|t| t.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn entries<'a>(
    db: &'a ConfigDb,
    table: &str,
) -> impl Iterator<Item = (&'a str, &'a Map<String, Value>)> {
    db.get(table)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_object()?)))
}

fn field<'a>(e: &'a Map<String, Value>, f: &str) -> Option<&'a str> {
    e.get(f).and_then(Value::as_str)
}

/// An address with a prefix length: `10.0.0.1/31`, `fc00::1/126`.
fn prefix(s: &str) -> bool {
    let Some((a, len)) = s.split_once('/') else {
        return false;
    };
    match (a.parse::<IpAddr>(), len.parse::<u8>()) {
        (Ok(IpAddr::V4(_)), Ok(l)) => l <= 32,
        (Ok(IpAddr::V6(_)), Ok(l)) => l <= 128,
        _ => false,
    }
}

/// Whether `after` (what a change of `before` would make) is acceptable.
pub fn check(before: &ConfigDb, after: &ConfigDb) -> Check {
    shape(after)?;
    let host = entries(after, "DEVICE_METADATA")
        .find(|(k, _)| *k == "localhost")
        .and_then(|(_, e)| field(e, "hostname"));
    if host.is_none_or(str::is_empty) {
        return Err("DEVICE_METADATA|localhost: hostname is required".into());
    }
    let (ports, old_ports) = (keys(after, "PORT"), keys(before, "PORT"));
    if let Some(p) = ports.symmetric_difference(&old_ports).next() {
        return Err(format!(
            "PORT|{p}: ports are hardware; entries cannot be added or removed"
        ));
    }
    let vrfs = keys(after, "VRF");
    for v in &vrfs {
        vrf_name(v).map_err(|e| format!("VRF|{v}: {e}"))?;
    }
    interfaces(after, &ports, &vrfs)?;
    routes(after, &vrfs)?;
    acls(after, &ports)
}

fn vrf_name(v: &str) -> Check {
    if !v.starts_with("Vrf") {
        return Err(format!("VRF name {v:?} must start with \"Vrf\""));
    }
    if v.len() > 15 {
        return Err(format!("VRF name {v:?} is longer than 15 characters"));
    }
    if !v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "VRF name {v:?} has characters other than letters, digits, - and _"
        ));
    }
    Ok(())
}

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

fn interfaces(db: &ConfigDb, ports: &BTreeSet<&str>, vrfs: &BTreeSet<&str>) -> Check {
    let ifaces = keys(db, "INTERFACE");
    for (k, e) in entries(db, "INTERFACE") {
        let err = |m: String| Err(format!("INTERFACE|{k}: {m}"));
        let (port, addr) = match k.split_once('|') {
            Some((p, a)) => (p, Some(a)),
            None => (k, None),
        };
        if !ports.contains(port) {
            return err(format!("no port {port}"));
        }
        match addr {
            Some(a) if !prefix(a) => return err(format!("{a:?} is not an address/length")),
            Some(_) if !ifaces.contains(port) => {
                return err(format!("the address needs the entry INTERFACE|{port}"))
            }
            _ => {}
        }
        if let Some(v) = field(e, "vrf_name") {
            if !vrfs.contains(v) {
                return err(format!("vrf_name {v}: no such VRF"));
            }
        }
    }
    Ok(())
}

fn routes(db: &ConfigDb, vrfs: &BTreeSet<&str>) -> Check {
    for (k, e) in entries(db, "STATIC_ROUTE") {
        let err = |m: String| Err(format!("STATIC_ROUTE|{k}: {m}"));
        let (vrf, p) = k.split_once('|').unwrap_or(("default", k));
        if vrf != "default" && !vrfs.contains(vrf) {
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

fn acls(db: &ConfigDb, ports: &BTreeSet<&str>) -> Check {
    const TYPES: [&str; 6] = ["L3", "L3V6", "MIRROR", "MIRRORV6", "CTRLPLANE", "PFCWD"];
    for (k, e) in entries(db, "ACL_TABLE") {
        let err = |m: String| Err(format!("ACL_TABLE|{k}: {m}"));
        match field(e, "type") {
            Some(t) if TYPES.contains(&t) => {}
            t => return err(format!("type {t:?} is not one of {}", TYPES.join(", "))),
        }
        if let Some(s) = field(e, "stage") {
            if !s.eq_ignore_ascii_case("ingress") && !s.eq_ignore_ascii_case("egress") {
                return err(format!("stage {s:?} is not ingress or egress"));
            }
        }
        let bound = e
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        if let Some(p) = bound.filter_map(Value::as_str).find(|p| !ports.contains(p)) {
            return err(format!("no port {p}"));
        }
    }
    let tables = keys(db, "ACL_TABLE");
    for (k, e) in entries(db, "ACL_RULE") {
        let err = |m: String| Err(format!("ACL_RULE|{k}: {m}"));
        match k.split_once('|') {
            Some((t, _)) if tables.contains(t) => {}
            Some((t, _)) => return err(format!("no ACL table {t}")),
            None => return err("the key must be TABLE|RULE".into()),
        }
        if field(e, "PRIORITY").is_some_and(|p| p.parse::<u32>().is_err()) {
            return err("PRIORITY must be a number".into());
        }
        let action = field(e, "PACKET_ACTION").unwrap_or("FORWARD");
        match action.split_once(':') {
            None if ["FORWARD", "DROP", "ACCEPT"].contains(&action) => {}
            Some(("REDIRECT", to)) if ports.contains(to) || to.parse::<IpAddr>().is_ok() => {}
            Some(("REDIRECT", to)) => return err(format!("REDIRECT:{to}: no port {to}")),
            _ => {
                return err(format!(
                    "PACKET_ACTION {action:?} is not FORWARD, DROP or REDIRECT:<port>"
                ))
            }
        }
        if let Some(d) = field(e, "DST_IP") {
            if !prefix(d) {
                return err(format!("DST_IP {d:?} is not a prefix"));
            }
        }
    }
    Ok(())
}

/// A fresh switch: `rendered` (vclos's baseline in config_db form) on top of
/// what a real box holds besides — platform metadata, port hardware
/// settings, and an ACL table vclos does not manage, so a change that would
/// wipe unmanaged entries shows up in tests.
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
        for (i, (name, p)) in ports.iter_mut().enumerate() {
            // Front-panel numbering: four lanes per 100G port.
            let front = name
                .strip_prefix("Ethernet")
                .and_then(|n| n.parse::<usize>().ok())
                .map_or(i, |n| n / 4);
            if let Value::Object(p) = p {
                for (f, v) in [
                    ("admin_status", "up".to_string()),
                    ("alias", format!("etp{}", front + 1)),
                    ("mtu", "9100".to_string()),
                    ("speed", "100000".to_string()),
                ] {
                    p.entry(f).or_insert_with(|| json!(v));
                }
            }
        }
    }
    if let Value::Object(t) = db.entry("ACL_TABLE").or_insert_with(|| json!({})) {
        t.entry("DATAACL").or_insert_with(
            || json!({"policy_desc": "DATAACL", "ports": [], "stage": "ingress", "type": "L3"}),
        );
    }
    db
}
