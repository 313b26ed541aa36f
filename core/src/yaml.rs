//! Bounded YAML: every YAML file vclos reads (topologies, hand-written
//! decisions) goes through [`check`] before serde_yaml_ng sees it.
//!
//! Why a separate pass. serde_yaml_ng 0.10 (libyaml via unsafe-libyaml)
//! first loads *every* event of the document, then deserialises, following
//! aliases as it goes. Its own guards come too late or are too loose:
//!
//! - the recursion limit (128, `remaining_depth` in serde_yaml_ng's `de.rs`)
//!   applies while deserialising, after libyaml has scanned the whole input;
//!   libyaml's scanner re-checks every open flow level's simple key on each
//!   token (`yaml_parser_stale_simple_keys`), so `[[[…` nested 200 000 deep
//!   costs time quadratic in the depth before any limit is reached
//!   (measured in docs/input-limits.md: 6 s for 20 000, 26 s for 40 000);
//! - the alias guard (`RepetitionLimitExceeded`: at most 100 alias jumps per
//!   event, `jump` in `de.rs`) bounds the number of jumps, not what each
//!   jump copies: one anchored list of 20 000 names referenced through two
//!   levels of aliases expands to 40 million strings (a 146 KB file, 4.3 GB,
//!   160 s), the YAML "billion laughs" (CVE-2003-1564 is the XML original).
//!
//! [`check`] walks the event stream of saphyr-parser (a YAML 1.2 parser in
//! safe Rust that streams events, so a refusal costs only the events read
//! so far) and refuses, before anything is built:
//!
//! - input longer than [`Limits::max_bytes`];
//! - nesting deeper than [`Limits::max_depth`] collections (YAML 1.2.2
//!   §3.2.1.1: a node graph; flow and block collections count alike);
//! - aliases that together stand for more than [`Limits::max_alias_nodes`]
//!   nodes. Each alias counts the full size of the node its anchor names
//!   (YAML 1.2.2 §3.2.2.2 and §7.1: an alias is a copy of the anchored node,
//!   aliases inside it included), which is what serde_yaml_ng will build.
//!
//! - aliases whose copies of scalars, with the text itself, come to more
//!   than [`Limits::max_bytes`]: a count of nodes alone let 100 000 aliases
//!   of one 1 MB scalar through (a 1 MB file standing for 100 GB).
//!
//! Every refusal names the line of the offending node. A file that passes
//! has at most `max_bytes` of literal nodes plus `max_alias_nodes` copied
//! ones, stands for at most `max_bytes` of scalar text in all, and nests
//! so that libyaml scans it in time linear in its length.

use saphyr_parser::{Event, Parser};
use thiserror::Error;

/// The bounds one kind of file is read under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted input, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted nesting of sequences and mappings.
    pub max_depth: usize,
    /// Most nodes that all aliases of the file may stand for, together.
    pub max_alias_nodes: u64,
}

/// Why a YAML text was refused before deserialisation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LimitError {
    #[error("{size} bytes is larger than the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error("nesting deeper than {limit} levels of lists and mappings")]
    TooDeep { line: usize, limit: usize },
    #[error(
        "aliases expand to more than {limit} nodes (anchors and aliases may only \
         repeat small parts of a file)"
    )]
    AliasBudget { line: usize, limit: u64 },
    #[error(
        "aliases copy more than {limit} bytes of text with the file's own (anchors and \
         aliases may only repeat small parts of a file)"
    )]
    AliasBytes { line: usize, limit: usize },
    #[error("{message}")]
    Syntax { line: usize, message: String },
}

impl LimitError {
    /// 1-based line of the refusal, where there is one.
    pub fn line(&self) -> Option<usize> {
        match self {
            LimitError::TooLarge { .. } => None,
            LimitError::TooDeep { line, .. }
            | LimitError::AliasBudget { line, .. }
            | LimitError::AliasBytes { line, .. }
            | LimitError::Syntax { line, .. } => Some(*line),
        }
    }
}

/// What [`check`] saw of an accepted text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// Nodes written in the text (scalars, sequences, mappings).
    pub literal_nodes: u64,
    /// Nodes the aliases stand for, together.
    pub alias_nodes: u64,
    /// Deepest nesting seen.
    pub depth: usize,
}

/// Why a small YAML input file (a jobs or profiles file) could not be
/// read or passed the bounds; its name (and line) in every message.
#[derive(Debug, Error)]
pub enum FileError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not UTF-8 text")]
    NotUtf8 { file: String },
    #[error("{}: {reason}", at(file, *line))]
    Limit {
        file: String,
        line: Option<usize>,
        reason: LimitError,
    },
}

/// `file:line`, or `file` without a line.
pub fn at(file: &str, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_string(),
    }
}

/// The text of `path`, read up to `limit` bytes, and its name for
/// messages.
pub fn read_text(path: &std::path::Path, limit: usize) -> Result<(String, String), FileError> {
    let file = path.display().to_string();
    let bytes = read_capped(path, limit).map_err(|source| FileError::Io {
        file: file.clone(),
        source,
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((file, text)),
        Err(_) => Err(FileError::NotUtf8 { file }),
    }
}

/// [`check`], the refusal naming `file` and the line.
pub fn check_file(file: &str, text: &str, limits: &Limits) -> Result<Shape, FileError> {
    check(text, limits).map_err(|reason| FileError::Limit {
        file: file.into(),
        line: reason.line(),
        reason,
    })
}

/// Read at most `limit + 1` bytes of `path`: enough to tell a file over
/// the limit without reading all of it (a file may also grow while read).
/// Only a regular file (or a link to one) is opened: a named pipe would
/// block the open until a writer comes, and a device such as `/dev/zero`
/// never ends (refused as `InvalidInput`).
pub fn read_capped(path: &std::path::Path, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    regular_file(path)?;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `Ok` when `path` is a regular file (after links), else the reason:
/// not found, or `InvalidInput` naming what it is instead.
pub fn regular_file(path: &std::path::Path) -> std::io::Result<()> {
    let kind = std::fs::metadata(path)?.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let what = if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file (a pipe, socket or device)"
    };
    Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, what))
}

/// [`read_capped`], refusing a file over `limit` bytes; the error is a
/// sentence for a message that names the file.
pub fn read_bytes_capped(path: &std::path::Path, limit: usize) -> Result<Vec<u8>, String> {
    let bytes = read_capped(path, limit).map_err(|e| e.to_string())?;
    if bytes.len() > limit {
        return Err(format!("larger than the {limit}-byte limit"));
    }
    Ok(bytes)
}

/// [`read_bytes_capped`] as UTF-8 text.
pub fn read_text_capped(path: &std::path::Path, limit: usize) -> Result<String, String> {
    String::from_utf8(read_bytes_capped(path, limit)?).map_err(|_| "not UTF-8 text".to_string())
}

/// `serde_yaml_ng::from_str` after a leading byte order mark, which YAML
/// allows at the start of a stream (YAML 1.2.2, 5.2 "Character
/// Encodings"): left in, the parser counted it as a column of line 1 and
/// placed an error in a file holding nothing else at line 2.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_yaml_ng::Error> {
    serde_yaml_ng::from_str(text.strip_prefix('\u{feff}').unwrap_or(text))
}

/// Check `text` against `limits` in one streaming pass; refuse at the first
/// node that breaks one.
pub fn check(text: &str, limits: &Limits) -> Result<Shape, LimitError> {
    if text.len() > limits.max_bytes {
        return Err(LimitError::TooLarge {
            size: text.len(),
            limit: limits.max_bytes,
        });
    }
    let mut shape = Shape::default();
    // Size of every anchored node by anchor id (saphyr numbers anchors from
    // 1 in order of appearance; 0 means "no anchor"): nodes, scalar bytes.
    let mut anchor_size: Vec<(u64, u64)> = Vec::new();
    // Open collections: (anchor id, (nodes inside so far, itself included;
    // their scalar bytes)).
    let mut open: Vec<(usize, (u64, u64))> = Vec::new();
    // Scalar bytes all aliases copy, on top of the text.
    let mut copied: u64 = 0;
    let mut documents = 0usize;
    let record = |sizes: &mut Vec<(u64, u64)>, id: usize, n: (u64, u64)| {
        if id > 0 {
            if sizes.len() <= id {
                sizes.resize(id + 1, (0, 0));
            }
            sizes[id] = n;
        }
    };
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| {
            let line = e.marker().line();
            // Inside a flow collection saphyr-parser scans ahead to resolve
            // implicit keys (YAML 1.2.2 §7.4.2 allows flow keys of any
            // length) and stops at 255 flow levels (`increase_flow_level`,
            // "recursion limit exceeded"): a depth refusal too.
            if e.info().contains("recursion limit") {
                LimitError::TooDeep {
                    line,
                    limit: limits.max_depth,
                }
            } else {
                LimitError::Syntax {
                    line,
                    message: e.info().to_string(),
                }
            }
        })?;
        let line = span.start.line();
        let node = match event {
            Event::SequenceStart(id, _) | Event::MappingStart(id, _) => {
                shape.literal_nodes += 1;
                open.push((id, (1, 0)));
                shape.depth = shape.depth.max(open.len());
                if open.len() > limits.max_depth {
                    return Err(LimitError::TooDeep {
                        line,
                        limit: limits.max_depth,
                    });
                }
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match open.pop() {
                Some((id, n)) => {
                    record(&mut anchor_size, id, n);
                    n
                }
                None => continue,
            },
            Event::Scalar(value, _, id, _) => {
                shape.literal_nodes += 1;
                let n = (1, value.len() as u64);
                record(&mut anchor_size, id, n);
                n
            }
            Event::Alias(id) => {
                // An alias to a node still open is a cycle, which serde_yaml_ng
                // cannot build either; count it as the budget (refused below).
                let n = anchor_size
                    .get(id)
                    .copied()
                    .filter(|&(n, _)| n > 0)
                    .unwrap_or((limits.max_alias_nodes.saturating_add(1), 0));
                shape.alias_nodes = shape.alias_nodes.saturating_add(n.0);
                if shape.alias_nodes > limits.max_alias_nodes {
                    return Err(LimitError::AliasBudget {
                        line,
                        limit: limits.max_alias_nodes,
                    });
                }
                copied = copied.saturating_add(n.1);
                if copied.saturating_add(text.len() as u64) > limits.max_bytes as u64 {
                    return Err(LimitError::AliasBytes {
                        line,
                        limit: limits.max_bytes,
                    });
                }
                n
            }
            Event::DocumentStart(_) => {
                // Every file vclos reads is one document; serde_yaml_ng
                // refuses more without saying where the second starts.
                documents += 1;
                if documents > 1 {
                    return Err(LimitError::Syntax {
                        line,
                        message: "a second YAML document starts here (`---`); the file must \
                                  hold one"
                            .into(),
                    });
                }
                continue;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
        };
        if let Some((_, parent)) = open.last_mut() {
            parent.0 = parent.0.saturating_add(node.0);
            parent.1 = parent.1.saturating_add(node.1);
        }
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_moves_no_error_and_a_topology_parses_after_it() {
        use crate::topology::{from_str as topology, TopologyError};
        let line = |text: &str| match topology("t.yaml", text) {
            Err(TopologyError::Parse { line, message, .. }) => (line, message),
            other => panic!("{other:?}"),
        };
        // Nothing but the mark: the error is at line 1, as for an empty file.
        assert_eq!(line("\u{feff}").0, Some(1));
        assert_eq!(line("").0, Some(1));
        // Its columns are the editor's, as without the mark.
        let (at, message) = line("\u{feff}name: x\n");
        assert_eq!(at, Some(1));
        assert_eq!(message, line("name: x\n").1);
        assert_eq!(line("\u{feff}name: x\nfoo: [\n").0, Some(3));
        let yaml = include_str!("../../topologies/testbed-ocs.yaml");
        let marked = topology("t.yaml", &format!("\u{feff}{yaml}")).unwrap();
        assert_eq!(marked.name, topology("t.yaml", yaml).unwrap().name);
    }

    const SMALL: Limits = Limits {
        max_bytes: 1 << 20,
        max_depth: 8,
        max_alias_nodes: 100,
    };

    #[test]
    fn alias_counts_the_whole_anchored_node() {
        // &a is a list of 3 scalars: 4 nodes; &b holds two copies: 1 + 8 = 9.
        let text = "a: &a [x, y, z]\nb: &b [*a, *a]\nc: *b\n";
        let s = check(text, &SMALL).expect("within budget");
        assert_eq!(s.alias_nodes, 4 + 4 + 9);
        assert_eq!(s.depth, 2);
        let tight = Limits {
            max_alias_nodes: 16,
            ..SMALL
        };
        assert_eq!(
            check(text, &tight),
            Err(LimitError::AliasBudget { line: 3, limit: 16 })
        );
    }

    #[test]
    fn alias_counts_the_text_it_copies() {
        // 40 aliases of a 1 000-byte scalar: 40 nodes, but 40 000 bytes.
        let long = "A".repeat(1000);
        let text = format!("a: &a {long}\nb: [{}]\n", vec!["*a"; 40].join(", "));
        let roomy = Limits {
            max_bytes: 64 * 1024,
            ..SMALL
        };
        assert_eq!(check(&text, &roomy).unwrap().alias_nodes, 40);
        let tight = Limits {
            max_bytes: 32 * 1024,
            ..SMALL
        };
        assert_eq!(
            check(&text, &tight),
            Err(LimitError::AliasBytes {
                line: 2,
                limit: 32 * 1024
            })
        );
        // Through a collection the bytes add up the same way.
        let nested = format!(
            "a: &a [{long}, {long}]\nb: [{}]\n",
            vec!["*a"; 20].join(", ")
        );
        assert!(matches!(
            check(&nested, &tight),
            Err(LimitError::AliasBytes { line: 2, .. })
        ));
    }

    #[test]
    fn depth_is_refused_at_its_line() {
        let text = "a:\n  b:\n    - [[[[[[[[[x]]]]]]]]]\n";
        assert_eq!(
            check(text, &SMALL),
            Err(LimitError::TooDeep { line: 3, limit: 8 })
        );
        assert!(check("a: [[x]]\n", &SMALL).is_ok());
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let refused = |p: &std::path::Path| {
            let e = read_capped(p, 16).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{p:?}: {e}");
        };
        // A device that never ends, a directory, and a named pipe with no
        // writer (opening it would block): refused before any read.
        refused(std::path::Path::new("/dev/zero"));
        refused(dir.path());
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        refused(&fifo);
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        refused(&link);
        let file = dir.path().join("f");
        std::fs::write(&file, "0123456789abcdefXYZ").unwrap();
        assert_eq!(read_capped(&file, 16).unwrap().len(), 17);
        assert_eq!(read_text_capped(&file, 32).unwrap(), "0123456789abcdefXYZ");
        let e = read_text_capped(&file, 16).unwrap_err();
        assert!(e.contains("16-byte limit"), "{e}");
    }

    #[test]
    fn size_and_syntax() {
        let tiny = Limits {
            max_bytes: 4,
            ..SMALL
        };
        assert_eq!(
            check("a: bc\n", &tiny),
            Err(LimitError::TooLarge { size: 6, limit: 4 })
        );
        let e = check("a: [x\nb: y\n", &SMALL).unwrap_err();
        assert!(matches!(e, LimitError::Syntax { .. }), "{e:?}");
        let e = check("a: *nowhere\n", &SMALL).unwrap_err();
        assert!(matches!(e, LimitError::Syntax { line: 1, .. }), "{e:?}");
        let e = check("a: 1\nb: 2\n---\nc: 3\n", &SMALL).unwrap_err();
        assert!(
            matches!(&e, LimitError::Syntax { line: 3, message } if message.contains("second YAML document")),
            "{e:?}"
        );
        assert!(
            check("---\na: 1\n", &SMALL).is_ok(),
            "one explicit document"
        );
    }
}
