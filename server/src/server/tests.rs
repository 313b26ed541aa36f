#![allow(clippy::unwrap_used)]

use super::problem::parse_body;
use super::*;

#[test]
fn tokens_are_checked_and_never_shown() {
    assert!(Token::from_file_text("short").is_err());
    assert!(Token::from_file_text("has a space in the middle!").is_err());
    let t = Token::from_file_text("  0123456789abcdef-secret\n").unwrap();
    assert!(t.matches("0123456789abcdef-secret"));
    assert!(!t.matches("0123456789abcdef-secreT"));
    assert!(!t.matches("0123456789abcdef-secret "));
    assert!(!t.matches(""));
    assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    let c = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: Some(t),
        request_timeout: Duration::from_secs(1),
        max_waiting: 1,
        tls: None,
        elect: None,
    };
    assert!(!format!("{c:?}").contains("secret"));
}

#[test]
fn bad_bodies_name_the_field() {
    let field = |body: &str| {
        let p = parse_body::<SubmitBody>(body.as_bytes()).unwrap_err();
        assert_eq!(p.status(), StatusCode::BAD_REQUEST);
        let r = p.into_response();
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        p_field(body)
    };
    assert_eq!(
        field(r#"{"id": "a", "gpus": "8"}"#).as_deref(),
        Some("gpus")
    );
    assert_eq!(
        field(r#"{"id": "a", "gpus": 8, "colour": []}"#).as_deref(),
        Some("colour")
    );
    assert_eq!(
        field(r#"{"id": "a", "servers": ["s1", 2]}"#).as_deref(),
        Some("servers[1]")
    );
    assert_eq!(field(r#"{"gpus": 8}"#), None);
    assert_eq!(field(r#"{"id": 5, "gpus": 8}"#).as_deref(), Some("id"));
    let ok: SubmitBody = parse_body(br#"{"id": "a", "gpus": 8}"#).unwrap();
    assert_eq!((ok.id.as_str(), ok.gpus, ok.dry_run), ("a", Some(8), false));
    // `gpus` may be left out only when `servers` says where.
    let bare: SubmitBody = parse_body(br#"{"id": "a"}"#).unwrap();
    let p = bare.named().unwrap_err();
    assert_eq!(p.status(), StatusCode::BAD_REQUEST);
    let on: SubmitBody = parse_body(br#"{"id": "a", "servers": ["s1"]}"#).unwrap();
    assert!(matches!(on.named(), Ok(Some(Named::Servers(_)))));
    let on: SubmitBody = parse_body(br#"{"id": "a", "gpus_on": {"s1": [0, 3]}}"#).unwrap();
    assert!(matches!(on.named(), Ok(Some(Named::Gpus(g))) if g["s1"] == [0, 3]));
    let both: SubmitBody =
        parse_body(br#"{"id": "a", "servers": ["s1"], "gpus_on": {"s1": [0]}}"#).unwrap();
    let v = body_json(both.named().unwrap_err().into_response());
    assert_eq!(
        (v["status"].as_u64(), v["field"].as_str()),
        (Some(400), Some("gpus_on"))
    );
}

/// The `field` member of the problem a body gives.
fn p_field(body: &str) -> Option<String> {
    let p = parse_body::<SubmitBody>(body.as_bytes()).unwrap_err();
    let r = p.into_response();
    let bytes = futures_body(r);
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["status"], 400);
    assert_eq!(v["type"], "about:blank");
    v["field"].as_str().map(str::to_string)
}

fn body_json(r: Response) -> serde_json::Value {
    serde_json::from_slice(&futures_body(r)).unwrap()
}

fn futures_body(r: Response) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        axum::body::to_bytes(r.into_body(), MAX_BODY)
            .await
            .unwrap()
            .to_vec()
    })
}

#[test]
fn lifecycle_errors_map_to_statuses_a_scheduler_can_act_on() {
    let blocked = JobsError::Blocked {
        job: JobId::new("a").unwrap(),
        why: "no slice is free",
    };
    assert_eq!(jobs_problem(&blocked).status(), StatusCode::CONFLICT);
    let refused = JobsError::NotOnServers {
        job: JobId::new("a").unwrap(),
        why: "uneven".into(),
        suggested: vec!["s1".into(), "s2".into()],
    };
    let v = body_json(jobs_problem(&refused).into_response());
    assert_eq!(
        (v["status"].as_u64(), v["field"].as_str()),
        (Some(409), Some("servers"))
    );
    assert_eq!(v["suggested_servers"], serde_json::json!(["s1", "s2"]));
    let unknown = JobsError::Placement(crate::placement::PlacementError::Given {
        job: JobId::new("a").unwrap(),
        field: Some("servers[3]".into()),
        reason: "`x` is not a server of this topology".into(),
    });
    let v = body_json(jobs_problem(&unknown).into_response());
    assert_eq!(
        (v["status"].as_u64(), v["field"].as_str()),
        (Some(422), Some("servers[3]"))
    );
    assert!(v["detail"].as_str().unwrap().contains("servers[3]: `x`"));
    let stale = JobsError::Stale("x".into());
    assert_eq!(
        jobs_problem(&stale).status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[test]
fn a_body_is_one_json_value_and_nothing_after_it() {
    let p = parse_body::<SubmitBody>(br#"{"id": "a", "gpus": 4}{"x": 1}"#).unwrap_err();
    assert_eq!(p.status(), StatusCode::BAD_REQUEST);
    let v = body_json(p.into_response());
    let detail = v["detail"].as_str().unwrap();
    assert!(detail.contains("trailing characters"), "{detail}");
    assert!(parse_body::<SubmitBody>(br#"{"id": "a", "gpus": 4} ,"#).is_err());
    // Whitespace around the value is not data.
    let ok: SubmitBody = parse_body(b" {\"id\": \"a\", \"gpus\": 4} \r\n\t").unwrap();
    assert_eq!(ok.gpus, Some(4));
}

#[test]
fn the_bearer_scheme_is_matched_in_any_case() {
    assert_eq!(bearer_token("Bearer abc"), Some("abc"));
    assert_eq!(bearer_token("bearer abc"), Some("abc"));
    assert_eq!(bearer_token("BEARER  abc"), Some("abc"));
    assert_eq!(bearer_token("Bearer"), None);
    assert_eq!(bearer_token("Bearerabc"), None);
    assert_eq!(bearer_token("Basic abc"), None);
    assert_eq!(bearer_token("Bearer\tabc"), None);
}
