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
        let r = self.0.handle_line(line);
        assert_eq!(r.action, SessionAction::Continue, "{line}");
        r.output
    }

    /// Write `json` to `path` the way the driver does.
    fn write(&mut self, path: &str, json: &str) {
        assert_eq!(self.run(&format!("printf '%s' '{json}' > {path}")), "");
    }
}

const REDIRECT: &str = r#"[{"op":"add","path":"/ACL_TABLE/v-j1-p1","value":{"type":"L3","stage":"ingress","ports":["Ethernet0"]}},{"op":"add","path":"/ACL_RULE","value":{}},{"op":"add","path":"/ACL_RULE/v-j1-p1|RULE_1","value":{"PRIORITY":"9999","DST_IP":"10.1.0.0/24","PACKET_ACTION":"REDIRECT:Ethernet4"}}]"#;

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
        .run("echo x; reboot")
        .starts_with("-bash: emulator: `;` is not supported"));
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
    let out = sh.run("sudo config apply-patch --dry-run /tmp/p.json");
    assert!(out.ends_with("Patch applied successfully.\n"), "{out}");
    assert_eq!(dev.running_version(), v0, "a dry run writes nothing");
    let out = sh.run("sudo config apply-patch /tmp/p.json");
    assert!(out.ends_with("Patch applied successfully.\n"), "{out}");
    let run = dev.running();
    assert_eq!(
        run["ACL_RULE"]["v-j1-p1|RULE_1"]["PACKET_ACTION"],
        "REDIRECT:Ethernet4"
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
            "must start with \"Vrf\"",
        ),
        (
            r#"[{"op":"add","path":"/VRF","value":{"Vrf-averyveryverylong":{}}}]"#,
            "longer than 15",
        ),
        (
            r#"[{"op":"remove","path":"/VRF/Vrf-x"}]"#,
            "Given patch will produce invalid config",
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
            r#"[{"op":"add","path":"/ACL_RULE","value":{"nope|R1":{"PACKET_ACTION":"DROP"}}}]"#,
            "no ACL table nope",
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
    sh.run("sudo config apply-patch /tmp/p.json");
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
        .run("sudo config apply-patch /tmp/p.json")
        .contains("fork: retry"));
    dev.faults().clear();
    dev.faults().refuse_commits(true);
    assert!(sh
        .run("sudo config apply-patch --dry-run /tmp/p.json")
        .contains("successfully"));
    let out = sh.run("sudo config apply-patch /tmp/p.json");
    assert!(
        out.contains("Error: the device refused the change"),
        "{out}"
    );
    assert_eq!(dev.running_text(), before);
    assert_eq!(
        dev.history().last().unwrap(),
        &["sudo", "config", "apply-patch", "/tmp/p.json"]
    );
}
