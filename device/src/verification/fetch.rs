//! Reading every device's running configuration through its real driver.
//!
//! Verification must read what the devices hold, not what vclos believes it
//! sent, so this goes through the same drivers as the controller (SSH CLI,
//! NETCONF, Telnet/TL1), a bounded number of devices at a time so a large
//! fabric neither opens hundreds of sessions at once nor waits on them one
//! by one. Each device's result is kept separately: one unreachable device
//! is reported by name, and the others are still read.

use std::collections::BTreeMap;
use std::sync::Arc;

use tracing::{debug, Instrument};
use vclos_drivers::{DriverError, ErrorKind, Step};

use crate::controller::fanout::bounded;
use crate::controller::DriverFactory;

/// Default number of devices read at once.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// Open, `get_config`, close, for each device; at most `max` at a time.
pub async fn fetch_configs(
    factory: Arc<dyn DriverFactory>,
    devices: Vec<String>,
    max: usize,
) -> BTreeMap<String, Result<String, DriverError>> {
    let names = devices.clone();
    let results = bounded(
        devices,
        max,
        |device| {
            let factory = Arc::clone(&factory);
            let span = tracing::info_span!("get_config", device = %device);
            async move { fetch_one(factory.as_ref(), &device).await }.instrument(span)
        },
        |_| {},
    )
    .await;
    names
        .into_iter()
        .zip(results)
        .map(|(device, r)| {
            let r = r.unwrap_or_else(|| {
                Err(DriverError {
                    device: device.clone(),
                    step: Step::GetConfig,
                    kind: ErrorKind::Protocol("the reading task panicked".into()),
                })
            });
            (device, r)
        })
        .collect()
}

async fn fetch_one(factory: &dyn DriverFactory, device: &str) -> Result<String, DriverError> {
    let mut drv = factory.driver(device)?;
    drv.open().await?;
    let text = drv.get_config().await;
    // A failed close after a successful read loses nothing.
    if let Err(e) = drv.close().await {
        debug!(error = %e, "close failed");
    }
    text
}
