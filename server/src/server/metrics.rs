//! `GET /metrics`: the service's counters and latency histograms in the
//! Prometheus text exposition format (OpenMetrics), through the official
//! Rust client `prometheus-client`.
//!
//! * `vclos_changes_total{action, outcome}`: admissions and releases by
//!   outcome (`committed`, `rolled_back`, `partial`: devices left
//!   unsettled, `refused`: nothing sent, by error);
//! * `vclos_failures_total{cause}`: refused or failed changes by cause (the
//!   HTTP status class a scheduler sees: `no_slice`, `invalid`, `busy`,
//!   `devices`, `internal`);
//! * `vclos_change_seconds{action}`: a change from taking the fabric to
//!   its report (placement, device transaction, state write);
//! * `vclos_device_errors_total{device}`: devices that failed or were not
//!   put back in a transaction;
//! * `vclos_jobs`: jobs held;
//! * `vclos_leader`: 1 while this instance leads (leader election,
//!   `--store etcd`), 0 while it follows.

use std::sync::atomic::AtomicI64;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChangeLabels {
    pub action: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabels {
    pub cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeviceLabels {
    pub device: String,
}

fn latency() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The registry and its metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Mutex<Registry>,
    pub changes: Family<ChangeLabels, Counter>,
    pub failures: Family<CauseLabels, Counter>,
    pub seconds: Family<ActionLabels, Histogram>,
    pub device_errors: Family<DeviceLabels, Counter>,
    pub jobs: Gauge<i64, AtomicI64>,
    /// 1 while this instance leads (always without leader election).
    pub leader: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("vclos");
        let changes = Family::<ChangeLabels, Counter>::default();
        let failures = Family::<CauseLabels, Counter>::default();
        let seconds =
            Family::<ActionLabels, Histogram>::new_with_constructor(latency as fn() -> Histogram);
        let device_errors = Family::<DeviceLabels, Counter>::default();
        let jobs = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "changes",
            "Admissions and releases by outcome",
            changes.clone(),
        );
        registry.register(
            "failures",
            "Refused or failed changes by cause",
            failures.clone(),
        );
        registry.register(
            "change_seconds",
            "A change from taking the fabric to its report",
            seconds.clone(),
        );
        registry.register(
            "device_errors",
            "Devices that failed in a transaction",
            device_errors.clone(),
        );
        registry.register("jobs", "Jobs held", jobs.clone());
        let leader = Gauge::<i64, AtomicI64>::default();
        leader.set(1);
        registry.register("leader", "1 while this instance leads", leader.clone());
        Metrics {
            registry: Mutex::new(registry),
            changes,
            failures,
            seconds,
            device_errors,
            jobs,
            leader,
        }
    }
}

impl Metrics {
    pub fn change(&self, action: &str, outcome: &str) {
        self.changes
            .get_or_create(&ChangeLabels {
                action: action.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    pub fn failure(&self, cause: &str) {
        self.failures
            .get_or_create(&CauseLabels {
                cause: cause.into(),
            })
            .inc();
    }

    pub fn took(&self, action: &str, seconds: f64) {
        self.seconds
            .get_or_create(&ActionLabels {
                action: action.into(),
            })
            .observe(seconds);
    }

    pub fn device_error(&self, device: &str) {
        self.device_errors
            .get_or_create(&DeviceLabels {
                device: device.into(),
            })
            .inc();
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}
