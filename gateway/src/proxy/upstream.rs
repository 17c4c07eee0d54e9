//! The upstream: its URL, checked, and a keep-alive pool of connections to it, over TLS for an
//! `https://` upstream (rustls; Mozilla's roots, or the file's own CA).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::Uri;
use http::uri::{Authority, Scheme};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tower_redis_ratelimit::store::redact_url;

use super::upload::Upload;
use crate::config::FieldError;
use crate::runtime::current_worker;

/// How long connecting to the upstream may take: then 502.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The client that forwards requests.
pub(crate) type UpstreamClient = Client<HttpsConnector<HttpConnector>, RequestBody>;

/// A request body as it goes upstream: as the client sent it, or watched ([`Upload`]).
pub(crate) type RequestBody = http_body_util::Either<Body, Upload>;

/// The upstream's scheme and authority, and the clients to reach it: one per worker, so that
/// a worker's requests go out on connections that its own event loop drives.
#[derive(Clone)]
pub(crate) struct Upstream {
    clients: Arc<[UpstreamClient]>,
    pub(crate) scheme: Scheme,
    pub(crate) authority: Authority,
}

impl Upstream {
    /// The upstream at `url` (`http://host:port` or `https://host:port`, no path), reached by
    /// `workers` workers; `ca`, a PEM file of the certificates an `https://` upstream's must
    /// chain to, instead of Mozilla's.
    pub(crate) fn new(url: &str, ca: Option<&Path>, workers: usize) -> Result<Self, FieldError> {
        let field = |message: String| FieldError::new("proxy.upstream", message);
        // A mistake shows the URL without its password (from the environment, maybe).
        let shown = redact_url(url);
        let uri: Uri = url
            .parse()
            .map_err(|err| field(format!("{shown:?} is not a URL: {err}")))?;
        let scheme = match uri.scheme() {
            Some(scheme) if *scheme == Scheme::HTTP || *scheme == Scheme::HTTPS => scheme.clone(),
            _ => {
                return Err(field(format!(
                    "{shown:?}: write http://host:port or https://host:port"
                )));
            }
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| field(format!("{shown:?} has no host")))?;
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(field(format!(
                "{shown:?}: an upstream has no path: requests are forwarded with their own"
            )));
        }
        if ca.is_some() && scheme != Scheme::HTTPS {
            return Err(FieldError::new(
                "proxy.upstream_ca",
                format!("{shown:?} is not an https:// upstream"),
            ));
        }
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        http.set_nodelay(true);
        // The connector checks the scheme itself.
        http.enforce_http(false);
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|err| field(format!("TLS: {err}")))?
        .with_root_certificates(
            roots(ca).map_err(|message| FieldError::new("proxy.upstream_ca", message))?,
        )
        .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let clients = (0..workers.max(1))
            .map(|_| Client::builder(TokioExecutor::new()).build(connector.clone()))
            .collect();
        Ok(Self {
            clients,
            scheme,
            authority,
        })
    }

    /// The client of the worker that calls this (the first off the workers).
    pub(crate) fn client(&self) -> &UpstreamClient {
        let worker = current_worker().unwrap_or(0);
        &self.clients[worker % self.clients.len()]
    }
}

/// The certificates in the PEM file `ca`, or Mozilla's roots.
fn roots(ca: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match ca {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let certificates = CertificateDer::pem_file_iter(path)
                .map_err(|err| format!("{}: {err}", path.display()))?;
            for certificate in certificates {
                let certificate =
                    certificate.map_err(|err| format!("{}: {err}", path.display()))?;
                roots
                    .add(certificate)
                    .map_err(|err| format!("{}: {err}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!("{}: no certificate in it", path.display()));
            }
        }
    }
    Ok(roots)
}
