//! What one client can take from an emulated device, over real loopback
//! sockets: concurrent connections (Huawei CE: 21 VTYs, announced in the
//! login banner; NETCONF: 15; TL1: 32), channels per SSH connection (10),
//! NETCONF sessions per device (15), the command line (CE: 510 characters;
//! SONiC: 64 KiB), failed TL1 logins (3 per connection), and NETCONF input
//! RFC 6241 forbids (a hello without a base capability, non-UTF-8 bytes).
//! Raw TCP clients, a raw russh client and the real drivers. Nothing here
//! measures time: [`LIMIT`] only bounds a wait that would otherwise hang.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use russh::client::{self, Handle, Msg};
use russh::keys::PublicKeyOrCertificate;
use russh::{Channel, ChannelMsg};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vclos_core::topology::{DeviceId, Ocs, OcsId};
use vclos_drivers::netconf::framing::{encode, Decoder, Framing};
use vclos_drivers::netconf::xml::{Element, NS_BASE};
use vclos_drivers::netconf::NetconfDriver;
use vclos_drivers::ssh::{HostKeyCheck, Password, SshOptions};
use vclos_drivers::Driver;
use vclos_emu::emulator::busy::StaticBusy;
use vclos_emu::emulator::cli::SwitchDevice;
use vclos_emu::emulator::faults::Faults;
use vclos_emu::emulator::netconf::datastore::DeviceOptions;
use vclos_emu::emulator::netconf::NetconfDevice;
use vclos_emu::emulator::ocs::OcsModel;
use vclos_emu::emulator::slots::{
    CE_VTY_USERS, NETCONF_SESSIONS, SSH_SESSIONS_PER_CONNECTION, TL1_SESSIONS,
};
use vclos_emu::emulator::sonic::{validate, SonicDevice};
use vclos_emu::emulator::ssh::{serve, Login, Service, SshServer};
use vclos_emu::emulator::tl1::{self, Tl1Options, Tl1Server};
use vclos_emu::emulator::vrp::VrpConfig;

/// Bound on any one wait: far longer than anything here takes.
const LIMIT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------ helpers ----

/// Accepts the emulator's fresh host key.
struct AnyKey;

impl client::Handler for AnyKey {
    type Error = russh::Error;

    async fn check_server_key(&mut self, _: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

/// A logged-in SSH connection (admin/admin).
async fn login(srv: &SshServer) -> Handle<AnyKey> {
    let config = Arc::new(client::Config::default());
    let mut h = tokio::time::timeout(LIMIT, client::connect(config, srv.local_addr(), AnyKey))
        .await
        .unwrap()
        .unwrap();
    let auth = h.authenticate_password("admin", "admin").await.unwrap();
    assert!(auth.success());
    h
}

/// Channel data until `done` holds for all of it; panics if the channel
/// closes first.
async fn read_until(ch: &mut Channel<Msg>, done: impl Fn(&str) -> bool) -> String {
    let mut got = Vec::new();
    tokio::time::timeout(LIMIT, async {
        while !done(&String::from_utf8_lossy(&got)) {
            match ch.wait().await {
                Some(ChannelMsg::Data { data }) => got.extend_from_slice(&data),
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => {
                    panic!("channel closed: {}", String::from_utf8_lossy(&got))
                }
                Some(_) => {}
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no end: {}", String::from_utf8_lossy(&got)));
    String::from_utf8_lossy(&got).into_owned()
}

/// Everything a channel sends until it closes.
async fn read_to_end(ch: &mut Channel<Msg>) -> String {
    let mut got = Vec::new();
    tokio::time::timeout(LIMIT, async {
        loop {
            match ch.wait().await {
                Some(ChannelMsg::Data { data }) => got.extend_from_slice(&data),
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => break,
                Some(_) => {}
            }
        }
    })
    .await
    .unwrap();
    String::from_utf8_lossy(&got).into_owned()
}

/// A `shell` channel (`pty`: with a terminal, so input is echoed), and its
/// banner up to the first prompt `prompt`.
async fn shell(h: &Handle<AnyKey>, pty: bool, prompt: &str) -> (Channel<Msg>, String) {
    let mut ch = h.channel_open_session().await.unwrap();
    if pty {
        ch.request_pty(true, "vt100", 80, 24, 0, 0, &[])
            .await
            .unwrap();
    }
    ch.request_shell(true).await.unwrap();
    let banner = read_until(&mut ch, |t| t.ends_with(prompt)).await;
    (ch, banner)
}

/// A raw TCP connection the server accepted and holds: it has sent its SSH
/// version line.
async fn held_ssh_connection(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(LIMIT, async {
        while !got.contains(&b'\n') {
            let mut b = [0u8; 256];
            let n = s.read(&mut b).await.unwrap();
            assert!(n > 0, "closed before the version line");
            got.extend_from_slice(&b[..n]);
        }
    })
    .await
    .unwrap();
    assert!(got.starts_with(b"SSH-2.0-"), "{got:?}");
    s
}

/// Whether the server closes a new connection before sending a byte (it
/// takes one by sending its SSH version line at once).
async fn closed_at_once(addr: SocketAddr) -> bool {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut b = [0u8; 256];
    let n = tokio::time::timeout(LIMIT, s.read(&mut b))
        .await
        .unwrap()
        .unwrap_or(0);
    n == 0
}

/// Connect until the server takes the connection again (after one of its
/// sessions ended), within [`LIMIT`].
async fn eventually_accepted(addr: SocketAddr) {
    tokio::time::timeout(LIMIT, async {
        while closed_at_once(addr).await {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the freed slot was never given back");
}

fn ce() -> (Arc<SwitchDevice>, Service) {
    let dev = SwitchDevice::new("LEAF1", VrpConfig::new("LEAF1"), Arc::new(Faults::new()));
    (dev.clone(), Service::Cli(dev))
}

fn netconf_device() -> Arc<NetconfDevice> {
    NetconfDevice::with_options(
        "SPINE1",
        Element::new("data"),
        Arc::new(Faults::new()),
        DeviceOptions::default(),
    )
}

fn netconf_options(srv: &SshServer) -> SshOptions {
    let mut o = SshOptions::new(
        "127.0.0.1",
        srv.local_addr().port(),
        "admin",
        Password::new("admin"),
        HostKeyCheck::InsecureAcceptAny,
    );
    o.command_timeout = LIMIT;
    o.connect_retries = 0;
    o
}

/// A `netconf` subsystem on a new channel of `h`, its server hello read,
/// or `None` when the request is refused or the channel closed before a
/// hello.
async fn netconf_channel(h: &Handle<AnyKey>) -> Option<(Channel<Msg>, Decoder)> {
    let mut ch = h.channel_open_session().await.ok()?;
    ch.request_subsystem(true, "netconf").await.unwrap();
    let mut dec = Decoder::new();
    let hello = tokio::time::timeout(LIMIT, async {
        loop {
            if let Some(m) = dec.next_message().unwrap() {
                return Some(m);
            }
            match ch.wait().await {
                Some(ChannelMsg::Data { data }) => dec.push(&data),
                Some(ChannelMsg::Failure | ChannelMsg::Eof | ChannelMsg::Close) | None => {
                    return None
                }
                Some(_) => {}
            }
        }
    })
    .await
    .unwrap();
    let Some(hello) = hello else {
        let _ = ch.close().await;
        return None;
    };
    assert!(hello.contains("<hello"), "{hello}");
    Some((ch, dec))
}

/// The next NETCONF message on `ch`, or `None` when it closes.
async fn netconf_recv(ch: &mut Channel<Msg>, dec: &mut Decoder) -> Option<String> {
    tokio::time::timeout(LIMIT, async {
        loop {
            if let Some(m) = dec.next_message().unwrap() {
                return Some(m);
            }
            match ch.wait().await {
                Some(ChannelMsg::Data { data }) => dec.push(&data),
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => return None,
                Some(_) => {}
            }
        }
    })
    .await
    .unwrap()
}

const BASE_10_HELLO: &str = "<hello xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\"><capabilities><capability>urn:ietf:params:netconf:base:1.0</capability></capabilities></hello>";

fn ocs8() -> Ocs {
    Ocs {
        name: "ocs1".into(),
        device: DeviceId(0),
        ports: (1..=8).map(|i| i.to_string().into()).collect(),
        port_peer: vec![None; 8],
        patches: vec![(0, 4)],
    }
}

async fn tl1_ocs() -> Tl1Server {
    let model = OcsModel::new(OcsId(0), &ocs8(), Arc::new(StaticBusy::new()));
    tl1::serve(Arc::new(model), Tl1Options::new(Login::default()))
        .await
        .unwrap()
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

/// Whether the server closes `s` (EOF) before sending anything more.
async fn tl1_closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 256];
    matches!(
        tokio::time::timeout(LIMIT, s.read(&mut b)).await.unwrap(),
        Ok(0) | Err(_)
    )
}

// ---------------------------------------------------------- Huawei CE ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ce_takes_21_vty_users_announces_how_many_are_online_and_refuses_the_22nd() {
    let (_dev, service) = ce();
    let srv = serve(service, Login::default()).await.unwrap();
    let a = login(&srv).await;
    let (_ca, banner) = shell(&a, false, "<LEAF1>").await;
    assert!(
        banner.contains(
            "Info: The max number of VTY users is 21, the number of current VTY users online is 1."
        ),
        "{banner}"
    );
    let b = login(&srv).await;
    let (_cb, banner) = shell(&b, false, "<LEAF1>").await;
    assert!(
        banner.contains("the number of current VTY users online is 2."),
        "{banner}"
    );
    // 19 more connections, not logged in: each holds a VTY as a user at
    // the login prompt does.
    let mut held = Vec::new();
    for _ in 2..CE_VTY_USERS {
        held.push(held_ssh_connection(srv.local_addr()).await);
    }
    // The 22nd is closed before the server says a word.
    assert!(closed_at_once(srv.local_addr()).await);
    // One leaves: its VTY is free again.
    drop(held.pop());
    eventually_accepted(srv.local_addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ce_command_line_over_510_characters_is_refused_and_not_buffered() {
    let (dev, service) = ce();
    let srv = serve(service, Login::default()).await.unwrap();
    let h = login(&srv).await;
    let (mut ch, _) = shell(&h, true, "<LEAF1>").await;
    // 1 MiB without a line end, then the end.
    let chunk = vec![b'a'; 64 * 1024];
    for _ in 0..16 {
        ch.data(&chunk[..]).await.unwrap();
    }
    ch.data(&b"\r"[..]).await.unwrap();
    let out = read_until(&mut ch, |t| t.ends_with("<LEAF1>")).await;
    // The echo stops at the 510th character, the bell rings once.
    let echo = out.split("\r\n").next().unwrap();
    assert_eq!(echo, format!("{}\x07", "a".repeat(510)));
    assert!(
        out.contains(
            "Error: The command is too long. A command can contain a maximum of 510 characters."
        ),
        "{out}"
    );
    // The session goes on; 510 characters exactly are a command.
    let line = format!("{:>510}\r", "display current-configuration");
    ch.data(line.as_bytes()).await.unwrap();
    let out = read_until(&mut ch, |t| t.ends_with("<LEAF1>")).await;
    assert!(out.contains("sysname LEAF1"), "{out}");
    let line = format!("{:>511}\r", "display current-configuration");
    ch.data(line.as_bytes()).await.unwrap();
    let out = read_until(&mut ch, |t| t.ends_with("<LEAF1>")).await;
    assert!(out.contains("Error: The command is too long"), "{out}");
    // An exec request is held to the same limit.
    let mut ex = h.channel_open_session().await.unwrap();
    ex.exec(true, line.trim_end()).await.unwrap();
    let out = read_to_end(&mut ex).await;
    assert!(out.contains("Error: The command is too long"), "{out}");
    assert_eq!(dev.commits().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_connection_opens_at_most_10_channels() {
    let (_dev, service) = ce();
    let srv = serve(service, Login::default()).await.unwrap();
    let h = login(&srv).await;
    let mut open = Vec::new();
    for _ in 0..SSH_SESSIONS_PER_CONNECTION {
        open.push(h.channel_open_session().await.unwrap());
    }
    // sshd's MaxSessions: the 11th is administratively prohibited.
    let err = h.channel_open_session().await.unwrap_err();
    assert!(
        matches!(
            err,
            russh::Error::ChannelOpenFailure(russh::ChannelOpenFailure::AdministrativelyProhibited)
        ),
        "{err:?}"
    );
    // The connection still works: a channel closed frees its place.
    let ch = open.pop().unwrap();
    ch.close().await.unwrap();
    drop(ch);
    let ch = tokio::time::timeout(LIMIT, async {
        loop {
            if let Ok(ch) = h.channel_open_session().await {
                return ch;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    ch.request_shell(true).await.unwrap();
}

// -------------------------------------------------------------- SONiC ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sonic_shell_line_over_64_kib_is_refused() {
    let base = json!({"DEVICE_METADATA": {"localhost": {"hostname": "leaf1"}}});
    let initial = validate::initial(base.as_object().cloned().unwrap(), "ToRRouter");
    let dev = SonicDevice::new("leaf1", initial, Arc::new(Faults::new())).unwrap();
    let srv = serve(Service::Cli(dev.clone()), Login::default())
        .await
        .unwrap();
    let h = login(&srv).await;
    let prompt = "admin@leaf1:~$ ";
    let (mut ch, _) = shell(&h, false, prompt).await;
    let long = format!("echo {}\n", "x".repeat(1 << 20));
    ch.data(long.as_bytes()).await.unwrap();
    let out = read_until(&mut ch, |t| t.ends_with(prompt)).await;
    assert!(
        out.contains("-bash: line too long: this shell reads at most 65536 bytes a line"),
        "{out}"
    );
    assert!(!out.contains("xxx"), "the line ran: {}", out.len());
    ch.data(&b"echo $?\n"[..]).await.unwrap();
    let out = read_until(&mut ch, |t| t.ends_with(prompt)).await;
    assert!(out.contains("\r\n2\r\n"), "{out:?}");
    // Only `echo $?` ran.
    assert_eq!(
        dev.history(),
        vec![vec!["echo".to_string(), "2".to_string()]]
    );
}

// ------------------------------------------------------------ NETCONF ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netconf_device_refuses_the_16th_client() {
    let dev = netconf_device();
    let srv = serve(Service::Netconf(dev), Login::default())
        .await
        .unwrap();
    let mut open = Vec::new();
    for _ in 0..NETCONF_SESSIONS {
        let mut d = NetconfDriver::new("SPINE1", netconf_options(&srv));
        d.open().await.unwrap();
        open.push(d);
    }
    let mut extra = NetconfDriver::new("SPINE1", netconf_options(&srv));
    let err = extra.open().await.unwrap_err();
    assert!(!err.to_string().is_empty());
    // The open ones still answer.
    for d in &mut open {
        d.get_config().await.unwrap();
    }
    // One closes: a client gets in again.
    let mut d = open.pop().unwrap();
    d.close().await.unwrap();
    eventually_accepted(srv.local_addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netconf_device_runs_at_most_15_sessions_whatever_the_connections() {
    let dev = netconf_device();
    let srv = serve(Service::Netconf(dev), Login::default())
        .await
        .unwrap();
    // Two connections, 10 and 5 sessions: the device's 15.
    let (a, b) = (login(&srv).await, login(&srv).await);
    let mut sessions = Vec::new();
    for _ in 0..SSH_SESSIONS_PER_CONNECTION {
        sessions.push(netconf_channel(&a).await.expect("a session"));
    }
    for _ in SSH_SESSIONS_PER_CONNECTION..NETCONF_SESSIONS {
        sessions.push(netconf_channel(&b).await.expect("a session"));
    }
    // The 16th is closed before its hello although its connection has
    // room for channels.
    assert!(netconf_channel(&b).await.is_none());
    // One ends (close-session): another may start.
    let (mut ch, mut dec) = sessions.pop().unwrap();
    ch.data(&encode(BASE_10_HELLO, Framing::EndOfMessage)[..])
        .await
        .unwrap();
    let close = format!("<rpc xmlns=\"{NS_BASE}\" message-id=\"1\"><close-session/></rpc>");
    ch.data(&encode(&close, Framing::EndOfMessage)[..])
        .await
        .unwrap();
    let r = netconf_recv(&mut ch, &mut dec).await.unwrap();
    assert!(r.contains("<ok/>"), "{r}");
    assert!(netconf_recv(&mut ch, &mut dec).await.is_none());
    tokio::time::timeout(LIMIT, async {
        while netconf_channel(&b).await.is_none() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netconf_hello_without_a_base_capability_ends_the_session_and_bad_utf8_is_malformed() {
    let dev = netconf_device();
    let srv = serve(Service::Netconf(dev), Login::default())
        .await
        .unwrap();
    let h = login(&srv).await;
    // RFC 6241 8.1: no base capability: the server terminates the session.
    let (mut ch, mut dec) = netconf_channel(&h).await.unwrap();
    let hello = format!(
        "<hello xmlns=\"{NS_BASE}\"><capabilities><capability>urn:ietf:params:netconf:capability:candidate:1.0</capability></capabilities></hello>"
    );
    ch.data(&encode(&hello, Framing::EndOfMessage)[..])
        .await
        .unwrap();
    assert_eq!(netconf_recv(&mut ch, &mut dec).await, None);
    // RFC 6241 3: a message that is not UTF-8 gets malformed-message, and
    // the session goes on.
    let (mut ch, mut dec) = netconf_channel(&h).await.unwrap();
    ch.data(&encode(BASE_10_HELLO, Framing::EndOfMessage)[..])
        .await
        .unwrap();
    let mut bad = format!("<rpc xmlns=\"{NS_BASE}\" message-id=\"7\"><get-config><source><running/></source></get-config></rpc>").into_bytes();
    bad.insert(10, 0xff);
    bad.extend_from_slice(b"]]>]]>");
    ch.data(&bad[..]).await.unwrap();
    let r = netconf_recv(&mut ch, &mut dec).await.unwrap();
    assert!(
        r.contains("<error-tag>malformed-message</error-tag>"),
        "{r}"
    );
    let ok = format!("<rpc xmlns=\"{NS_BASE}\" message-id=\"8\"><get-config><source><running/></source></get-config></rpc>");
    ch.data(&encode(&ok, Framing::EndOfMessage)[..])
        .await
        .unwrap();
    let r = netconf_recv(&mut ch, &mut dec).await.unwrap();
    assert!(r.contains("message-id=\"8\"") && r.contains("<data"), "{r}");
}

// ---------------------------------------------------------------- TL1 ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tl1_serves_32_sessions_and_refuses_the_33rd() {
    let srv = tl1_ocs().await;
    let mut held = Vec::new();
    for i in 0..TL1_SESSIONS {
        let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
        // Answered: the session is being served.
        let r = tl1_cmd(&mut s, &format!("RTRV-HDR:::{i};")).await;
        assert!(r.contains("PLNA"), "{r}");
        held.push(s);
    }
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    let _ = s.write_all(b"RTRV-HDR:::99;\r\n").await;
    assert!(tl1_closed(&mut s).await);
    // One leaves: another is served.
    drop(held.pop());
    tokio::time::timeout(LIMIT, async {
        loop {
            let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
            if s.write_all(b"ACT-USER::admin:1::admin;\r\n").await.is_ok()
                && !tl1_closed(&mut s).await
            {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tl1_closes_a_connection_after_three_failed_logins() {
    let srv = tl1_ocs().await;
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    for ctag in 1..=2 {
        let r = tl1_cmd(&mut s, &format!("ACT-USER::admin:{ctag}::guess{ctag};")).await;
        assert!(r.contains(&format!("M  {ctag} DENY\r\n   PIUI")), "{r}");
    }
    // The third: refused, then the connection is closed.
    let r = tl1_cmd(&mut s, "ACT-USER::admin:3::guess3;").await;
    assert!(r.contains("M  3 DENY\r\n   PIUI"), "{r}");
    assert!(r.contains("too many failed logins"), "{r}");
    assert!(tl1_closed(&mut s).await);
    // Commands pasted after the third guess are not run either.
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    s.write_all(b"ACT-USER::admin:1::a;ACT-USER::admin:2::b;ACT-USER::admin:3::c;ACT-USER::admin:4::admin;\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(LIMIT, s.read_to_end(&mut all))
        .await
        .unwrap()
        .unwrap();
    let all = String::from_utf8_lossy(&all);
    assert_eq!(all.matches("PIUI").count(), 3, "{all}");
    assert!(!all.contains("COMPLD"), "{all}");
    // The account is not locked: a new connection logs in.
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    let r = tl1_cmd(&mut s, "ACT-USER::admin:1::admin;").await;
    assert!(r.contains("M  1 COMPLD"), "{r}");
}
