#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

fn problems(text: &str) -> Vec<RowProblem> {
    match parse("t.csv", text.as_bytes()) {
        Err(TraceError::Invalid { problems, .. }) => problems,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn parses_and_sorts_stably_by_arrival() {
    let text = "# comment\njob_id,arrival_s,gpus,duration_s\n\
                b,5,8,10\na,1.5,1,2\nc,5,16,3.25\r\n\n";
    let jobs = parse("t.csv", text.as_bytes()).unwrap();
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(jobs[2].gpus, 16);
    assert_eq!(jobs[2].duration_s, 3.25);
    assert_eq!(jobs[0].deadline_s, None);
}

#[test]
fn deadline_column_is_optional_per_row() {
    let text = "job_id,arrival_s,gpus,duration_s,deadline_s\nj1,0,1,10,30\nj2,1,2,10,\n";
    let jobs = parse("t.csv", text.as_bytes()).unwrap();
    assert_eq!(jobs[0].deadline_s, Some(30.0));
    assert_eq!(jobs[1].deadline_s, None);
}

#[test]
fn every_bad_row_is_reported_with_its_line() {
    let text = "job_id,arrival_s,gpus,duration_s\n\
                ok1,0,1,1\n\
                bad1,x,1,1\n\
                bad2,-3,1,1\n\
                bad3,0,0,1\n\
                bad;rm,0,1,1\n\
                ok1,4,1,1\n\
                bad5,0,1,NaN\n\
                bad6,0,1\n\
                bad7,0,1,0\n";
    let p = problems(text);
    let lines: Vec<usize> = p.iter().map(|p| p.line).collect();
    assert_eq!(lines, [3, 4, 5, 6, 7, 8, 9, 10]);
    assert!(p[0].message.contains("arrival_s `x`"), "{}", p[0].message);
    assert!(p[1].message.contains("negative"), "{}", p[1].message);
    assert!(p[2].message.contains("at least 1"), "{}", p[2].message);
    assert!(p[3].message.contains("job id"), "{}", p[3].message);
    assert!(p[4]
        .message
        .contains("duplicate job id `ok1` (first on line 2)"));
    assert!(p[5].message.contains("duration_s"), "{}", p[5].message);
    assert!(
        p[6].message.contains("expected 4 fields"),
        "{}",
        p[6].message
    );
    assert!(p[7].message.contains("greater than 0"), "{}", p[7].message);
}

#[test]
fn error_display_names_file_and_line() {
    let e = parse("jobs.csv", b"job_id,arrival_s,gpus,duration_s\nj,1,two,3\n").unwrap_err();
    let shown = e.to_string();
    assert!(shown.contains("jobs.csv:2: gpus `two`"), "{shown}");
}

#[test]
fn header_is_checked() {
    let p = problems("id,arrival,gpus,duration\nj,1,1,1\n");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].line, 1);
    assert!(p[0].message.contains("expected header"));
    let p = problems("# only a comment\n\n");
    assert!(p[0].message.contains("missing header"));
}

#[test]
fn deadline_before_arrival_is_rejected() {
    let p = problems("job_id,arrival_s,gpus,duration_s,deadline_s\nj,10,1,1,5\n");
    assert_eq!(p[0].line, 2);
    assert!(p[0].message.contains("before arrival"));
}

#[test]
fn non_utf8_is_a_row_error() {
    let mut bytes = b"job_id,arrival_s,gpus,duration_s\n".to_vec();
    bytes.extend_from_slice(b"j\xff,1,1,1\n");
    match parse("t.csv", &bytes) {
        Err(TraceError::Invalid { problems, .. }) => {
            assert_eq!(problems[0].line, 2);
            assert!(problems[0].message.contains("UTF-8"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_error_lists_are_truncated() {
    let mut text = String::from("job_id,arrival_s,gpus,duration_s\n");
    for i in 0..30 {
        text.push_str(&format!("j{i},1,0,1\n"));
    }
    let shown = parse("t.csv", text.as_bytes()).unwrap_err().to_string();
    assert!(shown.contains("30 problems"));
    assert!(shown.contains("and 10 more"));
}

#[test]
fn write_then_parse_round_trips() {
    let jobs = vec![
        Job {
            id: JobId::new("a").unwrap(),
            arrival_s: 0.5,
            gpus: 24,
            duration_s: 100.25,
            deadline_s: Some(400.0),
        },
        Job {
            id: JobId::new("b").unwrap(),
            arrival_s: 2.0,
            gpus: 1,
            duration_s: 3.0,
            deadline_s: None,
        },
    ];
    let mut out = Vec::new();
    write_csv(&mut out, &jobs).unwrap();
    assert_eq!(parse("t.csv", &out).unwrap(), jobs);
}

proptest! {
    #[test]
    fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse("fuzz.csv", &bytes);
    }

    #[test]
    fn never_panics_on_csv_like_text(
        rows in proptest::collection::vec("[a-z0-9,.\\-eE+ ]{0,30}", 0..20),
        five in any::<bool>(),
    ) {
        let mut text = String::from("job_id,arrival_s,gpus,duration_s");
        if five { text.push_str(",deadline_s"); }
        text.push('\n');
        for r in rows { text.push_str(&r); text.push('\n'); }
        if let Ok(jobs) = parse("fuzz.csv", text.as_bytes()) {
            for j in &jobs {
                prop_assert!(j.gpus >= 1);
                prop_assert!(j.arrival_s >= 0.0 && j.duration_s > 0.0);
            }
            prop_assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        }
    }
}
