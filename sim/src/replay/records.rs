//! One record per trace job (`vclos replay --jobs-out FILE`): when it
//! arrived, started and ended, what its slice held, and how it started.
//!
//! The report's averages say *that* two policies differ; the records say
//! for which jobs (by size, by arrival, backfilled or not), the way Slurm's
//! `sacct` lists each job's submit, start and end times next to the
//! cluster-wide figures of `sreport`. Written as CSV, one row per job in
//! trace order, header first; every field is a number, a validated job id
//! (no comma or quote can occur: `crate::names`) or one of the fixed words
//! below, so no field needs quoting. A job that never started has empty
//! time fields.

use std::io::{self, Write};

use crate::names::JobId;

/// How a job ended up (`outcome` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fate {
    /// Started and ran to its end.
    Completed,
    /// Dropped: larger than the fabric (`rejected`), or no slice of its
    /// size or any larger one (`unplaceable`).
    Dropped,
    /// Still queued or running when the trace ran out of events (cannot
    /// happen in a finished replay; kept so a record is never guessed).
    #[default]
    Unfinished,
}

impl Fate {
    fn word(self) -> &'static str {
        match self {
            Fate::Completed => "completed",
            Fate::Dropped => "dropped",
            Fate::Unfinished => "unfinished",
        }
    }
}

/// Who the `place` call that started a job was for (`started_as` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartedAs {
    /// The queue's head.
    Head,
    /// A job behind a blocked head (`--backfill`), placed as usual.
    Behind,
    /// A job behind a blocked head, placed apart from the head's reserved
    /// slice (`--backfill slices`).
    Apart,
}

impl StartedAs {
    fn word(self) -> &'static str {
        match self {
            StartedAs::Head => "head",
            StartedAs::Behind => "behind",
            StartedAs::Apart => "apart",
        }
    }
}

/// One job of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub job: JobId,
    /// GPUs it asked for.
    pub gpus: u32,
    pub arrival_s: f64,
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    /// GPUs its decision held (more than `gpus` when rounded up to whole
    /// servers or a larger shape).
    pub held_gpus: u32,
    /// The placement stage that placed it (`leaf`, `vclos`, `ocs-vclos`...).
    pub stage: &'static str,
    /// Distinct leaves and spines of its slice (0 for a job in one leaf).
    pub leaves: u32,
    pub spines: u32,
    pub started_as: Option<StartedAs>,
    /// Its `place` calls refused on GPUs / on the network.
    pub blocked_gpu: u32,
    pub blocked_network: u32,
    pub fate: Fate,
}

/// The CSV header, in column order.
pub const HEADER: &str = "job_id,gpus,arrival_s,start_s,end_s,wait_s,jct_s,held_gpus,stage,\
leaves,spines,started_as,blocked_gpu,blocked_network,outcome";

/// Write `records` as CSV (module doc): the header, then one row each.
pub fn write_csv(records: &[JobRecord], mut out: impl Write) -> io::Result<()> {
    writeln!(out, "{HEADER}")?;
    for r in records {
        let time = |t: Option<f64>| t.map(|t| format!("{t:.3}")).unwrap_or_default();
        let wait = r.start_s.map(|s| s - r.arrival_s);
        let jct = r.end_s.map(|e| e - r.arrival_s);
        writeln!(
            out,
            "{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.job,
            r.gpus,
            r.arrival_s,
            time(r.start_s),
            time(r.end_s),
            time(wait),
            time(jct),
            r.held_gpus,
            r.stage,
            r.leaves,
            r.spines,
            r.started_as.map_or("", StartedAs::word),
            r.blocked_gpu,
            r.blocked_network,
            r.fate.word(),
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(job: &str) -> JobRecord {
        JobRecord {
            job: JobId::new(job).unwrap(),
            gpus: 24,
            arrival_s: 10.0,
            start_s: Some(12.5),
            end_s: Some(112.5),
            held_gpus: 32,
            stage: "ocs-vclos",
            leaves: 3,
            spines: 2,
            started_as: Some(StartedAs::Apart),
            blocked_gpu: 1,
            blocked_network: 4,
            fate: Fate::Completed,
        }
    }

    #[test]
    fn rows_follow_the_header_and_a_job_never_started_has_empty_times() {
        let mut dropped = record("j2");
        (dropped.start_s, dropped.end_s, dropped.started_as) = (None, None, None);
        (dropped.held_gpus, dropped.stage, dropped.fate) = (0, "", Fate::Dropped);
        let mut out = Vec::new();
        write_csv(&[record("j1"), dropped], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HEADER);
        assert_eq!(
            lines[1],
            "j1,24,10.000,12.500,112.500,2.500,102.500,32,ocs-vclos,3,2,apart,1,4,completed"
        );
        assert_eq!(lines[2], "j2,24,10.000,,,,,0,,3,2,,1,4,dropped");
        let columns = HEADER.split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == columns));
    }
}
