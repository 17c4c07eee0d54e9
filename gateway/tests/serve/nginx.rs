//! A real nginx, configured as gateway/docs/gateways.md says, asking `serve` through `auth_request`:
//! what a client of nginx sees.

use crate::scenarios::{self, every_gateways_scenarios};
use crate::support::Kind;

every_gateways_scenarios!(Kind::Nginx);

/// nginx asks a `serve` beside it on its Unix socket: no network hop, and the socket's peers
/// are trusted gateways. nginx's request id names the request in `serve`'s log and upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_over_a_unix_socket() {
    let (admitted, entry) = scenarios::over_a_unix_socket(Kind::Nginx).await;
    let id = admitted.header("x-seen-request-id");
    assert_eq!(id.len(), 32, "{id}");
    assert_eq!(entry["request_id"], id.as_str());
}
