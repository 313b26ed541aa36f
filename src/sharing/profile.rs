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

use thiserror::Error;

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

    /// Share of the iteration spent communicating, weighted by demand.
    pub fn duty(&self) -> f64 {
        self.mean_demand(0.0, f64::from(self.iteration_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
