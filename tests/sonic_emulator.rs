//! The emulated SONiC switch over real loopback SSH: driven by the real
//! `SonicDriver` with the SONiC dialect's patches (load, compare, commit,
//! read back, rollback, replace, discard, faults, payload injection), and by
//! the standard OpenSSH client (`ssh` + `sshpass`; skipped with a notice when
//! either is absent).
#![allow(clippy::unwrap_used)]

#[path = "openssh/mod.rs"]
mod openssh;

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use vclos::dialect::{sonic::Sonic, Dialect};
use vclos::emulator::faults::Faults;
use vclos::emulator::shell::{SessionKind, ShellSession};
use vclos::emulator::sonic::session::SonicSession;
use vclos::emulator::sonic::{validate, SonicDevice};
use vclos::emulator::ssh::{serve, Login, Service, SshServer};
use vclos::intent::{Description, Hostname, Ipv4Net, Item, PortName};
use vclos::names::JobId;
use vclos_drivers::configdb;
use vclos_drivers::sonic::{SonicDriver, KEEP_CHECKPOINTS};
use vclos_drivers::ssh::{HostKeyCheck, Password, SshOptions};
use vclos_drivers::{CommitId, Driver, ErrorKind, LoadMode, Step};

fn port(p: &str) -> PortName {
    PortName::new(p).unwrap()
}

/// leaf1: a server port and a routed uplink.
fn base() -> BTreeSet<Item> {
    BTreeSet::from([
        Item::Hostname {
            name: Hostname::new("leaf1").unwrap(),
        },
        Item::Description {
            port: port("Ethernet0"),
            text: Description::new("srv1 gpu0").unwrap(),
        },
        Item::Description {
            port: port("Ethernet4"),
            text: Description::new("uplink").unwrap(),
        },
        Item::Address {
            port: port("Ethernet4"),
            vrf: None,
            net: "10.0.0.1/31".parse::<Ipv4Net>().unwrap(),
        },
    ])
}

/// `base` plus a source route of Ethernet0 onto Ethernet4.
fn with_redirect() -> BTreeSet<Item> {
    let mut s = base();
    s.insert(Item::Redirect {
        job: JobId::new("j1").unwrap(),
        index: 1,
        port: port("Ethernet0"),
        uplink: port("Ethernet4"),
        destinations: vec!["10.128.1.0/24".parse().unwrap()],
    });
    s
}

async fn start() -> (Arc<SonicDevice>, SshServer) {
    let db = configdb::parse(&Sonic.render(&base())).unwrap();
    let dev = SonicDevice::new(
        "leaf1",
        validate::initial(db, "ToRRouter"),
        Arc::new(Faults::new()),
    )
    .unwrap();
    let srv = serve(Service::Cli(dev.clone()), Login::default())
        .await
        .unwrap();
    (dev, srv)
}

fn driver(srv: &SshServer, kh: &tempfile::NamedTempFile) -> SonicDriver {
    let mut o = SshOptions::new(
        "127.0.0.1",
        srv.local_addr().port(),
        "admin",
        Password::new("admin"),
        HostKeyCheck::KnownHosts(kh.path().into()),
    );
    o.command_timeout = Duration::from_secs(5);
    o.connect_retries = 0;
    SonicDriver::new("leaf1", o)
}

fn known_hosts(srv: &SshServer) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{}", srv.known_hosts_line()).unwrap();
    f
}

/// A switch, its server, a known_hosts file for it, and an open driver.
async fn connected() -> (
    Arc<SonicDevice>,
    SshServer,
    tempfile::NamedTempFile,
    SonicDriver,
) {
    let (dev, srv) = start().await;
    let kh = known_hosts(&srv);
    let mut d = driver(&srv, &kh);
    d.open().await.unwrap();
    (dev, srv, kh, d)
}

fn items(text: &str) -> BTreeSet<Item> {
    Sonic.parse("leaf1", text).unwrap()
}

/// The programs the device's shell ran, in order.
/// The programs run, without the driver's `echo vclos-rc=$?` after each.
fn programs(dev: &SonicDevice) -> Vec<String> {
    dev.history()
        .iter()
        .filter(|w| !(w[0] == "echo" && w.get(1).is_some_and(|a| a.starts_with("vclos-rc="))))
        .map(|w| match w.first().map(String::as_str) {
            Some("sudo") => format!("sudo {} {}", w[1], w.get(2).cloned().unwrap_or_default()),
            _ => w[0].clone(),
        })
        .collect()
}

#[tokio::test]
async fn driver_loads_compares_commits_reads_back_and_rolls_back() {
    let (dev, srv, kh, mut d) = connected().await;
    let before = d.get_config().await.unwrap();
    assert_eq!(before, dev.running_text());
    assert_eq!(items(&before), base());

    let patch = Sonic.changes(&base(), &with_redirect()).join("\n");
    d.load_candidate(&patch, LoadMode::Merge).await.unwrap();
    let diff = d.compare_config().await.unwrap();
    assert!(diff.starts_with("--- running\n+++ candidate\n"), "{diff}");
    assert!(
        diff.contains("+            \"REDIRECT_ACTION\": \"Ethernet4\""),
        "{diff}"
    );
    assert_eq!(dev.running_text(), before, "loading leaves running alone");
    // The candidate is a validated file on the device.
    let files = dev.file_names();
    assert!(
        files.len() == 1 && files[0].starts_with("/tmp/vclos-"),
        "{files:?}"
    );

    let id = d.commit(None).await.unwrap();
    assert!(id.0.starts_with("vclos-"), "{id:?}");
    assert!(programs(&dev).ends_with(&[
        "show".into(),
        "printf".into(),
        "sudo config apply-patch".into(),
        "sudo config checkpoint".into(),
        "sudo config apply-patch".into(),
        "rm".into(),
        "sudo config list-checkpoints".into(),
    ]));
    assert_eq!(dev.checkpoints(), std::slice::from_ref(&id.0));
    let after = d.get_config().await.unwrap();
    assert_eq!(after, dev.running_text());
    assert_eq!(items(&after), with_redirect());
    let run = dev.running();
    assert_eq!(
        run["ACL_TABLE"]["DATAACL"]["type"], "L3",
        "unmanaged ACL table kept"
    );
    assert_eq!(
        run["PORT"]["Ethernet0"]["mtu"], "9100",
        "port hardware kept"
    );
    assert_eq!(d.compare_config().await.unwrap(), "");
    assert!(dev.file_names().is_empty(), "the patch file is removed");

    // Undo the commit: running as it was before it.
    d.rollback(Some(&id)).await.unwrap();
    assert_eq!(d.get_config().await.unwrap(), before);

    // A commit someone else changed afterwards is not rolled back.
    d.load_candidate(&patch, LoadMode::Merge).await.unwrap();
    let id2 = d.commit(None).await.unwrap();
    let mut other = driver(&srv, &kh);
    other.open().await.unwrap();
    let rename = r#"{"op":"replace","path":"/PORT/Ethernet0/description","value":"moved"}"#;
    other.load_candidate(rename, LoadMode::Merge).await.unwrap();
    other.commit(None).await.unwrap();
    let e = d.rollback(Some(&id2)).await.unwrap_err();
    assert!(
        e.to_string().contains("running changed since commit"),
        "{e}"
    );
    other.close().await.unwrap();
    assert!(matches!(
        d.rollback(Some(&CommitId("vclos-1;reboot".into())))
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Rejected(_)
    ));
    d.close().await.unwrap();
}

/// `base` with the uplink Ethernet4 shared: job j1 joins it on the
/// sub-interface Ethernet4.101 (the leaf end: address, source route onto
/// it), and job j2's VRF holds Ethernet4.102 (a spine end: VRF-bound
/// address, a route through it) — both ends' forms on one switch.
fn shared() -> BTreeSet<Item> {
    let mut s = base();
    let vrf = vclos::intent::VrfName::new("Vrf-j2").unwrap();
    let net = |n: &str| n.parse::<Ipv4Net>().unwrap();
    s.extend([
        Item::Subinterface {
            port: port("Ethernet4.101"),
            vlan: 101,
        },
        Item::Address {
            port: port("Ethernet4.101"),
            vrf: None,
            net: net("172.16.0.2/31"),
        },
        Item::Redirect {
            job: JobId::new("j1").unwrap(),
            index: 1,
            port: port("Ethernet0"),
            uplink: port("Ethernet4.101"),
            destinations: vec![net("10.128.1.0/24")],
        },
        Item::Vrf { name: vrf.clone() },
        Item::Subinterface {
            port: port("Ethernet4.102"),
            vlan: 102,
        },
        Item::Address {
            port: port("Ethernet4.102"),
            vrf: Some(vrf.clone()),
            net: net("172.16.0.5/31"),
        },
        Item::Route {
            vrf,
            prefix: net("10.128.0.0/24"),
            nexthop: "172.16.0.4".parse().unwrap(),
        },
    ]);
    s
}

#[tokio::test]
async fn subinterfaces_commit_read_back_as_intended_and_release() {
    let (dev, _srv, _kh, mut d) = connected().await;
    let before = d.get_config().await.unwrap();
    let patch = Sonic.changes(&base(), &shared()).join("\n");
    d.load_candidate(&patch, LoadMode::Merge).await.unwrap();
    d.commit(None).await.unwrap();
    let after = d.get_config().await.unwrap();
    assert_eq!(items(&after), shared());
    let run = dev.running();
    let subs = &run["VLAN_SUB_INTERFACE"];
    assert_eq!(
        subs["Ethernet4.101"],
        serde_json::json!({"admin_status": "up", "vlan": "101"})
    );
    assert_eq!(subs["Ethernet4.102"]["vrf_name"], "Vrf-j2");
    assert!(subs["Ethernet4.101|172.16.0.2/31"].is_object());
    assert_eq!(
        run["ACL_RULE"]["v-j1-p1|RULE_1"]["REDIRECT_ACTION"], "172.16.0.3@Ethernet4.101",
        "the far end of the sub-interface's /31, at the sub-interface"
    );
    assert_eq!(
        run["INTERFACE"]["Ethernet4|10.0.0.1/31"],
        serde_json::json!({})
    );

    // The sub-port itself as the target: aclorch refuses it, so the switch
    // does (at load, by the dry run).
    let bare = r#"{"op":"replace","path":"/ACL_RULE/v-j1-p1|RULE_1/REDIRECT_ACTION","value":"Ethernet4.101"}"#;
    let e = d.load_candidate(bare, LoadMode::Merge).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("Wrong port type for REDIRECT action"),
        "{e}"
    );
    assert_eq!(d.get_config().await.unwrap(), after);

    // Released: exactly the configuration before.
    let patch = Sonic.changes(&shared(), &base()).join("\n");
    d.load_candidate(&patch, LoadMode::Merge).await.unwrap();
    d.commit(None).await.unwrap();
    assert_eq!(d.get_config().await.unwrap(), before);
    d.close().await.unwrap();
}

#[tokio::test]
async fn replace_discard_and_what_sonic_does_not_have() {
    let (dev, _srv, _kh, mut d) = connected().await;
    let caps = d.capabilities();
    assert!(caps.replace && caps.rollback && !caps.commit_confirm && !caps.atomic);

    // Replace: the whole document (the running one plus a VRF).
    let mut doc = dev.running();
    doc.insert("VRF".into(), serde_json::json!({"Vrf-j1": {}}));
    d.load_candidate(&configdb::to_text(&doc), LoadMode::Replace)
        .await
        .unwrap();
    assert!(d
        .compare_config()
        .await
        .unwrap()
        .contains("+    \"VRF\": {"));
    assert!(matches!(
        d.commit(Some(Duration::from_secs(60)))
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Unsupported(_)
    ));
    d.commit(None).await.unwrap();
    assert_eq!(dev.running(), doc);
    assert!(matches!(
        d.confirm().await.unwrap_err().kind,
        ErrorKind::Unsupported(_)
    ));

    // Discard: the file goes, running stays.
    let v = dev.running_version();
    d.load_candidate(r#"{"op":"remove","path":"/VRF/Vrf-j1"}"#, LoadMode::Merge)
        .await
        .unwrap();
    d.discard().await.unwrap();
    assert_eq!(d.compare_config().await.unwrap(), "");
    assert_eq!(dev.running_version(), v);
    assert!(dev.file_names().is_empty(), "{:?}", dev.file_names());

    // The device refuses a VRF not named Vrf...: at load, by its dry run.
    let e = d
        .load_candidate(
            r#"{"op":"add","path":"/VRF/job7","value":{}}"#,
            LoadMode::Merge,
        )
        .await
        .unwrap_err();
    assert_eq!(e.step, Step::Load);
    assert!(
        e.to_string()
            .contains("does not match the pattern Vrf[a-zA-Z0-9_-]+"),
        "{e}"
    );
    assert!(e.to_string().contains("exited with status 2"), "{e}");
    assert_eq!(dev.running_version(), v);
    assert!(dev.file_names().is_empty());
    // A patch that cannot apply is refused before anything is written.
    let n = dev.history().len();
    let e = d
        .load_candidate(r#"{"op":"remove","path":"/VRF/Vrf-zz"}"#, LoadMode::Merge)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("does not apply to running"), "{e}");
    assert!(dev.history()[n..]
        .iter()
        .all(|w| w[0] == "show" || w[0] == "echo"));
}

#[tokio::test]
async fn payloads_cannot_reach_the_shell() {
    let (dev, _srv, _kh, mut d) = connected().await;
    let n = dev.history().len();
    // Not JSON: refused before anything is sent.
    for bad in ["sudo reboot", "{\"op\":\"add\"}'; reboot; '", "[1]"] {
        let e = d.load_candidate(bad, LoadMode::Merge).await.unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }
    assert_eq!(dev.history().len(), n);
    // JSON whose strings try to end the quoting (a quote, DEL keys that
    // would erase the opening quote): stored literally, nothing else runs.
    // (A description holds at most 255 characters: sonic-port.yang.)
    let evil =
        "x'; sudo reboot; echo '\u{7f}\u{7f}\u{7f}\u{7f}\u{7f}\u{7f}\u{7f}$(reboot)\nß".repeat(6);
    assert!(evil.chars().count() <= 255);
    let op =
        serde_json::json!({"op": "replace", "path": "/PORT/Ethernet0/description", "value": evil});
    // Long enough to be sent in pieces: many VRFs besides.
    let mut ops = vec![
        op.to_string(),
        serde_json::json!({"op": "add", "path": "/VRF", "value": {}}).to_string(),
    ];
    for i in 0..100 {
        ops.push(
            serde_json::json!({"op": "add", "path": format!("/VRF/Vrf-p{i}"), "value": {}})
                .to_string(),
        );
    }
    d.load_candidate(&ops.join("\n"), LoadMode::Merge)
        .await
        .unwrap();
    d.commit(None).await.unwrap();
    assert_eq!(dev.running()["PORT"]["Ethernet0"]["description"], evil);
    let pieces = dev.history().iter().filter(|w| w[0] == "printf").count();
    assert!(pieces > 3, "a long payload is sent in pieces: {pieces}");
    let ran: BTreeSet<String> = programs(&dev).into_iter().collect();
    let expected = [
        "show",
        "printf",
        "rm",
        "sudo config apply-patch",
        "sudo config checkpoint",
        "sudo config list-checkpoints",
    ];
    assert_eq!(ran, expected.iter().map(|s| s.to_string()).collect());
}

#[tokio::test]
async fn faults_mid_commit_leave_the_device_as_it_was() {
    let (dev, _srv, _kh, mut d) = connected().await;
    let before = dev.running_text();
    let patch = Sonic.changes(&base(), &with_redirect()).join("\n");
    d.load_candidate(&patch, LoadMode::Merge).await.unwrap();
    // Refused: an error naming the device and step; running unchanged.
    dev.faults().refuse_commits(true);
    let e = d.commit(None).await.unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("leaf1", Step::Commit));
    assert!(e.to_string().contains("refused the change"), "{e}");
    assert_eq!(dev.running_text(), before);
    dev.faults().clear();
    // Dropped at the apply-patch (after the checkpoint).
    dev.faults().fail_after(Some(1));
    let e = d.commit(None).await.unwrap_err();
    assert!(
        e.to_string().contains("Resource temporarily unavailable"),
        "{e}"
    );
    assert_eq!(dev.running_text(), before);
    dev.faults().clear();
    dev.faults().drop_next();
    let e = d.commit(None).await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
    assert_eq!(dev.running_text(), before);
    // The driver reconnects; the staged file is still there; it commits,
    // and rollback without an id returns to its last checkpoint.
    let id = d.commit(None).await.unwrap();
    assert_eq!(items(&dev.running_text()), with_redirect());
    d.rollback(None).await.unwrap();
    assert_eq!(dev.running_text(), before);
    assert!(dev.checkpoints().contains(&id.0));
}

#[tokio::test]
async fn openssh_client_uses_the_sonic_shell() {
    if !openssh::available() {
        return;
    }
    let (dev, srv) = start().await;
    let kh = known_hosts(&srv);
    let patch = Sonic.changes(&base(), &with_redirect());
    let body = format!("[{}]", patch.join(","));
    // Interactive, as an operator types it: write the patch, apply, look.
    let input = format!(
        "printf '%s' '{body}' > /tmp/p.json\nsudo config apply-patch -i /ACL_RULE /tmp/p.json\nfrobnicate\nexit 0\n"
    );
    let out = openssh::run(srv.local_addr().port(), kh.path(), true, &input, &[]).await;
    assert!(
        out.contains("admin@leaf1:~$ sudo config apply-patch -i /ACL_RULE /tmp/p.json\n"),
        "{out}"
    );
    assert!(out.contains("Patch applied successfully.\n"), "{out}");
    assert!(
        out.contains("-bash: frobnicate: command not found\n"),
        "{out}"
    );
    assert_eq!(items(&dev.running_text()), with_redirect());
    // One command per exec request, as `ssh switch show ...` does.
    let out = openssh::run(
        srv.local_addr().port(),
        kh.path(),
        false,
        "",
        &["show runningconfiguration all"],
    )
    .await;
    assert_eq!(out, dev.running_text());
    let out = openssh::run(
        srv.local_addr().port(),
        kh.path(),
        false,
        "",
        &["sudo config list-checkpoints"],
    )
    .await;
    assert_eq!(out, "[]\n");
}

#[tokio::test]
async fn only_the_newest_checkpoints_are_kept() {
    let (dev, _srv, _kh, mut d) = connected().await;
    // Someone else's checkpoint is never touched.
    let mut sh = SonicSession::new(dev.clone(), "admin", SessionKind::Shell);
    let out = sh
        .handle_line("sudo config checkpoint before-upgrade")
        .output;
    assert!(out.contains("successfully"), "{out}");
    let mut ids = Vec::new();
    for k in 0..KEEP_CHECKPOINTS + 3 {
        let op = serde_json::json!({"op": "replace", "path": "/PORT/Ethernet0/description", "value": format!("v{k}")});
        d.load_candidate(&op.to_string(), LoadMode::Merge)
            .await
            .unwrap();
        ids.push(d.commit(None).await.unwrap().0);
    }
    let mut kept = ids[ids.len() - KEEP_CHECKPOINTS..].to_vec();
    kept.push("before-upgrade".into());
    kept.sort();
    assert_eq!(dev.checkpoints(), kept);
    // The last commit still rolls back.
    d.rollback(ids.last().map(|i| CommitId(i.clone())).as_ref())
        .await
        .unwrap();
    assert_eq!(
        dev.running()["PORT"]["Ethernet0"]["description"],
        format!("v{}", KEEP_CHECKPOINTS + 1)
    );
}

#[tokio::test]
async fn reuse_checks_the_shell_and_forgets_the_last_checkpoint() {
    let (dev, _srv, _kh, mut d) = connected().await;
    let before = d.get_config().await.unwrap();
    let patch = Sonic.changes(&base(), &with_redirect()).join("\n");
    d.load_candidate(&patch, LoadMode::Merge).await.unwrap();
    // A candidate staged on the device: not reusable, and left alone.
    let e = d.reuse().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Rejected(_)), "{e}");
    d.commit(None).await.unwrap();
    d.reuse().await.unwrap();
    // The next transaction's rollback(None) cannot undo the last commit.
    let e = d.rollback(None).await.unwrap_err();
    assert!(e.to_string().contains("no checkpoint"), "{e}");
    assert_ne!(d.get_config().await.unwrap(), before);
    assert_eq!(dev.faults().logins(), 1, "one login for everything");
    dev.faults().disconnect_all();
    let e = d.reuse().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
}

/// `ssh` running `remote` on the emulated switch, stdin `input`: its stdout
/// and exit code (OpenSSH exits with the remote command's exit status).
async fn ssh_status(
    srv: &SshServer,
    kh: &std::path::Path,
    input: &str,
    remote: &[&str],
) -> (String, i32) {
    let port = srv.local_addr().port();
    let (out, status, _) = openssh::output(port, kh, false, input, remote).await;
    (out, status.code().unwrap_or(-1))
}

#[tokio::test]
async fn openssh_sees_bash_exit_statuses() {
    if !openssh::available() {
        return;
    }
    let (dev, srv) = start().await;
    let kh = known_hosts(&srv);
    let before = dev.running_text();
    let patch = r#"[{"op":"add","path":"/ACL_TABLE/t1","value":{"type":"L3","ports":["Ethernet0"]}},{"op":"add","path":"/ACL_RULE","value":{"t1|R1":{"PRIORITY":"9999","PACKET_ACTION":"REDIRECT:Ethernet4"}}}]"#;
    let write = format!("printf '%s' '{patch}' > /tmp/p.json");
    for (remote, status) in [
        ("true", 0),
        ("false", 1),
        ("frobnicate", 127),
        ("echo x | sh", 2),
        (write.as_str(), 0),
        // The legacy redirect form is not a packet_action: refused.
        ("sudo config apply-patch /tmp/p.json", 2),
        ("false; echo rc=$?", 0),
    ] {
        let (out, code) = ssh_status(&srv, kh.path(), "", &[remote]).await;
        assert_eq!(code, status, "{remote}: {out}");
    }
    assert_eq!(dev.running_text(), before);
    let (out, _) = ssh_status(&srv, kh.path(), "", &["false; echo rc=$?"]).await;
    assert_eq!(out, "rc=1\n");
    // A shell ends with its last command's status.
    let (_, code) = ssh_status(&srv, kh.path(), "frobnicate\nexit\n", &[]).await;
    assert_eq!(code, 127);
    let (_, code) = ssh_status(&srv, kh.path(), "false\n", &[]).await;
    assert_eq!(code, 1);
}
