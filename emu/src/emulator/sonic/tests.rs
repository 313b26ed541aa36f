#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::{json, Value};
use vclos_drivers::configdb::ConfigDb;

use super::session::SonicSession;
use super::*;
use crate::emulator::shell::{SessionAction, SessionKind, ShellSession};

fn db(v: Value) -> ConfigDb {
    v.as_object().cloned().unwrap()
}

/// A leaf with two ports, one routed uplink.
fn leaf() -> Arc<SonicDevice> {
    let base = db(json!({
        "DEVICE_METADATA": {"localhost": {"hostname": "leaf1"}},
        "PORT": {"Ethernet0": {"description": "srv1"}, "Ethernet4": {}},
        "INTERFACE": {"Ethernet4": {}, "Ethernet4|10.0.0.1/31": {}},
    }));
    SonicDevice::new(
        "leaf1",
        validate::initial(base, "ToRRouter"),
        Arc::new(Faults::new()),
    )
    .unwrap()
}

struct Sh(SonicSession);

impl Sh {
    fn new(dev: &Arc<SonicDevice>) -> Self {
        Sh(SonicSession::new(dev.clone(), "admin", SessionKind::Shell))
    }

    fn run(&mut self, line: &str) -> String {
        self.status(line).0
    }

    /// The output and exit status of `line`.
    fn status(&mut self, line: &str) -> (String, u32) {
        let r = self.0.handle_line(line);
        assert_eq!(r.action, SessionAction::Continue, "{line}");
        (r.output, r.status)
    }

    /// Write `json` to `path` the way the driver does.
    fn write(&mut self, path: &str, json: &str) {
        assert_eq!(self.run(&format!("printf '%s' '{json}' > {path}")), "");
    }
}

#[test]
fn tmp_is_a_bounded_filesystem() {
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    let chunk = "x".repeat(60 * 1024);
    let lines = MAX_TMP_BYTES / chunk.len();
    for _ in 0..lines {
        assert_eq!(sh.run(&format!("printf '%s' '{chunk}' >> /tmp/big")), "");
    }
    let before = dev.file("/tmp/big").unwrap().len();
    let (out, status) = sh.status(&format!("printf '%s' '{chunk}' >> /tmp/big"));
    assert!(out.contains("No space left on device"), "{out}");
    assert_ne!(status, 0);
    assert_eq!(dev.file("/tmp/big").unwrap().len(), before);
    // Freed, it takes files again; but never more than MAX_TMP_FILES.
    assert_eq!(sh.run("rm -f /tmp/big"), "");
    for i in 0..MAX_TMP_FILES {
        assert_eq!(sh.run(&format!("printf 'a' > /tmp/f{i}")), "");
    }
    let out = sh.run("printf 'a' > /tmp/one-more");
    assert!(out.contains("No space left on device"), "{out}");
    assert_eq!(
        sh.run("printf 'b' > /tmp/f0"),
        "",
        "rewriting a file is fine"
    );
}

const REDIRECT: &str = r#"[{"op":"add","path":"/ACL_TABLE/v-j1-p1","value":{"type":"L3","stage":"ingress","ports":["Ethernet0"]}},{"op":"add","path":"/ACL_RULE","value":{}},{"op":"add","path":"/ACL_RULE/v-j1-p1|RULE_1","value":{"PRIORITY":"9999","DST_IP":"10.1.0.0/24","REDIRECT_ACTION":"Ethernet4"}}]"#;

/// The option the driver passes: ACL rules are not checked by the models.
const IGN: &str = "-i /ACL_RULE";

#[test]
fn prompt_show_and_unknown_commands() {
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    assert_eq!(sh.0.prompt(), "admin@leaf1:~$ ");
    let shown = sh.run("show runningconfiguration all");
    assert_eq!(shown, dev.running_text());
    assert!(
        shown.contains("\n    \"ACL_TABLE\": {\n        \"DATAACL\""),
        "{shown}"
    );
    assert_eq!(sh.run("sonic-cfggen -d --print-data"), shown);
    assert_eq!(sh.run("reboot"), "-bash: reboot: command not found\n");
    let mut exec = SonicSession::new(dev.clone(), "admin", SessionKind::Exec);
    assert_eq!(
        exec.handle_line("reboot").output,
        "bash: reboot: command not found\n"
    );
    assert!(sh
        .run("show foo")
        .contains("Error: No such command \"foo\"."));
    assert!(sh
        .run("echo x | reboot")
        .starts_with("-bash: emulator: `|` is not supported"));
    assert_eq!(sh.0.handle_line("exit").action, SessionAction::Close);
}

#[test]
fn apply_patch_from_a_tmp_file_needs_root_and_commits() {
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    sh.write("/tmp/p.json", REDIRECT);
    assert_eq!(sh.run("cat /tmp/p.json"), REDIRECT);
    assert_eq!(
        sh.run("config apply-patch /tmp/p.json"),
        "Root privileges are required for this operation\n"
    );
    let v0 = dev.running_version();
    let out = sh.run(&format!(
        "sudo config apply-patch --dry-run {IGN} /tmp/p.json"
    ));
    assert!(out.ends_with("Patch applied successfully.\n"), "{out}");
    assert_eq!(dev.running_version(), v0, "a dry run writes nothing");
    let out = sh.run(&format!("sudo config apply-patch {IGN} /tmp/p.json"));
    assert!(out.ends_with("Patch applied successfully.\n"), "{out}");
    let run = dev.running();
    assert_eq!(
        run["ACL_RULE"]["v-j1-p1|RULE_1"]["REDIRECT_ACTION"],
        "Ethernet4"
    );
    assert_eq!(
        run["ACL_TABLE"]["DATAACL"]["type"], "L3",
        "unmanaged table kept"
    );
    assert!(dev.running_version() > v0);
    assert_eq!(sh.run("rm -f /tmp/p.json"), "");
    assert_eq!(dev.file("/tmp/p.json"), None);
    assert!(sh.run("rm /tmp/p.json").contains("No such file"));
}

#[test]
fn bad_patches_change_nothing_and_say_why() {
    let dev = leaf();
    let before = dev.running_text();
    let mut sh = Sh::new(&dev);
    for (patch, why) in [
        (
            r#"[{"op":"add","path":"/VRF","value":{"job7":{}}}]"#,
            "does not match the pattern Vrf",
        ),
        (
            r#"[{"op":"add","path":"/VRF","value":{"Vrf-averyveryverylong":{}}}]"#,
            "longer than 15",
        ),
        (
            r#"[{"op":"remove","path":"/VRF/Vrf-x"}]"#,
            "path is invalid",
        ),
        (
            r#"[{"op":"add","path":"/INTERFACE/Ethernet0","value":{"vrf_name":"Vrf-x"}}]"#,
            "no such VRF",
        ),
        (
            r#"[{"op":"add","path":"/PORT/Ethernet8","value":{}}]"#,
            "ports are hardware",
        ),
        (
            r#"[{"op":"add","path":"/ACL_RULE","value":{"nope|R1":{"PRIORITY":"1","PACKET_ACTION":"DROP"}}}]"#,
            "Invalid leafref value \"nope\"",
        ),
        (
            r#"[{"op":"move","from":"/PORT","path":"/X"}]"#,
            "not one of add",
        ),
        // The first operation is fine; the second is not: all or nothing.
        (
            r#"[{"op":"add","path":"/VRF","value":{"Vrf-ok":{}}},{"op":"replace","path":"/DEVICE_METADATA/localhost/hostname","value":""}]"#,
            "hostname is required",
        ),
    ] {
        sh.write("/tmp/bad.json", patch);
        let out = sh.run("sudo config apply-patch /tmp/bad.json");
        assert!(
            out.contains(why) && out.contains("\nError: "),
            "{patch}: {out}"
        );
        assert!(!out.contains("successfully"), "{out}");
    }
    assert_eq!(dev.running_text(), before);
    let out = sh.run("sudo config apply-patch /tmp/none.json");
    assert!(
        out.contains("Path '/tmp/none.json' does not exist."),
        "{out}"
    );
    assert!(sh
        .run("printf '%s' x > /etc/x")
        .contains("/etc/x: Permission denied"));
}

#[test]
fn checkpoints_rollback_and_replace() {
    let dev = leaf();
    let before = dev.running_text();
    let mut sh = Sh::new(&dev);
    let out = sh.run("sudo config checkpoint vclos-1");
    assert!(out.ends_with("Checkpoint created successfully.\n"), "{out}");
    sh.write("/tmp/p.json", REDIRECT);
    sh.run(&format!("sudo config apply-patch {IGN} /tmp/p.json"));
    assert_ne!(dev.running_text(), before);
    assert_eq!(
        sh.run("sudo config list-checkpoints"),
        "[\n    \"vclos-1\"\n]\n"
    );
    let out = sh.run("sudo config rollback vclos-1");
    assert!(out.ends_with("Config rolled back successfully.\n"), "{out}");
    assert_eq!(dev.running_text(), before);
    assert!(sh
        .run("sudo config rollback nope")
        .contains("Error: Checkpoint 'nope' does not exist"));
    assert!(sh
        .run("sudo config checkpoint 'a b'")
        .contains("Error: invalid name"));
    assert_eq!(
        sh.run("sudo config delete-checkpoint vclos-1"),
        "Checkpoint deleted successfully.\n"
    );
    assert!(dev.checkpoints().is_empty());

    // replace: the whole document, validated like a patch.
    let mut doc = dev.running();
    doc.insert("VRF".into(), json!({"Vrf-a": {}}));
    sh.write("/tmp/all.json", &Value::Object(doc.clone()).to_string());
    let out = sh.run("sudo config replace /tmp/all.json");
    assert!(out.ends_with("Config replaced successfully.\n"), "{out}");
    assert_eq!(dev.running(), doc);
    doc.insert("VRF".into(), json!({"bad": {}}));
    sh.write("/tmp/all.json", &Value::Object(doc).to_string());
    assert!(sh
        .run("sudo config replace /tmp/all.json")
        .contains("Error: "));
    assert!(sh
        .run("sudo config save -y")
        .starts_with("Running command:"));
}

#[test]
fn printf_appends_and_reuses_its_format() {
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    sh.run("printf '%s' 'ab' > /tmp/x");
    sh.run("printf '%s\\n' 'c' 'd' >> /tmp/x");
    assert_eq!(dev.file("/tmp/x").unwrap(), "abc\nd\n");
    assert_eq!(sh.run("printf '100%% %s\\t|' x"), "100% x\t|");
    assert!(sh.run("printf '%d' 1").contains("invalid format character"));
    assert_eq!(sh.run("echo -n 'a b' c"), "a b c");
    assert_eq!(sh.run("show runningconfiguration all > /tmp/r"), "");
    assert_eq!(dev.file("/tmp/r").unwrap(), dev.running_text());
}

#[test]
fn faults_drop_fail_and_refuse() {
    let dev = leaf();
    let before = dev.running_text();
    let mut sh = Sh::new(&dev);
    sh.write("/tmp/p.json", REDIRECT);
    dev.faults().drop_next();
    assert_eq!(
        sh.0.handle_line("show runningconfiguration all").action,
        SessionAction::Drop
    );
    dev.faults().fail_after(Some(0));
    assert!(sh
        .run(&format!("sudo config apply-patch {IGN} /tmp/p.json"))
        .contains("fork: retry"));
    dev.faults().clear();
    dev.faults().refuse_commits(true);
    assert!(sh
        .run(&format!(
            "sudo config apply-patch --dry-run {IGN} /tmp/p.json"
        ))
        .contains("successfully"));
    let out = sh.run(&format!("sudo config apply-patch {IGN} /tmp/p.json"));
    assert!(
        out.contains("Error: the device refused the change"),
        "{out}"
    );
    assert_eq!(dev.running_text(), before);
    assert_eq!(
        dev.history().last().unwrap(),
        &[
            "sudo",
            "config",
            "apply-patch",
            "-i",
            "/ACL_RULE",
            "/tmp/p.json"
        ]
    );
}

/// Write `patch`, apply it with `opts`, and check it is refused with `why`
/// (exit status 2) and running unchanged.
fn refused(dev: &Arc<SonicDevice>, sh: &mut Sh, opts: &str, patch: &str, why: &str) {
    let before = dev.running_text();
    sh.write("/tmp/bad.json", patch);
    let (out, status) = sh.status(&format!("sudo config apply-patch {opts} /tmp/bad.json"));
    assert!(out.contains(why), "{patch}\nwanted {why:?} in\n{out}");
    assert!(out.starts_with("Failed to apply patch due to: "), "{out}");
    assert_eq!(status, 2, "{patch}: {out}");
    assert_eq!(dev.running_text(), before, "{patch}");
}

/// A patch adding ACL table `v-j1-p1` on Ethernet0 with one rule `rule`.
fn rule_patch(rule: Value) -> String {
    json!([
        {"op": "add", "path": "/ACL_TABLE/v-j1-p1", "value": {"type": "L3", "stage": "ingress", "ports": ["Ethernet0"]}},
        {"op": "add", "path": "/ACL_RULE", "value": {"v-j1-p1|RULE_1": rule}},
    ])
    .to_string()
}

#[test]
fn the_models_refuse_what_sonic_yang_models_refuse() {
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    let rule = |extra: Value| {
        let mut r = json!({"PRIORITY": "9999", "IP_TYPE": "IPV4ANY", "DST_IP": "10.1.0.0/24"});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        r.as_object_mut().unwrap().retain(|_, v| !v.is_null());
        rule_patch(r)
    };
    for (patch, why) in [
        // stypes:packet_action has REDIRECT, never REDIRECT:<port>.
        (
            rule(json!({"PACKET_ACTION": "REDIRECT:Ethernet4"})),
            "Invalid enumeration value \"REDIRECT:Ethernet4\"",
        ),
        // sonic-acl has no REDIRECT_ACTION leaf.
        (
            rule(json!({"REDIRECT_ACTION": "Ethernet4"})),
            "field REDIRECT_ACTION has no leaf",
        ),
        (
            rule(json!({"PACKET_ACTION": "DROP", "PRIORITY": "1000000"})),
            "Value \"1000000\" does not satisfy the range constraint 0..999999",
        ),
        (
            rule(json!({"PACKET_ACTION": "DROP", "PRIORITY": "-1"})),
            "range constraint",
        ),
        (
            rule(json!({"PACKET_ACTION": "DROP", "PRIORITY": null})),
            "Mandatory node \"PRIORITY\"",
        ),
        (
            rule(json!({"PACKET_ACTION": "DROP", "IP_TYPE": "IPV5"})),
            "Invalid enumeration value \"IPV5\"",
        ),
        (
            rule(json!({"PACKET_ACTION": "DROP", "DST_IP": "10.1.0.0"})),
            "is not an ipv4-prefix",
        ),
        (
            r#"[{"op":"add","path":"/ACL_TABLE/t1","value":{"stage":"ingress"}}]"#.into(),
            "Mandatory node \"type\"",
        ),
        (
            r#"[{"op":"add","path":"/ACL_TABLE/t1","value":{"type":"L9"}}]"#.into(),
            "type \"L9\" is not an acl_table_type",
        ),
        (
            r#"[{"op":"add","path":"/ACL_TABLE/t1","value":{"type":"L3","ports":["Ethernet99"]}}]"#.into(),
            "Invalid leafref value \"Ethernet99\"",
        ),
        (
            r#"[{"op":"add","path":"/ACL_TABLE/t1","value":{"type":"L3","ports":[]}}]"#.into(),
            "Empty leaf-list at ports",
        ),
        (
            r#"[{"op":"add","path":"/ACL_TABLE/t1","value":{"type":"L3","stage":"sideways"}}]"#.into(),
            "stage \"sideways\"",
        ),
        (
            r#"[{"op":"add","path":"/ACL_RULE","value":{"DATAACL":{"PRIORITY":"1","PACKET_ACTION":"DROP"}}}]"#.into(),
            "Value not found for ACL_TABLE_NAME RULE_NAME in DATAACL",
        ),
        (
            r#"[{"op":"add","path":"/ACL_RULE","value":{"DATAACL|a|b":{"PRIORITY":"1","PACKET_ACTION":"DROP"}}}]"#.into(),
            "Value not found for ACL_TABLE_NAME RULE_NAME",
        ),
        (
            r#"[{"op":"remove","path":"/PORT/Ethernet0/lanes"}]"#.into(),
            "PORT|Ethernet0: Mandatory node \"lanes\"",
        ),
        (
            r#"[{"op":"replace","path":"/PORT/Ethernet0/lanes","value":"5"}]"#.into(),
            "lane 5 is used by another port",
        ),
        (
            r#"[{"op":"replace","path":"/PORT/Ethernet0/lanes","value":"1,,2"}]"#.into(),
            "PORT has an empty lane",
        ),
        (
            r#"[{"op":"replace","path":"/PORT/Ethernet0/lanes","value":"x"}]"#.into(),
            "PORT has an invalid lane 'x'",
        ),
        (
            r#"[{"op":"remove","path":"/PORT/Ethernet0/speed"}]"#.into(),
            "Mandatory node \"speed\"",
        ),
        (
            r#"[{"op":"replace","path":"/PORT/Ethernet0/mtu","value":"9217"}]"#.into(),
            "mtu \"9217\" is not in the range 68..9216",
        ),
        (
            r#"[{"op":"add","path":"/PORT/Ethernet0/colour","value":"red"}]"#.into(),
            "field colour has no leaf",
        ),
        (
            r#"[{"op":"add","path":"/FOO","value":{"x":{"a":"b"}}}]"#.into(),
            "Given patch is not valid because it has changes to tables without YANG models",
        ),
        (
            r#"[{"op":"remove","path":"/INTERFACE/Ethernet4|10.0.0.1~131"},{"op":"remove","path":"/INTERFACE/Ethernet4"}]"#.into(),
            "will result in empty tables which is not allowed in ConfigDb. Table: INTERFACE",
        ),
    ] {
        refused(&dev, &mut sh, "", &patch, why);
    }
    // The same rule without the model's complaints is taken.
    accepted(&mut sh, "", &rule(json!({"PACKET_ACTION": "DROP"})));
}

#[test]
fn ignored_acl_rules_still_get_orchagents_checks() {
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    for (rule, why) in [
        (
            json!({"PRIORITY": "9999", "REDIRECT_ACTION": "Ethernet99"}),
            "redirect target Ethernet99: no such port",
        ),
        (
            json!({"PRIORITY": "9999", "PACKET_ACTION": "REDIRECT:Ethernet99"}),
            "redirect target Ethernet99: no such port",
        ),
        (
            json!({"PRIORITY": "9999", "PACKET_ACTION": "REDIRECT"}),
            "Redirect action rule must have ':' after REDIRECT",
        ),
        (
            json!({"PRIORITY": "9999", "PACKET_ACTION": "REDIRECT:"}),
            "must have a target after 'REDIRECT:'",
        ),
        (
            json!({"PRIORITY": "1000000", "REDIRECT_ACTION": "Ethernet4"}),
            "Priority value 1000000 is out of supported priority range 0-999999",
        ),
        (
            json!({"REDIRECT_ACTION": "Ethernet4"}),
            "a rule needs a PRIORITY",
        ),
        (
            json!({"PRIORITY": "9999", "DST_IP": "10.1.0.0/24"}),
            "a rule needs an action",
        ),
        (
            json!({"PRIORITY": "9999", "REDIRECT_ACTION": "Ethernet4", "COLOUR": "red"}),
            "Unknown or invalid rule attribute 'COLOUR'",
        ),
    ] {
        refused(&dev, &mut sh, IGN, &rule_patch(rule), why);
    }
    // aclorch's legacy form is programmed too, once the models are bypassed.
    let legacy = rule_patch(json!({"PRIORITY": "9999", "PACKET_ACTION": "REDIRECT:Ethernet4"}));
    accepted(&mut sh, IGN, &legacy);
}

#[test]
fn a_redirect_in_running_makes_unignored_patches_fail() {
    // The updater validates the whole resulting config_db: once a rule the
    // models cannot express is running, every patch needs `-i /ACL_RULE`.
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    accepted(&mut sh, IGN, REDIRECT);
    let vrf = r#"[{"op":"add","path":"/VRF","value":{"Vrf-a":{}}}]"#;
    refused(&dev, &mut sh, "", vrf, "field REDIRECT_ACTION has no leaf");
    accepted(&mut sh, IGN, vrf);
    assert!(dev.running()["VRF"]["Vrf-a"].is_object());
    // A rollback to a checkpoint holding it needs the option as well.
    sh.run("sudo config checkpoint c1");
    let (out, status) = sh.status("sudo config rollback c1");
    assert_eq!(status, 2, "{out}");
    assert!(out.contains("REDIRECT_ACTION has no leaf"), "{out}");
    assert_eq!(sh.status(&format!("sudo config rollback {IGN} c1")).1, 0);
}

#[test]
fn a_fresh_switch_is_valid_with_derived_lanes() {
    let dev = leaf();
    let run = dev.running();
    assert_eq!(run["PORT"]["Ethernet0"]["lanes"], "1,2,3,4");
    assert_eq!(run["PORT"]["Ethernet4"]["lanes"], "5,6,7,8");
    assert!(validate::check(&run, &run, &[]).is_ok());
    // Without the hardware settings a baseline is refused: no lanes.
    let bare = db(json!({
        "DEVICE_METADATA": {"localhost": {"hostname": "leaf1"}},
        "PORT": {"Ethernet0": {"speed": "100000"}},
    }));
    let e = SonicDevice::new("leaf1", bare, Arc::new(Faults::new())).unwrap_err();
    assert!(e.contains("Mandatory node \"lanes\""), "{e}");
}

#[test]
fn exit_statuses_follow_bash() {
    let dev = leaf();
    let mut sh = Sh::new(&dev);
    sh.write("/tmp/p.json", REDIRECT);
    for (line, out, status) in [
        ("true", "", 0),
        ("false", "", 1),
        ("false; echo rc=$?", "rc=1\n", 0),
        ("true; false", "", 1),
        ("echo '$?' $?", "$? 1\n", 0),
        ("reboot", "-bash: reboot: command not found\n", 127),
        ("reboot; echo rc=$?", "-bash: reboot: command not found\nrc=127\n", 0),
        ("sudo reboot", "sudo: reboot: command not found\n", 1),
        ("cat /tmp/none", "cat: /tmp/none: No such file or directory\n", 1),
        ("rm /tmp/none", "rm: cannot remove '/tmp/none': No such file or directory\n", 1),
        ("printf x > /etc/x", "-bash: /etc/x: Permission denied\n", 1),
        ("echo x | sh", "-bash: emulator: `|` is not supported (simple commands, single quotes and one > or >> only)\n", 2),
        ("; echo", "-bash: syntax error near unexpected token `;'\n", 2),
        ("config apply-patch /tmp/p.json", "Root privileges are required for this operation\n", 1),
    ] {
        assert_eq!(sh.status(line), (out.to_string(), status), "{line}");
    }
    let (_, status) = sh.status("sudo config apply-patch /tmp/p.json");
    assert_eq!(status, 2, "a refused apply-patch fails");
    let (_, status) = sh.status(&format!("sudo config apply-patch {IGN} /tmp/p.json"));
    assert_eq!(status, 0);
    assert_eq!(sh.status("sudo config rollback nope").1, 2);
    assert_eq!(sh.status("sudo config bogus").1, 2);
    let r = sh.0.handle_line("exit 3");
    assert_eq!((r.action, r.status), (SessionAction::Close, 3));
    let mut exec = SonicSession::new(dev.clone(), "admin", SessionKind::Exec);
    assert_eq!(exec.handle_line("false").status, 1);
    assert_eq!(exec.handle_line("sudo config checkpoint x").status, 0);
}

/// A leaf with a long-named port too (Ethernet128: its sub-interfaces with
/// four-digit VLANs exceed Linux's 15 characters), Ethernet4 routed.
fn subif_leaf() -> Arc<SonicDevice> {
    let base = db(json!({
        "DEVICE_METADATA": {"localhost": {"hostname": "leaf1"}},
        "PORT": {"Ethernet0": {}, "Ethernet4": {}, "Ethernet128": {}},
        "INTERFACE": {"Ethernet4": {}, "Ethernet4|10.0.0.1/31": {}},
        "VRF": {"Vrf-b": {}},
    }));
    SonicDevice::new(
        "leaf1",
        validate::initial(base, "ToRRouter"),
        Arc::new(Faults::new()),
    )
    .unwrap()
}

/// A patch adding the `VLAN_SUB_INTERFACE` entries `entries` (the table
/// created when running has none).
fn subif_patch(dev: &SonicDevice, entries: Value) -> String {
    let mut ops = Vec::new();
    if dev.running().get("VLAN_SUB_INTERFACE").is_none() {
        ops.push(json!({"op": "add", "path": "/VLAN_SUB_INTERFACE", "value": {}}));
    }
    for (k, v) in entries.as_object().unwrap() {
        let path = format!("/VLAN_SUB_INTERFACE/{}", k.replace('/', "~1"));
        ops.push(json!({"op": "add", "path": path, "value": v}));
    }
    Value::Array(ops).to_string()
}

/// Apply `patch` (options `opts`) and expect success.
fn accepted(sh: &mut Sh, opts: &str, patch: &str) {
    sh.write("/tmp/ok.json", patch);
    let (out, status) = sh.status(&format!("sudo config apply-patch {opts} /tmp/ok.json"));
    assert_eq!(status, 0, "{patch}\n{out}");
}

#[test]
fn sub_interfaces_pass_the_vlan_sub_interface_model() {
    let dev = subif_leaf();
    let mut sh = Sh::new(&dev);
    // Long and short names, the spine end's VRF, addresses.
    let good = json!({
        "Ethernet4.101": {"admin_status": "up", "vlan": "101"},
        "Ethernet4.101|172.16.0.2/31": {},
        "Eth4.102": {"vlan": "102", "vrf_name": "Vrf-b"},
        "Eth4.102|172.16.0.4/31": {},
        "Ethernet128.999": {"vlan": "999", "loopback_action": "drop", "send_redirects": "false"},
        "Ethernet0.4094": {"vlan": "4094"},
    });
    accepted(&mut sh, "", &subif_patch(&dev, good));
    let run = dev.running();
    assert_eq!(run["VLAN_SUB_INTERFACE"]["Ethernet4.101"]["vlan"], "101");
    assert_eq!(run["VLAN_SUB_INTERFACE"]["Eth4.102"]["vrf_name"], "Vrf-b");
}

#[test]
fn the_model_refuses_what_sonic_vlan_sub_interface_refuses() {
    let dev = subif_leaf();
    let mut sh = Sh::new(&dev);
    let convention =
        "Must condition not satisfied, please follow vlan sub interface naming convention";
    for (entries, why) in [
        (json!({"Ethernet99.101": {"vlan": "101"}}), convention),
        (json!({"Eth99.101": {"vlan": "101"}}), convention),
        (json!({"Po1.101": {"vlan": "101"}}), convention),
        // 16 characters: longer than a Linux interface name.
        (json!({"Ethernet128.1001": {"vlan": "1001"}}), convention),
        (
            json!({"Eth4.101": {"admin_status": "up"}}),
            "no encap vlan provided for short-name format vlan sub interface",
        ),
        (json!({"Ethernet4.0101": {}}), "does not match the pattern"),
        (json!({"Ethernet4.4095": {}}), "does not match the pattern"),
        (json!({"Ethernet4": {}}), "does not match the pattern"),
        (json!({"Ether_4.101": {"vlan": "101"}}), "does not match the pattern"),
        (
            json!({"Ethernet4.101": {"vlan": "0"}}),
            "vlan \"0\" does not satisfy the range constraint 1..4094",
        ),
        (json!({"Ethernet4.101": {"vlan": "4095"}}), "range constraint 1..4094"),
        (json!({"Ethernet4.101": {"vlan": "x"}}), "range constraint 1..4094"),
        (
            json!({"Ethernet4.101": {"vlan": "101", "vrf_name": "Vrf-x"}}),
            "Invalid leafref value \"Vrf-x\" of vrf_name - no target instance in VRF",
        ),
        (
            json!({"Ethernet4.101": {"vlan": "101", "vnet_name": "Vnet1"}}),
            "Invalid leafref value \"Vnet1\" of vnet_name",
        ),
        (
            json!({"Ethernet4.101": {"admin_status": "sideways"}}),
            "Invalid value \"sideways\" of admin_status",
        ),
        (
            json!({"Ethernet4.101": {"send_redirects": "yes"}}),
            "Invalid value \"yes\" of send_redirects",
        ),
        (
            json!({"Ethernet4.101": {"vlan": "101", "colour": "red"}}),
            "field colour has no leaf",
        ),
        // An address of a sub-interface that does not exist.
        (
            json!({"Ethernet4.101|172.16.0.2/31": {}}),
            "Invalid leafref value \"Ethernet4.101\" - no target instance in VLAN_SUB_INTERFACE_LIST",
        ),
        (
            json!({"Ethernet4.101": {}, "Ethernet4.101|172.16.0/31": {}}),
            "is not a sonic-ip-prefix",
        ),
        (
            json!({"Ethernet4.101": {}, "Ethernet4.101|172.16.0.2/31": {"family": "IPv4"}}),
            "field family has no leaf",
        ),
    ] {
        refused(&dev, &mut sh, "", &subif_patch(&dev, entries), why);
    }
    // A sub-interface is no port of INTERFACE.
    let iface = r#"[{"op":"add","path":"/INTERFACE/Ethernet4.101","value":{}}]"#;
    refused(&dev, &mut sh, "", iface, "leafref: no port Ethernet4.101");
}

#[test]
fn one_parent_never_terminates_a_vlan_twice() {
    let dev = subif_leaf();
    let mut sh = Sh::new(&dev);
    let why = "emulator: intfmgrd would not create this sub-interface";
    // In one patch: a long name and a short one with the same VLAN.
    let both = json!({"Ethernet4.101": {"vlan": "101"}, "Eth4.7": {"vlan": "101"}});
    refused(&dev, &mut sh, "", &subif_patch(&dev, both), why);
    // Against running; the long name's VLAN is its suffix (intfmgrd).
    accepted(
        &mut sh,
        "",
        &subif_patch(&dev, json!({"Ethernet4.101": {"vlan": "101"}})),
    );
    for again in [
        json!({"Eth4.9": {"vlan": "101"}}),
        json!({"Ethernet4.102": {"vlan": "101"}, "Eth4.8": {"vlan": "102"}}),
    ] {
        refused(&dev, &mut sh, "", &subif_patch(&dev, again), why);
    }
    // The same VLAN on another parent is fine.
    accepted(
        &mut sh,
        "",
        &subif_patch(&dev, json!({"Ethernet0.101": {"vlan": "101"}})),
    );
}

#[test]
fn a_redirect_names_a_subinterface_by_its_far_end_only() {
    let dev = subif_leaf();
    let mut sh = Sh::new(&dev);
    let sub = json!({
        "Ethernet4.101": {"admin_status": "up", "vlan": "101"},
        "Ethernet4.101|172.16.0.2/31": {},
    });
    accepted(&mut sh, "", &subif_patch(&dev, sub));
    let rule = |action: Value| {
        let mut r = json!({"PRIORITY": "9999", "IP_TYPE": "IPV4ANY", "DST_IP": "10.1.0.0/24"});
        for (k, v) in action.as_object().unwrap() {
            r[k] = v.clone();
        }
        rule_patch(r)
    };
    let missing = "doesn't exist on the switch";
    for (action, why) in [
        // aclorch: a sub-port is no physical port or LAG.
        (
            json!({"REDIRECT_ACTION": "Ethernet4.101"}),
            "Wrong port type for REDIRECT action. Only physical ports and LAG ports are supported",
        ),
        (
            json!({"PACKET_ACTION": "REDIRECT:Ethernet4.101"}),
            "Wrong port type for REDIRECT action",
        ),
        // The sub-interface's own address, an address off its subnet, the
        // main interface's neighbour named on the sub-interface.
        (
            json!({"REDIRECT_ACTION": "172.16.0.2@Ethernet4.101"}),
            missing,
        ),
        (
            json!({"REDIRECT_ACTION": "172.16.0.5@Ethernet4.101"}),
            missing,
        ),
        (
            json!({"REDIRECT_ACTION": "10.0.0.0@Ethernet4.101"}),
            missing,
        ),
        (json!({"REDIRECT_ACTION": "172.16.0.3@Ethernet0"}), missing),
        (json!({"REDIRECT_ACTION": "10.9.9.9"}), missing),
        (
            json!({"REDIRECT_ACTION": "x@Ethernet4.101"}),
            "redirect target x@Ethernet4.101: no such port, LAG or next hop",
        ),
    ] {
        refused(&dev, &mut sh, IGN, &rule(action.clone()), why);
    }
    for ok in [
        json!({"REDIRECT_ACTION": "172.16.0.3@Ethernet4.101"}),
        json!({"PACKET_ACTION": "REDIRECT:10.0.0.0@Ethernet4"}),
        json!({"REDIRECT_ACTION": "172.16.0.3"}),
    ] {
        let patch = rule(ok.clone());
        accepted(&mut sh, IGN, &patch);
        // Once programmed, its next hop cannot go away under it.
        if ok["REDIRECT_ACTION"] == "172.16.0.3@Ethernet4.101" {
            let gone =
                r#"[{"op":"remove","path":"/VLAN_SUB_INTERFACE/Ethernet4.101|172.16.0.2~131"}]"#;
            refused(&dev, &mut sh, IGN, gone, missing);
        }
        let undo =
            r#"[{"op":"remove","path":"/ACL_TABLE/v-j1-p1"},{"op":"remove","path":"/ACL_RULE"}]"#;
        accepted(&mut sh, IGN, undo);
    }
}
