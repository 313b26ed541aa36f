//! `vclos serve` against hostile or unlucky clients, on loopback: slow or
//! idle connections, bodies that never end, too many sockets, malformed or
//! trailing bodies, and reads behind a device that never answers. Every
//! answer is bounded in time and every error is problem+json.
//!
//! The service runs in-process on the testbed-ocs topology with a state
//! directory of its own; its devices are black holes (a driver whose every
//! call waits forever), so nothing here needs a device, and a read of the
//! devices lasts the fabric's read timeout (30 s).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vclos_server::server::{self, Limits};

/// Defect 1: a request head sent a byte at a time is cut off after the
/// header timeout (not held open for as long as the client likes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_sent_slowly_is_cut_off_within_twice_the_header_timeout() {
    let svc = start(limits(2, 30, 64), Duration::from_secs(60)).await;
    let s = TcpStream::connect(svc.addr).await.unwrap();
    let (mut r, mut w) = s.into_split();
    let started = Instant::now();
    let drip = tokio::spawn(async move {
        w.write_all(b"GET /healthz HTTP/1.1\r\nHost: vclos\r\n")
            .await
            .unwrap();
        for b in b"X-Slow: ".iter().cycle() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if w.write_all(&[*b]).await.is_err() {
                return;
            }
        }
    });
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(4), r.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "a head dripping a byte every 200 ms was still open after 4 s (header timeout 2 s)"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "closed too soon"
    );
    drip.abort();
    // The service still answers.
    svc.answers_then_stop().await;
}

/// Defect 1: idle connections, before their first request or after a
/// response, are closed after the header (idle) timeout, so descriptors
/// come back and `/healthz` answers again with the cap reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_header_timeout_and_the_service_recovers() {
    let svc = start(limits(2, 30, 4), Duration::from_secs(60)).await;
    // One keep-alive connection that made a request and then idles.
    let mut kept = TcpStream::connect(svc.addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: vclos\r\n\r\n")
        .await
        .unwrap();
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(svc.addr).await.unwrap());
    }
    let started = Instant::now();
    let mut buf = [0u8; 512];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    assert!(
        closed_within(&mut kept, Duration::from_secs(4)).await,
        "an idle keep-alive connection stayed open past twice the header timeout"
    );
    for s in &mut idle {
        let left = Duration::from_secs(4).saturating_sub(started.elapsed());
        assert!(
            closed_within(s, left + Duration::from_millis(500)).await,
            "a connection that sent nothing stayed open past twice the header timeout"
        );
    }
    // Their slots are free again although the client never closed them.
    let r = healthz_within(svc.addr, Duration::from_secs(10)).await;
    assert_eq!(r.status, 200);
    drop(idle);
    svc.stop().await;
}

/// Defect 1, what the header timeout must not cut: an event stream that
/// stays open (its request was read; the answer goes on) and ends when the
/// service stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_outlives_the_header_timeout_and_ends_on_shutdown() {
    let svc = start(limits(1, 30, 64), Duration::from_secs(60)).await;
    let mut s = TcpStream::connect(svc.addr).await.unwrap();
    s.write_all(&request("GET", "/v1/events", Some(&bearer()), None))
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    assert!(
        !closed_within(&mut s, Duration::from_secs(3)).await,
        "an event stream was closed by the header timeout"
    );
    svc.stop().await;
    assert!(closed_within(&mut s, Duration::from_secs(5)).await);
}

/// Defect 1: beyond the connection cap a new connection is closed at once
/// (its descriptor freed), and service resumes when connections go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_closed_at_once() {
    let svc = start(limits(60, 30, 4), Duration::from_secs(60)).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(svc.addr).await.unwrap());
    }
    // The accept loop sees them in order; give it a moment to count them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut extra = TcpStream::connect(svc.addr).await.unwrap();
    assert!(
        closed_within(&mut extra, Duration::from_secs(5)).await,
        "a fifth connection was kept with the cap at four"
    );
    // The held ones are still served.
    let s = &mut held[0];
    s.write_all(&request("GET", "/healthz", None, None))
        .await
        .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    assert_eq!(parse(&buf).status, 200);
    drop(held);
    svc.answers_then_stop().await;
}

/// One client address holds at most `max_per_client` connections: beyond
/// it a new one from that address is closed at once, while another
/// address (127.0.0.2, loopback too) is still served, and the first gets a
/// connection again once one of its own ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_every_connection() {
    let bounds = Limits {
        max_per_client: 2,
        ..limits(60, 30, 64)
    };
    let svc = start(bounds, Duration::from_secs(60)).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(svc.addr).await.unwrap());
    }
    // The accept loop sees them in order; give it a moment to count them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut extra = TcpStream::connect(svc.addr).await.unwrap();
    assert!(
        closed_within(&mut extra, Duration::from_secs(5)).await,
        "a third connection from one address was kept with the cap at two"
    );
    let healthz = |mut s: TcpStream| async move {
        s.write_all(&request("GET", "/healthz", None, None))
            .await
            .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        parse(&buf).status
    };
    let other = tokio::net::TcpSocket::new_v4().unwrap();
    other.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let other = other.connect(svc.addr).await.unwrap();
    assert_eq!(healthz(other).await, 200, "another client was refused");
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = TcpStream::connect(svc.addr).await.unwrap();
    assert_eq!(healthz(again).await, 200, "the slot was not given back");
    drop(held);
    svc.answers_then_stop().await;
}

/// A client that stops reading is cut off once a write has waited the
/// write timeout: it pipelines many requests and reads nothing, so the
/// answers fill its receive window and the service's send buffer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off_after_the_write_timeout() {
    let write_timeout = Duration::from_secs(2);
    let bounds = Limits {
        write_timeout,
        ..limits(120, 30, 64)
    };
    let svc = start(bounds, Duration::from_secs(60)).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let s = socket.connect(svc.addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    // Keep-alive requests (8.7 KB answers): 17 MB asked for in all.
    const ASKED: usize = 2000;
    let one = b"GET /openapi.json HTTP/1.1\r\nHost: vclos\r\n\r\n";
    let writer = tokio::spawn(async move {
        for _ in 0..ASKED {
            if wr.write_all(one).await.is_err() {
                break;
            }
        }
        wr
    });
    // Nothing read for longer than the write timeout.
    tokio::time::sleep(write_timeout * 3).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), rd.read_to_end(&mut got)).await;
    assert!(
        read.is_ok(),
        "the connection was still open 30 s after reading started (header timeout 120 s)"
    );
    let answered = got.windows(15).filter(|w| w == b"HTTP/1.1 200 OK").count();
    assert!(
        answered < ASKED,
        "every answer was delivered: nothing was cut off"
    );
    writer.abort();
    svc.answers_then_stop().await;
}

/// Defect 1: a body that never ends is answered 408 (problem+json) within
/// the body timeout, whether chunked or short of its Content-Length; one
/// sent to an endpoint that reads no body ends its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_ends_is_answered_408_within_the_body_timeout() {
    let svc = start(limits(60, 2, 64), Duration::from_secs(60)).await;
    let chunked = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: vclos\r\nAuthorization: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{{\"id\": \r\n",
        bearer()
    );
    let short = format!(
        "POST /v1/plan HTTP/1.1\r\nHost: vclos\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"submit\": ",
        bearer()
    );
    for raw in [chunked, short] {
        let started = Instant::now();
        let r = exchange_within(svc.addr, raw.as_bytes(), Duration::from_secs(4)).await;
        assert_eq!(r.status, 408, "{r:?}");
        assert!(started.elapsed() >= Duration::from_secs(1));
        let v = r.problem();
        assert!(v["detail"].as_str().unwrap().contains("body"), "{v}");
    }
    // An endpoint that reads no body answers and then closes the connection
    // rather than wait for the rest.
    let raw = "GET /healthz HTTP/1.1\r\nHost: vclos\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
    let r = exchange_within(svc.addr, raw.as_bytes(), Duration::from_secs(4)).await;
    assert_eq!(r.status, 200);
    svc.stop().await;
}

/// Defect 2: a JSON body must be the whole body: trailing data is a 400
/// naming it (trailing whitespace is fine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailing_data_after_the_json_body_is_refused() {
    let svc = start(Limits::default(), Duration::from_secs(60)).await;
    let auth = bearer();
    let cases = [
        (
            "/v1/jobs",
            r#"{"id": "a", "gpus": 4, "dry_run": true}{"x": 1}"#,
        ),
        ("/v1/jobs", r#"{"id": "a", "gpus": 4, "dry_run": true} x"#),
        ("/v1/plan", r#"{"submit": {"id": "a", "gpus": 4}}[]"#),
    ];
    for (path, body) in cases {
        let r = exchange(svc.addr, &request("POST", path, Some(&auth), Some(body))).await;
        assert_eq!(r.status, 400, "{path} {body}: {r:?}");
        let v = r.problem();
        assert!(
            v["detail"].as_str().unwrap().contains("trailing"),
            "{path} {body}: {v}"
        );
    }
    let ok = r#"{"id": "a", "gpus": 4, "dry_run": true}  
"#;
    let r = exchange(
        svc.addr,
        &request("POST", "/v1/jobs", Some(&auth), Some(ok)),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    svc.stop().await;
}

/// Defect 3: errors axum makes before a handler runs (a body over the
/// limit, a method an endpoint does not take, a path that is not UTF-8)
/// are problem+json too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_before_a_handler_are_problem_json() {
    let svc = start(Limits::default(), Duration::from_secs(60)).await;
    let auth = bearer();
    let big = format!(
        r#"{{"id": "a", "gpus": 4, "pad": "{}"}}"#,
        "x".repeat(17 * 1024)
    );
    let r = exchange(
        svc.addr,
        &request("POST", "/v1/jobs", Some(&auth), Some(&big)),
    )
    .await;
    assert_eq!(r.status, 413, "{r:?}");
    assert!(r.problem()["detail"].as_str().unwrap().contains("16384"));
    let r = exchange(
        svc.addr,
        &request("PUT", "/v1/jobs", Some(&auth), Some("{}")),
    )
    .await;
    assert_eq!(r.status, 405, "{r:?}");
    r.problem();
    let allow = r.header("allow").unwrap();
    assert!(allow.contains("GET") || allow.contains("get"), "{allow}");
    let r = exchange(svc.addr, &request("DELETE", "/healthz", None, None)).await;
    assert_eq!(r.status, 405, "{r:?}");
    r.problem();
    let r = exchange(svc.addr, &request("GET", "/v1/jobs/%FF", Some(&auth), None)).await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.problem()["field"], "id");
    let r = exchange(svc.addr, &request("GET", "/nowhere", None, None)).await;
    assert_eq!(r.status, 404, "{r:?}");
    r.problem();
    // What hyper refuses before any route (docs/service.md): a head over
    // the bound is 431, with an empty body.
    let long = format!(
        "GET /healthz HTTP/1.1\r\nHost: vclos\r\nX-Pad: {}\r\n\r\n",
        "x".repeat(2 * server::MAX_HEAD)
    );
    let r = exchange(svc.addr, long.as_bytes()).await;
    assert_eq!(r.status, 431, "{r:?}");
    assert!(r.body.is_empty());
    let r = exchange(svc.addr, b"GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n").await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.is_empty());
    svc.stop().await;
}

/// Defect 4: the scheme of `Authorization` is case-insensitive (RFC 9110
/// Section 11.1); the token is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive() {
    let svc = start(Limits::default(), Duration::from_secs(60)).await;
    for auth in [
        format!("Bearer {TOKEN}"),
        format!("bearer {TOKEN}"),
        format!("BEARER {TOKEN}"),
        format!("bEaReR  {TOKEN}"),
    ] {
        let r = exchange(svc.addr, &request("GET", "/v1/jobs", Some(&auth), None)).await;
        assert_eq!(r.status, 200, "{auth}: {r:?}");
    }
    for auth in [
        format!("Bearer {}", TOKEN.to_uppercase()),
        format!("Basic {TOKEN}"),
        format!("Bearer{TOKEN}"),
        format!("Bearertoken {TOKEN}"),
        "Bearer".to_string(),
    ] {
        let r = exchange(svc.addr, &request("GET", "/v1/jobs", Some(&auth), None)).await;
        assert_eq!(r.status, 401, "{auth}: {r:?}");
        r.problem();
        assert_eq!(r.header("www-authenticate"), Some("bearer"));
    }
    svc.stop().await;
}

/// Defect 5: a read that talks to a device that never answers is answered
/// 503 (problem+json, Retry-After) after the request timeout, not after the
/// fabric's 30 s read timeout per caller in line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_black_holed_devices_are_bounded_by_the_request_timeout() {
    let svc = start(Limits::default(), Duration::from_secs(1)).await;
    let auth = bearer();
    let started = Instant::now();
    let calls = (0..3).map(|_| {
        let raw = request("GET", "/v1/status", Some(&auth), None);
        let addr = svc.addr;
        tokio::spawn(async move { exchange_within(addr, &raw, Duration::from_secs(10)).await })
    });
    for call in calls.collect::<Vec<_>>() {
        let r = call.await.unwrap();
        assert_eq!(r.status, 503, "{r:?}");
        assert_eq!(r.header("retry-after"), Some("1"));
        let v = r.problem();
        assert!(
            v["detail"].as_str().unwrap().contains("request timeout"),
            "{v}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(svc.opened.load(Ordering::SeqCst) > 0, "no device was read");
    svc.stop().await;
}

/// Defect 5: while `GET /v1/status` waits on a device, the reads that need
/// no device (jobs, one job, a plan) answer at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_without_device_io_do_not_wait_for_a_status_reading_devices() {
    let svc = start(Limits::default(), Duration::from_secs(60)).await;
    let auth = bearer();
    let raw = request("GET", "/v1/status", Some(&auth), None);
    let status = stuck_on_a_device(&svc, raw, "status read no device").await;
    let within = Duration::from_secs(5);
    let r = exchange_within(
        svc.addr,
        &request("GET", "/v1/jobs", Some(&auth), None),
        within,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"[]");
    let r = exchange_within(
        svc.addr,
        &request("GET", "/v1/jobs/j1", Some(&auth), None),
        within,
    )
    .await;
    assert_eq!(r.status, 404);
    let plan = r#"{"submit": {"id": "j1", "gpus": 4}}"#;
    let r = exchange_within(
        svc.addr,
        &request("POST", "/v1/plan", Some(&auth), Some(plan)),
        within,
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let r = exchange_within(svc.addr, &request("GET", "/readyz", None, None), within).await;
    assert_eq!(r.status, 200);
    status.abort();
    // Not stopped gracefully: that would wait for the status call, which
    // reads the black holes until the fabric's 30 s read timeout.
    drop(svc);
}

/// Defect 5: listing the jobs, or reading one, does not wait for a change
/// stuck on a device either: they answer as of the last change (the stuck
/// one has not been answered, so the reads are ordered before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_jobs_does_not_wait_for_a_change_stuck_on_a_device() {
    let svc = start(Limits::default(), Duration::from_secs(60)).await;
    let auth = bearer();
    // Over both leaves: every device is configured.
    let raw = request(
        "POST",
        "/v1/jobs",
        Some(&auth),
        Some(r#"{"id": "j1", "gpus": 24}"#),
    );
    let submit = stuck_on_a_device(&svc, raw, "the change reached no device").await;
    let within = Duration::from_secs(5);
    for _ in 0..3 {
        let r = exchange_within(
            svc.addr,
            &request("GET", "/v1/jobs", Some(&auth), None),
            within,
        )
        .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body, b"[]");
        // Nor does reading one job: not held yet (its answer is not sent).
        let r = exchange_within(
            svc.addr,
            &request("GET", "/v1/jobs/j1", Some(&auth), None),
            within,
        )
        .await;
        assert_eq!(r.status, 404, "{r:?}");
    }
    submit.abort();
    // Not stopped gracefully: the change waits on the black holes.
    drop(svc);
}

/// Defect 5: status calls read the devices side by side, not one after
/// another (four calls behind a black hole took 30/60/90/120 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_calls_read_the_devices_side_by_side() {
    let read = Duration::from_secs(3);
    let svc = start_reading(Limits::default(), Duration::from_secs(60), read).await;
    let auth = bearer();
    let started = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let raw = request("GET", "/v1/status", Some(&auth), None);
            let addr = svc.addr;
            tokio::spawn(async move { exchange_within(addr, &raw, Duration::from_secs(30)).await })
        })
        .collect();
    for call in calls {
        let r = call.await.unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let devices = v["devices"].as_array().unwrap();
        assert!(!devices.is_empty());
        for d in devices {
            assert!(d["error"].as_str().unwrap().contains("timed out"), "{d}");
        }
    }
    // One after another: 12 s.
    assert!(
        started.elapsed() < read * 3,
        "four status calls took {:?} with a {read:?} read timeout",
        started.elapsed()
    );
    svc.stop().await;
}
