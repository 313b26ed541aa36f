//! Reading devices back: running configurations through the real drivers,
//! parsed in each device's dialect, and compared with intent (drift).
//!
//! Used where the state file cannot be trusted on its own: after a crash
//! (recovery decides from what the devices hold), by `reconcile`, and by
//! `status`. Reads run concurrently, one fresh driver per device.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tracing::Instrument;
use vclos_drivers::{DriverError, ErrorKind, Step};

use super::changes::{compare, expected, managed};
use super::JobsError;
use crate::controller::DriverFactory;
use crate::dialect::dialect;
use crate::intent::{FabricIntent, Item};
use crate::topology::{Role, Topology};

/// Open a device, read its running configuration, close it.
pub async fn get_config(
    factory: &Arc<dyn DriverFactory>,
    device: &str,
    timeout: Duration,
) -> Result<String, DriverError> {
    let mut drv = factory.driver(device)?;
    let name = device.to_string();
    let work = async {
        drv.open().await?;
        let text = drv.get_config().await;
        let _ = drv.close().await;
        text
    };
    let timed_out = DriverError {
        device: name.clone(),
        step: Step::GetConfig,
        kind: ErrorKind::Timeout(timeout),
    };
    tokio::time::timeout(timeout, work)
        .instrument(tracing::info_span!("read", device = %name))
        .await
        .unwrap_or(Err(timed_out))
}

/// Running configurations of `devices`, concurrently, in the given order.
pub async fn read_all(
    factory: &Arc<dyn DriverFactory>,
    devices: &[String],
    timeout: Duration,
) -> Vec<(String, Result<String, DriverError>)> {
    let mut set = JoinSet::new();
    for (i, d) in devices.iter().enumerate() {
        let f = Arc::clone(factory);
        let d = d.clone();
        set.spawn(async move {
            let r = get_config(&f, &d, timeout).await;
            (i, d, r)
        });
    }
    let mut out: Vec<Option<(String, Result<String, DriverError>)>> =
        (0..devices.len()).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        if let Ok((i, d, r)) = joined {
            out[i] = Some((d, r));
        }
    }
    out.into_iter()
        .zip(devices)
        .map(|(r, d)| {
            r.unwrap_or_else(|| {
                (
                    d.clone(),
                    Err(DriverError {
                        device: d.clone(),
                        step: Step::GetConfig,
                        kind: ErrorKind::Protocol("read task failed".into()),
                    }),
                )
            })
        })
        .collect()
}

/// The vclos-managed items a device runs, parsed from its configuration.
pub fn parse_managed(
    topo: &Topology,
    base: &FabricIntent,
    device: &str,
    text: &str,
) -> Result<BTreeSet<Item>, JobsError> {
    let id = topo
        .device_id(device)
        .ok_or_else(|| JobsError::UnknownDevice(device.to_string()))?;
    let items = dialect(topo.device(id).mgmt.dialect).parse(device, text)?;
    Ok(managed(base, device, items))
}

/// How one device's running configuration differs from intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub device: String,
    pub role: Role,
    /// In intent, not on the device.
    pub missing: Vec<Item>,
    /// On the device (on a port vclos manages), not in intent.
    pub extra: Vec<Item>,
    /// Steering vclos did not write on (or onto) a port vclos manages
    /// ([`Item::ForeignSteering`]): reported, never deleted by vclos.
    pub foreign: Vec<Item>,
}

impl Drift {
    /// Nothing to report: vclos's items match and no foreign steering.
    pub fn is_empty(&self) -> bool {
        self.holds_intent() && self.foreign.is_empty()
    }

    /// vclos's own items are exactly the intent (foreign steering aside).
    pub fn holds_intent(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty()
    }
}

/// A device's running items set against its intent.
pub fn drift(intent: &FabricIntent, device: &str, have: &BTreeSet<Item>) -> Option<Drift> {
    let want = intent.device(device)?;
    let (foreign, own): (BTreeSet<Item>, BTreeSet<Item>) =
        have.iter().cloned().partition(Item::is_foreign);
    let (missing, extra) = compare(&own, &expected(want));
    Some(Drift {
        device: device.to_string(),
        role: want.role,
        missing,
        extra,
        foreign: foreign.into_iter().collect(),
    })
}
