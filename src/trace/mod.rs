//! Job traces: the CSV file format a replay reads, and its parser.
//!
//! A trace is a list of [`Job`]s (id, arrival time, GPU count, run time and
//! an optional deadline). The file is a plain CSV with a fixed header
//!
//! ```text
//! job_id,arrival_s,gpus,duration_s[,deadline_s]
//! ```
//!
//! so that traces can be produced by any tool (a spreadsheet, a script over
//! a real scheduler log) and checked by eye. Lines starting with `#` and
//! blank lines are ignored; `vclos trace generate` writes its parameters in
//! such a comment. The parser never panics on any input: every bad row is
//! reported with the file name and 1-based line number, all at once, so a
//! hand-edited trace can be fixed in one pass. Arrivals need not be sorted;
//! the parser sorts stably by arrival time (ties keep file order).

pub mod generate;

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use thiserror::Error;

use crate::names::JobId;

/// The mandatory header columns, in order.
pub const HEADER: [&str; 4] = ["job_id", "arrival_s", "gpus", "duration_s"];
/// The optional fifth column.
pub const DEADLINE: &str = "deadline_s";

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
}

/// One bad row (or header) of a trace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowProblem {
    /// 1-based line number.
    pub line: usize,
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
    #[error("{}", Problems { file, problems })]
    Invalid {
        file: String,
        problems: Vec<RowProblem>,
    },
}

/// How many problems are listed before "and N more".
const SHOWN: usize = 20;

struct Problems<'a> {
    file: &'a str,
    problems: &'a [RowProblem],
}

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(f, "{}: invalid trace ({n} problem{})", self.file, plural(n))?;
        for p in self.problems.iter().take(SHOWN) {
            write!(f, "\n  {}:{}: {}", self.file, p.line, p.message)?;
        }
        if n > SHOWN {
            write!(f, "\n  ... and {} more", n - SHOWN)?;
        }
        Ok(())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Read and parse a trace file.
pub fn load(path: &Path) -> Result<Vec<Job>, TraceError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        file: file.clone(),
        source,
    })?;
    parse(&file, &bytes)
}

/// Parse trace bytes; `file` is only used in error messages.
pub fn parse(file: &str, bytes: &[u8]) -> Result<Vec<Job>, TraceError> {
    let mut problems = Vec::new();
    let mut columns: Option<usize> = None;
    let mut jobs: Vec<Job> = Vec::new();
    // id -> line of first occurrence, to name both lines of a duplicate.
    let mut seen: HashMap<JobId, usize> = HashMap::new();

    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t.trim(),
            Err(e) => {
                problems.push(RowProblem {
                    line,
                    message: format!("not UTF-8 (bad byte at column {})", e.valid_up_to() + 1),
                });
                continue;
            }
        };
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let Some(ncols) = columns else {
            match header(&fields) {
                Ok(n) => columns = Some(n),
                Err(message) => {
                    // Without a header nothing else can be read meaningfully.
                    problems.push(RowProblem { line, message });
                    return Err(invalid(file, problems));
                }
            }
            continue;
        };
        match row(&fields, ncols) {
            Ok(job) => match seen.get(&job.id) {
                Some(first) => problems.push(RowProblem {
                    line,
                    message: format!("duplicate job id `{}` (first on line {first})", job.id),
                }),
                None => {
                    seen.insert(job.id.clone(), line);
                    jobs.push(job);
                }
            },
            Err(message) => problems.push(RowProblem { line, message }),
        }
    }
    if columns.is_none() {
        problems.push(RowProblem {
            line: 1,
            message: format!("missing header `{}`", HEADER.join(",")),
        });
    }
    if !problems.is_empty() {
        return Err(invalid(file, problems));
    }
    // Stable: equal arrivals keep file order.
    jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    Ok(jobs)
}

fn invalid(file: &str, problems: Vec<RowProblem>) -> TraceError {
    TraceError::Invalid {
        file: file.to_string(),
        problems,
    }
}

/// Check the header; return its column count (4 or 5).
fn header(fields: &[&str]) -> Result<usize, String> {
    let ok4 = fields == HEADER;
    let ok5 = fields.len() == 5 && fields[..4] == HEADER && fields[4] == DEADLINE;
    if ok4 || ok5 {
        Ok(fields.len())
    } else {
        Err(format!(
            "expected header `{}` (optionally `,{DEADLINE}`), found `{}`",
            HEADER.join(","),
            shorten(&fields.join(","))
        ))
    }
}

fn row(fields: &[&str], ncols: usize) -> Result<Job, String> {
    if fields.len() != ncols {
        return Err(format!("expected {ncols} fields, found {}", fields.len()));
    }
    let id = JobId::new(fields[0]).map_err(|e| e.to_string())?;
    let arrival_s = seconds("arrival_s", fields[1])?;
    let gpus = match fields[2].parse::<u32>() {
        Ok(0) => return Err("gpus must be at least 1".into()),
        Ok(n) => n,
        Err(_) => {
            return Err(format!(
                "gpus `{}` is not a whole number",
                shorten(fields[2])
            ))
        }
    };
    let duration_s = seconds("duration_s", fields[3])?;
    if duration_s == 0.0 {
        return Err("duration_s must be greater than 0".into());
    }
    let deadline_s = match fields.get(4) {
        None | Some(&"") => None,
        Some(v) => {
            let d = seconds(DEADLINE, v)?;
            if d < arrival_s {
                return Err(format!("deadline_s {d} is before arrival_s {arrival_s}"));
            }
            Some(d)
        }
    };
    Ok(Job {
        id,
        arrival_s,
        gpus,
        duration_s,
        deadline_s,
    })
}

/// A finite, non-negative number of seconds.
fn seconds(column: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) if v.is_finite() => Err(format!("{column} {v} is negative")),
        _ => Err(format!(
            "{column} `{}` is not a finite number of seconds",
            shorten(value)
        )),
    }
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

/// Write `jobs` as trace CSV (with the deadline column when any job has one).
/// Times are written with millisecond precision.
pub fn write_csv(out: &mut dyn Write, jobs: &[Job]) -> std::io::Result<()> {
    let with_deadline = jobs.iter().any(|j| j.deadline_s.is_some());
    write!(out, "{}", HEADER.join(","))?;
    if with_deadline {
        write!(out, ",{DEADLINE}")?;
    }
    writeln!(out)?;
    for j in jobs {
        write!(
            out,
            "{},{:.3},{},{:.3}",
            j.id, j.arrival_s, j.gpus, j.duration_s
        )?;
        if with_deadline {
            match j.deadline_s {
                Some(d) => write!(out, ",{d:.3}")?,
                None => write!(out, ",")?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
