//! Slurm integration: what `vclos slurm prolog` and `vclos slurm epilog`
//! need from a job's environment, as pure functions (the commands
//! themselves are in the CLI and talk to `vclos serve` through
//! [`crate::client`]).
//!
//! # How Slurm runs them
//! `PrologSlurmctld` and `EpilogSlurmctld` (slurm.conf) are programs that
//! `slurmctld` runs on the controller, as `SlurmctldUser`, at a job's
//! allocation and at its termination (Slurm's Prolog and Epilog Guide,
//! <https://slurm.schedmd.com/prolog_epilog.html>; the 22.05 text Debian
//! bookworm ships is `doc/html/prolog_epilog.shtml` of slurm-wlm
//! 22.05.8). Both get the job's environment, among it `SLURM_JOB_ID` and
//! `SLURM_JOB_NODELIST` ("Nodes assigned to job. A SLURM hostlist
//! expression"; available in PrologSlurmctld and EpilogSlurmctld only).
//! The guide's failure handling: a PrologSlurmctld that exits non-zero
//! gets the job requeued (batch jobs; interactive ones are cancelled); an
//! EpilogSlurmctld that fails is only logged. Programs run without a
//! search path, so slurm.conf names vclos by its absolute path. Whatever
//! they print on stderr goes to the slurmctld log, so each call prints one
//! line there.
//!
//! # What vclos does with them
//! * [`job_id`]: `SLURM_JOB_ID`, digits only, becomes the vclos job id
//!   `<prefix><id>` (default prefix `slurm-`), a valid [`JobId`].
//! * [`hostlist::expand`]: `SLURM_JOB_NODELIST` to node names.
//! * [`NodeMap`]: node names to the topology's server names: the same
//!   name by default (`vclos topology export --format slurm` names Slurm
//!   nodes after the servers), or a `--node-map` file of `node server`
//!   lines.
//!
//! The prolog then asks the service to admit the job on exactly those
//! servers (`POST /v1/jobs` with `servers`); the epilog releases it
//! (`DELETE /v1/jobs/{id}`, where 404 means already released). Both are
//! idempotent by job id, so Slurm may run them again.

pub mod hostlist;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use thiserror::Error;

use crate::names::JobId;

/// Largest `--node-map` file, bytes.
pub const MAX_NODE_MAP: u64 = 4 * 1024 * 1024;
/// Most digits in `SLURM_JOB_ID` (Slurm's job ids are 32-bit).
const MAX_JOB_ID_DIGITS: usize = 10;

#[derive(Debug, Error)]
pub enum SlurmError {
    #[error("{var} is not set (is this running as Slurm's PrologSlurmctld / EpilogSlurmctld?)")]
    Missing { var: &'static str },
    #[error("{var}={shown:?}: {why}")]
    BadJobId {
        var: &'static str,
        shown: String,
        why: &'static str,
    },
    #[error("the vclos job id {id:?}: {source}")]
    JobName {
        id: String,
        #[source]
        source: crate::names::NameError,
    },
    #[error("{var}: {source}")]
    Hostlist {
        var: &'static str,
        #[source]
        source: hostlist::HostlistError,
    },
    #[error("{path}: {why}")]
    MapFile { path: String, why: String },
    #[error("{path}:{line}: {why}")]
    MapLine {
        path: String,
        line: usize,
        why: String,
    },
    #[error("node {node:?} (from {var}) is not in the node map {path}")]
    Unmapped {
        node: String,
        var: &'static str,
        path: String,
    },
    #[error("server {server:?} appears more than once in {var} (after mapping)")]
    Duplicate { server: String, var: &'static str },
}

/// The vclos job id of Slurm job `slurm_id` (the value of `SLURM_JOB_ID`):
/// `<prefix><digits>`.
pub fn job_id(prefix: &str, slurm_id: Option<&str>) -> Result<JobId, SlurmError> {
    const VAR: &str = "SLURM_JOB_ID";
    let raw = slurm_id.ok_or(SlurmError::Missing { var: VAR })?;
    let bad = |why| SlurmError::BadJobId {
        var: VAR,
        shown: raw.chars().take(32).collect(),
        why,
    };
    if raw.is_empty() {
        return Err(bad("empty"));
    }
    if !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("a Slurm job id is digits only"));
    }
    if raw.len() > MAX_JOB_ID_DIGITS {
        return Err(bad("more digits than a Slurm job id has"));
    }
    let id = format!("{prefix}{raw}");
    JobId::new(id.as_str()).map_err(|source| SlurmError::JobName { id, source })
}

/// Slurm node name -> topology server name.
#[derive(Debug, Clone, Default)]
pub struct NodeMap {
    /// `None`: identity.
    map: Option<BTreeMap<String, String>>,
    path: String,
}

impl NodeMap {
    /// Every node is the server of the same name.
    pub fn identity() -> NodeMap {
        NodeMap::default()
    }

    /// Read a node map file (at most [`MAX_NODE_MAP`] bytes).
    pub fn read(path: &Path) -> Result<NodeMap, SlurmError> {
        let shown = path.display().to_string();
        let fail = |why: String| SlurmError::MapFile {
            path: shown.clone(),
            why,
        };
        let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
        if meta.len() > MAX_NODE_MAP {
            return Err(fail(format!(
                "{} bytes, over the {MAX_NODE_MAP}-byte limit",
                meta.len()
            )));
        }
        let bytes = vclos_core::yaml::read_capped(path, MAX_NODE_MAP as usize)
            .map_err(|e| fail(e.to_string()))?;
        if bytes.len() as u64 > MAX_NODE_MAP {
            return Err(fail(format!("over the {MAX_NODE_MAP}-byte limit")));
        }
        let text = String::from_utf8(bytes).map_err(|_| fail("not UTF-8 text".into()))?;
        NodeMap::parse(&text, &shown)
    }

    /// Parse a node map: one `slurm-node server` pair a line, blank lines
    /// and `#` comments (to the end of a line) ignored; a node listed
    /// twice is an error. `path` names the file in errors.
    pub fn parse(text: &str, path: &str) -> Result<NodeMap, SlurmError> {
        let mut map = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let fail = |why: String| SlurmError::MapLine {
                path: path.to_string(),
                line: line_no,
                why,
            };
            let content = line.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            let [node, server] = fields[..] else {
                return Err(fail(format!(
                    "expected `slurm-node server`, found {} field(s)",
                    fields.len()
                )));
            };
            for (what, v) in [("node", node), ("server", server)] {
                if v.len() > hostlist::MAX_NAME || !v.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(fail(format!(
                        "the {what} name must be printable ASCII of at most {} bytes",
                        hostlist::MAX_NAME
                    )));
                }
            }
            if let Some(prev) = map.insert(node.to_string(), server.to_string()) {
                return Err(fail(format!(
                    "node {node:?} is mapped twice (to {prev:?} before)"
                )));
            }
        }
        Ok(NodeMap {
            map: Some(map),
            path: path.to_string(),
        })
    }

    /// The servers of `nodes` (from variable `var`), in order; an unmapped
    /// node or a server named twice is an error.
    pub fn servers(&self, nodes: &[String], var: &'static str) -> Result<Vec<String>, SlurmError> {
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            let server = match &self.map {
                None => node.clone(),
                Some(m) => m.get(node).cloned().ok_or_else(|| SlurmError::Unmapped {
                    node: node.clone(),
                    var,
                    path: self.path.clone(),
                })?,
            };
            if !seen.insert(server.clone()) {
                return Err(SlurmError::Duplicate { server, var });
            }
            out.push(server);
        }
        Ok(out)
    }
}

/// The servers of a job: `SLURM_JOB_NODELIST` (its value `nodelist`)
/// expanded and mapped.
pub fn job_servers(nodelist: Option<&str>, map: &NodeMap) -> Result<Vec<String>, SlurmError> {
    const VAR: &str = "SLURM_JOB_NODELIST";
    let raw = nodelist.ok_or(SlurmError::Missing { var: VAR })?;
    let nodes =
        hostlist::expand(raw).map_err(|source| SlurmError::Hostlist { var: VAR, source })?;
    map.servers(&nodes, VAR)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn job_ids_are_digits_with_the_prefix() {
        assert_eq!(job_id("slurm-", Some("42")).unwrap().as_str(), "slurm-42");
        assert_eq!(job_id("", Some("7")).unwrap().as_str(), "7");
        for (v, want) in [
            (None, "SLURM_JOB_ID is not set"),
            (Some(""), "empty"),
            (Some("12a"), "digits only"),
            (Some("1;reboot"), "digits only"),
            (Some("-1"), "digits only"),
            (Some("12345678901"), "more digits"),
        ] {
            let e = job_id("slurm-", v).unwrap_err().to_string();
            assert!(e.contains(want), "{v:?}: {e}");
        }
        // A prefix that makes an invalid vclos id is named.
        let e = job_id("bad prefix ", Some("1")).unwrap_err().to_string();
        assert!(e.contains("bad prefix"), "{e}");
        let e = job_id("a-very-long-prefix-", Some("123456")).unwrap_err();
        assert!(matches!(e, SlurmError::JobName { .. }), "{e}");
    }

    #[test]
    fn the_identity_map_keeps_names_and_refuses_duplicates() {
        let id = NodeMap::identity();
        let s = job_servers(Some("srv[3-6]"), &id).unwrap();
        assert_eq!(s, ["srv3", "srv4", "srv5", "srv6"]);
        let e = job_servers(Some("srv1,srv1"), &id).unwrap_err().to_string();
        assert!(e.contains("\"srv1\" appears more than once"), "{e}");
        let e = job_servers(None, &id).unwrap_err().to_string();
        assert!(e.contains("SLURM_JOB_NODELIST is not set"), "{e}");
        let e = job_servers(Some("srv[1-"), &id).unwrap_err().to_string();
        assert!(e.starts_with("SLURM_JOB_NODELIST: unmatched"), "{e}");
    }

    #[test]
    fn a_node_map_maps_and_names_file_and_line() {
        let text = "# slurm node -> server\n\ngpu01 srv1   # first\ngpu02\tsrv2\n";
        let m = NodeMap::parse(text, "map.txt").unwrap();
        assert_eq!(
            m.servers(&["gpu02".into(), "gpu01".into()], "V").unwrap(),
            ["srv2", "srv1"]
        );
        let e = m.servers(&["gpu03".into()], "V").unwrap_err().to_string();
        assert!(e.contains("\"gpu03\"") && e.contains("map.txt"), "{e}");
        for (text, want) in [
            (
                "a b c\n",
                "map.txt:1: expected `slurm-node server`, found 3",
            ),
            ("a b\nlonely\n", "map.txt:2: expected"),
            ("a b\na c\n", "map.txt:2: node \"a\" is mapped twice"),
            ("a b\u{7}\n", "map.txt:1: the server name must be printable"),
        ] {
            let e = NodeMap::parse(text, "map.txt").unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        // Two nodes onto one server is refused when used.
        let m = NodeMap::parse("a s\nb s\n", "m").unwrap();
        let e = m.servers(&["a".into(), "b".into()], "V").unwrap_err();
        assert!(matches!(e, SlurmError::Duplicate { .. }), "{e}");
    }

    #[test]
    fn a_node_map_file_is_bounded_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("map");
        std::fs::write(&p, "n1 srv1\n").unwrap();
        assert!(NodeMap::read(&p).is_ok());
        let e = NodeMap::read(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none"), "{e}");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MAX_NODE_MAP + 1).unwrap();
        let e = NodeMap::read(&p).unwrap_err().to_string();
        assert!(e.contains("limit") && e.contains("map"), "{e}");
    }
}
