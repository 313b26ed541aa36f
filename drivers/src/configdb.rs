//! SONiC config_db documents and RFC 6902 JSON Patches over them, shared by
//! the SONiC driver (which predicts the candidate to diff it) and the
//! emulated SONiC switch (which applies patches), so both agree on what a
//! patch does.
//!
//! A config_db document is a JSON object of tables, each an object of keys
//! (`Ethernet0`, `Vrf-j1|10.0.0.0/24`), each an object of fields. Patches are
//! applied with the `json-patch` crate on a copy. A patch that would leave a
//! table without keys is refused ([`apply`]), as the Generic Config Updater
//! refuses it (sonic-net/sonic-utilities
//! `generic_config_updater/generic_updater.py`, `PatchApplier.apply`:
//! "given patch is not valid because it will result in empty tables which is
//! not allowed in ConfigDb", since Redis holds no empty hash); [`merge`]
//! therefore removes a table whose last key goes. The printed form is the one `show runningconfiguration all`
//! gives: keys sorted, four-space indent.

use json_patch::{Patch, PatchOperation};
use serde::Serialize;
use serde_json::{Map, Value};

/// A config_db document: tables by name.
pub type ConfigDb = Map<String, Value>;

/// A document as SONiC prints it: sorted keys, 4-space indent, a final newline.
pub fn to_text(db: &ConfigDb) -> String {
    pretty(db)
}

/// Any JSON value printed SONiC's way (`json.dumps(indent=4)`) with a
/// final newline.
pub fn pretty<T: Serialize + ?Sized>(v: &T) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    // Serialising JSON values into a Vec cannot fail.
    let _ = v.serialize(&mut ser);
    let mut s = String::from_utf8(out).unwrap_or_default();
    s.push('\n');
    s
}

/// Parse a config_db document (an empty text is an empty document).
pub fn parse(text: &str) -> Result<ConfigDb, String> {
    if text.trim().is_empty() {
        return Ok(ConfigDb::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("config_db must be a JSON object".into()),
        Err(e) => Err(format!("line {}: not JSON: {e}", e.line())),
    }
}

/// Only these operations are accepted: config_db edits are additions,
/// removals and replacements of keys and fields.
pub fn check_op(op: &PatchOperation) -> Result<(), String> {
    match op {
        PatchOperation::Add(_) | PatchOperation::Remove(_) | PatchOperation::Replace(_) => Ok(()),
        other => Err(format!(
            "operation on {} is not one of add, remove, replace",
            other.path()
        )),
    }
}

/// A patch file's contents: one JSON array of operations.
pub fn parse_patch(text: &str) -> Result<Patch, String> {
    let patch: Patch = serde_json::from_str(text).map_err(|e| format!("not a JSON Patch: {e}"))?;
    patch.0.iter().try_for_each(check_op)?;
    Ok(patch)
}

/// A patch given one operation per line (the SONiC dialect's change form);
/// errors name the 1-based line.
pub fn patch_from_lines(text: &str) -> Result<Patch, (usize, String)> {
    let mut ops = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let op: PatchOperation = serde_json::from_str(line)
            .map_err(|e| (i + 1, format!("not a JSON Patch operation: {e}")))?;
        check_op(&op).map_err(|e| (i + 1, e))?;
        ops.push(op);
    }
    Ok(Patch(ops))
}

/// Tables of `db` without keys.
fn empty_tables(db: &ConfigDb) -> Vec<&str> {
    db.iter()
        .filter(|(_, t)| t.as_object().is_some_and(Map::is_empty))
        .map(|(k, _)| k.as_str())
        .collect()
}

/// The document `patch` makes of `db`, or why it cannot apply (`db` is
/// never touched); a result with an empty table is refused, in the
/// Generic Config Updater's words.
pub fn apply(db: &ConfigDb, patch: &Patch) -> Result<ConfigDb, String> {
    let mut doc = Value::Object(db.clone());
    // The undo-on-error of `json_patch::patch` is pointless on a copy.
    json_patch::patch_unsafe(&mut doc, &patch.0).map_err(|e| e.to_string())?;
    match doc {
        Value::Object(m) => {
            let empty = empty_tables(&m);
            if !empty.is_empty() {
                return Err(format!(
                    "given patch is not valid because it will result in empty tables which is not allowed in ConfigDb. Table{}: {}",
                    if empty.len() == 1 { "" } else { "s" },
                    empty.join(", ")
                ));
            }
            Ok(m)
        }
        _ => Err("the patch replaces the whole document with a non-object".into()),
    }
}

/// `patch` as a driver sends it for a merge onto `db`, and the document it
/// makes. An `add` of an empty object where an object already exists is
/// dropped: it means "create the parent if missing" (the dialect cannot know
/// what running holds), but RFC 6902 would replace the existing object,
/// wiping every entry vclos does not manage (say a `DATAACL` table).
pub fn merge(db: &ConfigDb, patch: &Patch) -> Result<(Patch, ConfigDb), String> {
    let mut doc = Value::Object(db.clone());
    let mut kept = Vec::new();
    for (i, op) in patch.0.iter().enumerate() {
        if let PatchOperation::Add(a) = op {
            let creates = a.value.as_object().is_some_and(Map::is_empty);
            if creates && doc.pointer(a.path.as_str()).is_some_and(Value::is_object) {
                continue;
            }
        }
        json_patch::patch_unsafe(&mut doc, std::slice::from_ref(op))
            .map_err(|e| format!("operation {} on {}: {e}", i + 1, op.path()))?;
        // A removal emptying its table becomes the table's removal.
        let mut op = op.clone();
        if let PatchOperation::Remove(r) = &mut op {
            let table = r.path.to_string();
            let table: String = table.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
            if table != r.path.as_str() {
                let emptied = doc.pointer(&table).and_then(Value::as_object);
                if emptied.is_some_and(Map::is_empty) {
                    if let (Ok(p), Value::Object(m)) = (table.parse(), &mut doc) {
                        r.path = p;
                        m.remove(&table[1..].replace("~1", "/").replace("~0", "~"));
                    }
                }
            }
        }
        kept.push(op);
    }
    match doc {
        Value::Object(mut m) => {
            prune(&mut m);
            Ok((Patch(kept), m))
        }
        _ => Err("the patch replaces the whole document with a non-object".into()),
    }
}

/// Drop tables left without keys.
pub fn prune(db: &mut ConfigDb) {
    db.retain(|_, t| !t.as_object().is_some_and(Map::is_empty));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn db(v: Value) -> ConfigDb {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn prints_sorted_with_four_spaces() {
        let d = db(json!({"VRF": {"Vrf-b": {}, "Vrf-a": {}}, "ACL_TABLE": {}}));
        assert_eq!(
            to_text(&d),
            "{\n    \"ACL_TABLE\": {},\n    \"VRF\": {\n        \"Vrf-a\": {},\n        \"Vrf-b\": {}\n    }\n}\n"
        );
        assert_eq!(parse(&to_text(&d)), Ok(d));
    }

    #[test]
    fn patches_apply_on_a_copy_and_empty_tables_are_refused() {
        let d = db(json!({"VRF": {"Vrf-a": {}}, "PORT": {"Ethernet0": {"mtu": "9100"}}}));
        let p = patch_from_lines(
            "{\"op\":\"remove\",\"path\":\"/VRF/Vrf-a\"}\n\n{\"op\":\"add\",\"path\":\"/PORT/Ethernet0/description\",\"value\":\"x\"}\n",
        )
        .unwrap();
        assert!(apply(&d, &p).unwrap_err().ends_with("Table: VRF"));
        let (p, _) = merge(&d, &p).unwrap();
        let out = apply(&d, &p).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"PORT": {"Ethernet0": {"mtu": "9100", "description": "x"}}})
        );
        let bad = patch_from_lines("{\"op\":\"remove\",\"path\":\"/VRF/Vrf-zz\"}").unwrap();
        assert!(apply(&d, &bad).is_err());
        assert_eq!(d["VRF"], json!({"Vrf-a": {}}));
    }

    #[test]
    fn only_add_remove_replace_and_errors_name_the_line() {
        let e =
            patch_from_lines("\n{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/b\"}").unwrap_err();
        assert_eq!(e.0, 2);
        assert!(e.1.contains("not one of add"), "{}", e.1);
        assert_eq!(patch_from_lines("echo hi").unwrap_err().0, 1);
        assert!(parse_patch("[{\"op\":\"test\",\"path\":\"/a\",\"value\":1}]").is_err());
        assert!(parse_patch("[]").is_ok());
        assert!(parse("[1]").is_err());
        assert!(parse("{").unwrap_err().starts_with("line 1"));
    }

    #[test]
    fn merge_keeps_existing_parents() {
        let d = db(json!({"ACL_TABLE": {"DATAACL": {"type": "L3"}}}));
        let p = patch_from_lines(concat!(
            "{\"op\":\"add\",\"path\":\"/ACL_TABLE\",\"value\":{}}\n",
            "{\"op\":\"add\",\"path\":\"/ACL_TABLE/v-j1-p1\",\"value\":{\"type\":\"L3\"}}\n",
            "{\"op\":\"add\",\"path\":\"/VRF\",\"value\":{}}\n",
            "{\"op\":\"add\",\"path\":\"/VRF/Vrf-a\",\"value\":{}}\n",
        ))
        .unwrap();
        let (kept, out) = merge(&d, &p).unwrap();
        assert_eq!(kept.0.len(), 3, "the existing ACL_TABLE is not re-created");
        assert_eq!(out["ACL_TABLE"]["DATAACL"], json!({"type": "L3"}));
        assert_eq!(out["VRF"], json!({"Vrf-a": {}}));
        // Applied as written, RFC 6902 replaces the table.
        assert_eq!(
            apply(&d, &p).unwrap()["ACL_TABLE"]
                .as_object()
                .unwrap()
                .len(),
            1
        );
        let e = merge(
            &d,
            &patch_from_lines("{\"op\":\"remove\",\"path\":\"/X/y\"}").unwrap(),
        );
        assert!(e.unwrap_err().starts_with("operation 1 on /X/y"));
    }

    #[test]
    fn a_removal_emptying_its_table_removes_the_table() {
        let d = db(json!({
            "ACL_RULE": {"t|R1": {"PRIORITY": "1"}},
            "VRF": {"Vrf-a": {}, "Vrf-b": {}},
        }));
        let p = patch_from_lines(concat!(
            "{\"op\":\"remove\",\"path\":\"/ACL_RULE/t|R1\"}\n",
            "{\"op\":\"remove\",\"path\":\"/VRF/Vrf-a\"}\n",
        ))
        .unwrap();
        // As written, the updater refuses it: ACL_RULE would be empty.
        let e = apply(&d, &p).unwrap_err();
        assert!(
            e.contains("will result in empty tables") && e.ends_with("Table: ACL_RULE"),
            "{e}"
        );
        let (kept, out) = merge(&d, &p).unwrap();
        let paths: Vec<String> = kept.0.iter().map(|o| o.path().to_string()).collect();
        assert_eq!(paths, ["/ACL_RULE", "/VRF/Vrf-a"]);
        assert_eq!(apply(&d, &kept).unwrap(), out);
        assert_eq!(out, db(json!({"VRF": {"Vrf-b": {}}})));
    }
}
