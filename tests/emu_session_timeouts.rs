//! Login grace and idle timeouts of the emulated SSH and Telnet/TL1
//! endpoints, over real loopback sockets with raw TCP clients, the real
//! drivers, OpenSSH and the `telnet` binary; and the controller's session
//! pool coping with a device that closed its idle sessions. Timeouts are
//! 1 s here (behaviour, not speed: only "closed" / "not closed" is asserted).
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;
#[path = "interop/mod.rs"]
mod interop;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vclos::controller::NoProgress;
use vclos::emulator::busy::StaticBusy;
use vclos::emulator::cli::SwitchDevice;
use vclos::emulator::fabric::FabricOptions;
use vclos::emulator::faults::Faults;
use vclos::emulator::ocs::OcsModel;
use vclos::emulator::ssh::{serve_with, Login, Service, SshServer};
use vclos::emulator::timeouts::SessionTimeouts;
use vclos::emulator::tl1::{self, Tl1Options, Tl1Server};
use vclos::emulator::vrp::VrpConfig;
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::topology::{DeviceId, Ocs, OcsId};
use vclos_drivers::huawei_ce::HuaweiCeDriver;
use vclos_drivers::ssh::{HostKeyCheck, Password, SshOptions};
use vclos_drivers::Driver;

const SEC: Duration = Duration::from_secs(1);
/// Far longer than any timeout under test: not closed by then means never.
const LIMIT: Duration = Duration::from_secs(15);

fn limits(login: Duration, idle: Duration) -> SessionTimeouts {
    SessionTimeouts {
        login: Some(login),
        idle: Some(idle),
    }
}

/// Everything the server sends until it closes the connection; panics if it
/// is still open after [`LIMIT`].
async fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    tokio::time::timeout(LIMIT, async {
        let mut b = [0u8; 4096];
        loop {
            match s.read(&mut b).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&b[..n]),
            }
        }
    })
    .await
    .expect("the server kept the connection open");
    all
}

// ---------------------------------------------------------------- SSH ----

async fn ssh_switch(t: SessionTimeouts) -> (Arc<SwitchDevice>, SshServer) {
    let dev = SwitchDevice::new("LEAF1", VrpConfig::new("LEAF1"), Arc::new(Faults::new()));
    let srv = serve_with(
        "127.0.0.1:0",
        Service::Cli(dev.clone()),
        Login::default(),
        t,
    )
    .await
    .unwrap();
    (dev, srv)
}

fn known_hosts(srv: &SshServer) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "{}", srv.known_hosts_line()).unwrap();
    f
}

fn ce_driver(srv: &SshServer, kh: &tempfile::NamedTempFile) -> HuaweiCeDriver {
    let mut o = SshOptions::new(
        "127.0.0.1",
        srv.local_addr().port(),
        "admin",
        Password::new("admin"),
        HostKeyCheck::KnownHosts(kh.path().into()),
    );
    o.command_timeout = Duration::from_secs(10);
    o.connect_timeout = Duration::from_secs(5);
    o.connect_retries = 0;
    HuaweiCeDriver::new("LEAF1", o)
}

#[tokio::test]
async fn ssh_silent_tcp_connection_is_closed_after_the_login_grace() {
    let (dev, srv) = ssh_switch(limits(SEC, Duration::from_secs(60))).await;
    let start = Instant::now();
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    let got = until_closed(&mut s).await;
    assert!(got.starts_with(b"SSH-2.0-"), "{got:?}");
    assert!(start.elapsed() >= SEC, "closed before the grace time");
    assert_eq!(dev.faults().logins(), 0);
}

#[tokio::test]
async fn ssh_client_stalled_in_key_exchange_is_closed() {
    let (_dev, srv) = ssh_switch(limits(SEC, Duration::from_secs(60))).await;
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    // A version line, then nothing: the server's KEXINIT is never answered.
    s.write_all(b"SSH-2.0-stalling_client\r\n").await.unwrap();
    until_closed(&mut s).await;
}

#[tokio::test]
async fn openssh_client_that_does_not_authenticate_in_time_is_disconnected() {
    if !interop::on_path("ssh") {
        return;
    }
    // OpenSSH asks for the password through SSH_ASKPASS, which takes 3 s
    // to answer: past a 1 s login grace, well within a 30 s one.
    let dir = tempfile::tempdir().unwrap();
    let askpass = dir.path().join("askpass");
    std::fs::write(&askpass, "#!/bin/sh\nsleep 3\necho admin\n").unwrap();
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ssh = |srv: &SshServer, kh: &tempfile::NamedTempFile| {
        let mut c = tokio::process::Command::new("ssh");
        c.args(["-T", "-o", "StrictHostKeyChecking=yes", "-o"])
            .arg(format!("UserKnownHostsFile={}", kh.path().display()))
            .args([
                "-o",
                "PubkeyAuthentication=no",
                "-o",
                "PreferredAuthentications=password",
                "-o",
                "NumberOfPasswordPrompts=1",
                "-p",
                &srv.local_addr().port().to_string(),
                "admin@127.0.0.1",
                "display current-configuration",
            ])
            .env("SSH_ASKPASS", &askpass)
            .env("SSH_ASKPASS_REQUIRE", "force")
            .env("DISPLAY", ":0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    for (grace, ok) in [(Duration::from_secs(30), true), (SEC, false)] {
        let (dev, srv) = ssh_switch(limits(grace, Duration::from_secs(60))).await;
        let kh = known_hosts(&srv);
        let out = tokio::time::timeout(LIMIT, ssh(&srv, &kh).output())
            .await
            .unwrap()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(
            out.status.success(),
            ok,
            "grace {grace:?}: {stdout}\n{stderr}"
        );
        assert_eq!(dev.faults().logins(), u64::from(ok), "grace {grace:?}");
        if ok {
            assert!(stdout.contains("sysname LEAF1"), "{stdout}");
        }
    }
}

#[tokio::test]
async fn ssh_idle_session_is_closed_and_an_active_one_is_not() {
    let (dev, srv) = ssh_switch(limits(Duration::from_secs(30), SEC)).await;
    let kh = known_hosts(&srv);
    // Active: a command every 300 ms for 3 s, three idle times.
    let mut busy = ce_driver(&srv, &kh);
    busy.open().await.unwrap();
    for _ in 0..10 {
        busy.get_config().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A command running longer than the idle time is not cut off.
    dev.faults().delay_replies(Duration::from_millis(2500));
    let text = busy.get_config().await.unwrap();
    assert!(text.contains("sysname LEAF1"), "{text}");
    dev.faults().clear();
    busy.reuse().await.unwrap();
    // Idle: nothing sent for 2.5 idle times, then the session is gone.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let err = busy.reuse().await.unwrap_err();
    assert_eq!(dev.faults().logins(), 1, "{err}");
    // The device still takes new sessions.
    let mut again = ce_driver(&srv, &kh);
    again.open().await.unwrap();
    again.get_config().await.unwrap();
}

// ---------------------------------------------------------------- TL1 ----

fn ocs8() -> Ocs {
    Ocs {
        name: "ocs1".into(),
        device: DeviceId(0),
        ports: (1..=8).map(|i| i.to_string().into()).collect(),
        port_peer: vec![None; 8],
        patches: vec![(0, 4), (1, 5)], // 1~5, 2~6
    }
}

async fn tl1_ocs(t: SessionTimeouts, switching: Duration) -> (Tl1Server, Arc<Faults>) {
    let model = OcsModel::new(OcsId(0), &ocs8(), Arc::new(StaticBusy::new()))
        .with_switching_delay(switching);
    let opts = Tl1Options {
        timeouts: t,
        ..Tl1Options::new(Login::default())
    };
    let faults = opts.faults.clone();
    let srv = tl1::serve(Arc::new(model), opts).await.unwrap();
    (srv, faults)
}

/// Send one TL1 command and read its response block.
async fn tl1_cmd(s: &mut TcpStream, cmd: &str) -> String {
    s.write_all(format!("{cmd}\r\n").as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(LIMIT, async {
        let mut b = [0u8; 1024];
        while !got.ends_with(b"\r\n;\r\n") {
            let n = s.read(&mut b).await.unwrap();
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&b[..n]);
        }
    })
    .await
    .unwrap();
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn tl1_connection_without_act_user_is_closed_after_the_login_grace() {
    let (srv, faults) = tl1_ocs(limits(SEC, Duration::from_secs(60)), Duration::ZERO).await;
    // Silent.
    let start = Instant::now();
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    assert!(until_closed(&mut s).await.is_empty());
    assert!(start.elapsed() >= SEC, "closed before the grace time");
    // Talking, but never logging in: the grace counts from the connect.
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    let r = tl1_cmd(&mut s, "RTRV-HDR:::1;").await;
    assert!(r.contains("PLNA"), "{r}");
    let r = tl1_cmd(&mut s, "ACT-USER::admin:2::wrong;").await;
    assert!(r.contains("PIUI"), "{r}");
    let talk = async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if s.write_all(b"RTRV-HDR:::3;\r\n").await.is_err() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), talk).await;
    until_closed(&mut s).await;
    assert_eq!(faults.logins(), 0);
}

#[tokio::test]
async fn tl1_idle_session_gets_the_canc_message_and_is_closed() {
    let (srv, _) = tl1_ocs(limits(Duration::from_secs(30), SEC), Duration::ZERO).await;
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    let r = tl1_cmd(&mut s, "ACT-USER::admin:1::admin;").await;
    assert!(r.contains("M  1 COMPLD"), "{r}");
    let start = Instant::now();
    let rest = String::from_utf8(until_closed(&mut s).await).unwrap();
    assert!(start.elapsed() >= SEC, "closed before the idle time");
    assert!(rest.contains("\r\nA  1 CANC\r\n"), "{rest:?}");
    assert!(rest.contains("/* Session Timeout: admin */"), "{rest:?}");
    assert!(rest.ends_with(";\r\n"), "{rest:?}");
}

#[tokio::test]
async fn tl1_logout_restarts_the_login_grace() {
    let (srv, _) = tl1_ocs(limits(SEC, Duration::from_secs(60)), Duration::ZERO).await;
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    tl1_cmd(&mut s, "ACT-USER::admin:1::admin;").await;
    // Logged in past the grace time: not closed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = tl1_cmd(&mut s, "CANC-USER::admin:2;").await;
    assert!(r.contains("M  2 COMPLD"), "{r}");
    // Logged out: closed a grace time later, without a CANC message.
    let rest = until_closed(&mut s).await;
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[tokio::test]
async fn tl1_active_session_and_long_commands_are_not_closed() {
    // The OCS takes 2.5 s to switch, two and a half idle times.
    let (srv, faults) = tl1_ocs(limits(SEC, SEC), Duration::from_millis(2500)).await;
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    tl1_cmd(&mut s, "ACT-USER::admin:1::admin;").await;
    for i in 0..10 {
        let r = tl1_cmd(&mut s, &format!("RTRV-HDR:::{};", 10 + i)).await;
        assert!(r.contains("COMPLD"), "{r}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let r = tl1_cmd(&mut s, "ENT-PATCH::3,7:30;").await;
    assert!(r.contains("M  30 COMPLD"), "{r}");
    // An injected reply delay longer than the idle time, too.
    faults.delay_replies(Duration::from_millis(2500));
    let r = tl1_cmd(&mut s, "RTRV-PATCH::3:31;").await;
    assert!(r.contains("M  31 COMPLD") && r.contains("\"3,7\""), "{r}");
    faults.clear();
    let r = tl1_cmd(&mut s, "RTRV-HDR:::32;").await;
    assert!(r.contains("M  32 COMPLD"), "{r}");
}

#[tokio::test]
async fn telnet_client_logs_in_reads_patches_and_logs_out() {
    if !interop::on_path("telnet") {
        return;
    }
    let (srv, faults) = tl1_ocs(SessionTimeouts::default(), Duration::ZERO).await;
    let mut child = tokio::process::Command::new("telnet")
        .args(["127.0.0.1", &srv.local_addr().port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // telnet exits at the end of its input: keep it open until the last
    // reply has come back.
    stdin
        .write_all(b"ACT-USER::admin:1::admin;\nRTRV-PATCH:::2;\nCANC-USER::admin:3;\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(LIMIT, async {
        let mut b = [0u8; 1024];
        while !String::from_utf8_lossy(&out).contains("M  3 COMPLD") {
            let n = stdout.read(&mut b).await.unwrap();
            assert!(n > 0, "telnet ended: {}", String::from_utf8_lossy(&out));
            out.extend_from_slice(&b[..n]);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no logout reply: {}", String::from_utf8_lossy(&out)));
    drop(stdin);
    let _ = tokio::time::timeout(LIMIT, child.wait()).await;
    let out = String::from_utf8_lossy(&out).replace('\r', "");
    assert!(out.contains("M  1 COMPLD"), "{out}");
    let patches: Vec<&str> = out
        .split("M  2 COMPLD\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| *l != ";")
        .map(str::trim)
        .collect();
    assert_eq!(patches, ["\"1,5\"", "\"2,6\""], "{out}");
    assert_eq!(faults.logins(), 1);
}

// ------------------------------------------------------- session pool ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_sessions_the_devices_timed_out_are_reconnected_once() {
    let opts = FabricOptions {
        switch_delay: Duration::ZERO,
        timeouts: limits(Duration::from_secs(30), 2 * SEC),
        ..FabricOptions::default()
    };
    let emu = common::emu_with(common::TESTBED, opts).await;
    let mut f = emu.fabric().await.with_policy(Policy::OcsVclos);
    let job = JobId::new("a").unwrap();
    let r = f.submit(&job, 24, &NoProgress).await.unwrap();
    assert!(r.report.is_committed(), "{}", r.report);
    let pool = Arc::clone(f.sessions().unwrap());
    assert!(!pool.idle_devices().is_empty());
    let before = emu.logins();
    // Every device logs the pooled sessions out (idle 2 s) before the
    // pool's own 5-minute expiry.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    emu.release_reconnecting(&mut f, &job, &before).await;
}
