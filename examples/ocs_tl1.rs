//! Serve the testbed OCS over Telnet/TL1 on loopback, for poking at it with
//! `telnet 127.0.0.1 <port>` until `vclos emu serve` does this for a whole
//! fabric. The password is read from `VCLOS_PASSWORD` (user `admin`).
//!
//! `cargo run --example ocs_tl1 -- [port]`

use std::net::SocketAddr;
use std::sync::Arc;

use vclos::emulator::busy::NeverBusy;
use vclos::emulator::ocs::OcsModel;
use vclos::emulator::tl1::{self, Login, Tl1Options};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let port: u16 = std::env::args().nth(1).map_or(Ok(0), |p| p.parse())?;
    let text = include_str!("../topologies/testbed-ocs.yaml");
    let topo = vclos::topology::from_str("testbed-ocs.yaml", text)?;
    let id = topo
        .ocs_id("ocs1")
        .ok_or_else(|| anyhow::anyhow!("no ocs1"))?;
    let model = OcsModel::from_topology(&topo, id, Arc::new(NeverBusy))
        .ok_or_else(|| anyhow::anyhow!("no ocs1"))?;
    let password =
        std::env::var("VCLOS_PASSWORD").map_err(|_| anyhow::anyhow!("set VCLOS_PASSWORD"))?;
    let opts = Tl1Options {
        bind: SocketAddr::from(([127, 0, 0, 1], port)),
        ..Tl1Options::new(Login {
            username: "admin".into(),
            password,
        })
    };
    let server = tl1::serve(Arc::new(model), opts).await?;
    println!(
        "ocs1 TL1 on {} (telnet, plaintext); Ctrl-C stops",
        server.local_addr()
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}
