//! The service in-process for the tests of `vclos serve`'s bounds: the
//! testbed-ocs topology, a state directory of its own, devices that are
//! black holes (a driver whose every call waits forever, so nothing needs a
//! device and a read of the devices lasts the fabric's 30 s read timeout),
//! and raw HTTP/1.1 over loopback sockets.
#![allow(clippy::unwrap_used, dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vclos_drivers::{Capabilities, CommitId, Driver, DriverError, LoadMode};
use vclos_server::jobs::Fabric;
use vclos_server::server::{self, Config, Limits, ServeError, Token};

pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A device that accepts nothing and answers nothing.
pub struct BlackHole {
    device: String,
}

#[async_trait]
impl Driver for BlackHole {
    fn device(&self) -> &str {
        &self.device
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    async fn open(&mut self) -> Result<(), DriverError> {
        std::future::pending().await
    }
    async fn close(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    async fn get_config(&mut self) -> Result<String, DriverError> {
        std::future::pending().await
    }
    async fn load_candidate(&mut self, _: &str, _: LoadMode) -> Result<(), DriverError> {
        std::future::pending().await
    }
    async fn compare_config(&mut self) -> Result<String, DriverError> {
        std::future::pending().await
    }
    async fn commit(&mut self, _: Option<Duration>) -> Result<CommitId, DriverError> {
        std::future::pending().await
    }
    async fn confirm(&mut self) -> Result<(), DriverError> {
        std::future::pending().await
    }
    async fn discard(&mut self) -> Result<(), DriverError> {
        std::future::pending().await
    }
    async fn rollback(&mut self, _: Option<&CommitId>) -> Result<(), DriverError> {
        std::future::pending().await
    }
}

/// A running service; stopped (gracefully, checked) by [`Svc::stop`].
pub struct Svc {
    pub addr: SocketAddr,
    /// Device sessions opened so far (each then waits forever).
    pub opened: Arc<AtomicUsize>,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<Result<(), ServeError>>,
    _dir: tempfile::TempDir,
}

impl Svc {
    /// The service still answers `/healthz`; then [`Svc::stop`].
    pub async fn answers_then_stop(self) {
        assert_eq!(
            healthz_within(self.addr, Duration::from_secs(10))
                .await
                .status,
            200
        );
        self.stop().await;
    }

    pub async fn stop(self) {
        self.stop.send(()).unwrap();
        let served = tokio::time::timeout(Duration::from_secs(60), self.served)
            .await
            .expect("graceful shutdown within 60 s");
        served.unwrap().unwrap();
    }
}

pub async fn start(limits: Limits, request_timeout: Duration) -> Svc {
    start_reading(limits, request_timeout, Duration::from_secs(30)).await
}

/// [`start`] with the fabric's device read timeout `read_timeout`.
pub async fn start_reading(
    limits: Limits,
    request_timeout: Duration,
    read_timeout: Duration,
) -> Svc {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topologies/testbed-ocs.yaml"
    );
    let topo = Arc::new(vclos_core::topology::load(std::path::Path::new(path)).unwrap());
    let dir = tempfile::tempdir().unwrap();
    vclos_core::state::store::init(dir.path(), &topo.name).unwrap();
    let opened = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&opened);
    let factory = move |device: &str| -> Result<Box<dyn Driver>, DriverError> {
        count.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(BlackHole {
            device: device.to_string(),
        }))
    };
    let (mut fabric, recovered) = Fabric::open_with(topo, dir.path(), Arc::new(factory))
        .await
        .unwrap();
    assert!(recovered.is_none());
    fabric.read_timeout = read_timeout;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Config {
        listen: addr,
        token: Some(Token::from_file_text(TOKEN).unwrap()),
        request_timeout,
        max_waiting: 4,
        tls: None,
        elect: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(server::serve_on(
        listener,
        fabric,
        config,
        limits,
        async move {
            let _ = stopped.await;
        },
    ));
    Svc {
        addr,
        opened,
        stop,
        served,
        _dir: dir,
    }
}

pub fn limits(header: u64, body: u64, connections: usize) -> Limits {
    Limits {
        header_timeout: Duration::from_secs(header),
        body_timeout: Duration::from_secs(body),
        max_connections: connections,
        ..Limits::default()
    }
}

/// A whole answer: status, head (lowercase) and body.
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n\n{}",
            self.head,
            String::from_utf8_lossy(&self.body)
        )
    }
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim())
        })
    }

    /// The body as a problem document, checked to be one.
    pub fn problem(&self) -> serde_json::Value {
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{self:?}"
        );
        let v: serde_json::Value = serde_json::from_slice(&self.body).unwrap();
        assert_eq!(v["status"], self.status, "{v}");
        assert_eq!(v["type"], "about:blank", "{v}");
        assert!(v["title"].is_string() && v["detail"].is_string(), "{v}");
        v
    }
}

/// A request with `Connection: close`: method, path, bearer token, extra
/// header lines and body.
pub fn request(method: &str, path: &str, auth: Option<&str>, body: Option<&str>) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: vclos\r\nConnection: close\r\n");
    if let Some(a) = auth {
        r += &format!("Authorization: {a}\r\n");
    }
    if let Some(b) = body {
        r += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        );
    } else {
        r += "\r\n";
    }
    r.into_bytes()
}

pub fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// Send `raw` on a new connection and read the answer until the server
/// closes it (at most `within`). A server that answers before it has read
/// everything may reset the connection after its answer: what came before
/// the reset is the answer.
pub async fn exchange_within(addr: SocketAddr, raw: &[u8], within: Duration) -> Reply {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let sent = s.write_all(raw).await;
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) => return buf,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(_) if !buf.is_empty() => return buf,
                Err(e) => panic!("no answer (sending: {sent:?}): {e}"),
            }
        }
    };
    let buf = tokio::time::timeout(within, read)
        .await
        .unwrap_or_else(|_| panic!("no whole answer within {within:?}"));
    parse(&buf)
}

pub async fn exchange(addr: SocketAddr, raw: &[u8]) -> Reply {
    exchange_within(addr, raw, Duration::from_secs(30)).await
}

pub fn parse(buf: &[u8]) -> Reply {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer head: {:?}", String::from_utf8_lossy(buf)));
    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Reply {
        status,
        head,
        body: buf[end + 4..].to_vec(),
    }
}

/// Whether the server closes `s` (end of stream or reset) within `within`;
/// whatever it sends first is read and ignored.
pub async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// `GET /healthz`, retried on a closed connection until `within`.
pub async fn healthz_within(addr: SocketAddr, within: Duration) -> Reply {
    let started = Instant::now();
    loop {
        let raw = request("GET", "/healthz", None, None);
        let attempt = async {
            let mut s = TcpStream::connect(addr).await.ok()?;
            s.write_all(&raw).await.ok()?;
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).await.ok()?;
            (!buf.is_empty()).then(|| parse(&buf))
        };
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_secs(5), attempt).await {
            return r;
        }
        assert!(
            started.elapsed() < within,
            "/healthz did not answer within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Send `raw` on a connection of its own and wait until the service has
/// opened a device session for it (every device is a black hole, so the
/// request then waits on it); the task reads whatever answer comes.
pub async fn stuck_on_a_device(svc: &Svc, raw: Vec<u8>, what: &str) -> tokio::task::JoinHandle<()> {
    let addr = svc.addr;
    let task = tokio::spawn(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&raw).await.unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf).await;
    });
    let waiting = Instant::now();
    while svc.opened.load(Ordering::SeqCst) == 0 {
        assert!(waiting.elapsed() < Duration::from_secs(10), "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task
}
