#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use vclos_drivers::netconf::framing::Framing;
use vclos_drivers::netconf::xml::{Element, NS_BASE};
use vclos_drivers::netconf::CAP_BASE_11;

use super::*;
use crate::emulator::faults::Faults;

fn device() -> Arc<NetconfDevice> {
    NetconfDevice::new("SPINE1", Element::new("data"), Arc::new(Faults::new()))
}

/// A device without a schema (structural checks only), whatever the build.
fn bare() -> Arc<NetconfDevice> {
    NetconfDevice::with_options(
        "SPINE2",
        Element::new("data"),
        Arc::new(Faults::new()),
        datastore::DeviceOptions::default(),
    )
}

/// Both kinds: the rules that hold with and without libyang.
fn devices() -> [Arc<NetconfDevice>; 2] {
    [device(), bare()]
}

fn session(dev: &Arc<NetconfDevice>) -> NetconfSession {
    let mut s = NetconfSession::new(dev.clone());
    let hello = format!("<hello xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\"><capabilities><capability>{CAP_BASE_11}</capability></capabilities></hello>");
    assert_eq!(s.handle(&hello).reply, None);
    assert_eq!(s.framing(), Framing::Chunked);
    s
}

fn rpc(s: &mut NetconfSession, body: &str) -> Element {
    let out = s.handle(&format!(
        "<rpc xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"42\">{body}</rpc>"
    ));
    let r = Element::parse(&out.reply.unwrap()).unwrap();
    assert_eq!(r.get_attr("message-id"), Some("42"));
    r
}

fn ok(s: &mut NetconfSession, body: &str) {
    let r = rpc(s, body);
    assert!(r.find("ok").is_some(), "{}", r.to_xml());
}

fn err_tag(s: &mut NetconfSession, body: &str) -> (String, Option<String>) {
    let r = rpc(s, body);
    let e = r
        .find("rpc-error")
        .unwrap_or_else(|| panic!("no error: {}", r.to_xml()));
    for f in ["error-type", "error-tag", "error-severity", "error-message"] {
        assert!(e.find(f).is_some(), "missing {f}");
    }
    let sid = e
        .find("error-info")
        .and_then(|i| i.find("session-id"))
        .map(|s| s.text.clone());
    (e.find("error-tag").unwrap().text.clone(), sid)
}

const NI: &str = "http://openconfig.net/yang/network-instance";
const VRF: &str = r#"<config><network-instances xmlns="http://openconfig.net/yang/network-instance"><network-instance><name>JOB7</name><config><name>JOB7</name><type xmlns:oc-ni-types="http://openconfig.net/yang/network-instance-types">oc-ni-types:L3VRF</type></config></network-instance></network-instances></config>"#;

fn edit(cfg: &str) -> String {
    format!("<edit-config><target><candidate/></target>{cfg}</edit-config>")
}

#[test]
fn merge_keys_list_entries_and_delete_removes_them() {
    let dev = device();
    let mut s = session(&dev);
    ok(&mut s, &edit(VRF));
    let other = VRF.replace("JOB7", "JOB8");
    ok(&mut s, &edit(&other));
    // Merging a leaf into JOB7 changes only JOB7.
    ok(
        &mut s,
        &edit(
            r#"<config xmlns:t="http://openconfig.net/yang/network-instance-types"><network-instances xmlns="http://openconfig.net/yang/network-instance"><network-instance><name>JOB7</name><config><type>t:L2VSI</type></config></network-instance></network-instances></config>"#,
        ),
    );
    let cand = dev.state().candidate.clone();
    let nis = &cand.children[0];
    assert_eq!(nis.children.len(), 2);
    assert_eq!(
        nis.children[0]
            .find("config")
            .unwrap()
            .find("type")
            .unwrap()
            .text,
        "t:L2VSI"
    );
    assert_eq!(
        nis.children[1]
            .find("config")
            .unwrap()
            .find("type")
            .unwrap()
            .text,
        "oc-ni-types:L3VRF"
    );
    ok(
        &mut s,
        &edit(
            r#"<config xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><network-instances xmlns="http://openconfig.net/yang/network-instance"><network-instance nc:operation="delete"><name>JOB8</name></network-instance></network-instances></config>"#,
        ),
    );
    assert_eq!(dev.state().candidate.children[0].children.len(), 1);
    let (tag, _) = err_tag(
        &mut s,
        &edit(
            r#"<config xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><network-instances xmlns="http://openconfig.net/yang/network-instance"><network-instance nc:operation="delete"><name>JOB8</name></network-instance></network-instances></config>"#,
        ),
    );
    assert_eq!(tag, "data-missing");
    let (tag, _) = err_tag(
        &mut s,
        &edit(&VRF.replace(
            "<network-instance>",
            "<network-instance xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" nc:operation=\"create\">",
        )),
    );
    assert_eq!(tag, "data-exists");
    // Running is untouched until commit.
    assert!(dev.running().children.is_empty());
    ok(&mut s, "<commit/>");
    assert_eq!(dev.running(), dev.state().candidate.clone());
}

#[test]
fn locks_name_the_holder_and_block_edits() {
    let dev = device();
    let mut a = session(&dev);
    let mut b = session(&dev);
    ok(&mut a, "<lock><target><candidate/></target></lock>");
    let (tag, sid) = err_tag(&mut b, "<lock><target><candidate/></target></lock>");
    assert_eq!(
        (tag.as_str(), sid),
        ("lock-denied", Some(a.id().to_string()))
    );
    let (tag, sid) = err_tag(&mut b, &edit(VRF));
    assert_eq!((tag.as_str(), sid), ("in-use", Some(a.id().to_string())));
    ok(&mut a, &edit(VRF));
    // Ending the holder's session releases the lock and its changes.
    a.end();
    ok(&mut b, "<lock><target><candidate/></target></lock>");
    assert!(dev.state().candidate.children.is_empty());
}

#[test]
fn validate_checks_key_against_config_leaf() {
    let dev = bare();
    let mut s = session(&dev);
    let bad = VRF.replace("<config><name>JOB7</name>", "<config><name>JOB9</name>");
    // The edit itself is refused: the candidate it would make is invalid.
    let (tag, _) = err_tag(&mut s, &edit(&bad));
    assert_eq!(tag, "invalid-value");
    assert!(dev.state().candidate.children.is_empty());
    // A candidate that is invalid anyway: validate and commit refuse it.
    let mut data = Element::parse(&bad).unwrap();
    data.name = "data".into();
    dev.state().candidate = data;
    let (tag, _) = err_tag(&mut s, "<validate><source><candidate/></source></validate>");
    assert_eq!(tag, "invalid-value");
    let (tag, _) = err_tag(&mut s, "<commit/>");
    assert_eq!(tag, "invalid-value");
    assert!(dev.running().children.is_empty());
    ok(&mut s, "<discard-changes/>");
    ok(&mut s, "<validate><source><candidate/></source></validate>");
}

#[test]
fn malformed_and_unknown_requests_get_rpc_errors() {
    let dev = device();
    let mut s = session(&dev);
    let out = s.handle("<rpc message-id=\"1\"><get-config>");
    let r = Element::parse(&out.reply.unwrap()).unwrap();
    assert_eq!(
        r.find("rpc-error").unwrap().find("error-tag").unwrap().text,
        "malformed-message"
    );
    assert_eq!(
        err_tag(&mut s, "<frobnicate/>").0,
        "operation-not-supported"
    );
    assert_eq!(
        err_tag(
            &mut s,
            "<get-config><source><startup/></source></get-config>"
        )
        .0,
        "invalid-value"
    );
    assert_eq!(err_tag(&mut s, "<cancel-commit/>").0, "operation-failed");
}

#[test]
fn subtree_filter_selects_matching_entries() {
    let dev = device();
    let mut s = session(&dev);
    ok(&mut s, &edit(VRF));
    ok(&mut s, &edit(&VRF.replace("JOB7", "JOB8")));
    ok(&mut s, "<commit/>");
    let r = rpc(&mut s, "<get-config><source><running/></source><filter type=\"subtree\"><network-instances><network-instance><name>JOB8</name></network-instance></network-instances></filter></get-config>");
    let nis = &r.find("data").unwrap().children[0];
    assert_eq!(nis.children.len(), 1);
    assert_eq!(nis.children[0].find("name").unwrap().text, "JOB8");
}

#[tokio::test(start_paused = true)]
async fn confirmed_commit_reverts_after_timeout_unless_confirmed() {
    let dev = device();
    let mut s = session(&dev);
    ok(&mut s, &edit(VRF));
    ok(
        &mut s,
        "<commit><confirmed/><confirm-timeout>30</confirm-timeout></commit>",
    );
    assert_eq!(dev.running().children.len(), 1);
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(dev.running().children.len(), 1, "still within the timeout");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(dev.running().children.is_empty(), "reverted");
    assert!(dev.state().candidate.children.is_empty());

    // Confirmed in time: stays.
    ok(&mut s, &edit(VRF));
    ok(
        &mut s,
        "<commit><confirmed/><confirm-timeout>30</confirm-timeout></commit>",
    );
    ok(&mut s, "<commit/>");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(dev.running().children.len(), 1);

    // cancel-commit reverts at once.
    ok(&mut s, &edit(&VRF.replace("JOB7", "JOB8")));
    ok(&mut s, "<commit><confirmed/></commit>");
    assert_eq!(dev.running().children[0].children.len(), 2);
    ok(&mut s, "<cancel-commit/>");
    assert_eq!(dev.running().children[0].children.len(), 1);
}

#[test]
fn faults_refuse_commit_and_drop() {
    let dev = device();
    let mut s = session(&dev);
    ok(&mut s, &edit(VRF));
    dev.faults().refuse_commits(true);
    assert_eq!(err_tag(&mut s, "<commit/>").0, "operation-failed");
    dev.faults().clear();
    dev.faults().drop_next();
    let out = s.handle(&format!(
        "<rpc xmlns=\"{NS_BASE}\" message-id=\"1\"><commit/></rpc>"
    ));
    assert!(out.drop && out.reply.is_none());
    assert!(dev.running().children.is_empty());
}

/// The error element of a reply.
fn error_of(r: &Element) -> &Element {
    r.find("rpc-error")
        .unwrap_or_else(|| panic!("no error: {}", r.to_xml()))
}

fn raw_err(s: &mut NetconfSession, msg: &str) -> Element {
    let out = s.handle(msg);
    let r = Element::parse(&out.reply.expect("a reply")).unwrap();
    error_of(&r).clone()
}

fn text_of<'a>(e: &'a Element, child: &str) -> &'a str {
    e.find(child).map_or("", |c| c.text.as_str())
}

#[test]
fn rpc_and_operation_outside_the_base_namespace_are_refused() {
    for dev in devices() {
        let mut s = session(&dev);
        ok(&mut s, &edit(VRF));
        // RFC 6241 4.1: <rpc> in another namespace is not a NETCONF rpc.
        let e = raw_err(
            &mut s,
            "<rpc xmlns=\"urn:example:not-netconf\" message-id=\"1\"><commit/></rpc>",
        );
        assert_eq!(text_of(&e, "error-tag"), "unknown-namespace");
        assert_eq!(text_of(&e, "error-type"), "protocol");
        assert!(e.to_xml().contains("urn:example:not-netconf"));
        // No namespace at all is not the base namespace either.
        let e = raw_err(&mut s, "<rpc message-id=\"1\"><commit/></rpc>");
        assert_eq!(text_of(&e, "error-tag"), "unknown-namespace");
        // The operation element in a foreign namespace.
        let e = raw_err(
            &mut s,
            &format!("<nc:rpc xmlns:nc=\"{NS_BASE}\" message-id=\"2\"><commit/></nc:rpc>"),
        );
        assert_eq!(text_of(&e, "error-tag"), "unknown-namespace");
        // A foreign <rpc> around a base-namespace operation.
        let e = raw_err(
            &mut s,
            &format!(
                "<ex:rpc xmlns:ex=\"urn:example:not-netconf\" xmlns=\"{NS_BASE}\" message-id=\"4\"><commit/></ex:rpc>"
            ),
        );
        assert_eq!(text_of(&e, "error-tag"), "unknown-namespace");
        assert!(dev.running().children.is_empty(), "nothing was committed");
        // Prefixed base namespace works.
        let out = s.handle(&format!(
            "<nc:rpc xmlns:nc=\"{NS_BASE}\" message-id=\"3\"><nc:commit/></nc:rpc>"
        ));
        assert!(out.reply.unwrap().contains("<ok/>"));
        assert_eq!(dev.running().children.len(), 1);
    }
}

#[test]
fn config_in_an_unimplemented_namespace_is_refused() {
    for dev in devices() {
        let mut s = session(&dev);
        ok(&mut s, &edit(VRF));
        let before = dev.state().candidate.clone();
        for cfg in [
            "<config><widgets xmlns=\"urn:example:widgets\"><widget><name>a</name></widget></widgets></config>",
            // Unqualified under <rpc xmlns=base>: in the NETCONF namespace.
            "<config><network-instances><network-instance><name>X</name></network-instance></network-instances></config>",
        ] {
            let (tag, _) = err_tag(&mut s, &edit(cfg));
            assert_eq!(tag, "unknown-namespace", "{cfg}");
            assert_eq!(dev.state().candidate, before, "candidate unchanged");
        }
    }
}

#[test]
fn keyless_list_entries_are_refused_not_merged_into_the_first() {
    for dev in devices() {
        let mut s = session(&dev);
        ok(&mut s, &edit(VRF));
        ok(&mut s, &edit(&VRF.replace("JOB7", "JOB8")));
        let before = dev.state().candidate.clone();
        let r = rpc(
            &mut s,
            &edit(&format!(
                "<config><network-instances xmlns=\"{NI}\"><network-instance><config><description>x</description></config></network-instance></network-instances></config>"
            )),
        );
        let e = error_of(&r);
        assert_eq!(text_of(e, "error-tag"), "missing-element", "{}", r.to_xml());
        assert_eq!(dev.state().candidate, before, "no entry was changed");
    }
    // The heuristic for lists the table does not know: a same-named
    // sibling keyed by a KEY_LEAVES leaf makes a key-less entry an error.
    let mut target = Element::new("data");
    let keyed = Element::parse("<c><foos><foo><name>a</name><v>1</v></foo></foos></c>").unwrap();
    tree::apply(
        &mut target,
        &keyed,
        tree::Op::Merge,
        &tree::Scope::default(),
    )
    .unwrap();
    let keyless = Element::parse("<c><foos><foo><v>2</v></foo></foos></c>").unwrap();
    let e = tree::apply(
        &mut target,
        &keyless,
        tree::Op::Merge,
        &tree::Scope::default(),
    )
    .unwrap_err();
    assert_eq!(e.tag, "missing-element");
    assert_eq!(e.path.as_deref(), Some("/foos/foo"));
    // A table list must carry every key: protocol needs identifier and name.
    let mut target = Element::new("data");
    let half = Element::parse(
        "<c><network-instances><network-instance><name>a</name><protocols><protocol><name>p</name></protocol></protocols></network-instance></network-instances></c>",
    )
    .unwrap();
    let e = tree::apply(&mut target, &half, tree::Op::Merge, &tree::Scope::default()).unwrap_err();
    assert_eq!(e.tag, "missing-element");
    assert!(e.message.contains("<identifier>"), "{}", e.message);
}

#[test]
fn addresses_are_keyed_by_ip() {
    // openconfig-if-ip: list address { key "ip"; }.
    let dev = bare();
    let mut s = session(&dev);
    let addr = |ip: &str, len: u8| {
        format!(
            "<config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\"><interface><name>e1</name><subinterfaces><subinterface><index>0</index><ipv4 xmlns=\"http://openconfig.net/yang/interfaces/ip\"><addresses><address><ip>{ip}</ip><config><ip>{ip}</ip><prefix-length>{len}</prefix-length></config></address></addresses></ipv4></subinterface></subinterfaces></interface></interfaces></config>"
        )
    };
    ok(&mut s, &edit(&addr("10.0.0.1", 31)));
    ok(&mut s, &edit(&addr("10.0.0.3", 31)));
    let cand = dev.state().candidate.to_xml();
    assert!(
        cand.contains("10.0.0.1") && cand.contains("10.0.0.3"),
        "two entries, not one merged: {cand}"
    );
}

#[test]
fn xpath_filter_is_a_bad_attribute_not_empty_data() {
    for dev in devices() {
        let mut s = session(&dev);
        ok(&mut s, &edit(VRF));
        ok(&mut s, "<commit/>");
        for op in ["get-config><source><running/></source", "get"] {
            let close = op.split('>').next().unwrap();
            let r = rpc(
                &mut s,
                &format!("<{op}><filter type=\"xpath\" select=\"/network-instances\"/></{close}>"),
            );
            let e = error_of(&r);
            assert_eq!(text_of(e, "error-tag"), "bad-attribute");
            assert_eq!(
                text_of(e.find("error-info").unwrap(), "bad-attribute"),
                "type"
            );
            assert!(r.find("data").is_none());
        }
    }
}

#[test]
fn nul_characters_are_refused_before_parsing() {
    let dev = device();
    let mut s = session(&dev);
    let e = raw_err(
        &mut s,
        &format!(
            "<rpc xmlns=\"{NS_BASE}\" message-id=\"1\">{}</rpc>",
            edit(&VRF.replace("JOB7</name><config>", "JOB7\0</name><config>"))
        ),
    );
    assert_eq!(text_of(&e, "error-tag"), "malformed-message");
    assert!(dev.state().candidate.children.is_empty());
}

#[test]
fn deep_nesting_is_too_big_and_the_session_survives() {
    let dev = device();
    let mut s = session(&dev);
    let n = 10_000;
    let deep = format!(
        "<config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\">{}{}</interfaces></config>",
        "<x>".repeat(n),
        "</x>".repeat(n)
    );
    let e = raw_err(
        &mut s,
        &format!(
            "<rpc xmlns=\"{NS_BASE}\" message-id=\"1\">{}</rpc>",
            edit(&deep)
        ),
    );
    assert_eq!(text_of(&e, "error-tag"), "too-big");
    // The session goes on; a tree just inside the limit (the envelope
    // rpc/edit-config/config/interfaces is 4 deep) is parsed and judged on
    // its content, not refused as too big.
    ok(&mut s, &edit(VRF));
    let inside = dev.limits().max_depth - 4;
    let fits = format!(
        "<config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\">{}{}</interfaces></config>",
        "<x>".repeat(inside),
        "</x>".repeat(inside)
    );
    let r = rpc(&mut s, &edit(&fits));
    let tag = r
        .find("rpc-error")
        .map(|e| text_of(e, "error-tag").to_string());
    assert_ne!(tag.as_deref(), Some("too-big"), "{}", r.to_xml());
}

#[test]
fn too_many_elements_are_too_big() {
    let limits = datastore::Limits {
        max_elements: 50,
        ..datastore::Limits::default()
    };
    let dev = NetconfDevice::with_options(
        "S",
        Element::new("data"),
        Arc::new(Faults::new()),
        datastore::DeviceOptions {
            limits,
            schema: None,
        },
    );
    let mut s = session(&dev);
    let wide = format!(
        "<config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\">{}</interfaces></config>",
        "<x/>".repeat(60)
    );
    let e = raw_err(
        &mut s,
        &format!(
            "<rpc xmlns=\"{NS_BASE}\" message-id=\"1\">{}</rpc>",
            edit(&wide)
        ),
    );
    assert_eq!(text_of(&e, "error-tag"), "too-big");
}

#[tokio::test]
async fn kill_session_releases_locks_and_reverts_its_confirmed_commit() {
    for dev in devices() {
        let mut a = session(&dev);
        let mut b = session(&dev);
        ok(&mut a, "<lock><target><candidate/></target></lock>");
        ok(&mut a, &edit(VRF));
        ok(&mut a, "<commit><confirmed/></commit>");
        ok(&mut a, &edit(&VRF.replace("JOB7", "JOB8")));
        assert_eq!(dev.running().children.len(), 1);
        let kill = a.kill_switch();
        assert!(!kill.is_killed());
        // Killing oneself or a session that does not exist: invalid-value.
        let own = format!(
            "<kill-session><session-id>{}</session-id></kill-session>",
            b.id()
        );
        assert_eq!(err_tag(&mut b, &own).0, "invalid-value");
        assert_eq!(
            err_tag(
                &mut b,
                "<kill-session><session-id>999</session-id></kill-session>"
            )
            .0,
            "invalid-value"
        );
        ok(
            &mut b,
            &format!(
                "<kill-session><session-id>{}</session-id></kill-session>",
                a.id()
            ),
        );
        assert!(kill.is_killed());
        // The transport wakes up.
        tokio::time::timeout(Duration::from_secs(1), kill.killed())
            .await
            .unwrap();
        // Its confirmed commit is reverted, its lock and candidate gone.
        assert!(dev.running().children.is_empty(), "reverted");
        assert!(dev.state().candidate.children.is_empty());
        ok(&mut b, "<lock><target><candidate/></target></lock>");
        // The killed session answers nothing and closes.
        let out = a.handle(&format!(
            "<rpc xmlns=\"{NS_BASE}\" message-id=\"1\"><get-config><source><running/></source></get-config></rpc>"
        ));
        assert!(out.close && out.reply.is_none());
        a.end();
        // A second kill of the same session: it no longer exists.
        assert_eq!(
            err_tag(
                &mut b,
                &format!(
                    "<kill-session><session-id>{}</session-id></kill-session>",
                    a.id()
                )
            )
            .0,
            "invalid-value"
        );
    }
}

#[test]
fn copy_config_between_datastores_and_from_config() {
    for dev in devices() {
        let mut s = session(&dev);
        ok(&mut s, &edit(VRF));
        ok(&mut s, "<commit/>");
        ok(&mut s, &edit(&VRF.replace("JOB7", "JOB8")));
        // running -> candidate: the candidate is running again.
        ok(
            &mut s,
            "<copy-config><target><candidate/></target><source><running/></source></copy-config>",
        );
        let run = dev.running();
        assert_eq!(dev.state().candidate, run);
        // <config> -> candidate replaces the candidate wholesale.
        let cfg = VRF.replace("JOB7", "JOB9");
        ok(
            &mut s,
            &format!(
                "<copy-config><target><candidate/></target><source>{cfg}</source></copy-config>"
            ),
        );
        let cand = dev.state().candidate.to_xml();
        assert!(cand.contains("JOB9") && !cand.contains("JOB7"), "{cand}");
        // candidate -> running commits it.
        ok(
            &mut s,
            "<copy-config><target><running/></target><source><candidate/></source></copy-config>",
        );
        assert!(dev.running().to_xml().contains("JOB9"));
        let before = dev.state().candidate.clone();
        // Refusals leave the datastores unchanged.
        let bad_ns = "<config><w xmlns=\"urn:example:w\"/></config>";
        for (body, tag) in [
            ("<copy-config><target><candidate/></target><source><candidate/></source></copy-config>".to_string(), "invalid-value"),
            ("<copy-config><target><candidate/></target><source><url>file:///x</url></source></copy-config>".to_string(), "operation-not-supported"),
            (format!("<copy-config><target><running/></target><source>{cfg}</source></copy-config>"), "operation-not-supported"),
            (format!("<copy-config><target><candidate/></target><source>{bad_ns}</source></copy-config>"), "unknown-namespace"),
        ] {
            assert_eq!(err_tag(&mut s, &body).0, tag, "{body}");
            assert_eq!(dev.state().candidate, before);
        }
    }
}

#[test]
fn delete_config_refuses_running_and_empties_the_candidate() {
    for dev in devices() {
        let mut s = session(&dev);
        ok(&mut s, &edit(VRF));
        ok(&mut s, "<commit/>");
        let (tag, _) = err_tag(
            &mut s,
            "<delete-config><target><running/></target></delete-config>",
        );
        assert_eq!(tag, "operation-not-supported");
        assert_eq!(dev.running().children.len(), 1, "running unchanged");
        ok(
            &mut s,
            "<delete-config><target><candidate/></target></delete-config>",
        );
        assert!(dev.state().candidate.children.is_empty());
        assert_eq!(dev.running().children.len(), 1);
    }
}

#[test]
fn hello_advertises_yang_modules_and_no_xpath() {
    for dev in devices() {
        let s = NetconfSession::new(dev.clone());
        let hello = Element::parse(&s.hello()).unwrap();
        let caps: Vec<String> = hello
            .find("capabilities")
            .unwrap()
            .children
            .iter()
            .map(|c| c.text.clone())
            .collect();
        for m in ["openconfig-interfaces", "openconfig-network-instance"] {
            assert!(
                caps.iter()
                    .any(|c| c.contains(&format!("?module={m}&revision="))),
                "{m} in {caps:?}"
            );
        }
        assert!(!caps.iter().any(|c| c.contains(":xpath")));
        // What is advertised is what is implemented.
        for (_, ns, _) in session::MODULES.iter().take(1) {
            assert!(caps.iter().any(|c| c.starts_with(ns)));
        }
    }
}

/// The schema cases: only with libyang and the models (feature `yang`).
fn schema_device() -> Option<Arc<NetconfDevice>> {
    let dev = device();
    if dev.schema().is_none() {
        eprintln!("SKIPPED: no YANG schema (build with --features yang and install the models)");
        return None;
    }
    Some(dev)
}

const IANAIFT: &str = "xmlns:ianaift=\"urn:ietf:params:xml:ns:yang:iana-if-type\"";

fn iface(extra_config: &str, ipv4: &str) -> String {
    format!(
        "<config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\"><interface><name>e1</name><config><name>e1</name><type {IANAIFT}>ianaift:ethernetCsmacd</type>{extra_config}</config>{ipv4}</interface></interfaces></config>"
    )
}

fn v4(ip: &str, len: &str) -> String {
    format!(
        "<subinterfaces><subinterface><index>0</index><config><index>0</index></config><ipv4 xmlns=\"http://openconfig.net/yang/interfaces/ip\"><addresses><address><ip>{ip}</ip><config><ip>{ip}</ip><prefix-length>{len}</prefix-length></config></address></addresses></ipv4></subinterface></subinterfaces>"
    )
}

#[test]
fn schema_refuses_invalid_edits_with_rfc_tags_and_keeps_the_candidate() {
    let Some(dev) = schema_device() else { return };
    let mut s = session(&dev);
    ok(&mut s, &edit(&iface("", &v4("10.0.0.1", "31"))));
    ok(&mut s, &edit(VRF));
    ok(&mut s, "<commit/>");
    let before = dev.state().candidate.clone();
    let cases = [
        (iface("<colour>red</colour>", ""), "unknown-element"),
        (
            iface("", "").replace("ianaift:ethernetCsmacd", "ethernetCsmacd"),
            "invalid-value",
        ),
        (
            VRF.replace("oc-ni-types:L3VRF", "oc-ni-types:NO_SUCH_TYPE"),
            "invalid-value",
        ),
        (iface("", &v4("10.0.0.1", "99")), "invalid-value"),
        (iface("", &v4("999.1.1.1", "31")), "invalid-value"),
        // A whole-datastore rule: an interface without its mandatory type.
        (
            "<config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\"><interface><name>e2</name><config><name>e2</name></config></interface></interfaces></config>".to_string(),
            "missing-element",
        ),
    ];
    for (cfg, tag) in cases {
        let r = rpc(&mut s, &edit(&cfg));
        let e = error_of(&r);
        assert_eq!(text_of(e, "error-tag"), tag, "{cfg}\n{}", r.to_xml());
        assert_eq!(text_of(e, "error-type"), "application");
        assert_eq!(dev.state().candidate, before, "candidate unchanged: {cfg}");
    }
    assert_eq!(dev.running(), before, "running unchanged");
}

#[test]
fn schema_checks_validate_and_commit() {
    let Some(dev) = schema_device() else { return };
    let mut s = session(&dev);
    ok(&mut s, &edit(VRF));
    // A candidate made invalid behind the edit path's back (as a restored
    // backup could be): validate and commit refuse it, running stays.
    dev.state().candidate = Element::parse(
        "<data><interfaces xmlns=\"http://openconfig.net/yang/interfaces\"><interface><name>e9</name><config><name>e9</name></config></interface></interfaces></data>",
    )
    .unwrap();
    let (tag, _) = err_tag(&mut s, "<validate><source><candidate/></source></validate>");
    assert_eq!(tag, "missing-element");
    let r = rpc(&mut s, "<commit/>");
    let e = error_of(&r);
    assert_eq!(text_of(e, "error-tag"), "missing-element");
    assert!(dev.running().children.is_empty());
    // <validate> of a <config> source.
    let (tag, _) = err_tag(
        &mut s,
        &format!(
            "<validate><source>{}</source></validate>",
            iface("", &v4("10.0.0.1", "99"))
        ),
    );
    assert_eq!(tag, "invalid-value");
}

/// Apply `changes` one edit-config each, commit, and read running back
/// with the OpenConfig parser.
fn apply_and_read(
    s: &mut NetconfSession,
    changes: &[String],
) -> std::collections::BTreeSet<crate::intent::Item> {
    use crate::dialect::Dialect;
    for c in changes {
        ok(s, &edit(c));
    }
    ok(s, "<commit/>");
    let r = rpc(s, "<get-config><source><running/></source></get-config>");
    crate::dialect::openconfig::OpenConfig
        .parse("d", &r.to_xml())
        .unwrap()
}

#[test]
fn subinterfaces_round_trip_through_edit_config_and_get_config() {
    use crate::dialect::openconfig::{shared_link_items, OpenConfig};
    use crate::dialect::Dialect;
    use crate::intent::Item;
    let none = std::collections::BTreeSet::new();
    let (leaf, spine) = shared_link_items();
    for dev in devices() {
        for items in [&leaf, &spine] {
            let mut s = session(&dev);
            let got = apply_and_read(&mut s, &OpenConfig.changes(&none, items));
            assert_eq!(&got, items);
            // Job b leaves the shared link: its sub-interface and what is
            // on it go, job a's main interface stays.
            let mut kept = items.clone();
            kept.retain(|i| {
                !matches!(i, Item::Redirect { .. } | Item::Route { .. })
                    && !i.port().is_some_and(|p| p.as_str().ends_with(".101"))
                    && !matches!(i, Item::Vrf { name } if name.as_str() == "Vrf-b-1")
            });
            let got = apply_and_read(&mut s, &OpenConfig.changes(items, &kept));
            assert_eq!(got, kept);
            assert!(!dev.running().to_xml().contains("<index>101</index>"));
            let got = apply_and_read(&mut s, &OpenConfig.changes(&kept, &none));
            assert_eq!(got, none);
        }
    }
}

const VLAN_NS: &str = "http://openconfig.net/yang/vlan";

/// Subinterface `index` of `port` (created with the port) tagged `vlan`.
fn tagged_subif(port: &str, index: u32, vlan: &str) -> String {
    format!(
        "<config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\"><interface><name>{port}</name><config><name>{port}</name><type {IANAIFT}>ianaift:ethernetCsmacd</type></config><subinterfaces><subinterface><index>{index}</index><config><index>{index}</index></config><vlan xmlns=\"{VLAN_NS}\"><config><vlan-id>{vlan}</vlan-id></config></vlan></subinterface></subinterfaces></interface></interfaces></config>"
    )
}

#[test]
fn two_subinterfaces_of_a_port_cannot_terminate_one_vlan() {
    for dev in devices() {
        let mut s = session(&dev);
        ok(&mut s, &edit(&tagged_subif("e1", 101, "101")));
        // The same tag on another port is another VLAN.
        ok(&mut s, &edit(&tagged_subif("e2", 101, "101")));
        let before = dev.state().candidate.clone();
        let r = rpc(&mut s, &edit(&tagged_subif("e1", 102, "101")));
        let e = error_of(&r);
        assert_eq!(
            text_of(e, "error-tag"),
            "operation-failed",
            "{}",
            r.to_xml()
        );
        assert!(
            text_of(e, "error-path").contains("subinterface[index='102']"),
            "{}",
            r.to_xml()
        );
        assert!(text_of(e, "error-message").contains("VLAN 101 of interface e1"));
        assert_eq!(dev.state().candidate, before, "candidate unchanged");
        // Re-tagging the first one frees 101 for the second.
        ok(&mut s, &edit(&tagged_subif("e1", 101, "103")));
        ok(&mut s, &edit(&tagged_subif("e1", 102, "101")));
        ok(&mut s, "<commit/>");
    }
}

#[test]
fn the_models_refuse_bad_tags_and_dangling_subinterfaces() {
    let Some(dev) = schema_device() else { return };
    let mut s = session(&dev);
    ok(&mut s, &edit(&tagged_subif("e1", 101, "101")));
    ok(&mut s, &edit(VRF));
    let before = dev.state().candidate.clone();
    let bind = |iface: &str, sub: u32| {
        format!(
            "<config><network-instances xmlns=\"{NI}\"><network-instance><name>JOB7</name><interfaces><interface><id>x</id><config><id>x</id><interface>{iface}</interface><subinterface>{sub}</subinterface></config></interface></interfaces></network-instance></network-instances></config>"
        )
    };
    // The subinterface of a port the device does not have: the interface
    // entry it would sit in has no config/name, the target of its key's
    // leafref (and no mandatory config/type).
    let orphan = tagged_subif("e9", 101, "101").replace(
        &format!("<config><name>e9</name><type {IANAIFT}>ianaift:ethernetCsmacd</type></config>"),
        "",
    );
    let cases = [
        // openconfig-vlan-types vlan-id: uint16 1..4094 (or a QinQ string).
        (tagged_subif("e1", 101, "4095"), "invalid-value"),
        (tagged_subif("e1", 101, "0"), "invalid-value"),
        (tagged_subif("e1", 101, "vlan101"), "invalid-value"),
        (orphan, "data-missing"),
        // The binding's subinterface is a leafref (require-instance).
        (bind("e1", 102), "data-missing"),
        (bind("e9", 101), "data-missing"),
    ];
    for (cfg, tag) in cases {
        let r = rpc(&mut s, &edit(&cfg));
        let e = error_of(&r);
        assert_eq!(text_of(e, "error-tag"), tag, "{cfg}\n{}", r.to_xml());
        assert_eq!(dev.state().candidate, before, "candidate unchanged: {cfg}");
    }
    ok(&mut s, &edit(&bind("e1", 101)));
    ok(&mut s, "<commit/>");
}

#[test]
fn client_hello_without_a_base_capability_or_with_a_session_id_ends_the_session() {
    let dev = bare();
    let hello = |caps: &str, extra: &str| {
        format!("<hello xmlns=\"{NS_BASE}\"><capabilities>{caps}</capabilities>{extra}</hello>")
    };
    let base10 = "<capability>urn:ietf:params:netconf:base:1.0</capability>";
    let other = "<capability>urn:ietf:params:netconf:capability:candidate:1.0</capability>";
    // RFC 6241 8.1: no base capability, no protocol in common.
    for bad in [
        hello(other, ""),
        hello("", ""),
        format!("<hello xmlns=\"{NS_BASE}\"/>"),
        // A client must not send a session-id: the server terminates.
        hello(base10, "<session-id>4</session-id>"),
    ] {
        let mut s = NetconfSession::new(dev.clone());
        let out = s.handle(&bad);
        assert!(out.close && out.reply.is_none(), "{bad}: {out:?}");
        s.end();
    }
    // base:1.0 alone is a hello (end-of-message framing stays).
    let mut s = NetconfSession::new(dev.clone());
    let out = s.handle(&hello(&format!("{other}{base10}"), ""));
    assert!(!out.close && out.reply.is_none(), "{out:?}");
    assert_eq!(s.framing(), Framing::EndOfMessage);
    let r = rpc(
        &mut s,
        "<get-config><source><running/></source></get-config>",
    );
    assert!(r.find("data").is_some(), "{}", r.to_xml());
}

#[test]
fn a_document_type_declaration_is_malformed_and_nothing_runs() {
    for dev in devices() {
        let mut s = session(&dev);
        let msg = format!(
            "<?xml version=\"1.0\"?><!DOCTYPE rpc [<!ENTITY x \"JOB7\">]><rpc xmlns=\"{NS_BASE}\" message-id=\"1\">{}</rpc>",
            edit(VRF)
        );
        let e = raw_err(&mut s, &msg);
        assert_eq!(text_of(&e, "error-tag"), "malformed-message");
        assert_eq!(text_of(&e, "error-type"), "rpc");
        // RFC 6241 3.2: refused, not processed: the candidate is unchanged.
        assert!(dev.state().candidate.children.is_empty());
        // Lower case is a DTD to the parser too.
        let msg = msg.replace("DOCTYPE", "doctype");
        assert_eq!(
            text_of(&raw_err(&mut s, &msg), "error-tag"),
            "malformed-message"
        );
        // A comment quoting one is not a declaration.
        let r = rpc(
            &mut s,
            "<!-- <!DOCTYPE x> --><get-config><source><running/></source></get-config>",
        );
        assert!(r.find("rpc-error").is_none(), "{}", r.to_xml());
        ok(&mut s, &edit(VRF));
    }
}

#[test]
fn a_message_that_is_not_utf8_is_malformed_after_the_hello() {
    let dev = bare();
    // Before the hello: the session ends.
    let mut s = NetconfSession::new(dev.clone());
    let out = s.not_utf8();
    assert!(out.close && out.reply.is_none());
    s.end();
    // After it: malformed-message (RFC 6241 3), and the session goes on.
    let mut s = session(&dev);
    let out = s.not_utf8();
    assert!(!out.close);
    let r = Element::parse(&out.reply.unwrap()).unwrap();
    let e = error_of(&r);
    assert_eq!(text_of(e, "error-tag"), "malformed-message");
    assert_eq!(text_of(e, "error-type"), "rpc");
    let r = rpc(
        &mut s,
        "<get-config><source><running/></source></get-config>",
    );
    assert!(r.find("data").is_some(), "{}", r.to_xml());
}
