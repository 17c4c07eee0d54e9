//! Who the client is: the address a trusted gateway names, never what a client writes into
//! `X-Forwarded-For` itself, and the caller itself when it is no gateway.

use crate::support::{Serve, get, header, limits};

/// `serve` trusting 127.0.0.1 only, with `extra` lines in its `[serve]` table, a limit of 1.
fn serve(extra: &str) -> Serve {
    Serve::start(&format!(
        r#"
        [serve]
        listen = "127.0.0.1:0"
        gateways = ["127.0.0.1"]
        access_log = "off"
        {extra}
        {}
        "#,
        limits(1)
    ))
}

/// The status of a question from `from` about `/api/x`, with `headers`.
async fn status(serve: &Serve, from: &str, headers: &[(&str, &str)]) -> u16 {
    let mut asked = vec![("x-forwarded-uri", "/api/x")];
    asked.extend_from_slice(headers);
    let response = get(from, &serve.url("/forward_auth"), &asked).await;
    response.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_gateway_names_the_client_in_x_forwarded_for() {
    let serve = serve("");
    // nginx appends the address it sees to what the client sent: the rightmost is the client.
    let spoofed = [("x-forwarded-for", "6.6.6.6, 203.0.113.1")];
    assert_eq!(status(&serve, "127.0.0.1", &spoofed).await, 200);
    assert_eq!(status(&serve, "127.0.0.1", &spoofed).await, 429);
    // A new leftmost entry is the client's own writing: still 203.0.113.1, still refused.
    let respoofed = [("x-forwarded-for", "7.7.7.7, 203.0.113.1")];
    assert_eq!(status(&serve, "127.0.0.1", &respoofed).await, 429);
    // Two header lines are one list.
    let split = [
        ("x-forwarded-for", "8.8.8.8"),
        ("x-forwarded-for", "203.0.113.1"),
    ];
    assert_eq!(status(&serve, "127.0.0.1", &split).await, 429);
    // Another client has its own quota.
    let other = [("x-forwarded-for", "6.6.6.6, 203.0.113.2")];
    assert_eq!(status(&serve, "127.0.0.1", &other).await, 200);
    // A gateway's word that is no address: 400, not a key of garbage.
    let garbage = [("x-forwarded-for", "not-an-address")];
    assert_eq!(status(&serve, "127.0.0.1", &garbage).await, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_caller_is_the_client_whatever_it_forwards() {
    let serve = serve("");
    // 127.0.0.2 is no gateway: its X-Forwarded-For is not read, it is the client itself.
    assert_eq!(
        status(&serve, "127.0.0.2", &[("x-forwarded-for", "203.0.113.1")]).await,
        200
    );
    for spoofed in ["203.0.113.1", "203.0.113.99", "6.6.6.6, 203.0.113.50"] {
        let headers = [("x-forwarded-for", spoofed)];
        assert_eq!(
            status(&serve, "127.0.0.2", &headers).await,
            429,
            "{spoofed}"
        );
    }
    // The trusted gateway's client 203.0.113.1 was not charged for the spoofer's questions.
    let from_gateway = [("x-forwarded-for", "203.0.113.1")];
    assert_eq!(status(&serve, "127.0.0.1", &from_gateway).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_header_x_real_ip_is_read_from_gateways_only() {
    let serve = serve(r#"client_header = "x-real-ip""#);
    let real = [
        ("x-real-ip", "203.0.113.1"),
        ("x-forwarded-for", "203.0.113.77"),
    ];
    assert_eq!(status(&serve, "127.0.0.1", &real).await, 200);
    // X-Forwarded-For is not the configured header: a new one changes nothing.
    let other_forwarded = [
        ("x-real-ip", "203.0.113.1"),
        ("x-forwarded-for", "203.0.113.78"),
    ];
    assert_eq!(status(&serve, "127.0.0.1", &other_forwarded).await, 429);
    assert_eq!(
        status(&serve, "127.0.0.1", &[("x-real-ip", "203.0.113.2")]).await,
        200
    );
    // From a caller that is no gateway, X-Real-IP is not read.
    assert_eq!(
        status(&serve, "127.0.0.2", &[("x-real-ip", "203.0.113.3")]).await,
        200
    );
    assert_eq!(
        status(&serve, "127.0.0.2", &[("x-real-ip", "203.0.113.4")]).await,
        429
    );
    // The answer says nothing of who the client was.
    let response = get(
        "127.0.0.1",
        &serve.url("/forward_auth"),
        &[("x-forwarded-uri", "/api/x"), ("x-real-ip", "203.0.113.9")],
    )
    .await;
    assert_eq!(header(&response, "x-real-ip"), "-");
}
