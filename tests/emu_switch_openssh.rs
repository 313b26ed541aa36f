//! The emulated switch driven by the standard OpenSSH client (`ssh` +
//! `sshpass`), interactively with a forced pty and commands piped on stdin,
//! with host-key checking against the emulator's exported known_hosts line.
//! Skipped, with a notice, when `ssh` or `sshpass` is not on PATH (CI
//! installs the apt packages `openssh-client sshpass`).
#![allow(clippy::unwrap_used)]

#[path = "openssh/mod.rs"]
mod openssh;

use std::io::Write;
use std::sync::Arc;

use vclos::emulator::cli::SwitchDevice;
use vclos::emulator::faults::Faults;
use vclos::emulator::ssh::{serve, Login, Service};
use vclos::emulator::vrp::VrpConfig;

#[tokio::test]
async fn openssh_client_configures_and_displays() {
    if !openssh::available() {
        return;
    }
    let dev = SwitchDevice::new("LEAF1", VrpConfig::new("LEAF1"), Arc::new(Faults::new()));
    let srv = serve(Service::Cli(dev.clone()), Login::default())
        .await
        .unwrap();
    let mut kh = tempfile::NamedTempFile::new().unwrap();
    writeln!(kh, "{}", srv.known_hosts_line()).unwrap();
    let port = srv.local_addr().port();

    // Interactive (forced pty): the device echoes what is typed.
    let input = "system-view\ninterface 100GE1/0/1\ndescription via-openssh\ncommit\nreturn\ndisplay current-configuration\nquit\n";
    let out = openssh::run(port, kh.path(), true, input, &[]).await;
    assert!(out.contains("<LEAF1>system-view\n"), "{out}");
    assert!(out.contains("[*LEAF1-100GE1/0/1]commit\n"), "{out}");
    assert!(
        out.contains("interface 100GE1/0/1\n description via-openssh\n#\nreturn\n"),
        "{out}"
    );
    assert!(dev
        .running_config()
        .render()
        .contains("description via-openssh"));

    // Piped without a pty: no echo, prompts still printed, EOF ends the session.
    let out = openssh::run(
        port,
        kh.path(),
        false,
        "display configuration commit list\n",
        &[],
    )
    .await;
    assert!(out.contains("1000000001"), "{out}");
    assert!(
        !out.contains("display configuration commit list"),
        "no echo without a pty: {out}"
    );

    // An exec request runs one command.
    let out = openssh::run(
        port,
        kh.path(),
        false,
        "",
        &["display current-configuration"],
    )
    .await;
    assert_eq!(out, dev.running_config().render());
}

#[tokio::test]
async fn openssh_client_speaks_netconf_subsystem() {
    if !openssh::available() {
        return;
    }
    use vclos::emulator::netconf::NetconfDevice;
    use vclos_drivers::netconf::xml::Element;
    let dev = NetconfDevice::new("SPINE1", Element::new("data"), Arc::new(Faults::new()));
    let srv = serve(Service::Netconf(dev), Login::default())
        .await
        .unwrap();
    let mut kh = tempfile::NamedTempFile::new().unwrap();
    writeln!(kh, "{}", srv.known_hosts_line()).unwrap();
    // A base:1.0-only client keeps end-of-message framing.
    let input = concat!(
        r#"<hello xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities><capability>urn:ietf:params:netconf:base:1.0</capability></capabilities></hello>]]>]]>"#,
        r#"<rpc xmlns="urn:ietf:params:xml:ns:netconf:base:1.0" message-id="9"><lock><target><candidate/></target></lock></rpc>]]>]]>"#,
        r#"<rpc xmlns="urn:ietf:params:xml:ns:netconf:base:1.0" message-id="10"><close-session/></rpc>]]>]]>"#,
    );
    let out = openssh::run(
        srv.local_addr().port(),
        kh.path(),
        false,
        input,
        &["-s", "netconf"],
    )
    .await;
    let msgs: Vec<&str> = out.split("]]>]]>").collect();
    assert!(
        msgs[0].contains("urn:ietf:params:netconf:capability:confirmed-commit:1.1"),
        "{out}"
    );
    assert!(
        msgs[1].contains(r#"message-id="9""#) && msgs[1].contains("<ok/>"),
        "{out}"
    );
    assert!(
        msgs[2].contains(r#"message-id="10""#) && msgs[2].contains("<ok/>"),
        "{out}"
    );
}
