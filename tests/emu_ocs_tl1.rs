//! The TL1 server over a real loopback socket, driven by a raw TCP client
//! (no vclos client code), plus the in-memory session API.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vclos::emulator::busy::StaticBusy;
use vclos::emulator::faults::Faults;
use vclos::emulator::ocs::OcsModel;
use vclos::emulator::tl1::{self, Login, Outcome, Session, Tl1Options, Tl1Server};
use vclos::topology::{DeviceId, Ocs, OcsId};

fn ocs8() -> Ocs {
    Ocs {
        name: "ocs1".into(),
        device: DeviceId(0),
        ports: (1..=8).map(|i| i.to_string().into()).collect(),
        port_peer: vec![None; 8],
        patches: vec![(0, 4), (1, 5)], // 1~5, 2~6
    }
}

fn login() -> Login {
    Login {
        username: "admin".into(),
        password: "s3cret".into(),
    }
}

async fn start(busy: Arc<StaticBusy>, delay: Duration) -> (Tl1Server, Arc<OcsModel>) {
    let model = Arc::new(OcsModel::new(OcsId(0), &ocs8(), busy).with_switching_delay(delay));
    let server = tl1::serve(model.clone(), Tl1Options::new(login()))
        .await
        .unwrap();
    (server, model)
}

/// A raw client: writes bytes, reads until a `;` line.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    async fn connect(server: &Tl1Server) -> Self {
        Raw {
            s: TcpStream::connect(server.local_addr()).await.unwrap(),
            buf: Vec::new(),
        }
    }
    async fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.unwrap();
    }
    /// The next complete response block, as text.
    async fn response(&mut self) -> String {
        String::from_utf8_lossy(&self.raw_response().await).into_owned()
    }
    /// The next complete response block, as bytes (Telnet replies included).
    async fn raw_response(&mut self) -> Vec<u8> {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(i) = find(&self.buf, b"\r\n;\r\n") {
                    return self.buf.drain(..i + 5).collect::<Vec<u8>>();
                }
                let mut b = [0u8; 1024];
                let n = self.s.read(&mut b).await.unwrap();
                assert!(n > 0, "server closed the connection");
                self.buf.extend_from_slice(&b[..n]);
            }
        })
        .await
        .unwrap()
    }
    async fn cmd(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n").as_bytes()).await;
        self.response().await
    }
    async fn login(&mut self) {
        let r = self.cmd("ACT-USER::admin:1::s3cret;").await;
        assert_eq!(status(&r), ("1".into(), "COMPLD".into()), "{r}");
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// (ctag, COMPLD|DENY) of the `M` line.
fn status(resp: &str) -> (String, String) {
    let m = resp
        .lines()
        .find(|l| l.starts_with("M  "))
        .unwrap_or_else(|| panic!("no M line in {resp:?}"));
    let w: Vec<&str> = m.split_whitespace().collect();
    (w[1].to_string(), w[2].to_string())
}

/// The DENY code.
fn code(resp: &str) -> String {
    let (_, st) = status(resp);
    assert_eq!(st, "DENY", "{resp}");
    let mut lines = resp.lines().skip_while(|l| !l.starts_with("M  "));
    lines.nth(1).unwrap().trim().to_string()
}

/// Quoted data lines, unquoted.
fn data(resp: &str) -> Vec<String> {
    resp.lines()
        .filter(|l| l.starts_with("   \""))
        .map(|l| l.trim().trim_matches('"').to_string())
        .collect()
}

#[tokio::test]
async fn login_gate_and_logout() {
    let (server, _) = start(Arc::default(), Duration::from_millis(1)).await;
    let mut c = Raw::connect(&server).await;
    let r = c.cmd("RTRV-PATCH:::7;").await;
    assert_eq!(status(&r), ("7".into(), "DENY".into()));
    assert_eq!(code(&r), "PLNA");
    assert_eq!(code(&c.cmd("ENT-PATCH::3,4:8;").await), "PLNA");
    assert_eq!(code(&c.cmd("ACT-USER::admin:9::wrong;").await), "PIUI");
    assert_eq!(code(&c.cmd("ACT-USER::root:10::s3cret;").await), "PIUI");
    c.login().await;
    assert_eq!(status(&c.cmd("RTRV-PATCH:::11;").await).1, "COMPLD");
    assert_eq!(status(&c.cmd("CANC-USER::admin:12;").await).1, "COMPLD");
    assert_eq!(code(&c.cmd("RTRV-PATCH:::13;").await), "PLNA");
}

#[tokio::test]
async fn response_shape_header_and_ctag_echo() {
    let (server, _) = start(Arc::default(), Duration::from_millis(1)).await;
    let mut c = Raw::connect(&server).await;
    c.login().await;
    let r = c.cmd("RTRV-PATCH:::abc123;").await;
    assert!(r.ends_with("\r\n;\r\n"), "{r:?}");
    let lines: Vec<&str> = r.lines().filter(|l| !l.trim().is_empty()).collect();
    // "   ocs1 YY-MM-DD HH:MM:SS"
    let h: Vec<&str> = lines[0].split_whitespace().collect();
    assert!(lines[0].starts_with("   "), "{r:?}");
    assert_eq!(h[0], "ocs1");
    assert!(
        h[1].len() == 8 && h[1].as_bytes()[2] == b'-' && h[1].as_bytes()[5] == b'-',
        "{r:?}"
    );
    assert!(h[2].len() == 8 && h[2].as_bytes()[2] == b':', "{r:?}");
    assert_eq!(lines[1], "M  abc123 COMPLD");
    assert_eq!(lines[2], "   \"1,5\"");
    assert_eq!(lines[3], "   \"2,6\"");
    assert_eq!(*lines.last().unwrap(), ";");
    // DENY: indented code, then a comment.
    let r = c.cmd("DLT-PATCH::99:x1;").await;
    let deny: Vec<&str> = r
        .split("\r\n")
        .skip_while(|l| !l.starts_with("M  "))
        .collect();
    assert_eq!(deny[0], "M  x1 DENY");
    assert_eq!(deny[1], "   IIAC");
    assert!(
        deny[2].starts_with("   /* ") && deny[2].ends_with(" */"),
        "{r:?}"
    );
}

#[tokio::test]
async fn every_verb() {
    let (server, model) = start(Arc::default(), Duration::from_millis(5)).await;
    let mut c = Raw::connect(&server).await;
    c.login().await;
    assert_eq!(data(&c.cmd("RTRV-PATCH:::1;").await), vec!["1,5", "2,6"]);
    assert_eq!(data(&c.cmd("rtrv-patch::6&4:2;").await), vec!["2,6"]);
    assert_eq!(data(&c.cmd("RTRV-PATCH::1&6:3;").await), vec!["1,5", "2,6"]);

    assert_eq!(status(&c.cmd("ENT-PATCH::3,4:4;").await).1, "COMPLD");
    assert_eq!(model.partner(2), Some(3));
    // Case-insensitive verbs; element-wise lists.
    assert_eq!(status(&c.cmd("ent-patch::7&8,8&7:5;").await).1, "DENY");
    assert_eq!(status(&c.cmd("Dlt-Patch::3:6;").await).1, "COMPLD");
    assert_eq!(status(&c.cmd("ENT-PATCH::3&7,4&8:7;").await).1, "COMPLD");
    assert_eq!(
        data(&c.cmd("RTRV-PATCH:::8;").await),
        vec!["1,5", "2,6", "3,4", "7,8"]
    );
    // Ranges.
    assert_eq!(status(&c.cmd("DLT-PATCH::1&&3:9;").await).1, "COMPLD");
    assert_eq!(data(&c.cmd("RTRV-PATCH:::10;").await), vec!["7,8"]);
    assert_eq!(status(&c.cmd("DLT-PATCH::ALL:11;").await).1, "COMPLD");
    assert!(model.patches().is_empty());
    assert!(data(&c.cmd("RTRV-PATCH:::12;").await).is_empty());

    let r = c.cmd("RTRV-NETYPE:::13;").await;
    assert_eq!(status(&r).1, "COMPLD");
    assert!(data(&r)[0].contains("EMU-OCS-8"), "{r}");
    let r = c.cmd("RTRV-EQPT::SYSTEM:14:::PARAMETER=SIZE;").await;
    assert_eq!(data(&r), vec!["SYSTEM:SIZE=4x4"]);
    // TID may name this OCS.
    assert_eq!(status(&c.cmd("RTRV-PATCH:OCS1::15;").await).1, "COMPLD");
    // Two commands on one line.
    c.send(b"RTRV-PATCH:::16;RTRV-PATCH:::17;\r\n").await;
    assert_eq!(status(&c.response().await).0, "16");
    assert_eq!(status(&c.response().await).0, "17");
}

#[tokio::test]
async fn deny_codes() {
    let busy = Arc::new(StaticBusy::new());
    let (server, model) = start(busy.clone(), Duration::from_millis(1)).await;
    let mut c = Raw::connect(&server).await;
    c.login().await;
    let cases = [
        ("ENT-PATCH::3,99:1;", "IIAC"),
        ("ENT-PATCH::3:2;", "IIAC"),
        ("DLT-PATCH::x:3;", "IIAC"),
        ("DLT-PATCH::4&&2:4;", "IIAC"),
        ("ENT-PATCH::3,3:5;", "IDNV"),
        ("ENT-PATCH::1,3:6;", "SAIS"),
        ("DLT-PATCH::3:7;", "SNVS"),
        ("FROB-PATCH:::8;", "ICNV"),
        ("RTRV-PATCH:OTHER::9;", "IITA"),
        ("RTRV-EQPT::SYSTEM:10:::PARAMETER=COLOUR;", "IPNV"),
        ("RTRV-PATCH;", "IISP"),
        ("RTRV-PATCH:::;", "IICT"),
        ("RTRV-PATCH:::11", "IISP"),
    ];
    for (cmd, want) in cases {
        assert_eq!(code(&c.cmd(cmd).await), want, "{cmd}");
    }
    busy.set_busy(OcsId(0), 4, true); // port 5, patched to 1
    let r = c.cmd("DLT-PATCH::1:12;").await;
    assert_eq!(code(&r), "SARB");
    assert!(r.contains("busy"), "{r}");
    assert_eq!(code(&c.cmd("DLT-PATCH::ALL:13;").await), "SARB");
    assert_eq!(
        model.patches(),
        vec![(0, 4), (1, 5)],
        "no DENY changed the table"
    );
}

#[tokio::test]
async fn telnet_negotiation_and_garbage_do_not_hurt() {
    let (server, _) = start(Arc::default(), Duration::from_millis(1)).await;
    let mut c = Raw::connect(&server).await;
    // IAC DO ECHO, IAC WILL SUPPRESS-GO-AHEAD, a subnegotiation, NULs,
    // invalid UTF-8 and control bytes, then a real command.
    c.send(b"\xff\xfd\x01\xff\xfb\x03\xff\xfa\x18\x01\xff\xf0")
        .await;
    c.send(b"\x00\xc3\x28\x01\x02garbage\x7f;\r\n").await;
    let first = c.raw_response().await;
    assert_eq!(code(&String::from_utf8_lossy(&first)), "ICNV");
    assert!(c.buf.is_empty());
    let first = first.as_slice();
    // The refusals came first: WONT ECHO, DONT SGA.
    assert!(find(first, b"\xff\xfc\x01").is_some() && find(first, b"\xff\xfe\x03").is_some());
    // A long line of junk without newline, then a bare-LF command.
    c.send(&vec![b'A'; 10_000]).await;
    c.send(b"\n").await;
    assert_eq!(code(&c.response().await), "IISP");
    c.send(b"ACT-USER::admin:5::s3cret;\n").await;
    assert_eq!(status(&c.response().await).1, "COMPLD");
    // Random bytes of every value, in chunks.
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    c.send(&junk).await;
    c.send(b"\r\nRTRV-PATCH:::77;\r\n").await;
    let mut last = String::new();
    for _ in 0..64 {
        last = c.response().await;
        if status(&last).0 == "77" {
            break;
        }
    }
    assert_eq!(
        data(&last),
        vec!["1,5", "2,6"],
        "session still alive and logged in"
    );
}

#[tokio::test]
async fn sessions_are_independent_but_share_the_ocs() {
    let (server, _) = start(Arc::default(), Duration::from_millis(20)).await;
    let mut a = Raw::connect(&server).await;
    let mut b = Raw::connect(&server).await;
    a.login().await;
    assert_eq!(
        code(&b.cmd("RTRV-PATCH:::1;").await),
        "PLNA",
        "login is per session"
    );
    b.login().await;
    // A change on A is seen by B; both sessions run at once.
    let (ra, rb) = tokio::join!(a.cmd("ENT-PATCH::3,4:2;"), b.cmd("ENT-PATCH::7,8:3;"));
    assert_eq!(
        (status(&ra).1, status(&rb).1),
        ("COMPLD".into(), "COMPLD".into())
    );
    assert_eq!(data(&b.cmd("RTRV-PATCH::3&7:4;").await), vec!["3,4", "7,8"]);
    // Many clients at once.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let addr = server.local_addr();
        tasks.push(tokio::spawn(async move {
            let mut c = Raw {
                s: TcpStream::connect(addr).await.unwrap(),
                buf: Vec::new(),
            };
            c.login().await;
            data(&c.cmd(&format!("RTRV-PATCH:::{i};")).await).len()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 4);
    }
}

#[tokio::test]
async fn changes_reply_after_the_switching_delay() {
    // Wide enough that a loaded machine still answers a disconnect well within it.
    let delay = Duration::from_millis(400);
    let (server, model) = start(Arc::default(), delay).await;
    let mut c = Raw::connect(&server).await;
    c.login().await;
    // A disconnection completes at once; a connection only once switched.
    let old = model.port_name(model.partner(0).unwrap());
    let t = std::time::Instant::now();
    assert_eq!(status(&c.cmd("DLT-PATCH::1:1;").await).1, "COMPLD");
    assert!(t.elapsed() < delay, "a disconnect has nothing to wait for");
    assert!(model.link_state(0).unwrap() == vclos::emulator::ocs::LinkState::Unpatched);
    let t = std::time::Instant::now();
    assert_eq!(
        status(&c.cmd(&format!("ENT-PATCH::1,{old}:2;")).await).1,
        "COMPLD"
    );
    assert!(t.elapsed() >= delay, "replied before the switch completed");
    assert!(model.link_state(0).unwrap().is_lit());
}

#[tokio::test]
async fn server_faults() {
    let model = Arc::new(OcsModel::new(
        OcsId(0),
        &ocs8(),
        Arc::new(StaticBusy::new()),
    ));
    let faults = Arc::new(Faults::new());
    let opts = Tl1Options {
        faults: faults.clone(),
        ..Tl1Options::new(login())
    };
    let server = tl1::serve(model.clone(), opts).await.unwrap();
    let mut c = Raw::connect(&server).await;
    c.login().await;
    faults.refuse_commits(true);
    let r = c.cmd("DLT-PATCH::1:2;").await;
    assert_eq!(code(&r), "SROF");
    assert_eq!(
        status(&c.cmd("RTRV-PATCH:::3;").await).1,
        "COMPLD",
        "reads still work"
    );
    faults.refuse_commits(false);
    faults.fail_after(Some(1));
    assert_eq!(status(&c.cmd("RTRV-PATCH:::4;").await).1, "COMPLD");
    assert_eq!(code(&c.cmd("RTRV-PATCH:::5;").await), "SROF");
    faults.clear();
    faults.drop_next();
    c.send(b"RTRV-PATCH:::6;\r\n").await;
    let mut b = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), c.s.read(&mut b))
        .await
        .unwrap();
    assert!(matches!(n, Ok(0) | Err(_)), "connection should be dropped");
    assert_eq!(model.patches().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn in_memory_session_waits_out_the_switch() {
    let model = Arc::new(OcsModel::new(
        OcsId(0),
        &ocs8(),
        Arc::new(StaticBusy::new()),
    ));
    let mut s = Session::new(model.clone(), Arc::new(login()), Arc::new(Faults::new()));
    assert!(!s.logged_in());
    let Outcome::Reply(r) = s.execute("ACT-USER::admin:1::s3cret").await else {
        panic!()
    };
    assert!(r.contains("M  1 COMPLD"), "{r}");
    let t = tokio::time::Instant::now();
    let Outcome::Reply(r) = s.execute("ENT-PATCH::3,4:2;").await else {
        panic!()
    };
    assert!(r.contains("M  2 COMPLD"), "{r}");
    assert_eq!(t.elapsed(), Duration::from_millis(50));
    assert!(model.link_state(2).unwrap().is_lit());
}
