//! ncclient, a real third-party NETCONF client, against an emulated
//! OpenConfig switch on loopback SSH (password authentication; ncclient
//! does not check the host key). The client side is
//! `tests/py/netconf_ncclient.py`: get-config, edit-config on the
//! candidate + commit, confirmed commit (confirmed, and not confirmed so
//! it rolls back), lock/unlock, kill-session, copy-config, delete-config
//! refused, and the error cases, each answered with the right rpc-error
//! tag and running unchanged. The schema cases (unknown leaf, bad
//! identity, prefix-length 99, address 999.1.1.1) need libyang: they run
//! under `--features vclos/yang` with the models installed, and are
//! reported SKIPPED otherwise.
#![allow(clippy::unwrap_used)]

#[path = "interop/mod.rs"]
mod interop;

use std::sync::Arc;

use vclos::emulator::faults::Faults;
use vclos::emulator::netconf::NetconfDevice;
use vclos::emulator::ssh::{serve, Login, Service};
use vclos_drivers::netconf::xml::Element;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ncclient_drives_the_emulated_openconfig_switch() {
    let Some(py) = interop::python_with(&["ncclient"]) else {
        return;
    };
    let dev = NetconfDevice::new("LEAF1", Element::new("data"), Arc::new(Faults::new()));
    let schema = dev.schema().is_some();
    if !schema {
        interop::missing("the OpenConfig schema (feature `yang` + models) for the schema cases");
    }
    let login = Login::default();
    let srv = serve(Service::Netconf(dev.clone()), login.clone())
        .await
        .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/netconf_ncclient.py");
    let port = srv.local_addr().port().to_string();
    let mut args = vec![
        script.to_string(),
        "127.0.0.1".into(),
        port,
        login.username.clone(),
        login.password.clone(),
    ];
    if schema {
        args.push("--schema".into());
    }
    let out = tokio::process::Command::new(&py)
        .args(&args)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("ALL PASSED"),
        "ncclient script failed:\n{stdout}\n{stderr}"
    );
    // What the client saw is what the device holds.
    let run = dev.running().to_xml();
    assert!(run.contains("Ethernet1") && run.contains("JOB2"), "{run}");
    assert!(
        !run.contains("JOB3"),
        "the unconfirmed commit was rolled back"
    );
}
