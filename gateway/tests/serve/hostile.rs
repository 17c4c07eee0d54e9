//! Questions that do not say which request they are about, or say it badly: 400-class answers
//! that say why, never a panic, and the service answers on.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{Serve, client_from, get, header, limits};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_questions_get_400_class_answers() {
    let serve = Serve::start(&format!(
        "[serve]\nlisten = \"127.0.0.1:0\"\naccess_log = \"off\"\n{}",
        limits(5)
    ));
    let forward = serve.url("/forward_auth");
    let nginx = serve.url("/auth_request");
    // Each case: the values of the target header (as many lines as values), and the method
    // named in X-Forwarded-Method.
    let cases: [(&str, &[&str], &str); 10] = [
        ("no target", &[], "GET"),
        ("empty target", &[""], "GET"),
        ("not a path", &["api/x"], "GET"),
        ("authority form", &["example.com:443"], "GET"),
        ("asterisk", &["*"], "GET"),
        ("encoded slash", &["/api%2Fx"], "GET"),
        ("bad escape", &["/api/%zz"], "GET"),
        ("twice", &["/open", "/api/x"], "GET"),
        ("bad method", &["/api/x"], "G(T"),
        ("spaces", &["/api/ x"], "GET"),
    ];
    for (case, targets, method) in cases {
        // Each endpoint reads the header its gateway writes.
        let asked = |target: &'static str| {
            let mut headers: Vec<(&str, &str)> = targets.iter().map(|uri| (target, *uri)).collect();
            headers.push(("x-forwarded-method", method));
            headers
        };
        let answer = get("127.0.0.1", &forward, &asked("x-forwarded-uri")).await;
        assert_eq!(answer.status(), 400, "{case}");
        assert_eq!(
            header(&answer, "content-type"),
            "application/problem+json",
            "{case}"
        );
        let answer = get("127.0.0.1", &nginx, &asked("x-original-uri")).await;
        assert_eq!(answer.status(), 403, "{case}");
        assert_eq!(header(&answer, "rejection-status"), "400", "{case}");
    }
    // The other endpoint's header names no request: Traefik and Caddy pass a client's
    // X-Original-URI on as it came, nginx a client's X-Forwarded-Uri.
    let other = get("127.0.0.1", &forward, &[("x-original-uri", "/api/x")]).await;
    assert_eq!(other.status(), 400);
    let other = get("127.0.0.1", &nginx, &[("x-forwarded-uri", "/api/x")]).await;
    assert_eq!(header(&other, "rejection-status"), "400");
    // A target that is not text.
    let response = client_from("127.0.0.1")
        .get(&forward)
        .header(
            "x-forwarded-uri",
            reqwest::header::HeaderValue::from_bytes(b"/api/\xff").unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    // Any other path.
    assert_eq!(
        get("127.0.0.1", &serve.url("/api/x"), &[]).await.status(),
        404
    );
    // A head larger than the server reads (about 400 KiB): refused by hyper with 431, the
    // connection closed.
    let mut stream = tokio::net::TcpStream::connect(serve.addr.as_deref().unwrap())
        .await
        .unwrap();
    let head = format!(
        "GET /forward_auth HTTP/1.1\r\nhost: x\r\nx-forwarded-uri: /api/x\r\nx-padding: {}\r\n\r\n",
        "a".repeat(600 * 1024)
    );
    // The server may stop reading (and close) before the whole head is written.
    let _ = stream.write_all(head.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    // Still answering. A target in absolute form (which servers must accept) is its path.
    let fine = get("127.0.0.1", &forward, &[("x-forwarded-uri", "/api/x")]).await;
    assert_eq!(fine.status(), 200);
    assert_eq!(header(&fine, "ratelimit"), "\"api\";r=4;t=60");
    let absolute = [("x-forwarded-uri", "http://example.com//api/../api/x?q=1")];
    let absolute = get("127.0.0.1", &forward, &absolute).await;
    assert_eq!(absolute.status(), 200);
    assert_eq!(header(&absolute, "ratelimit"), "\"api\";r=3;t=60");
}
