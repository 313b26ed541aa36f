#![allow(clippy::unwrap_used)]
//! The client against a canned HTTP/1.1 server on loopback (one thread,
//! one connection per answer): retries, bounds, problems, the token.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use super::*;

/// Serve `answers` in order, one per connection; record each request's
/// head and body.
fn canned(answers: Vec<String>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for answer in answers {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                head.push_str(&line);
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            head.push_str(&String::from_utf8_lossy(&body));
            seen2.lock().unwrap().push(head);
            let mut stream = stream;
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (url, seen)
}

fn answer(status: &str, headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    )
}

fn client(url: &str, token: Option<&str>) -> Client {
    let options = Options {
        max_retry_wait: Duration::from_millis(20),
        ..Options::default()
    };
    Client::new(url, token.map(|t| Token::new(t).unwrap()), None, options).unwrap()
}

fn job(id: &str) -> JobId {
    JobId::new(id).unwrap()
}

#[test]
fn busy_answers_are_retried_a_bounded_number_of_times() {
    let busy = answer(
        "503 Service Unavailable",
        "Retry-After: 1\r\nContent-Type: application/problem+json\r\n",
        r#"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"busy"}"#,
    );
    // Twice busy, then the list: three requests, one answer.
    let (url, seen) = canned(vec![busy.clone(), busy.clone(), answer("200 OK", "", "[]")]);
    let c = client(&url, Some("secret-token-123456"));
    assert!(c.list().unwrap().is_empty());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen[0].starts_with("GET /v1/jobs HTTP/1.1"), "{}", seen[0]);
    assert!(
        seen[0].contains("authorization: Bearer secret-token-123456")
            || seen[0].contains("Authorization: Bearer secret-token-123456"),
        "{}",
        seen[0]
    );
    drop(seen);
    // Always busy: given up after `tries`, with the last problem.
    let (url, seen) = canned(vec![busy; 6]);
    let e = client(&url, None).list().unwrap_err();
    assert_eq!(e.status(), Some(503), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 5);
}

#[test]
fn a_503_without_retry_after_is_not_retried() {
    let pending = answer(
        "503 Service Unavailable",
        "",
        r#"{"title":"Service Unavailable","status":503,"detail":"a journal is pending"}"#,
    );
    let (url, seen) = canned(vec![pending, answer("200 OK", "", "[]")]);
    let e = client(&url, None).list().unwrap_err();
    assert!(e.to_string().contains("a journal is pending"), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn problems_are_typed_with_field_and_suggested_servers() {
    let body = r#"{"type":"about:blank","title":"Conflict","status":409,
        "detail":"srv3 is busy\u001b[31m","field":"servers","suggested_servers":["srv5","srv6"]}"#;
    let (url, seen) = canned(vec![answer("409 Conflict", "", body)]);
    let servers = Named::Servers(vec!["srv3".to_string(), "srv4".to_string()]);
    let e = client(&url, None)
        .submit(&job("slurm-1"), None, Some(&servers), false)
        .unwrap_err();
    let p = e.problem().unwrap();
    assert_eq!((p.status, p.title.as_str()), (409, "Conflict"));
    assert_eq!(p.field.as_deref(), Some("servers"));
    assert_eq!(p.suggested_servers, ["srv5", "srv6"]);
    // Control characters from the server never reach a log.
    assert!(!p.detail.contains('\u{1b}'), "{:?}", p.detail);
    let text = e.to_string();
    assert!(
        text.contains("POST http://")
            && text.contains("409 Conflict: srv3 is busy")
            && text.contains("(field `servers`)")
            && text.contains("suggested servers: srv5,srv6"),
        "{text}"
    );
    // The body sent: servers, no gpus, no dry_run.
    let req = seen.lock().unwrap()[0].clone();
    assert!(
        req.ends_with(r#"{"id":"slurm-1","servers":["srv3","srv4"]}"#),
        "{req}"
    );
}

#[test]
fn a_non_problem_error_body_still_gives_the_status() {
    let (url, _) = canned(vec![answer(
        "502 Bad Gateway",
        "Content-Type: text/html\r\n",
        "<html>proxy error</html>",
    )]);
    let e = client(&url, None).status().unwrap_err();
    let p = e.problem().unwrap();
    assert_eq!(p.status, 502);
    assert!(p.detail.contains("<html>proxy error"), "{p:?}");
}

#[test]
fn answers_of_the_wrong_shape_are_bad_responses() {
    let (url, _) = canned(vec![
        answer("200 OK", "", "not json"),
        answer("200 OK", "", r#"{"unexpected": 1}"#),
        answer("201 Created", "", r#"{"job": "a"}"#),
    ]);
    let c = client(&url, None);
    let e = c.list().unwrap_err();
    assert!(
        matches!(e, ClientError::BadResponse { status: 200, .. }),
        "{e}"
    );
    let e = c.list().unwrap_err();
    assert!(e.to_string().contains("bad response"), "{e}");
    let e = c.submit(&job("a"), Some(4), None, false).unwrap_err();
    assert!(
        matches!(e, ClientError::BadResponse { status: 201, .. }),
        "{e}"
    );
}

#[test]
fn the_body_read_is_bounded() {
    let big = format!("[{}]", vec!["1"; 5000].join(","));
    let (url, _) = canned(vec![answer("200 OK", "", &big)]);
    let options = Options {
        max_body: 1000,
        ..Options::default()
    };
    let c = Client::new(&url, None, None, options).unwrap();
    let e = c.list().unwrap_err();
    assert!(e.to_string().contains("over the 1000-byte limit"), "{e}");
}

#[test]
fn transport_errors_name_the_url() {
    // A port nobody listens on (bound, then closed).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let e = client(&url, Some("secret-token-123456"))
        .list()
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ClientError::Transport { .. }), "{text}");
    assert!(text.contains(&format!("GET {url}/v1/jobs")), "{text}");
    assert!(!text.contains("secret-token"), "{text}");
}

#[test]
fn urls_tokens_and_ca_files_are_checked() {
    for (url, want) in [
        ("ftp://x", "http:// or https://"),
        ("localhost:8088", "http:// or https://"),
        ("http://", "no host"),
        ("http://user:pw@host", "credentials"),
        ("http://host/?a=1", "no query"),
        ("http://ho st", "no query"),
    ] {
        let e = Client::new(url, None, None, Options::default()).unwrap_err();
        assert!(e.to_string().contains(want), "{url}: {e}");
    }
    let c = Client::new("https://h:1/prefix/", None, None, Options::default()).unwrap();
    assert_eq!(c.base(), "https://h:1/prefix");
    // Tokens: trimmed, never shown.
    let t = Token::new("  tok-0123456789abcdef\n").unwrap();
    assert_eq!(t.0, "tok-0123456789abcdef");
    assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    assert!(Token::new(" \n").is_err());
    assert!(Token::new("two words").is_err());
    let dir = tempfile::tempdir().unwrap();
    let e = Token::from_file(&dir.path().join("none")).unwrap_err();
    assert!(
        e.to_string().contains("token file") && e.to_string().contains("none"),
        "{e}"
    );
    let p = dir.path().join("tok");
    std::fs::write(&p, "x".repeat(5000)).unwrap();
    let e = Token::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("limit") && !e.contains("xxxx"), "{e}");
    // A CA file without a certificate.
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "hello").unwrap();
    let e = Client::from_files("https://h", None, Some(&ca), Options::default()).unwrap_err();
    assert!(e.to_string().contains("no PEM certificate"), "{e}");
}

#[test]
fn ids_reach_the_path_only_validated() {
    // A JobId cannot hold `/`, `.` or `?`: no path can be smuggled in.
    assert!(JobId::new("../status").is_err());
    assert!(JobId::new("a?b").is_err());
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

#[test]
fn a_write_goes_to_the_leader_a_follower_names_and_skips_a_dead_instance() {
    let (leader, leader_seen) = canned(vec![answer(
        "200 OK",
        "Content-Type: application/json\r\n",
        "[]",
    )]);
    let follower_says = format!(
        r#"{{"title":"Service Unavailable","status":503,"detail":"this instance is a follower: send writes to the leader, {leader}","leader":"{leader}"}}"#
    );
    let (follower, follower_seen) = canned(vec![answer(
        "503 Service Unavailable",
        "Retry-After: 1\r\nContent-Type: application/problem+json\r\n",
        &follower_says,
    )]);
    // The first instance is down: nothing sent there; the second follows
    // and names the leader, where the request is answered.
    let c = client(&closed_port(), Some("0123456789abcdef-secret"))
        .with_servers(std::slice::from_ref(&follower))
        .unwrap();
    assert_eq!(c.list().unwrap(), Vec::<Decision>::new());
    assert_eq!(follower_seen.lock().unwrap().len(), 1);
    let seen = leader_seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].contains("Bearer 0123456789abcdef-secret"),
        "{}",
        seen[0]
    );
}

#[test]
fn without_a_leader_the_client_gives_up_after_the_failover_wait() {
    let no_leader = r#"{"title":"Service Unavailable","status":503,"detail":"this instance is a follower and no leader is elected right now; retry shortly","leader":null}"#;
    let answers = (0..50)
        .map(|_| answer("503 Service Unavailable", "Retry-After: 1\r\n", no_leader))
        .collect();
    let (follower, seen) = canned(answers);
    let options = Options {
        max_retry_wait: Duration::from_millis(20),
        failover_wait: Duration::from_millis(300),
        ..Options::default()
    };
    let c = Client::new(&follower, None, None, options).unwrap();
    let e = c.list().unwrap_err();
    assert_eq!(e.status(), Some(503), "{e}");
    let asked = seen.lock().unwrap().len();
    assert!((2..50).contains(&asked), "asked {asked} times");
    // A single instance that is down is a transport error (nothing to
    // fail over to).
    let e = client(&closed_port(), None).list().unwrap_err();
    assert!(matches!(e, ClientError::Transport { .. }), "{e}");
}
