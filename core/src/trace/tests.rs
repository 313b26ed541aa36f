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
fn a_byte_order_mark_before_the_header_is_ignored() {
    let text = "\u{feff}job_id,arrival_s,gpus,duration_s\nj1,0,1,10\n";
    let jobs = parse("t.csv", text.as_bytes()).unwrap();
    assert_eq!(jobs[0].id.as_str(), "j1");
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
fn error_display_names_file_line_and_column() {
    let e = parse("jobs.csv", b"job_id,arrival_s,gpus,duration_s\nj,1,two,3\n").unwrap_err();
    let shown = e.to_string();
    assert!(shown.contains("jobs.csv:2:5: gpus `two`"), "{shown}");
    // A row-level problem has no column.
    let e = parse("jobs.csv", b"job_id,arrival_s,gpus,duration_s\nj,1,2\n").unwrap_err();
    assert!(
        e.to_string().contains("jobs.csv:2: expected 4 fields"),
        "{e}"
    );
}

/// The reproductions of issue 12: `1e308` made `NaN%` utilisation and wrong
/// averages; every time column is now bounded, and the problem names the
/// line and the column (in characters, blanks skipped) of the field.
#[test]
fn huge_infinite_and_nan_times_are_refused_at_their_column() {
    let text = "job_id,arrival_s,gpus,duration_s,deadline_s\n\
                a,0,8,1e308,\n\
                b,1e308,8,10,\n\
                c,  inf,1,1,\n\
                d,5,1,NaN,\n\
                e,0,1,1,6.4e8\n\
                f,0,1,315360000.001,\n\
                g,-0.5,1,1,\n";
    let expected = [
        (2, 7, "duration_s 1e308 is more than 315360000 s (10 years)"),
        (3, 3, "arrival_s 1e308 is more than"),
        (4, 5, "arrival_s `inf` is not a finite number"),
        (5, 7, "duration_s `NaN` is not a finite number"),
        (6, 9, "deadline_s 6.4e8 is more than 630720000 s (20 years)"),
        (7, 7, "duration_s 315360000.001 is more than"),
        (8, 3, "arrival_s -0.5 is negative"),
    ];
    let p = problems(text);
    assert_eq!(p.len(), expected.len(), "{p:?}");
    for (p, (line, column, message)) in p.iter().zip(expected) {
        assert_eq!((p.line, p.column), (line, Some(column)), "{p:?}");
        assert!(p.message.contains(message), "{p:?}");
    }
}

#[test]
fn the_limits_themselves_are_accepted() {
    let text = format!(
        "job_id,arrival_s,gpus,duration_s,deadline_s\na,{m},{g},{m},{d}\nb,0,1,0.001,0\n",
        m = MAX_SECONDS,
        g = u32::MAX,
        d = MAX_DEADLINE_S
    );
    let jobs = parse("t.csv", text.as_bytes()).unwrap();
    assert_eq!(jobs[1].arrival_s, MAX_SECONDS);
    assert_eq!(jobs[1].duration_s, MAX_SECONDS);
    assert_eq!(jobs[1].deadline_s, Some(MAX_DEADLINE_S));
    assert_eq!(jobs[0].duration_s, 0.001);
}

/// Each row within its range, but together past `MAX_TOTAL_RUN_S`: the row
/// that crosses it is named, once.
#[test]
fn the_sum_of_run_times_is_bounded() {
    let rows = (MAX_TOTAL_RUN_S / MAX_SECONDS).floor() as usize; // 12_683
    let mut text = String::from("job_id,arrival_s,gpus,duration_s\n");
    for i in 0..rows + 5 {
        text.push_str(&format!("j{i},0,1,{MAX_SECONDS}\n"));
    }
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    // Line 1 is the header: row `rows + 1` is on line `rows + 2`.
    assert_eq!(
        (p[0].line, p[0].column),
        (rows + 2, Some(format!("j{rows}").len() + 6))
    );
    assert!(
        p[0].message
            .contains("more than the trace limit of 4000000000000 s"),
        "{}",
        p[0].message
    );
    // One row fewer is fine.
    let ok: String = text
        .lines()
        .take(rows + 1)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(parse("t.csv", ok.as_bytes()).unwrap().len(), rows);
}

fn small_limits() -> Limits {
    Limits {
        jobs: 3,
        line_bytes: 40,
        file_bytes: 200,
    }
}

#[test]
fn rows_beyond_the_job_limit_are_not_read() {
    let text = "job_id,arrival_s,gpus,duration_s\na,0,1,1\nb,0,1,1\nc,0,1,1\nd,0,1,1\ne,0,1,x\n";
    let e = parse_within("t.csv", text.as_bytes(), small_limits()).unwrap_err();
    let TraceError::Invalid {
        problems, total, ..
    } = e
    else {
        panic!("{e:?}")
    };
    // Stops at the fourth row: the bad fifth one is never looked at.
    assert_eq!(total, 1);
    assert_eq!(problems[0].line, 5);
    assert!(
        problems[0].message.contains("more than 3 jobs"),
        "{}",
        problems[0].message
    );
    let three: String = text.lines().take(4).map(|l| format!("{l}\n")).collect();
    assert_eq!(
        parse_within("t.csv", three.as_bytes(), small_limits())
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn long_lines_are_refused() {
    let long = format!("a,0,1,1{}\n", " ".repeat(40));
    let text = format!("job_id,arrival_s,gpus,duration_s\n{long}b,0,1,1\n");
    let e = parse_within("t.csv", text.as_bytes(), small_limits()).unwrap_err();
    let TraceError::Invalid { problems, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 2);
    assert!(
        problems[0]
            .message
            .contains("line of 47 bytes, longer than the limit of 40"),
        "{}",
        problems[0].message
    );
    // A long line before the header ends the parse at once.
    let text = format!("{long}{long}");
    let e = parse_within("t.csv", text.as_bytes(), small_limits()).unwrap_err();
    assert!(matches!(e, TraceError::Invalid { total: 1, .. }), "{e:?}");
}

#[test]
fn files_beyond_the_size_limit_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.csv");
    let mut text = String::from("job_id,arrival_s,gpus,duration_s\n");
    while text.len() <= 200 {
        text.push_str("# padding\n");
    }
    std::fs::write(&path, &text).unwrap();
    let e = load_within(&path, small_limits()).unwrap_err();
    assert!(
        e.to_string().contains("big.csv: more than 200 bytes"),
        "{e}"
    );
    std::fs::write(&path, &text[..200]).unwrap();
    // At the limit: read (a header and comments, no jobs).
    assert!(load_within(&path, small_limits()).unwrap().is_empty());
    // A directory is an I/O error naming it, not an empty trace.
    let e = load(dir.path()).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }), "{e:?}");
}

/// Memory stays bounded however many rows are bad: the first `SHOWN`
/// problems are kept, the rest only counted.
#[test]
fn problems_are_counted_but_only_the_first_kept() {
    let mut text = String::from("job_id,arrival_s,gpus,duration_s\n");
    for i in 0..5000 {
        text.push_str(&format!("j{i},0,0,1\n"));
    }
    let e = parse("t.csv", text.as_bytes()).unwrap_err();
    let TraceError::Invalid {
        problems, total, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!((problems.len(), *total), (SHOWN, 5000));
    assert!(e.to_string().contains("(5000 problems)"));
    assert!(e.to_string().contains("... and 4980 more"));
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
            assert_eq!(problems[0].column, Some(2));
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
            workload: Workload {
                comm_fraction: 0.55,
                collective: Collective::Alltoall,
                model: Some("dlrm large".into()),
                iteration_ms: Some(255),
            },
        },
        Job {
            id: JobId::new("b").unwrap(),
            arrival_s: 2.0,
            gpus: 1,
            duration_s: 3.0,
            deadline_s: None,
            workload: Workload::default(),
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
                prop_assert!(j.arrival_s <= MAX_SECONDS && j.duration_s <= MAX_SECONDS);
            }
            prop_assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        }
    }
}

#[test]
fn workload_columns_in_any_order_with_defaults_for_empty_fields() {
    let text = "job_id,arrival_s,gpus,duration_s,model,collective,comm_fraction\n\
                a,0,16,10,vgg16,hd,0.35\n\
                b,1,8,10,,,\n\
                c,2,64,10,dlrm,alltoall,1\n";
    let jobs = parse("t.csv", text.as_bytes()).unwrap();
    assert_eq!(jobs[0].workload.model.as_deref(), Some("vgg16"));
    assert_eq!(jobs[0].workload.collective, Collective::Hd);
    assert_eq!(jobs[0].workload.comm_fraction, 0.35);
    assert_eq!(jobs[1].workload, Workload::default());
    assert_eq!(jobs[1].deadline_s, None);
    assert_eq!(jobs[2].workload.comm_fraction, 1.0);
    assert_eq!(jobs[2].workload.collective, Collective::Alltoall);
}

#[test]
fn bad_workload_fields_name_line_and_column() {
    let text = "job_id,arrival_s,gpus,duration_s,comm_fraction,collective,model\n\
                a,0,16,10,1.5,ring,x\n\
                b,0,16,10,NaN,ring,x\n\
                c,0,16,10,0.2,tree,x\n\
                d,0,16,10,0.2,ring,x\u{7}y\n";
    let p = problems(text);
    assert_eq!(p.len(), 4, "{p:?}");
    assert_eq!((p[0].line, p[0].column), (2, Some(11)));
    assert!(p[0].message.contains("comm_fraction `1.5`"), "{p:?}");
    assert!(p[1].message.contains("comm_fraction `NaN`"), "{p:?}");
    assert_eq!((p[2].line, p[2].column), (4, Some(15)));
    assert!(p[2].message.contains("ring, hd, alltoall"), "{p:?}");
    assert!(p[3].message.contains("control character"), "{p:?}");
    let long = format!(
        "job_id,arrival_s,gpus,duration_s,model\na,0,1,1,{}\n",
        "m".repeat(workload::MAX_MODEL_CHARS + 1)
    );
    assert!(problems(&long)[0].message.contains("longer than"));
}

#[test]
fn iteration_ms_is_a_whole_number_of_milliseconds_in_range() {
    let text = "job_id,arrival_s,gpus,duration_s,iteration_ms\n\
                a,0,16,10,255\n\
                b,0,16,10,\n";
    let jobs = parse("t.csv", text.as_bytes()).unwrap();
    assert_eq!(jobs[0].workload.iteration_ms, Some(255));
    assert_eq!(jobs[1].workload.iteration_ms, None);
    let text = "job_id,arrival_s,gpus,duration_s,iteration_ms\n\
                a,0,16,10,0\n\
                b,0,16,10,2.5\n\
                c,0,16,10,3600001\n";
    let p = problems(text);
    assert_eq!(p.len(), 3, "{p:?}");
    assert_eq!((p[0].line, p[0].column), (2, Some(11)));
    assert!(
        p.iter().all(|x| x
            .message
            .contains("whole number of milliseconds from 1 to 3600000")),
        "{p:?}"
    );
}

#[test]
fn unknown_or_repeated_columns_are_refused_by_name() {
    let p = problems("job_id,arrival_s,gpus,duration_s,priority\na,0,1,1,3\n");
    assert!(p[0].message.contains("unknown column `priority`"), "{p:?}");
    let p = problems("job_id,arrival_s,gpus,duration_s,model,model\na,0,1,1,x,y\n");
    assert!(p[0].message.contains("`model` appears twice"), "{p:?}");
    let p = problems("job_id,gpus,arrival_s,duration_s\na,1,0,1\n");
    assert!(p[0].message.contains("expected header"), "{p:?}");
}

#[test]
fn generated_traces_carry_the_model_mix() {
    let g = generate::generate(&generate::Params {
        jobs: 4000,
        gpus: 512,
        load: 0.9,
        seed: 5,
        sizes: generate::Sizes::Helios,
    })
    .unwrap();
    for m in workload::MIX {
        let n = g
            .jobs
            .iter()
            .filter(|j| j.workload.model.as_deref() == Some(m.model))
            .count() as f64;
        let share = n / 4000.0;
        assert!((share - m.weight).abs() < 0.03, "{}: {share}", m.model);
    }
    let mut out = Vec::new();
    write_csv(&mut out, &g.jobs).unwrap();
    let head = String::from_utf8_lossy(&out[..120]).to_string();
    assert!(
        head.starts_with(
            "job_id,arrival_s,gpus,duration_s,deadline_s,comm_fraction,collective,model\n"
        ),
        "{head}"
    );
    assert_eq!(parse("g.csv", &out).unwrap(), g.jobs);
}
