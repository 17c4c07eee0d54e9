//! A server of the Envoy benchmarks: a tonic service on the gateway's listener (a free loopback
//! port), as `serve` runs it, until dropped; the service itself over rules written for the run.

use std::convert::Infallible;
use std::net::SocketAddr;

use ratelimit_gateway::runtime::{self, Address, Connections, Listener, ShutdownTrigger};
use testkit::{BoxError, TempDir};
use tower::Service;

/// A server listening on `addr` until dropped.
pub(crate) struct Served {
    pub(crate) addr: SocketAddr,
    _trigger: ShutdownTrigger,
    _rules: Option<TempDir>,
}

impl Served {
    /// Serves `service` (inside the servers' runtime) as `serve` does.
    pub(crate) async fn start<S>(service: S) -> Result<Served, BoxError>
    where
        S: Service<
                http::Request<hyper::body::Incoming>,
                Response = http::Response<tonic::body::Body>,
                Error = Infallible,
            > + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let listener = Listener::tcp(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let Address::Tcp(addr) = listener.address()? else {
            return Err("not a TCP listener".into());
        };
        let (trigger, shutdown) = ShutdownTrigger::new();
        let handler = move |request| {
            let mut service = service.clone();
            async move {
                match service.call(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            }
        };
        tokio::spawn(runtime::serve_connections(
            listener,
            Connections::defaults(),
            runtime::Workers::none(),
            handler,
            shutdown,
        ));
        Ok(Served {
            addr,
            _trigger: trigger,
            _rules: None,
        })
    }

    /// Serves Envoy's rate limit service over `rules` (file name, YAML), its stores the TOML
    /// `stores` (none: in process), as [`crate::service::load`] loads it.
    pub(crate) async fn rules(rules: &[(&str, &str)], stores: &str) -> Result<Served, BoxError> {
        let (service, dir) = crate::service::load(rules, stores)?;
        let served = Served::start(service.grpc()).await?;
        Ok(Served {
            _rules: Some(dir),
            ..served
        })
    }
}
