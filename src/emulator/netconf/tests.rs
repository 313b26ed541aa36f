#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use vclos_drivers::netconf::framing::Framing;
use vclos_drivers::netconf::xml::Element;
use vclos_drivers::netconf::CAP_BASE_11;

use super::*;
use crate::emulator::faults::Faults;

fn device() -> Arc<NetconfDevice> {
    NetconfDevice::new("SPINE1", Element::new("data"), Arc::new(Faults::new()))
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

const VRF: &str = r#"<config><network-instances xmlns="http://openconfig.net/yang/network-instance"><network-instance><name>JOB7</name><config><name>JOB7</name><type>L3VRF</type></config></network-instance></network-instances></config>"#;

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
            r#"<config><network-instances><network-instance><name>JOB7</name><config><type>DEFAULT</type></config></network-instance></network-instances></config>"#,
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
        "DEFAULT"
    );
    assert_eq!(
        nis.children[1]
            .find("config")
            .unwrap()
            .find("type")
            .unwrap()
            .text,
        "L3VRF"
    );
    ok(
        &mut s,
        &edit(
            r#"<config xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><network-instances><network-instance nc:operation="delete"><name>JOB8</name></network-instance></network-instances></config>"#,
        ),
    );
    assert_eq!(dev.state().candidate.children[0].children.len(), 1);
    let (tag, _) = err_tag(
        &mut s,
        &edit(
            r#"<config><network-instances><network-instance operation="delete"><name>JOB8</name></network-instance></network-instances></config>"#,
        ),
    );
    assert_eq!(tag, "data-missing");
    let (tag, _) = err_tag(
        &mut s,
        &edit(&VRF.replace(
            "<network-instance>",
            "<network-instance operation=\"create\">",
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
    let dev = device();
    let mut s = session(&dev);
    ok(
        &mut s,
        &edit(&VRF.replace("<config><name>JOB7</name>", "<config><name>JOB9</name>")),
    );
    let (tag, _) = err_tag(&mut s, "<validate><source><candidate/></source></validate>");
    assert_eq!(tag, "invalid-value");
    let (tag, _) = err_tag(&mut s, "<commit/>");
    assert_eq!(tag, "invalid-value");
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
    let out = s.handle("<rpc message-id=\"1\"><commit/></rpc>");
    assert!(out.drop && out.reply.is_none());
    assert!(dev.running().children.is_empty());
}
