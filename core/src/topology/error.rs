//! Loader errors. Every problem names the file, the line where the parser
//! knows it, and the device and port concerned.

use std::fmt;

use thiserror::Error;

use crate::names::escape_controls;

/// One thing wrong with a topology file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line in the file, where known.
    pub line: Option<usize>,
    pub device: Option<String>,
    pub port: Option<String>,
    pub message: String,
}

impl Problem {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Problem {
            line: None,
            device: None,
            port: None,
            message: message.into(),
        }
    }
    pub(crate) fn at(mut self, line: Option<usize>) -> Self {
        self.line = self.line.or(line);
        self
    }
    pub(crate) fn device(mut self, d: &str) -> Self {
        self.device = Some(d.to_string());
        self
    }
    pub(crate) fn port(mut self, p: &str) -> Self {
        self.port = Some(p.to_string());
        self
    }
}

/// Formats as `line N: device `d` port `p`: message` (file added by the error).
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.line {
            write!(f, "line {l}: ")?;
        }
        if let Some(d) = &self.device {
            write!(f, "device `{d}`")?;
            if let Some(p) = &self.port {
                write!(f, " port `{p}`")?;
            }
            f.write_str(": ")?;
        }
        f.write_str(&self.message)
    }
}

#[derive(Debug, Error)]
pub enum TopologyError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { file: String, offset: usize },
    #[error("{file}: {size} bytes is larger than the {limit}-byte limit for topology files")]
    TooLarge {
        file: String,
        size: usize,
        limit: usize,
    },
    #[error("{file}:{}: {message}", line.map(|l| l.to_string()).unwrap_or_else(|| "?".into()))]
    Parse {
        file: String,
        line: Option<usize>,
        message: String,
    },
    #[error("{file}: {} problem(s):{}{}", problems.len() + more, list(file, problems), and_more(*more))]
    Invalid {
        file: String,
        /// The first problems found, each with its line.
        problems: Vec<Problem>,
        /// Problems found past those, counted only.
        more: usize,
    },
}

fn list(file: &str, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| match p.line {
            Some(l) => {
                let rest = Problem {
                    line: None,
                    ..p.clone()
                };
                let rest = escape_controls(&rest.to_string(), false).into_owned();
                format!("\n  {file}:{l}: {rest}")
            }
            None => format!("\n  {file}: {}", escape_controls(&p.to_string(), false)),
        })
        .collect()
}

fn and_more(more: usize) -> String {
    if more == 0 {
        String::new()
    } else {
        format!("\n  … and {more} more")
    }
}

impl TopologyError {
    /// The individual problems (one for parse and I/O errors).
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            TopologyError::Invalid { problems, .. } => problems.clone(),
            TopologyError::Parse { line, message, .. } => {
                vec![Problem::new(message.clone()).at(*line)]
            }
            other => vec![Problem::new(other.to_string())],
        }
    }
}
