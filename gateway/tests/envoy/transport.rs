//! Over the wire: a tonic client of envoy-types, h2c on TCP and on a Unix socket, as Envoy
//! connects; and a raw HTTP/2 client sending what grpcio sends on a Unix socket, an
//! `:authority` that is no host.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimit_gateway::runtime::Listener;
use tower_redis_ratelimit::admission::FailureMode;

use crate::differences::TWO_LIMITS;
use std::net::SocketAddr;

use ratelimit_gateway::runtime::{Address, Connections};

use crate::raw_h2::{Answer, should_rate_limit};
use crate::support::{Files, codes, request, serve, serve_with, tcp, unix_client};

#[tokio::test]
async fn envoys_client_is_answered_over_tcp() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let (_served, mut client) = tcp(rules.service(FailureMode::Open)).await;
    let user = request("api", &[&[("user", "dave")]]);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let answer = client
            .should_rate_limit(user.clone())
            .await
            .unwrap()
            .into_inner();
        seen.push(codes(&answer).1);
    }
    assert_eq!(seen, [Code::Ok, Code::Ok, Code::Ok, Code::OverLimit]);
    let empty = client
        .should_rate_limit(request("", &[]))
        .await
        .unwrap_err();
    assert_eq!(empty.message(), "rate limit domain must not be empty");
}

#[tokio::test]
async fn envoys_client_is_answered_on_a_unix_socket() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let socket = rules.dir.path().join("rls.sock");
    let listener = Listener::unix(&socket).expect("the socket");
    let _served = serve(rules.service(FailureMode::Open), listener);
    let mut client = unix_client(&socket).await;
    let answer = client
        .should_rate_limit(request("api", &[&[("user", "erin")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(codes(&answer), (vec![Code::Ok], Code::Ok));
    assert_eq!(answer.statuses[0].limit_remaining, 2);
}

/// The `:authority` grpcio (1.85) sends on a channel to `unix:/tmp/serve.sock`: the socket's path,
/// percent-encoded, its first `/` dropped.
const GRPCIO_UNIX_AUTHORITY: &[u8] = b"tmp%2Fserve.sock";

/// Authorities that `http::uri::Authority` refuses, which h2 answers with PROTOCOL_ERROR.
const NO_HOSTS: [&[u8]; 3] = [GRPCIO_UNIX_AUTHORITY, b"unix:%2Ftmp%2Fserve.sock", b"a b"];

/// Three calls on one connection with `authority`, each for a user of its own: the codes and
/// what remains, or the resets.
async fn three_calls<Io>(io: Io, authority: &[u8], user: &str) -> Vec<Result<u32, u32>>
where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let asked = request("api", &[&[("user", user)]]);
    let answers = should_rate_limit(io, authority, &asked, 3).await;
    answers
        .into_iter()
        .map(|answer| match answer {
            Answer::Answered(answer) => {
                assert_eq!(codes(&answer).1, Code::Ok);
                Ok(answer.statuses[0].limit_remaining)
            }
            Answer::Reset(code) => Err(code),
        })
        .collect()
}

#[tokio::test]
async fn any_authority_is_answered_on_a_unix_socket_and_on_tcp() {
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let socket = rules.dir.path().join("rls.sock");
    let service = rules.service(FailureMode::Open);
    let _on_socket = serve(
        service.clone(),
        Listener::unix(&socket).expect("the socket"),
    );
    let tcp = Listener::tcp(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let Address::Tcp(addr) = tcp.address().unwrap() else {
        panic!("not TCP")
    };
    let _on_tcp = serve(service, tcp);
    for (index, authority) in NO_HOSTS.into_iter().chain([&b"localhost"[..]]).enumerate() {
        // The later calls name the first one's authority by its entry in the dynamic table:
        // the replacement kept the entry's size, so h2's table and the client's agree.
        let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
        let user = format!("unix-{index}");
        assert_eq!(
            three_calls(stream, authority, &user).await,
            [Ok(2), Ok(1), Ok(0)]
        );
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let user = format!("tcp-{index}");
        assert_eq!(
            three_calls(stream, authority, &user).await,
            [Ok(2), Ok(1), Ok(0)]
        );
    }
}

#[tokio::test]
async fn a_listener_that_takes_no_authority_as_it_comes_resets_those_streams() {
    // `proxy`'s listeners (`any_authority: false`): a malformed request is not forwarded.
    let rules = Files::new(&[("api.yaml", TWO_LIMITS)], "");
    let socket = rules.dir.path().join("strict.sock");
    let strict = Connections::defaults();
    assert!(!strict.any_authority);
    let _served = serve_with(
        rules.service(FailureMode::Open),
        Listener::unix(&socket).unwrap(),
        strict,
    );
    let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
    assert_eq!(
        three_calls(stream, GRPCIO_UNIX_AUTHORITY, "strict").await,
        [Err(1), Err(1), Err(1)],
        "PROTOCOL_ERROR, as h2 answers"
    );
}
