//! `vclos serve`: the long-running control plane (`vclos::server`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use vclos::server::{self, Config, Token};

use super::fabric::{runtime, FabricArgs};

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    fabric: FabricArgs,
    /// Address and port to listen on; anything but loopback needs
    /// `--token-file`.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8088")]
    listen: SocketAddr,
    /// File holding the bearer token every `/v1` request must carry
    /// (`Authorization: Bearer <token>`); never logged. Without it requests
    /// are not authenticated and the service listens on loopback only.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Seconds a request may wait and run before it is answered 503 (a
    /// transaction it started still completes or rolls back).
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    request_timeout: u64,
    /// Changes that may wait for the one in flight; more are answered 503
    /// with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_waiting: usize,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs
    /// `--tls-key`. Without TLS the bearer token travels in clear.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `--tls-cert`; never
    /// logged.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

pub fn run(a: ServeArgs) -> Result<ExitCode> {
    let token = match &a.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading --token-file {}", path.display()))?;
            Some(Token::from_file_text(&text).with_context(|| path.display().to_string())?)
        }
        None => None,
    };
    // Read before the state is touched: a bad file names itself.
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(server::Tls::from_pem_files(cert, key)?),
        _ => None,
    };
    let config = Config {
        listen: a.listen,
        token,
        request_timeout: Duration::from_secs(a.request_timeout.max(1)),
        max_waiting: a.max_waiting,
        tls,
    };
    runtime()?.block_on(async {
        // Refused before the state is touched.
        if config.token.is_none() && !config.listen.ip().is_loopback() {
            return Err(server::ServeError::OpenListener(config.listen).into());
        }
        // The lock is held for the service's life; released on drop.
        let fabric = a.fabric.open("serve", None).await?;
        server::serve(fabric, config, std::future::pending()).await?;
        Ok(ExitCode::SUCCESS)
    })
}
