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
    let cases: [(&str, Vec<(&str, &str)>); 10] = [
        ("no target", vec![]),
        ("empty target", vec![("x-original-uri", "")]),
        ("not a path", vec![("x-original-uri", "api/x")]),
        (
            "authority form",
            vec![("x-forwarded-uri", "example.com:443")],
        ),
        ("asterisk", vec![("x-forwarded-uri", "*")]),
        ("encoded slash", vec![("x-original-uri", "/api%2Fx")]),
        ("bad escape", vec![("x-original-uri", "/api/%zz")]),
        (
            "twice",
            vec![("x-original-uri", "/open"), ("x-original-uri", "/api/x")],
        ),
        (
            "bad method",
            vec![("x-original-uri", "/api/x"), ("x-forwarded-method", "G(T")],
        ),
        ("spaces", vec![("x-original-uri", "/api/ x")]),
    ];
    for (case, headers) in &cases {
        let answer = get("127.0.0.1", &forward, headers).await;
        assert_eq!(answer.status(), 400, "{case}");
        assert_eq!(
            header(&answer, "content-type"),
            "application/problem+json",
            "{case}"
        );
        let answer = get("127.0.0.1", &nginx, headers).await;
        assert_eq!(answer.status(), 403, "{case}");
        assert_eq!(header(&answer, "rejection-status"), "400", "{case}");
    }
    // A target that is not text.
    let response = client_from("127.0.0.1")
        .get(&forward)
        .header(
            "x-original-uri",
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
        "GET /forward_auth HTTP/1.1\r\nhost: x\r\nx-original-uri: /api/x\r\nx-padding: {}\r\n\r\n",
        "a".repeat(600 * 1024)
    );
    // The server may stop reading (and close) before the whole head is written.
    let _ = stream.write_all(head.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    // Still answering. A target in absolute form (which servers must accept) is its path.
    let fine = get("127.0.0.1", &forward, &[("x-original-uri", "/api/x")]).await;
    assert_eq!(fine.status(), 200);
    assert_eq!(header(&fine, "ratelimit"), "\"api\";r=4;t=60");
    let absolute = [("x-forwarded-uri", "http://example.com//api/../api/x?q=1")];
    let absolute = get("127.0.0.1", &forward, &absolute).await;
    assert_eq!(absolute.status(), 200);
    assert_eq!(header(&absolute, "ratelimit"), "\"api\";r=3;t=60");
}
