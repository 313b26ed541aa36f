//! TLS for `vclos serve` (`--tls-cert`, `--tls-key`): rustls with the
//! `ring` provider (already built for russh; no cmake or nasm).
//!
//! The certificate chain and key are PEM files, read once at startup; an
//! error names the file at fault. [`TlsListener`] hands axum's own accept
//! loop (`axum::serve`) connections whose handshake is done, so plain HTTP
//! and HTTPS share one serving path and one graceful shutdown: the
//! listener stops accepting, requests in flight finish.
//!
//! Handshakes run in their own tasks (a client that stalls its handshake
//! holds up no other), at most [`MAX_HANDSHAKES`] at once, each bounded by
//! [`HANDSHAKE_TIMEOUT`]. A connection that does not speak TLS (plain HTTP
//! to the TLS port) fails its handshake and is closed.

use super::conn::per_connection;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use super::ServeError;

/// Longest a client may take over its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes under way at once; further connections wait to start theirs.
pub const MAX_HANDSHAKES: usize = 256;

/// The service's TLS settings: a rustls server configuration holding the
/// certificate chain and its key. `Debug` shows the certificate file only.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ServerConfig>,
    cert: PathBuf,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

/// Largest PEM file read (a chain of a few certificates is kilobytes).
pub const MAX_PEM_BYTES: usize = 1024 * 1024;

impl Tls {
    /// Read a PEM certificate chain (leaf first) and its PEM private key
    /// (PKCS#8, PKCS#1 or SEC1). Errors name the file at fault.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls, ServeError> {
        let error = |what, file: &Path, message: String| ServeError::Tls {
            what,
            file: file.to_path_buf(),
            message,
        };
        let bad_cert = |message| error("TLS certificate file", cert, message);
        let bad_key = |message| error("TLS key file", key, message);
        let cert_pem =
            vclos_core::yaml::read_bytes_capped(cert, MAX_PEM_BYTES).map_err(bad_cert)?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad_cert(format!("not a PEM certificate chain: {e}")))?;
        if chain.is_empty() {
            return Err(bad_cert("no PEM CERTIFICATE section in it".into()));
        }
        let key_pem = vclos_core::yaml::read_bytes_capped(key, MAX_PEM_BYTES).map_err(bad_key)?;
        let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            bad_key(format!(
                "no PEM private key (PKCS#8, PKCS#1 or SEC1) in it: {e}"
            ))
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad_cert(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| match e {
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                    bad_key(format!(
                        "the key does not belong to the certificate in {}",
                        cert.display()
                    ))
                }
                rustls::Error::InconsistentKeys(_) => {
                    bad_cert("the certificate's public key cannot be read".to_string())
                }
                e => bad_key(format!("unusable private key: {e}")),
            })?;
        // The router speaks HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            config: Arc::new(config),
            cert: cert.to_path_buf(),
        })
    }

    /// The certificate file (for the startup log; the key is never shown).
    pub fn cert_file(&self) -> &Path {
        &self.cert
    }
}

/// A TCP listener whose connections come out with their TLS handshake
/// done ([`axum::serve::Listener`]). Dropping it stops accepting.
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: JoinHandle<()>,
}

impl TlsListener {
    /// Accept on `tcp` (in a task of the current runtime) with `tls`.
    pub fn new(tcp: TcpListener, tls: &Tls) -> io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(Arc::clone(&tls.config));
        let (tx, ready) = mpsc::channel(MAX_HANDSHAKES);
        let accepting = tokio::spawn(accept_loop(tcp, acceptor, tx));
        Ok(TlsListener {
            ready,
            local,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let (stream, peer) = match tcp.accept().await {
            Ok(c) => c,
            Err(e) if per_connection(&e) => continue,
            Err(e) => {
                // Out of file descriptors and the like: wait, as axum does.
                warn!(error = %e, "accepting a connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    drop(slot);
                    // Fails only once the listener is gone (shutting down).
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}
