//! The network model of a replay (issue 14): how fast jobs run when they
//! share links.
//!
//! The paper's simulator (RapidNetSim, Section 9.1) gives each flow of a
//! collective step a link's bandwidth divided by the flows on it; a step
//! lasts as long as its slowest flow. vclos keeps that rule in a fluid form
//! that is cheap enough to replay thousands of jobs:
//!
//! * **Traffic** ([`traffic`]): a job's collective (`ring`, `hd`,
//!   `alltoall`, from the trace's workload columns) is a set of flows
//!   between its GPUs on different servers, each with the share of a NIC's
//!   line rate it would get on the job's own full-bandwidth network. Steps
//!   of a collective are not simulated one by one: the flows of all steps
//!   are present at once, each weighted by its step's share of the
//!   communication time, so a GPU's flows add up to one NIC.
//! * **Sharing** ([`fairshare`]): link capacity is shared max-min fairly
//!   (water-filling) among the flows crossing it; a job's communication
//!   runs at the rate of its slowest flow relative to its isolated rate.
//!
//! Only fabric links are modelled (leaf to spine and spine to leaf, one
//! directed link per direction): a NIC and its leaf port carry one GPU's,
//! hence one job's, traffic, which the weights already keep within line
//! rate; intra-server traffic (NVLink) never reaches the fabric.

pub mod fairshare;
pub mod masks;
pub mod model;
pub mod peak;
pub mod routes;
mod runs;
pub mod sums;
pub mod traffic;
