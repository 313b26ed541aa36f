//! The TDM job model and its jobs file (issue 19 item 2; seed 003 Section
//! II-B, IV-A and Eq. 8; seed 004 Section II-B).
//!
//! A job is a collective-communication pattern (`ps`, `rar` or `a2a`), a
//! model size, a parallel unit size and how many of its GPUs sit in which
//! pod. The placement itself (003 Section IV-B "Deployment scheme") is an
//! input here: vclos places jobs elsewhere; the planner only schedules them.
//!
//! ```yaml
//! defaults:            # every key optional; the values shown are the defaults
//!   gpu_tflops: 26     # F_GPU (003 Section IV-A)
//!   efficiency: 0.4    # "efficient" (003 Section IV-A)
//!   k: 8               # K = 8 with recomputation, 6 without (004 Section III-A)
//!   tokens: 8192       # context length (003 Section IV-A: 8k)
//!   bytes_per_param: 2 # BF16: the reading of Table III below
//! jobs:
//!   - name: llama8b
//!     type: rar        # ps | rar | a2a
//!     model: 8B        # 1B | 3B | 8B | 90B (003 Table III), or model_gb: 21.2
//!     unit: 2          # GPUs per parallel unit (U_n), default 1
//!     pods: {pod1: 4, pod2: 4}   # GPUs of the job per pod (G_{i,n})
//!     ps_pod: pod1     # ps only: the parameter server's pod (I_n); default
//!                      # the job's first pod with the most GPUs
//!     tokens: 4096     # overrides defaults.tokens for this job
//!     hidden: 4096     # a2a only: hidden size; default from the model
//! ```
//!
//! # Readings chosen where the drafts are ambiguous
//!
//! * **Phi is given in GB** (003 Table III) but Eq. 8 needs a parameter
//!   count: Phi_params = Phi_GB x 1e9 / `bytes_per_param`.
//! * **FP64 in the text, BF16 in the sizes** (003 Section IV-A says FP64;
//!   Table III's 177.6 GB for Llama 3.2 90B is 88.8e9 parameters x 2 bytes):
//!   the sizes are taken as BF16, so `bytes_per_param` defaults to 2, and
//!   F_GPU = 26 TFLOP/s is used as given.
//! * **Eq. 8 per GPU**: t_train = K x tokens x Phi_params / (F_GPU x
//!   efficiency), as written (no division by the unit size; 004 Section
//!   III-A calls it "the training time per GPU").
//! * **F_n** ("output traffic size of each GPU", 003 Table I): for data
//!   parallel jobs (`ps`, `rar`) a unit of U_n GPUs holds one model replica,
//!   so each GPU outputs its 1/U_n share of the gradients: F_n = Phi_GB /
//!   U_n, and a unit's master sends F_n x U_n = Phi (Eq. 4). For expert
//!   parallel jobs (`a2a`) traffic follows the tokens (004 Section III-A):
//!   F_n = tokens x hidden x `bytes_per_param`, hidden from the Llama 3
//!   configurations (1B 2048, 3B 3072, 8B 4096, 90B 8192) unless given.
//! * **Units never span pods**, so FI (inter-unit traffic inside a unit, 003
//!   Table II) is 0 and a pod holds G_{i,n} / U_n master nodes
//!   (PN/AN_i^n); `pods` values must be multiples of `unit`.
//! * **Table II's intra/inter labels are swapped**: D_{i,j} (between two
//!   pods) is the inter-pod (OCS) demand and D_i (ToR to servers) the
//!   intra-pod one, which is how Eq. 2 uses them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;

use crate::yaml::{self, at, Limits};

/// Largest jobs file accepted.
pub const MAX_JOBS_BYTES: usize = 4 * 1024 * 1024;
/// Most jobs in one file.
pub const MAX_JOBS: usize = 10_000;
/// Most pods one job may span.
pub const MAX_JOB_PODS: usize = 1024;

const JOBS_LIMITS: Limits = Limits {
    max_bytes: MAX_JOBS_BYTES,
    max_depth: 8,
    max_alias_nodes: 10_000,
};

/// The collective-communication pattern of a job (003 Section II-B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Parameter server (data parallel).
    Ps,
    /// Ring-AllReduce (data parallel).
    Rar,
    /// AllToAll (expert parallel).
    A2a,
}

/// Model-wide constants of Eq. 8 (003 Section IV-A defaults).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Defaults {
    pub gpu_tflops: f64,
    pub efficiency: f64,
    pub k: f64,
    pub tokens: u64,
    pub bytes_per_param: f64,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            gpu_tflops: 26.0,
            efficiency: 0.4,
            k: 8.0,
            tokens: 8192,
            bytes_per_param: 2.0,
        }
    }
}

/// One job as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub name: String,
    pub kind: JobKind,
    /// Phi in GB (003 Table III).
    pub model_gb: f64,
    /// U_n: GPUs per parallel unit.
    pub unit: u32,
    /// G_{i,n}: the job's GPUs per pod (pod name, GPUs), file order.
    pub pods: Vec<(String, u32)>,
    /// I_n: the parameter server's pod (`ps` only).
    pub ps_pod: Option<String>,
    pub tokens: u64,
    /// Hidden size (`a2a` traffic).
    pub hidden: u32,
    /// 1-based line of the job in its file, for messages.
    pub line: Option<usize>,
}

/// A parsed jobs file.
#[derive(Debug, Clone, PartialEq)]
pub struct Jobs {
    pub defaults: Defaults,
    pub jobs: Vec<Job>,
}

#[derive(Debug, Error)]
pub enum JobsError {
    /// Unreadable, not UTF-8, or over the input bounds.
    #[error(transparent)]
    File(#[from] yaml::FileError),
    #[error("{}: not a jobs file: {message}", at(file, *line))]
    Parse {
        file: String,
        line: Option<usize>,
        message: String,
    },
    #[error("{}: {what}: {message}", at(file, *line))]
    Field {
        file: String,
        line: Option<usize>,
        /// `job NAME field FIELD` or `defaults.FIELD`.
        what: String,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJobs {
    #[serde(default)]
    defaults: Defaults,
    jobs: Vec<FileJob>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJob {
    name: String,
    #[serde(rename = "type")]
    kind: JobKind,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    model_gb: Option<f64>,
    #[serde(default)]
    unit: Option<u32>,
    pods: BTreeMap<String, u32>,
    #[serde(default)]
    ps_pod: Option<String>,
    #[serde(default)]
    tokens: Option<u64>,
    #[serde(default)]
    hidden: Option<u32>,
}

/// 003 Table III (GB, BF16) and the Llama 3 hidden sizes (module doc).
pub(crate) const MODELS: [(&str, f64, u32); 4] = [
    ("1B", 2.46, 2048),
    ("3B", 6.42, 3072),
    ("8B", 21.2, 4096),
    ("90B", 177.6, 8192),
];

/// Hidden size assumed for a model given only in GB: the nearest table row.
fn hidden_for(gb: f64) -> u32 {
    MODELS
        .iter()
        .min_by(|a, b| (a.1 - gb).abs().total_cmp(&(b.1 - gb).abs()))
        .map_or(4096, |m| m.2)
}

impl Jobs {
    /// Read and parse a jobs file.
    pub fn load(path: &Path) -> Result<Jobs, JobsError> {
        let (file, text) = yaml::read_text(path, MAX_JOBS_BYTES)?;
        Self::from_text(&file, &text)
    }

    /// Parse a jobs file's text; `file` names it in errors.
    pub fn from_text(file: &str, text: &str) -> Result<Jobs, JobsError> {
        yaml::check_file(file, text, &JOBS_LIMITS)?;
        let raw: FileJobs = yaml::from_str(text).map_err(|e| JobsError::Parse {
            file: file.into(),
            line: e.location().map(|l| l.line()),
            message: e.to_string(),
        })?;
        let d = raw.defaults;
        check_defaults(file, text, &d)?;
        if raw.jobs.len() > MAX_JOBS {
            return Err(JobsError::Parse {
                file: file.into(),
                line: None,
                message: format!("{} jobs; at most {MAX_JOBS}", raw.jobs.len()),
            });
        }
        let mut seen = std::collections::HashSet::new();
        let mut jobs = Vec::with_capacity(raw.jobs.len());
        for j in raw.jobs {
            let again = seen.contains(&j.name);
            let line = job_line(text, &j.name, usize::from(again));
            let name = j.name.clone();
            let field = |f: &str, message: String| JobsError::Field {
                file: file.into(),
                line,
                what: format!("job `{name}` field `{f}`"),
                message,
            };
            if !seen.insert(j.name.clone()) {
                return Err(field("name", "job named twice".into()));
            }
            let job = job(j, &d, line, field)?;
            // Each setting is finite, but their products may not be
            // (1e-308 GFLOPS): every figure the planner uses must be.
            let (train, gbit) = (job.train_s(&d), job.per_gpu_gbit(&d));
            if !(train.is_finite() && train > 0.0 && gbit.is_finite() && gbit >= 0.0) {
                return Err(JobsError::Field {
                    file: file.into(),
                    line,
                    what: format!("job `{}`", job.name),
                    message: format!(
                        "with these defaults its training time is {train} s and each GPU \
                         sends {gbit} Gbit per collective: not finite positive numbers"
                    ),
                });
            }
            jobs.push(job);
        }
        Ok(Jobs { defaults: d, jobs })
    }
}

fn check_defaults(file: &str, text: &str, d: &Defaults) -> Result<(), JobsError> {
    let positive = [
        ("gpu_tflops", d.gpu_tflops),
        ("efficiency", d.efficiency),
        ("k", d.k),
        ("bytes_per_param", d.bytes_per_param),
        ("tokens", d.tokens as f64),
    ];
    for (name, v) in positive {
        if !(v.is_finite() && v > 0.0) || (name == "efficiency" && v > 1.0) {
            let line = text
                .lines()
                .position(|l| l.trim_start().starts_with(&format!("{name}:")))
                .map(|i| i + 1);
            return Err(JobsError::Field {
                file: file.into(),
                line,
                what: format!("defaults.{name}"),
                message: format!(
                    "{v} is not a positive number{}",
                    if name == "efficiency" { " up to 1" } else { "" }
                ),
            });
        }
    }
    Ok(())
}

/// 1-based line of the `nth` (from 0) `name: NAME`, the job's entry.
fn job_line(text: &str, name: &str, nth: usize) -> Option<usize> {
    let key = format!("name: {name}");
    let entry = |l: &str| {
        l.match_indices(&key).any(|(i, _)| {
            let before = l[..i].trim_end().chars().last();
            let after = l[i + key.len()..].chars().next();
            matches!(before, None | Some('-' | '{' | ','))
                && matches!(after, None | Some(',' | '}' | ' ' | '#'))
        })
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| entry(l))
        .nth(nth)
        .map(|(i, _)| i + 1)
}

fn job(
    j: FileJob,
    d: &Defaults,
    line: Option<usize>,
    field: impl Fn(&str, String) -> JobsError,
) -> Result<Job, JobsError> {
    let model_gb = match (&j.model, j.model_gb) {
        (Some(_), Some(_)) => {
            return Err(field("model", "give model or model_gb, not both".into()))
        }
        (None, None) => {
            return Err(field(
                "model",
                "missing (1B, 3B, 8B, 90B or model_gb)".into(),
            ))
        }
        (Some(m), None) => MODELS
            .iter()
            .find(|r| r.0.eq_ignore_ascii_case(m))
            .map(|r| r.1)
            .ok_or_else(|| field("model", format!("`{m}` is not one of 1B, 3B, 8B, 90B")))?,
        (None, Some(gb)) if gb.is_finite() && gb > 0.0 && gb <= 1e6 => gb,
        (None, Some(gb)) => return Err(field("model_gb", format!("{gb} is not in (0, 1e6]"))),
    };
    let unit = j.unit.unwrap_or(1);
    if unit == 0 || unit > 4096 {
        return Err(field("unit", format!("{unit} is not in 1..=4096")));
    }
    if j.pods.is_empty() || j.pods.len() > MAX_JOB_PODS {
        return Err(field(
            "pods",
            format!("1 to {MAX_JOB_PODS} pods, not {}", j.pods.len()),
        ));
    }
    for (pod, &g) in &j.pods {
        if g == 0 || g % unit != 0 {
            return Err(field(
                "pods",
                format!("pod `{pod}`: {g} GPUs is not a positive multiple of the unit ({unit})"),
            ));
        }
    }
    match (&j.ps_pod, j.kind) {
        (Some(_), JobKind::Rar | JobKind::A2a) => {
            return Err(field(
                "ps_pod",
                "only a ps job has a parameter server".into(),
            ))
        }
        (Some(p), JobKind::Ps) if !j.pods.contains_key(p) => {
            return Err(field(
                "ps_pod",
                format!("`{p}` is not one of the job's pods"),
            ))
        }
        _ => {}
    }
    let tokens = j.tokens.unwrap_or(d.tokens);
    if tokens == 0 || tokens > 1 << 30 {
        return Err(field("tokens", format!("{tokens} is not in 1..=2^30")));
    }
    let hidden = j.hidden.unwrap_or_else(|| hidden_for(model_gb));
    if hidden == 0 || hidden > 1 << 20 {
        return Err(field("hidden", format!("{hidden} is not in 1..=2^20")));
    }
    Ok(Job {
        name: j.name,
        kind: j.kind,
        model_gb,
        unit,
        pods: j.pods.into_iter().collect(),
        ps_pod: j.ps_pod,
        tokens,
        hidden,
        line,
    })
}

impl Job {
    /// Eq. 8 (003 Section IV-A): t_train = K x tokens x Phi / (F_GPU x
    /// efficiency), Phi in parameters (module doc), seconds.
    pub fn train_s(&self, d: &Defaults) -> f64 {
        let params = self.model_gb * 1e9 / d.bytes_per_param;
        d.k * self.tokens as f64 * params / (d.gpu_tflops * 1e12 * d.efficiency)
    }

    /// F_n (003 Table I), in Gbit: what each GPU of the job outputs per
    /// collective (module doc).
    pub fn per_gpu_gbit(&self, d: &Defaults) -> f64 {
        match self.kind {
            JobKind::Ps | JobKind::Rar => self.model_gb * 8.0 / f64::from(self.unit),
            JobKind::A2a => {
                self.tokens as f64 * f64::from(self.hidden) * d.bytes_per_param * 8.0 / 1e9
            }
        }
    }

    /// I_n: the `ps_pod`, or the first pod with the most GPUs.
    pub fn ps_pod(&self) -> &str {
        if let Some(p) = &self.ps_pod {
            return p;
        }
        let most = self.pods.iter().map(|p| p.1).max().unwrap_or(0);
        self.pods
            .iter()
            .find(|p| p.1 == most)
            .map_or("", |p| p.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "defaults:\n  tokens: 4096\njobs:\n  - name: a\n    type: rar\n    model: 8B\n    unit: 2\n    pods: {pod1: 4, pod2: 2}\n  - {name: b, type: ps, model_gb: 10, pods: {pod2: 1, pod3: 3}}\n  - {name: c, type: a2a, model: 1B, pods: {pod1: 2}, tokens: 1024}\n";

    #[test]
    fn a_jobs_file_parses_with_defaults_and_table_iii_sizes() {
        let j = Jobs::from_text("jobs.yaml", FILE).unwrap();
        assert_eq!(j.defaults.tokens, 4096);
        assert_eq!(j.defaults.gpu_tflops, 26.0);
        let a = &j.jobs[0];
        assert_eq!(
            (a.kind, a.model_gb, a.unit, a.line),
            (JobKind::Rar, 21.2, 2, Some(4))
        );
        assert_eq!(a.pods, vec![("pod1".into(), 4), ("pod2".into(), 2)]);
        assert_eq!(j.jobs[1].ps_pod(), "pod3");
        assert_eq!(j.jobs[1].line, Some(9));
        assert_eq!((j.jobs[2].tokens, j.jobs[2].hidden), (1024, 2048));
    }

    #[test]
    fn eq_8_and_f_n_follow_the_documented_readings() {
        let j = Jobs::from_text("jobs.yaml", FILE).unwrap();
        let d = j.defaults;
        let a = &j.jobs[0];
        // K x tokens x (GB x 1e9 / 2 bytes) / (F_GPU x efficiency).
        let expect = 8.0 * 4096.0 * (21.2e9 / 2.0) / (26e12 * 0.4);
        assert!((a.train_s(&d) - expect).abs() < 1e-9 * expect);
        // Doubling the context doubles the training time.
        let mut longer = a.clone();
        longer.tokens *= 2;
        assert!((longer.train_s(&d) - 2.0 * a.train_s(&d)).abs() < 1e-9);
        // A unit's master sends the whole model: F_n x U_n = Phi.
        assert!((a.per_gpu_gbit(&d) * 2.0 - 21.2 * 8.0).abs() < 1e-9);
        let c = &j.jobs[2];
        assert!((c.per_gpu_gbit(&d) - 1024.0 * 2048.0 * 2.0 * 8.0 / 1e9).abs() < 1e-12);
    }

    #[test]
    fn settings_whose_products_overflow_are_refused_at_the_job() {
        let text = FILE.replace(
            "defaults:\n  tokens: 4096\n",
            "defaults:\n  tokens: 4096\n  gpu_tflops: 1e-308\n  efficiency: 1e-308\n  k: 1e308\n",
        );
        let e = Jobs::from_text("jobs.yaml", &text).unwrap_err().to_string();
        assert!(e.starts_with("jobs.yaml:7: job `a`"), "{e}");
        assert!(e.contains("training time is inf s"), "{e}");
    }

    #[test]
    fn bad_jobs_name_file_line_and_field() {
        let cases = [
            (FILE.replace("unit: 2", "unit: 3"), ":4:", "field `pods`"),
            (
                FILE.replace("model: 8B", "model: 7B"),
                ":4:",
                "field `model`",
            ),
            (FILE.replace("name: b", "name: a"), ":9:", "field `name`"),
            (
                FILE.replace("pod3: 3}", "pod3: 3}, ps_pod: pod9"),
                ":9:",
                "ps_pod",
            ),
            (
                FILE.replace("tokens: 4096", "tokens: 0"),
                ":2:",
                "defaults.tokens",
            ),
            (
                FILE.replace("type: rar", "type: tree"),
                ":5:",
                "not a jobs file",
            ),
            (
                FILE.replace("unit: 2", "unit: 2\n    colour: red"),
                ":",
                "colour",
            ),
        ];
        for (text, line, what) in cases {
            let err = Jobs::from_text("jobs.yaml", &text).unwrap_err().to_string();
            assert!(err.starts_with("jobs.yaml"), "{err}");
            assert!(err.contains(line) && err.contains(what), "{what}: {err}");
        }
        let deep = format!("jobs: {}{}", "[".repeat(100), "]".repeat(100));
        let err = Jobs::from_text("j.yaml", &deep).unwrap_err().to_string();
        assert!(err.contains("nesting deeper"), "{err}");
    }
}
