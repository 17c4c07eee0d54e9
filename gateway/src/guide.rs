//! The gateway's guides, kept in the repository's `docs/` beside the library's and included here:
//! they are about this binary, not about the library. This module holds documentation only.

/// `ratelimit-gateway proxy`, the rate-limiting reverse proxy: the limits of a file in front of a
/// service in any language; streaming, forwarding headers, WebSockets, reload and shutdown.
#[doc = include_str!("../docs/proxy.md")]
pub mod proxy {}

/// `ratelimit-gateway serve`, the decision service for gateways: nginx `auth_request`, Traefik
/// ForwardAuth and Caddy `forward_auth`, their tested configurations, a systemd unit, a sidecar on a
/// Unix socket.
#[doc = include_str!("../docs/gateways.md")]
pub mod gateways {}

/// `ratelimit-gateway serve` as Envoy's rate limit service: envoyproxy/ratelimit's files read
/// unchanged, what differs from it and why, the Envoy, Istio, Envoy Gateway and Contour
/// configuration, the metrics.
#[doc = include_str!("../docs/envoy.md")]
pub mod envoy {}
