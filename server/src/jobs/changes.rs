//! From a plan to a controller [`ChangeSet`]: each device's change commands
//! in the form its driver loads, a read-back check in its dialect, and the
//! last check before anything is sent — no OCS command may touch a port the
//! state says a job is using.
//!
//! Payload forms (what each driver's `load_candidate` takes in merge mode):
//! Huawei CE: CLI lines, one per line; SONiC: RFC 6902 JSON Patch
//! operations, one per line; TL1: `ENT-PATCH`/`DLT-PATCH` lines;
//! NETCONF: ONE `<config>` document — the dialect emits one document per
//! step, so their children are concatenated in order under one root (the
//! emulator and RFC 6241 datastores apply an edit's children in document
//! order, so removals still precede additions).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::controller::{ChangeSet, DeviceChange, Verify};
use crate::dialect::{claimed, dialect};
use crate::intent::addressing::split_subinterface;
use crate::intent::{DeviceIntent, FabricIntent, Item, PortName};
use crate::names::JobId;
use crate::plan::DevicePlan;
use crate::state::FabricState;
use crate::topology::{Dialect as DialectId, Role, Topology};

use super::JobsError;

/// The vclos-managed part of a device's parsed items: items without a port,
/// and items on ports the topology gives the device or on 802.1Q
/// sub-interfaces of those (shared links; a sub-interface carries its
/// traffic over the port's link, so one vclos did not write is drift too)
/// — the rest of a real configuration is not ours to judge; foreign
/// steering also when it redirects onto such a port.
pub fn managed(base: &FabricIntent, device: &str, items: BTreeSet<Item>) -> BTreeSet<Item> {
    let ports: BTreeSet<&str> = base
        .device(device)
        .map(|b| {
            b.items
                .iter()
                .filter_map(Item::port)
                .map(|p| p.as_str())
                .collect()
        })
        .unwrap_or_default();
    let ours = |p: &PortName| {
        ports.contains(p.as_str())
            || split_subinterface(p.as_str()).is_some_and(|(parent, _)| ports.contains(parent))
    };
    items
        .into_iter()
        .filter(|i| {
            i.port().is_none_or(ours)
                || matches!(i, Item::ForeignSteering { target: Some(t), .. } if ours(t))
        })
        .collect()
}

/// What a device should hold, as its dialect can express it.
pub fn expected(intent: &DeviceIntent) -> BTreeSet<Item> {
    claimed(dialect(intent.dialect), &intent.items)
}

/// Compare a parsed, managed item set with what it should be.
pub fn compare(have: &BTreeSet<Item>, want: &BTreeSet<Item>) -> (Vec<Item>, Vec<Item>) {
    let missing = want.difference(have).cloned().collect();
    let extra = have.difference(want).cloned().collect();
    (missing, extra)
}

/// A read-back check: running, parsed in the device's dialect and reduced to
/// what vclos manages, must be exactly `want`.
pub fn verify(base: Arc<FabricIntent>, intent: &DeviceIntent) -> Verify {
    let want = expected(intent);
    let device = intent.device.clone();
    let d = dialect(intent.dialect);
    Verify::Custom(Arc::new(move |running: &str| {
        let items = d.parse(&device, running).map_err(|e| e.to_string())?;
        // Foreign steering is not vclos's to verify (the apply was refused
        // if it sat on a port the change configures).
        let mut have = managed(&base, &device, items);
        have.retain(|i| !i.is_foreign());
        let (missing, extra) = compare(&have, &want);
        if missing.is_empty() && extra.is_empty() {
            return Ok(());
        }
        Err(describe(&missing, &extra))
    }))
}

/// "missing: a, b; unexpected: c" with at most a few items of each.
pub fn describe(missing: &[Item], extra: &[Item]) -> String {
    let list = |v: &[Item]| {
        let mut s: Vec<String> = v.iter().take(3).map(|i| i.to_string()).collect();
        if v.len() > 3 {
            s.push(format!("... ({} in all)", v.len()));
        }
        s.join(", ")
    };
    let mut out = Vec::new();
    if !missing.is_empty() {
        out.push(format!("missing: {}", list(missing)));
    }
    if !extra.is_empty() {
        out.push(format!("unexpected: {}", list(extra)));
    }
    format!(
        "running configuration differs from intent: {}",
        out.join("; ")
    )
}

/// The one text a device's driver loads for `commands` in its dialect.
pub fn payload(dialect: DialectId, commands: &[String]) -> String {
    match dialect {
        DialectId::Openconfig => netconf_document(commands),
        DialectId::HuaweiCe | DialectId::Sonic | DialectId::Tl1 => {
            let mut s = commands.join("\n");
            s.push('\n');
            s
        }
    }
}

/// One `<config>` document holding the children of every per-step document.
fn netconf_document(commands: &[String]) -> String {
    let mut open = None;
    let mut body = String::new();
    for c in commands {
        let t = c.trim();
        let (head, rest) = match (t.starts_with("<config"), t.find('>')) {
            (true, Some(i)) => t.split_at(i + 1),
            _ => {
                // Not a wrapped document: a fragment as it is.
                body.push_str(t);
                continue;
            }
        };
        open.get_or_insert_with(|| head.to_string());
        body.push_str(rest.strip_suffix("</config>").unwrap_or(rest));
    }
    let open = open.unwrap_or_else(|| {
        "<config xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" \
         xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"
            .to_string()
    });
    format!("{open}{body}</config>")
}

/// The change set of a plan: each device's commands at its stage, verified
/// against `candidate`.
pub fn change_set(
    devices: &[DevicePlan],
    candidate: &FabricIntent,
    base: &Arc<FabricIntent>,
) -> Result<ChangeSet, JobsError> {
    let mut set = ChangeSet::default();
    for p in devices {
        let name = &p.diff.device;
        let intent = candidate
            .device(name)
            .ok_or_else(|| JobsError::UnknownDevice(name.clone()))?;
        set.push(
            DeviceChange::new(
                name.clone(),
                p.diff.role,
                p.stage as u32,
                payload(p.diff.dialect, &p.diff.commands),
            )
            .with_verify(verify(Arc::clone(base), intent)),
        );
    }
    Ok(set)
}

/// Defence in depth: refuse a change set in which any OCS command touches
/// a port held by a job (other than `releasing`, whose own links are being
/// taken down), or anything that is not a patch command on a known port.
/// Runs on the exact payloads about to be sent.
pub fn guard_ocs(
    topo: &Topology,
    state: &FabricState,
    set: &ChangeSet,
    releasing: Option<&JobId>,
) -> Result<(), JobsError> {
    for c in set.changes.iter().filter(|c| c.role == Role::Ocs) {
        let refuse = |message: String| JobsError::Refused {
            device: c.device.clone(),
            message,
        };
        let ocs = topo
            .ocs
            .iter()
            .position(|o| *o.name == *c.device)
            .ok_or_else(|| refuse("not an OCS of the topology".into()))?;
        let ports = &topo.ocs[ocs].ports;
        for line in c.payload.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let fields: Vec<&str> = line.trim_end_matches(';').split(':').collect();
            let (verb, aid) = match fields.as_slice() {
                [verb, "", aid] | [verb, "", aid, _] => (verb.to_ascii_uppercase(), *aid),
                _ => return Err(refuse(format!("`{line}` is not a TL1 patch command"))),
            };
            let names: Vec<&str> = match verb.as_str() {
                "ENT-PATCH" | "DLT-PATCH" => aid.split([',', '&']).collect(),
                _ => return Err(refuse(format!("`{line}` is not ENT-PATCH or DLT-PATCH"))),
            };
            for n in names {
                let p = ports
                    .iter()
                    .position(|q| **q == *n)
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(|| refuse(format!("`{line}`: no port `{n}` on this OCS")))?;
                let id = crate::topology::OcsId(ocs as u32);
                if let Some(holder) = state.ocs_port_holder(id, p) {
                    if Some(holder) != releasing {
                        return Err(JobsError::BusyLink {
                            device: c.device.clone(),
                            command: line.to_string(),
                            port: n.to_string(),
                            holder: holder.clone(),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netconf_documents_are_merged_in_order() {
        let a = "<config xmlns=\"urn:x\" xmlns:nc=\"urn:x\"><a nc:operation=\"delete\"/></config>";
        let b = "<config xmlns=\"urn:x\" xmlns:nc=\"urn:x\"><b>1</b></config>";
        assert_eq!(
            payload(DialectId::Openconfig, &[a.into(), b.into()]),
            "<config xmlns=\"urn:x\" xmlns:nc=\"urn:x\"><a nc:operation=\"delete\"/><b>1</b></config>"
        );
        assert_eq!(
            payload(DialectId::HuaweiCe, &["a".into(), " b".into()]),
            "a\n b\n"
        );
    }
}
