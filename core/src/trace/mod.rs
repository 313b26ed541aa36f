//! Job traces: the CSV file format a replay reads, and its parser.
//!
//! A trace is a list of [`Job`]s (id, arrival time, GPU count, run time, an
//! optional deadline and what the job does on the network). The file is a
//! plain CSV whose header starts with four fixed columns and may go on with
//! optional ones, each at most once, in any order:
//!
//! ```text
//! job_id,arrival_s,gpus,duration_s[,deadline_s][,comm_fraction][,collective][,model][,iteration_ms]
//! ```
//!
//! An empty optional field takes the column's default ([`workload`] for the
//! network columns).
//!
//! so that traces can be produced by any tool (a spreadsheet, a script over
//! a real scheduler log) and checked by eye. Lines starting with `#` and
//! blank lines are ignored; `vclos trace generate` writes its parameters in
//! such a comment. The parser never panics on any input: every bad row is
//! reported with the file name and 1-based line number, all at once, so a
//! hand-edited trace can be fixed in one pass. Arrivals need not be sorted;
//! the parser sorts stably by arrival time (ties keep file order).
//!
//! ## Numeric ranges and size limits
//!
//! Every number is checked to be finite and within a range chosen so that a
//! replay's arithmetic stays exact to well under a millisecond (the
//! precision `write_csv` keeps). An IEEE 754 binary64 value has a 53-bit
//! significand (IEEE 754-2019, 3.6), so the spacing of doubles near `2^k`
//! is `2^(k-52)`: below `2^42` s it is at most `2^-10` s (0.98 ms).
//!
//! * `arrival_s` in `[0, MAX_SECONDS]`, `duration_s` in `(0, MAX_SECONDS]`,
//!   where [`MAX_SECONDS`] is 10 years (315,360,000 s < `2^29` s, spacing
//!   `2^-23` s): two orders of magnitude above the longest jobs of the
//!   published GPU-cluster traces (Helios, Philly: days to weeks) and far
//!   beyond any trace window, while `1e308` (an overflow to infinity in the
//!   first sum, `NaN` utilisation) is refused.
//! * `deadline_s` in `[arrival_s, MAX_DEADLINE_S]` (20 years: any arrival
//!   plus any run time).
//! * The sum of all `duration_s` is at most [`MAX_TOTAL_RUN_S`] (4e12 s).
//!   In a replay every event time is at most the last arrival plus the sum
//!   of the run times (after the last arrival some job runs at every
//!   instant until the end, or the replay is over: a head blocked while
//!   nothing runs is dropped), so every time, wait and completion stays
//!   below `MAX_SECONDS + MAX_TOTAL_RUN_S < 2^42` s, where sums and
//!   differences keep sub-millisecond resolution, and `gpus * time` sums
//!   stay far from overflow (`2^32 * 2^42 = 2^74` against `2^1024`).
//! * At most [`MAX_JOBS`] (10^7) jobs, [`MAX_LINE_BYTES`] per line and
//!   [`MAX_FILE_BYTES`] per file, so a hostile or mistaken input (a binary
//!   file, `/dev/zero`) is refused with bounded memory. Only the first
//!   [`SHOWN`] problems are kept; the rest are counted.
//!
//! Problems name the file, the 1-based line and, for a bad field, the
//! 1-based column (in characters) where the field starts, as
//! `FILE:LINE:COLUMN: message` (the GNU Coding Standards' "Formatting Error
//! Messages" form, which editors jump to).

pub mod generate;
pub mod workload;

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use crate::names::JobId;
pub use workload::{Collective, Workload};

/// The mandatory header columns, in order.
pub const HEADER: [&str; 4] = ["job_id", "arrival_s", "gpus", "duration_s"];
/// The optional deadline column.
pub const DEADLINE: &str = "deadline_s";
/// The optional columns, in the order [`write_csv`] writes them.
pub const OPTIONAL: [&str; 5] = [
    DEADLINE,
    "comm_fraction",
    "collective",
    "model",
    "iteration_ms",
];

/// Largest `arrival_s` and `duration_s`: 10 years of 365 days, in seconds.
pub const MAX_SECONDS: f64 = 10.0 * 365.0 * 86_400.0;
/// Largest `deadline_s`: any arrival plus any run time.
pub const MAX_DEADLINE_S: f64 = 2.0 * MAX_SECONDS;
/// Largest sum of `duration_s` over a trace (about 127,000 years); with
/// [`MAX_SECONDS`] every replay time stays below `2^42` s.
pub const MAX_TOTAL_RUN_S: f64 = 4.0e12;
/// Most jobs in one trace (ten times the largest replay measured, 10^6).
pub const MAX_JOBS: usize = 10_000_000;
/// Longest line, in bytes (a valid row is under 100).
pub const MAX_LINE_BYTES: usize = 4096;
/// Largest trace file, in bytes (10^7 rows of generated CSV are ~400 MB).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// One job of a trace. Times are seconds from the trace's origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    pub id: JobId,
    pub arrival_s: f64,
    pub gpus: u32,
    /// Run time once started (no contention model: the job runs for exactly this).
    pub duration_s: f64,
    /// Absolute deadline, used by the EDF queue.
    pub deadline_s: Option<f64>,
    /// What the job does on the network ([`workload`]; defaults when the
    /// trace has no such columns).
    pub workload: Workload,
}

/// One bad row (or header) of a trace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowProblem {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column (in characters) where the bad field starts, when one
    /// field is at fault.
    pub column: Option<usize>,
    pub message: String,
}

/// Why a trace could not be read.
#[derive(Debug, Error)]
pub enum TraceError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: more than {limit} bytes: not read (the limit of a trace file)")]
    TooLarge { file: String, limit: u64 },
    #[error("{}", Problems { file, problems, total: *total })]
    Invalid {
        file: String,
        /// The first [`SHOWN`] problems, in line order.
        problems: Vec<RowProblem>,
        /// How many problems were found in all.
        total: usize,
    },
}

/// How many problems are kept and listed before "and N more".
pub const SHOWN: usize = 20;

struct Problems<'a> {
    file: &'a str,
    problems: &'a [RowProblem],
    total: usize,
}

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.total;
        write!(f, "{}: invalid trace ({n} problem{})", self.file, plural(n))?;
        for p in self.problems.iter().take(SHOWN) {
            match p.column {
                Some(c) => write!(f, "\n  {}:{}:{c}: {}", self.file, p.line, p.message)?,
                None => write!(f, "\n  {}:{}: {}", self.file, p.line, p.message)?,
            }
        }
        if n > SHOWN {
            write!(f, "\n  ... and {} more", n - SHOWN)?;
        }
        Ok(())
    }
}

/// Problems found so far: the first [`SHOWN`] kept, all counted.
#[derive(Default)]
struct Found {
    kept: Vec<RowProblem>,
    total: usize,
}

impl Found {
    fn push(&mut self, line: usize, column: Option<usize>, message: String) {
        self.total += 1;
        if self.kept.len() < SHOWN {
            self.kept.push(RowProblem {
                line,
                column,
                message,
            });
        }
    }

    fn into_error(self, file: &str) -> TraceError {
        TraceError::Invalid {
            file: file.to_string(),
            problems: self.kept,
            total: self.total,
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The size limits of a trace (the constants above; smaller in tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Limits {
    jobs: usize,
    line_bytes: usize,
    file_bytes: u64,
}

const LIMITS: Limits = Limits {
    jobs: MAX_JOBS,
    line_bytes: MAX_LINE_BYTES,
    file_bytes: MAX_FILE_BYTES,
};

/// Read and parse a trace file (at most [`MAX_FILE_BYTES`]).
pub fn load(path: &Path) -> Result<Vec<Job>, TraceError> {
    load_within(path, LIMITS)
}

fn load_within(path: &Path, limits: Limits) -> Result<Vec<Job>, TraceError> {
    let file = path.display().to_string();
    let io = |source| TraceError::Io {
        file: file.clone(),
        source,
    };
    let limit = usize::try_from(limits.file_bytes).unwrap_or(usize::MAX - 1);
    let bytes = crate::yaml::read_capped(path, limit).map_err(io)?;
    if bytes.len() as u64 > limits.file_bytes {
        return Err(TraceError::TooLarge {
            file,
            limit: limits.file_bytes,
        });
    }
    parse_within(&file, &bytes, limits)
}

/// Parse trace bytes; `file` is only used in error messages.
pub fn parse(file: &str, bytes: &[u8]) -> Result<Vec<Job>, TraceError> {
    parse_within(file, bytes, LIMITS)
}

fn parse_within(file: &str, bytes: &[u8], limits: Limits) -> Result<Vec<Job>, TraceError> {
    let mut found = Found::default();
    let mut columns: Option<Vec<Column>> = None;
    let mut jobs: Vec<Job> = Vec::new();
    // id -> line of first occurrence, to name both lines of a duplicate.
    let mut seen: HashMap<JobId, usize> = HashMap::new();
    let mut rows = 0usize;
    let mut run_total = 0.0f64;
    // A UTF-8 byte-order mark (spreadsheets write one) is not part of the
    // header, as YAML files read here ignore it too.
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);

    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.len() > limits.line_bytes {
            found.push(
                line,
                None,
                format!(
                    "line of {} bytes, longer than the limit of {}",
                    raw.len(),
                    limits.line_bytes
                ),
            );
            if columns.is_none() {
                return Err(found.into_error(file));
            }
            continue;
        }
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                let valid = std::str::from_utf8(&raw[..e.valid_up_to()]).unwrap_or_default();
                let column = valid.chars().count() + 1;
                found.push(line, Some(column), "not UTF-8".into());
                continue;
            }
        };
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields = split_fields(text);
        let Some(cols) = &columns else {
            let names: Vec<&str> = fields.iter().map(|f| f.text).collect();
            match header(&names) {
                Ok(n) => columns = Some(n),
                Err(message) => {
                    // Without a header nothing else can be read meaningfully.
                    found.push(line, None, message);
                    return Err(found.into_error(file));
                }
            }
            continue;
        };
        rows += 1;
        if rows > limits.jobs {
            found.push(
                line,
                None,
                format!(
                    "more than {} jobs (the limit of a trace); not read further",
                    limits.jobs
                ),
            );
            break;
        }
        match row(&fields, cols) {
            Ok(job) => match seen.get(&job.id) {
                Some(first) => found.push(
                    line,
                    Some(fields[0].column),
                    format!("duplicate job id `{}` (first on line {first})", job.id),
                ),
                None => {
                    let before = run_total;
                    run_total += job.duration_s;
                    if run_total > MAX_TOTAL_RUN_S && before <= MAX_TOTAL_RUN_S {
                        found.push(
                            line,
                            Some(fields[3].column),
                            format!(
                                "the run times up to this row add up to {run_total:.0} s, \
                                 more than the trace limit of {MAX_TOTAL_RUN_S:.0} s"
                            ),
                        );
                    }
                    seen.insert(job.id.clone(), line);
                    jobs.push(job);
                }
            },
            Err(e) => found.push(line, e.column, e.message),
        }
    }
    if columns.is_none() {
        found.push(1, None, format!("missing header `{}`", HEADER.join(",")));
    }
    if found.total > 0 {
        return Err(found.into_error(file));
    }
    // Stable: equal arrivals keep file order.
    jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    Ok(jobs)
}

/// One comma-separated field, trimmed, and where it starts.
#[derive(Debug, Clone, Copy)]
struct Field<'a> {
    /// 1-based column, in characters, of the field's first non-blank.
    column: usize,
    text: &'a str,
}

fn split_fields(line: &str) -> Vec<Field<'_>> {
    let mut out = Vec::new();
    let mut column = 1;
    for piece in line.split(',') {
        let rest = piece.trim_start();
        let lead = piece[..piece.len() - rest.len()].chars().count();
        out.push(Field {
            column: column + lead,
            text: rest.trim_end(),
        });
        column += piece.chars().count() + 1;
    }
    out
}

/// An optional column of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Deadline,
    CommFraction,
    Collective,
    Model,
    IterationMs,
}

impl Column {
    const ALL: [Column; 5] = [
        Column::Deadline,
        Column::CommFraction,
        Column::Collective,
        Column::Model,
        Column::IterationMs,
    ];

    fn name(self) -> &'static str {
        OPTIONAL[self as usize]
    }
}

/// Check the header; return its optional columns, in file order.
fn header(fields: &[&str]) -> Result<Vec<Column>, String> {
    let expected = || {
        format!(
            "expected header `{}` followed by any of `{}` (each at most once), found `{}`",
            HEADER.join(","),
            OPTIONAL.join("`, `"),
            shorten(&fields.join(","))
        )
    };
    if fields.len() < HEADER.len() || fields[..HEADER.len()] != HEADER {
        return Err(expected());
    }
    let mut cols = Vec::new();
    for name in &fields[HEADER.len()..] {
        let Some(c) = Column::ALL.into_iter().find(|c| c.name() == *name) else {
            return Err(format!(
                "unknown column `{}`: {}",
                shorten(name),
                expected()
            ));
        };
        if cols.contains(&c) {
            return Err(format!("column `{name}` appears twice"));
        }
        cols.push(c);
    }
    Ok(cols)
}

/// What is wrong with a row, and where.
struct BadRow {
    column: Option<usize>,
    message: String,
}

impl BadRow {
    fn at(field: Field<'_>, message: String) -> Self {
        Self {
            column: Some(field.column),
            message,
        }
    }
}

fn row(fields: &[Field<'_>], cols: &[Column]) -> Result<Job, BadRow> {
    let ncols = HEADER.len() + cols.len();
    if fields.len() != ncols {
        return Err(BadRow {
            column: None,
            message: format!("expected {ncols} fields, found {}", fields.len()),
        });
    }
    let id = JobId::new(fields[0].text).map_err(|e| BadRow::at(fields[0], e.to_string()))?;
    let arrival_s = seconds(HEADER[1], fields[1], Range::from_zero(MAX_SECONDS))?;
    let gpus = match fields[2].text.parse::<u32>() {
        Ok(0) => return Err(BadRow::at(fields[2], "gpus must be at least 1".into())),
        Ok(n) => n,
        Err(_) => {
            return Err(BadRow::at(
                fields[2],
                format!(
                    "gpus `{}` is not a whole number from 1 to {}",
                    shorten(fields[2].text),
                    u32::MAX
                ),
            ))
        }
    };
    let duration_s = seconds(HEADER[3], fields[3], Range::above_zero(MAX_SECONDS))?;
    let mut job = Job {
        id,
        arrival_s,
        gpus,
        duration_s,
        deadline_s: None,
        workload: Workload::default(),
    };
    for (&c, &f) in cols.iter().zip(&fields[HEADER.len()..]) {
        if !f.text.is_empty() {
            optional(&mut job, c, f)?;
        }
    }
    Ok(job)
}

/// Read optional column `c` of `job` from the non-empty field `f`.
fn optional(job: &mut Job, c: Column, f: Field<'_>) -> Result<(), BadRow> {
    match c {
        Column::Deadline => {
            let d = seconds(DEADLINE, f, Range::from_zero(MAX_DEADLINE_S))?;
            if d < job.arrival_s {
                let a = job.arrival_s;
                return Err(BadRow::at(
                    f,
                    format!("deadline_s {d} is before arrival_s {a}"),
                ));
            }
            job.deadline_s = Some(d);
        }
        Column::CommFraction => match f.text.parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => job.workload.comm_fraction = v,
            _ => {
                return Err(BadRow::at(
                    f,
                    format!(
                        "comm_fraction `{}` is not a number from 0 to 1",
                        shorten(f.text)
                    ),
                ))
            }
        },
        Column::Collective => {
            job.workload.collective = Collective::parse(f.text).ok_or_else(|| {
                BadRow::at(
                    f,
                    format!(
                        "collective `{}` is not one of ring, hd, alltoall",
                        shorten(f.text)
                    ),
                )
            })?;
        }
        Column::Model => {
            workload::check_model(f.text).map_err(|m| BadRow::at(f, m))?;
            job.workload.model = Some(f.text.to_string());
        }
        Column::IterationMs => match f.text.parse::<u32>() {
            Ok(v) if (1..=workload::MAX_ITERATION_MS).contains(&v) => {
                job.workload.iteration_ms = Some(v)
            }
            _ => {
                return Err(BadRow::at(
                    f,
                    format!(
                        "iteration_ms `{}` is not a whole number of milliseconds from 1 to {}",
                        shorten(f.text),
                        workload::MAX_ITERATION_MS
                    ),
                ))
            }
        },
    }
    Ok(())
}

/// The allowed values of a time column: `[0, max]` or `(0, max]`.
#[derive(Debug, Clone, Copy)]
struct Range {
    zero_allowed: bool,
    max: f64,
}

impl Range {
    fn from_zero(max: f64) -> Self {
        Self {
            zero_allowed: true,
            max,
        }
    }

    fn above_zero(max: f64) -> Self {
        Self {
            zero_allowed: false,
            max,
        }
    }
}

/// A finite number of seconds within `range`.
fn seconds(column: &str, field: Field<'_>, range: Range) -> Result<f64, BadRow> {
    let bad = |message: String| Err(BadRow::at(field, message));
    let v = match field.text.parse::<f64>() {
        Ok(v) if v.is_finite() => v,
        _ => {
            return bad(format!(
                "{column} `{}` is not a finite number of seconds",
                shorten(field.text)
            ))
        }
    };
    if v < 0.0 {
        return bad(format!("{column} {v} is negative"));
    }
    if v == 0.0 && !range.zero_allowed {
        return bad(format!("{column} must be greater than 0"));
    }
    if v > range.max {
        return bad(format!(
            "{column} {} is more than {:.0} s ({} years), the limit",
            shorten(field.text),
            range.max,
            range.max / (365.0 * 86_400.0)
        ));
    }
    Ok(v)
}

/// Keep error messages readable when a field is huge.
fn shorten(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        format!("{}", s.escape_debug())
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{}...", head.escape_debug())
    }
}

/// Write `jobs` as trace CSV, with each optional column that some job
/// needs (a deadline, a workload other than the default). Times and
/// `comm_fraction` are written with three decimals (milliseconds).
pub fn write_csv(out: &mut dyn Write, jobs: &[Job]) -> std::io::Result<()> {
    let d = Workload::default();
    let cols: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|c| {
            jobs.iter().any(|j| match c {
                Column::Deadline => j.deadline_s.is_some(),
                Column::CommFraction => j.workload.comm_fraction != d.comm_fraction,
                Column::Collective => j.workload.collective != d.collective,
                Column::Model => j.workload.model.is_some(),
                Column::IterationMs => j.workload.iteration_ms.is_some(),
            })
        })
        .collect();
    write!(out, "{}", HEADER.join(","))?;
    for c in &cols {
        write!(out, ",{}", c.name())?;
    }
    writeln!(out)?;
    for j in jobs {
        write!(
            out,
            "{},{:.3},{},{:.3}",
            j.id, j.arrival_s, j.gpus, j.duration_s
        )?;
        for c in &cols {
            match c {
                Column::Deadline => match j.deadline_s {
                    Some(d) => write!(out, ",{d:.3}")?,
                    None => write!(out, ",")?,
                },
                Column::CommFraction => write!(out, ",{:.3}", j.workload.comm_fraction)?,
                Column::Collective => write!(out, ",{}", j.workload.collective)?,
                Column::Model => write!(out, ",{}", j.workload.model.as_deref().unwrap_or(""))?,
                Column::IterationMs => match j.workload.iteration_ms {
                    Some(ms) => write!(out, ",{ms}")?,
                    None => write!(out, ",")?,
                },
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
