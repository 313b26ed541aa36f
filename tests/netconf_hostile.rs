//! Hostile input against an emulated NETCONF device over real SSH on
//! loopback: a 20,000-deep edit-config and a 64 MiB message (base:1.0
//! end-of-message framing, and a 64 MiB chunk in base:1.1 chunked
//! framing). Each is
//! refused (`too-big`, or the session closed), and afterwards this device
//! and another device of the same emulator process still answer, with the
//! process's memory bounded. Figures are printed (VmRSS / VmHWM of
//! /proc/self/status); only a generous bound is asserted.
#![allow(clippy::unwrap_used)]

mod netconf_emu;

use std::time::Duration;

use russh::client::Msg;
use russh::{Channel, ChannelMsg};
use vclos::emulator::ssh::SshServer;
use vclos_drivers::netconf::framing::{encode, Decoder, Framing};
use vclos_drivers::netconf::xml::NS_BASE;
use vclos_drivers::netconf::NetconfDriver;
use vclos_drivers::ssh::{connect, SshOptions, SshSession};
use vclos_drivers::Driver;

fn opts(srv: &SshServer) -> SshOptions {
    netconf_emu::options(srv, Duration::from_secs(60))
}

/// (VmRSS, VmHWM) in KiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A raw NETCONF session (base:1.0 framing, so the server never switches
/// to chunked): what a hostile client writes, byte for byte.
struct Raw {
    _ssh: SshSession,
    ch: Channel<Msg>,
    dec: Decoder,
}

impl Raw {
    async fn open(srv: &SshServer) -> Raw {
        Raw::open_with(srv, false).await
    }

    /// With `chunked`, both sides announce base:1.1 and switch to chunked
    /// framing (RFC 6242 4.2) after the hellos.
    async fn open_with(srv: &SshServer, chunked: bool) -> Raw {
        let ssh = connect(&opts(srv)).await.unwrap();
        let ch = ssh.open_subsystem("netconf").await.unwrap();
        let mut r = Raw {
            _ssh: ssh,
            ch,
            dec: Decoder::new(),
        };
        let hello = r.recv().await.expect("server hello");
        assert!(hello.contains("<hello"));
        let v11 = if chunked {
            "<capability>urn:ietf:params:netconf:base:1.1</capability>"
        } else {
            ""
        };
        let mine = format!(
            "<hello xmlns=\"{NS_BASE}\"><capabilities><capability>urn:ietf:params:netconf:base:1.0</capability>{v11}</capabilities></hello>"
        );
        r.ch.data_bytes(encode(&mine, Framing::EndOfMessage))
            .await
            .unwrap();
        if chunked {
            r.dec.set_framing(Framing::Chunked);
        }
        r
    }

    /// The next message, or None when the server closed the channel.
    async fn recv(&mut self) -> Option<String> {
        loop {
            if let Some(m) = self.dec.next_message().unwrap() {
                return Some(m);
            }
            match tokio::time::timeout(Duration::from_secs(60), self.ch.wait())
                .await
                .ok()?
            {
                Some(ChannelMsg::Data { data }) => self.dec.push(&data),
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => return None,
                Some(_) => {}
            }
        }
    }
}

fn rpc(body: &str) -> String {
    format!("<rpc xmlns=\"{NS_BASE}\" message-id=\"1\">{body}</rpc>")
}

/// The device answers a get-config through the real driver.
async fn answers(srv: &SshServer, name: &str) {
    let mut d = NetconfDriver::new(name, opts(srv));
    d.open().await.unwrap();
    let run = d.get_config().await.unwrap();
    assert!(
        run.contains("data") || run.is_empty() || run.contains('<'),
        "{run}"
    );
    d.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_and_huge_messages_leave_every_device_answering() {
    let (dev, srv) = netconf_emu::start("LEAF1").await;
    let (_other_dev, other) = netconf_emu::start("LEAF2").await;
    let (rss0, hwm0) = memory();

    // 1. A 20,000-deep edit-config: answered with too-big, session alive.
    let mut raw = Raw::open(&srv).await;
    let n = 20_000;
    let deep = format!(
        "<edit-config><target><candidate/></target><config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\">{}{}</interfaces></config></edit-config>",
        "<x>".repeat(n),
        "</x>".repeat(n)
    );
    raw.ch
        .data_bytes(encode(&rpc(&deep), Framing::EndOfMessage))
        .await
        .unwrap();
    let reply = raw.recv().await.expect("a reply to the deep message");
    assert!(reply.contains("<error-tag>too-big</error-tag>"), "{reply}");
    raw.ch
        .data_bytes(encode(
            &rpc("<get-config><source><running/></source></get-config>"),
            Framing::EndOfMessage,
        ))
        .await
        .unwrap();
    let reply = raw.recv().await.expect("the session survives");
    assert!(reply.contains("<data"), "{reply}");
    let (rss1, hwm1) = memory();
    eprintln!("deep message refused");

    // 2. A 64 MiB message (over the 16 MiB default limit): the server
    // answers too-big and closes this session while it is still arriving.
    let mut raw = Raw::open(&srv).await;
    let filler = "<description>".to_string() + &"x".repeat(1 << 20) + "</description>";
    let mut sent = 0usize;
    let head = "<rpc xmlns=\"urn:ietf:params:xml:ns:netconf:base:1.0\" message-id=\"2\"><edit-config><target><candidate/></target><config><interfaces xmlns=\"http://openconfig.net/yang/interfaces\">";
    let _ = raw.ch.data_bytes(head.as_bytes().to_vec()).await;
    let mut refused_midway = false;
    while sent < 64 << 20 {
        // The server stops reading once the message is over its limit: a
        // send then fails, or stalls on the SSH window; both end it.
        let send = raw.ch.data_bytes(filler.as_bytes().to_vec());
        if !matches!(
            tokio::time::timeout(Duration::from_secs(10), send).await,
            Ok(Ok(()))
        ) {
            refused_midway = true;
            break;
        }
        sent += filler.len();
    }
    eprintln!("sent {} MiB", sent >> 20);
    if !refused_midway {
        let tail = b"</interfaces></config></edit-config></rpc>]]>]]>".to_vec();
        let _ = tokio::time::timeout(Duration::from_secs(10), raw.ch.data_bytes(tail)).await;
    }
    let reply = raw.recv().await;
    if let Some(r) = &reply {
        assert!(r.contains("<error-tag>too-big</error-tag>"), "{r}");
    }
    assert!(
        raw.recv().await.is_none(),
        "the oversized session is closed"
    );
    assert!(
        refused_midway && sent < 32 << 20,
        "the server must stop reading past its 16 MiB limit (took {sent} bytes)"
    );
    let (rss2, hwm2) = memory();

    // 2b. Chunked framing: a 64 MiB chunk is refused from its header.
    let mut raw = Raw::open_with(&srv, true).await;
    let _ = raw
        .ch
        .data_bytes(format!("\n#{}\n", 64 << 20).into_bytes())
        .await;
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        raw.ch.data_bytes(vec![b'x'; 1 << 20]),
    )
    .await;
    let reply = raw
        .recv()
        .await
        .expect("a too-big reply in chunked framing");
    assert!(reply.contains("<error-tag>too-big</error-tag>"), "{reply}");
    assert!(
        raw.recv().await.is_none(),
        "the oversized session is closed"
    );

    // 3. Both devices still answer; nothing was written.
    answers(&srv, "LEAF1").await;
    answers(&other, "LEAF2").await;
    assert!(dev.state().candidate.children.is_empty());
    let (rss3, hwm3) = memory();

    println!(
        "memory KiB: start rss={rss0} hwm={hwm0}; after 20000-deep rss={rss1} hwm={hwm1}; \
         after 64 MiB ({} MiB sent, refused midway: {refused_midway}) rss={rss2} hwm={hwm2}; \
         end rss={rss3} hwm={hwm3}",
        sent >> 20
    );
    assert!(hwm3 < 1024 * 1024, "peak {hwm3} KiB is over 1 GiB");
}
