//! `vclos serve`: the long-running control plane (`vclos::server`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use vclos::jobs::Fabric;
use vclos::server::{self, Config, Token};

use super::fabric::{runtime, FabricArgs};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Topology file (device endpoints and credential references).
    #[arg(long)]
    topology: PathBuf,
    /// State directory (`DIR/state.json`, `DIR/journal.json`, `DIR/lock`);
    /// it must exist unless `--init` is given. Not with `--store etcd`.
    #[arg(
        long,
        value_name = "DIR",
        required_if_eq("store", "dir"),
        conflicts_with = "etcd_endpoints"
    )]
    state: Option<PathBuf>,
    /// Create the state (no job held) if it does not exist yet: the state
    /// directory (one holding anything else is refused), or the state keys
    /// in etcd.
    #[arg(long)]
    init: bool,
    /// Seconds to wait for the writer lock while another writer holds it
    /// (then fail, naming the holder; 0: do not wait).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    wait: u64,
    /// Where the state lives: `dir` (the state directory, `--state`) or
    /// `etcd` (`--etcd-endpoints`; needs a vclos built with `--features
    /// etcd`).
    #[arg(long, value_enum, default_value_t = StoreKind::Dir)]
    store: StoreKind,
    /// With `--store etcd`: the cluster's client URLs, comma-separated.
    #[arg(
        long,
        value_name = "URL,...",
        value_delimiter = ',',
        required_if_eq("store", "etcd")
    )]
    etcd_endpoints: Vec<String>,
    /// With `--store etcd`: keys are `PREFIX/TOPOLOGY/{state,journal,txn,lock}`.
    #[arg(long, value_name = "PREFIX", default_value = "/vclos")]
    etcd_prefix: String,
    /// With `--store etcd`: seconds the writer lock's lease lives without
    /// this process (a killed writer's lock is gone after this).
    #[arg(long, value_name = "SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    etcd_lease_ttl: u64,
    /// With `--store etcd`: the URL other instances give clients for this
    /// one while it leads (the instance starts as a follower and campaigns;
    /// docs/ha.md). Default: `http(s)://` and the listening address.
    #[arg(long, value_name = "URL", value_parser = advertised_url, requires = "etcd_endpoints")]
    advertise_url: Option<String>,
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
    /// Seconds a client may take to send a request's head, counted from
    /// when its connection opens or its previous answer was sent (so also
    /// how long an idle connection is kept); then the connection is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = server::HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout: u64,
    /// Seconds a request's body may take to arrive after its head (then
    /// 408).
    #[arg(long, value_name = "SECONDS", default_value_t = server::BODY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    body_timeout: u64,
    /// Connections served at once; more are closed as soon as accepted.
    /// Keep it well below the descriptor limit (`ulimit -n`).
    #[arg(long, value_name = "N", default_value_t = server::MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// Connections served at once from one client address; more from it
    /// are closed as soon as accepted, so one client cannot hold them all.
    /// Raise it for clients behind one NAT or proxy.
    #[arg(long, value_name = "N", default_value_t = server::MAX_PER_CLIENT as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections_per_client: u64,
    /// Seconds a write to a client may wait for it to read (it stopped
    /// reading); then the connection is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = server::WRITE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    write_timeout: u64,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs
    /// `--tls-key`. Without TLS the bearer token travels in clear.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `--tls-cert`; never
    /// logged.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// `--store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// The state directory (`--state DIR`).
    Dir,
    /// An etcd cluster (`--etcd-endpoints`).
    Etcd,
}

pub fn run(a: ServeArgs) -> Result<ExitCode> {
    let token = match &a.token_file {
        Some(path) => {
            let text =
                vclos_core::yaml::read_text_capped(path, vclos::client::MAX_TOKEN_FILE as usize)
                    .map_err(|why| {
                        anyhow::anyhow!("reading --token-file {}: {why}", path.display())
                    })?;
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
        elect: (a.store == StoreKind::Etcd).then(|| a.advertise_url.clone()),
    };
    let limits = server::Limits {
        header_timeout: Duration::from_secs(a.header_timeout),
        body_timeout: Duration::from_secs(a.body_timeout),
        max_connections: usize::try_from(a.max_connections).unwrap_or(usize::MAX),
        max_per_client: usize::try_from(a.max_connections_per_client).unwrap_or(usize::MAX),
        write_timeout: Duration::from_secs(a.write_timeout),
    };
    runtime()?.block_on(async {
        // Refused before the state is touched.
        if config.token.is_none() && !config.listen.ip().is_loopback() {
            return Err(server::ServeError::OpenListener(config.listen).into());
        }
        // The state directory's lock is held for the service's life
        // (released on drop); on etcd the service campaigns for it.
        let fabric = open(&a).await?;
        server::serve_limited(fabric, config, limits, std::future::pending()).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The fabric, its writer lock taken and any interrupted operation settled.
async fn open(a: &ServeArgs) -> Result<Fabric> {
    match (a.store, &a.state) {
        (StoreKind::Dir, Some(state)) => {
            let args = FabricArgs {
                topology: a.topology.clone(),
                state: state.clone(),
                init: a.init,
                wait: a.wait,
            };
            args.open("serve", None).await
        }
        (StoreKind::Dir, None) => anyhow::bail!("--state DIR is required with --store dir"),
        (StoreKind::Etcd, _) => open_etcd(a).await,
    }
}

#[cfg(feature = "etcd")]
async fn open_etcd(a: &ServeArgs) -> Result<Fabric> {
    use std::sync::Arc;
    use vclos::store::etcd::{EtcdOptions, EtcdStore};
    use vclos::store::Store as _;

    let topo = Arc::new(vclos::topology::load(&a.topology)?);
    let mut options = EtcdOptions::new(a.etcd_endpoints.clone());
    options.prefix = a.etcd_prefix.clone();
    options.lease_ttl = Duration::from_secs(a.etcd_lease_ttl);
    let store = EtcdStore::connect(options, &topo.name).await?;
    if a.init && store.init().await? {
        eprintln!("created the state in {}", store.location());
    }
    // A follower until it wins the lock (`vclos::server`'s leader
    // election), which then settles any journal as `settle` does.
    Ok(Fabric::load_store(topo, Arc::new(store)).await?)
}

/// `--advertise-url`: `http(s)://host[:port][/prefix]`, no credentials.
fn advertised_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or("must start with http:// or https://")?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("no host".into());
    }
    if rest.contains(['@', '?', '#']) || !s.bytes().all(|b| b.is_ascii_graphic()) || s.len() > 512 {
        return Err(
            "a base URL without credentials, query, fragment or spaces, at most 512 bytes".into(),
        );
    }
    Ok(s.trim_end_matches('/').to_string())
}

#[cfg(not(feature = "etcd"))]
async fn open_etcd(_: &ServeArgs) -> Result<Fabric> {
    anyhow::bail!(
        "this vclos was built without the etcd store: rebuild it with `--features etcd` (needs protoc, Debian protobuf-compiler)"
    )
}
