//! Sharing links between jobs whose communication interleaves (issue 16;
//! Cassini, seed 001 Chapter 4). vClos's answer to "no free isolated
//! slice" is to wait; Cassini's is to let jobs share a link when their
//! periodic communication phases can be shifted apart in time.
//!
//! This module is the pure computation, with no placement or device in
//! it, in three steps that follow the thesis:
//!
//! 1. [`profile`]: a job's periodic network demand over one iteration
//!    (Section 4.1, Fig. 4.3: an Up and a Down phase, or several).
//! 2. [`circle`]: the link-level geometric abstraction (Section 4.3,
//!    Table 4.1): every job on a link placed on one *unified circle* whose
//!    perimeter is the LCM of their iteration times, rotated to minimise
//!    the demand above the link's capacity; the compatibility score
//!    (Eq. 4.1-4.4) and the time shifts (Eq. 4.5).
//! 3. [`affinity`]: the cluster-level step (Section 4.4.1, Algorithm 1):
//!    one time shift per job that keeps every link's relative shifts, by a
//!    BFS over the bipartite jobs/links *Affinity graph*; graphs with loops
//!    are rejected (Algorithm 2).
//!
//! The placer's sharing mode that uses it is `crate::placement::shared`
//! (issue 16, item 4). Not here yet: MLTCP in the network model (item 5),
//! and configuring shared links on devices (802.1Q sub-interfaces); their
//! design is in docs/cassini.md.

pub mod affinity;
pub mod circle;
pub mod periodic;
pub mod profile;
