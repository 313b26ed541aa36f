//! A job's periodic network demand (Cassini, seed 001 Section 4.1 and
//! Fig. 4.3; issue 16, item 1).
//!
//! Training repeats the same iteration, so a job's demand on the network is
//! periodic: a *Down* phase (computation, no traffic) and an *Up* phase
//! (communication) per iteration for data parallelism, or several phases of
//! different lengths and rates for hybrid parallelism (Fig. 4.1(d),
//! Section 4.3.3). A [`Profile`] is that pattern: phases in order, each a
//! duration in milliseconds and a demand as a share of the NIC's line rate
//! (`0` to `1`); the iteration time is their sum.
//!
//! **Defaults from a trace row** ([`Profile::of_workload`]): iteration
//! time `iteration_ms` (the trace column; [`DEFAULT_ITERATION_MS`] when
//! absent, close to the 255 ms VGG16 iteration of Fig. 4.3), and one Down
//! phase then one Up phase at line rate, the Up phase lasting
//! `comm_fraction` of the iteration (the network model's exposed
//! communication share, [`crate::trace::workload`]). Fig. 4.3(c) draws the
//! Down phase first, starting at angle 0; so does this.
//!
//! **A profiles file** ([`Profiles::read_file`]) gives multi-phase
//! patterns by model name (Section 4.5.1 profiles each model once; Fig.
//! 4.1(d)'s GPT-3 has six Up-Down phases), YAML or JSON:
//!
//! ```yaml
//! gpt3:               # the trace's `model`
//!   - {ms: 40, demand: 0}
//!   - {ms: 12, demand: 0.6}
//!   - {ms: 30, demand: 0}
//!   - {ms: 18, demand: 1}
//! ```
//!
//! A job whose `model` is listed gets that pattern (its iteration is the
//! phases' sum; a trace `iteration_ms` then stretches it to that length),
//! any other the default above. The file is bounded like every input
//! (docs/input-limits.md): [`MAX_PROFILES_BYTES`], nesting, aliases, at
//! most [`MAX_MODELS`] models of [`MAX_PHASES`] phases; an error names the
//! file, the line where known, the model and the phase.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;

use crate::yaml::{self, at, LimitError, Limits};

use crate::trace::workload::MAX_ITERATION_MS;
use crate::trace::Workload;

/// Iteration time of a job whose trace row gives none, milliseconds.
pub const DEFAULT_ITERATION_MS: u32 = 250;
/// Most phases in one profile.
pub const MAX_PHASES: usize = 64;

/// One phase of an iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    pub ms: u32,
    /// Share of the line rate, `[0, 1]`.
    pub demand: f64,
}

/// A job's demand over one iteration (module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    phases: Vec<Phase>,
    iteration_ms: u32,
}

/// Why phases do not make a profile.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ProfileError {
    #[error("a profile needs 1 to {MAX_PHASES} phases, found {0}")]
    Phases(usize),
    #[error("phase {index}: demand {demand} is not a share of the line rate from 0 to 1")]
    Demand { index: usize, demand: f64 },
    #[error("phase {index}: a phase lasts at least 1 ms")]
    Empty { index: usize },
    #[error("the iteration lasts {0} ms; at most {MAX_ITERATION_MS}")]
    TooLong(u64),
}

impl Profile {
    /// A profile of `phases`, checked.
    pub fn new(phases: Vec<Phase>) -> Result<Self, ProfileError> {
        if phases.is_empty() || phases.len() > MAX_PHASES {
            return Err(ProfileError::Phases(phases.len()));
        }
        for (index, p) in phases.iter().enumerate() {
            if !(0.0..=1.0).contains(&p.demand) {
                return Err(ProfileError::Demand {
                    index,
                    demand: p.demand,
                });
            }
            if p.ms == 0 {
                return Err(ProfileError::Empty { index });
            }
        }
        let total: u64 = phases.iter().map(|p| u64::from(p.ms)).sum();
        if total > u64::from(MAX_ITERATION_MS) {
            return Err(ProfileError::TooLong(total));
        }
        Ok(Profile {
            phases,
            iteration_ms: total as u32,
        })
    }

    /// Down for `(1 - comm_fraction)` of `iteration_ms`, then Up at line
    /// rate (Fig. 4.3(c)); `comm_fraction` is clamped to `[0, 1]`.
    pub fn up_down(iteration_ms: u32, comm_fraction: f64) -> Self {
        let iteration_ms = iteration_ms.clamp(1, MAX_ITERATION_MS);
        let c = if comm_fraction.is_finite() {
            comm_fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let up = ((f64::from(iteration_ms) * c).round() as u32).min(iteration_ms);
        let phases = [(iteration_ms - up, 0.0), (up, 1.0)]
            .into_iter()
            .filter(|&(ms, _)| ms > 0)
            .map(|(ms, demand)| Phase { ms, demand })
            .collect();
        Profile {
            phases,
            iteration_ms,
        }
    }

    /// The default profile of a trace row (module doc).
    pub fn of_workload(w: &Workload) -> Self {
        Self::up_down(
            w.iteration_ms.unwrap_or(DEFAULT_ITERATION_MS),
            w.comm_fraction,
        )
    }

    pub fn iteration_ms(&self) -> u32 {
        self.iteration_ms
    }

    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// Mean demand over `[from, to)` milliseconds of one iteration
    /// (`0 <= from < to <= iteration_ms`), phases integrated exactly.
    pub fn mean_demand(&self, from: f64, to: f64) -> f64 {
        let mut t = 0.0;
        let mut sum = 0.0;
        for p in &self.phases {
            let end = t + f64::from(p.ms);
            let overlap = end.min(to) - t.max(from);
            if overlap > 0.0 {
                sum += overlap * p.demand;
            }
            t = end;
        }
        if to > from {
            sum / (to - from)
        } else {
            0.0
        }
    }

    /// The profile with every demand held for `pad_ms` more on each side
    /// (at each millisecond the most demand within `pad_ms` of it, around
    /// the iteration's circle): a job scored with it keeps a gap of
    /// `pad_ms` from the jobs it interleaves with, so rounding in the
    /// model that plays them out, or clocks a little apart, cannot make
    /// their phases touch. At most one phase more (where the iteration
    /// wraps). An iteration over [`MAX_DILATED_MS`] is returned as it is
    /// (the work is a step per millisecond).
    pub fn dilated(&self, pad_ms: u32) -> Profile {
        let n = self.iteration_ms as usize;
        if pad_ms == 0 || n <= 1 || self.iteration_ms > MAX_DILATED_MS {
            return self.clone();
        }
        let mut at = Vec::with_capacity(n);
        for p in &self.phases {
            at.extend(std::iter::repeat_n(p.demand, p.ms as usize));
        }
        let pad = (pad_ms as usize).min(n / 2);
        let held: Vec<f64> = (0..n)
            .map(|i| {
                (i + n - pad..=i + n + pad)
                    .map(|k| at[k % n])
                    .fold(0.0, f64::max)
            })
            .collect();
        let mut phases: Vec<Phase> = Vec::new();
        for d in held {
            match phases.last_mut() {
                Some(p) if p.demand == d => p.ms += 1,
                _ => phases.push(Phase { ms: 1, demand: d }),
            }
        }
        Profile {
            phases,
            iteration_ms: self.iteration_ms,
        }
    }

    /// Share of the iteration spent communicating, weighted by demand.
    pub fn duty(&self) -> f64 {
        self.mean_demand(0.0, f64::from(self.iteration_ms))
    }
}

/// Longest iteration [`Profile::dilated`] pads, ms.
pub const MAX_DILATED_MS: u32 = 1 << 16;

/// Largest profiles file read.
pub const MAX_PROFILES_BYTES: usize = 1024 * 1024;
/// Most models in one profiles file.
pub const MAX_MODELS: usize = 1024;
const PROFILES_LIMITS: Limits = Limits {
    max_bytes: MAX_PROFILES_BYTES,
    max_depth: 8,
    max_alias_nodes: 10_000,
};

/// One phase as written in a profiles file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseSpec {
    ms: u32,
    demand: f64,
}

/// Profiles by model name, from a profiles file (module doc).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profiles {
    by_model: BTreeMap<String, Profile>,
}

/// Why a profiles file could not be used.
#[derive(Debug, Error)]
pub enum ProfilesError {
    /// Unreadable, not UTF-8, or over the input bounds.
    #[error(transparent)]
    File(#[from] yaml::FileError),
    #[error("{}: not a profiles file (model: list of {{ms, demand}} phases): {message}", at(file, *line))]
    Parse {
        file: String,
        line: Option<usize>,
        message: String,
    },
    #[error("{file}: {count} models; at most {MAX_MODELS}")]
    TooMany { file: String, count: usize },
    #[error("{file}: model `{model}`: {reason}")]
    Model {
        file: String,
        model: String,
        reason: ProfileError,
    },
}

impl Profiles {
    /// Read a profiles file (module doc).
    pub fn read_file(path: &Path) -> Result<Self, ProfilesError> {
        let (file, text) = yaml::read_text(path, MAX_PROFILES_BYTES)?;
        Self::from_text(&file, &text)
    }

    /// Parse a profiles file's text; `file` names it in errors.
    pub fn from_text(file: &str, text: &str) -> Result<Self, ProfilesError> {
        if text.len() > MAX_PROFILES_BYTES {
            return Err(yaml::FileError::Limit {
                file: file.into(),
                line: None,
                reason: LimitError::TooLarge {
                    size: text.len(),
                    limit: MAX_PROFILES_BYTES,
                },
            }
            .into());
        }
        yaml::check_file(file, text, &PROFILES_LIMITS)?;
        let raw: BTreeMap<String, Vec<PhaseSpec>> =
            yaml::from_str(text).map_err(|e| ProfilesError::Parse {
                file: file.into(),
                line: e.location().map(|l| l.line()),
                message: e.to_string(),
            })?;
        if raw.len() > MAX_MODELS {
            return Err(ProfilesError::TooMany {
                file: file.into(),
                count: raw.len(),
            });
        }
        let mut by_model = BTreeMap::new();
        for (model, phases) in raw {
            let phases = phases
                .into_iter()
                .map(|p| Phase {
                    ms: p.ms,
                    demand: p.demand,
                })
                .collect();
            let profile = Profile::new(phases).map_err(|reason| ProfilesError::Model {
                file: file.into(),
                model: model.clone(),
                reason,
            })?;
            by_model.insert(model, profile);
        }
        Ok(Profiles { by_model })
    }

    /// The profile of a job: its model's from the file, stretched to its
    /// `iteration_ms` if it has one, else the default of
    /// [`Profile::of_workload`].
    pub fn of_workload(&self, w: &Workload) -> Profile {
        let Some(p) = w.model.as_deref().and_then(|m| self.by_model.get(m)) else {
            return Profile::of_workload(w);
        };
        match w.iteration_ms {
            Some(ms) if ms != p.iteration_ms => p.stretched(ms),
            _ => p.clone(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_model.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_model.is_empty()
    }
}

impl Profile {
    /// The same pattern over an iteration of `ms` milliseconds (phase
    /// lengths scaled, each at least 1 ms, the last one absorbing the
    /// rounding).
    pub fn stretched(&self, ms: u32) -> Profile {
        let ms = ms.clamp(self.phases.len() as u32, MAX_ITERATION_MS);
        let k = f64::from(ms) / f64::from(self.iteration_ms);
        let n = self.phases.len();
        let mut phases: Vec<Phase> = self
            .phases
            .iter()
            .map(|p| Phase {
                ms: ((f64::from(p.ms) * k).round() as u32).max(1),
                demand: p.demand,
            })
            .collect();
        let head: u32 = phases[..n - 1].iter().map(|p| p.ms).sum();
        phases[n - 1].ms = ms.saturating_sub(head).max(1);
        let iteration_ms = phases.iter().map(|p| p.ms).sum();
        Profile {
            phases,
            iteration_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dilation holds each demand `pad` ms more on both sides, around the
    /// circle: Up [200, 250) of 250 becomes [199, 250) plus [0, 1) after
    /// the wrap; the mean demand grows by 2 ms; no pad is the profile.
    #[test]
    fn dilation_pads_every_demand_on_both_sides_around_the_circle() {
        let p = Profile::up_down(250, 0.2);
        let d = p.dilated(1);
        let shape: Vec<(u32, f64)> = d.phases().iter().map(|x| (x.ms, x.demand)).collect();
        assert_eq!(shape, vec![(1, 1.0), (198, 0.0), (51, 1.0)]);
        assert_eq!(d.iteration_ms(), 250);
        assert!((d.duty() - 52.0 / 250.0).abs() < 1e-12);
        assert_eq!(p.dilated(0), p);
        // Two levels: the higher demand wins where the pads meet (0.5 gains
        // 2 ms before and loses 2 ms to 1.0 after; 1.0 wraps 2 ms).
        let two = Profile::new(vec![
            Phase {
                ms: 10,
                demand: 0.0,
            },
            Phase { ms: 5, demand: 0.5 },
            Phase { ms: 5, demand: 1.0 },
        ])
        .unwrap();
        let shape: Vec<(u32, f64)> = (two.dilated(2).phases().iter())
            .map(|x| (x.ms, x.demand))
            .collect();
        assert_eq!(shape, vec![(2, 1.0), (6, 0.0), (5, 0.5), (7, 1.0)]);
    }

    #[test]
    fn a_profiles_file_gives_multi_phase_patterns_by_model() {
        let text = "gpt3:\n  - {ms: 40, demand: 0}\n  - {ms: 12, demand: 0.6}\n  - {ms: 30, demand: 0}\n  - {ms: 18, demand: 1}\n";
        let p = Profiles::from_text("p.yaml", text).unwrap();
        assert_eq!(p.len(), 1);
        let mut w = Workload {
            model: Some("gpt3".into()),
            ..Workload::default()
        };
        let g = p.of_workload(&w);
        assert_eq!((g.iteration_ms(), g.phases().len()), (100, 4));
        assert!((g.duty() - (12.0 * 0.6 + 18.0) / 100.0).abs() < 1e-12);
        // The trace's iteration time stretches the pattern.
        w.iteration_ms = Some(200);
        let s = p.of_workload(&w);
        assert_eq!(s.iteration_ms(), 200);
        assert!((s.duty() - g.duty()).abs() < 1e-9);
        // Any other model: the default Up-Down.
        w.model = Some("resnet50".into());
        assert_eq!(p.of_workload(&w), Profile::of_workload(&w));
        // JSON too.
        let j = Profiles::from_text("p.json", r#"{"m": [{"ms": 5, "demand": 1}]}"#).unwrap();
        assert_eq!(j.len(), 1);
    }

    #[test]
    fn bad_profiles_files_name_the_file_line_model_and_phase() {
        let e = Profiles::from_text("p.yaml", "m:\n  - {ms: 10, demand: 2}\n").unwrap_err();
        let e = e.to_string();
        assert!(e.contains("p.yaml: model `m`: phase 0: demand 2"), "{e}");
        let e = Profiles::from_text("p.yaml", "m:\n  - {ms: 10, rate: 1}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.yaml:2:") && e.contains("unknown field `rate`"),
            "{e}"
        );
        let e = Profiles::from_text("p.yaml", "m: []\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("model `m`: a profile needs 1 to 64 phases"),
            "{e}"
        );
        let deep = format!("m: {}{}\n", "[".repeat(20), "]".repeat(20));
        let e = Profiles::from_text("p.yaml", &deep)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nesting deeper than 8"), "{e}");
        let e = Profiles::read_file(Path::new("/nonexistent/p.yaml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/p.yaml: cannot read"),
            "{e}"
        );
    }

    #[test]
    fn vgg16_of_fig_4_3_is_a_200_degree_down_arc_then_up() {
        // Fig. 4.3(c): iteration 255 ms, Down 141 ms (the uncoloured arc,
        // "200 degrees" in the figure: 141 / 255 x 360 = 199.1).
        let p = Profile::up_down(255, 114.0 / 255.0);
        assert_eq!(p.iteration_ms(), 255);
        assert_eq!(
            p.phases(),
            &[
                Phase {
                    ms: 141,
                    demand: 0.0
                },
                Phase {
                    ms: 114,
                    demand: 1.0
                }
            ]
        );
        let down_degrees = 360.0 * 141.0 / 255.0;
        assert!((down_degrees - 200.0_f64).abs() < 1.0, "{down_degrees}");
        assert_eq!(p.mean_demand(0.0, 141.0), 0.0);
        assert_eq!(p.mean_demand(141.0, 255.0), 1.0);
        assert!((p.mean_demand(131.0, 151.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn defaults_and_edges() {
        let w = Workload::default();
        let p = Profile::of_workload(&w);
        assert_eq!(p.iteration_ms(), DEFAULT_ITERATION_MS);
        assert!((p.duty() - w.comm_fraction).abs() < 1e-3);
        assert_eq!(Profile::up_down(100, 0.0).phases().len(), 1);
        assert_eq!(Profile::up_down(100, 1.0).duty(), 1.0);
        assert_eq!(Profile::up_down(100, f64::NAN).duty(), 0.0);
        assert!(matches!(Profile::new(vec![]), Err(ProfileError::Phases(0))));
        let bad = Profile::new(vec![Phase {
            ms: 10,
            demand: 1.5,
        }]);
        assert!(bad.unwrap_err().to_string().contains("phase 0: demand 1.5"));
        let long = Profile::new(vec![
            Phase {
                ms: MAX_ITERATION_MS,
                demand: 0.0,
            },
            Phase { ms: 1, demand: 1.0 },
        ]);
        assert!(matches!(long, Err(ProfileError::TooLong(_))));
    }
}
