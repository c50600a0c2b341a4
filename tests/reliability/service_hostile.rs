//! Hostile input on the service side (issue 6, item 4): path tricks, SQL metacharacters,
//! wrong types, oversized and lying bodies, huge query strings and headers, WebSocket floods
//! and oversized frames, isolation between keys, and keys kept out of the log. Each answer
//! is a 4xx with the error envelope, and the service stays up. (JWT edge cases are proven
//! in tests/service/jwt.rs.)

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use convo_client::api::StreamEvent;
use convo_service::{ServiceConfig, Tier, generate_api_key, jwt};
use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::common::{GUARD, Svc, next_event, session, start_default, start_with, until_end};

/// An answer read off the wire.
#[derive(Debug)]
struct Raw {
    status: u16,
    body: String,
}

impl Raw {
    fn envelope(&self) -> Value {
        let v: Value = serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body));
        assert!(
            v["error"]["code"].is_string() && v["error"]["message"].is_string(),
            "not the envelope: {v}"
        );
        v
    }

    /// A 4xx with the envelope; returns its code.
    fn refused(&self, what: &str) -> String {
        assert!(
            (400..500).contains(&self.status),
            "{what}: status {} {}",
            self.status,
            self.body
        );
        self.envelope()["error"]["code"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// Sends `head` (request line and headers, without the blank line) and `body` as they are,
/// on a fresh connection, and reads the whole answer (the request asks to close).
async fn raw(addr: SocketAddr, head: &str, body: &[u8]) -> Raw {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("{head}\r\nHost: {addr}\r\nConnection: close\r\n").into_bytes();
    if !head.to_ascii_lowercase().contains("content-length")
        && !head.to_ascii_lowercase().contains("transfer-encoding")
    {
        request.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(body);
    // The server may answer (413, 431) and close before reading everything.
    let _ = sock.write_all(&request).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(GUARD, sock.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "an answer in time to {}",
        &head[..head.len().min(80)]
    );
    let text = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Raw {
        status,
        body: if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

async fn still_up(svc: &Svc) {
    let sid = session();
    svc.send_text(&sid, "still there?").await;
    let (status, body) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn path_tricks_in_ids_get_a_4xx_envelope() {
    let svc = start_default().await;
    let addr = svc.service.addr;
    let key = format!("Authorization: Bearer {}", svc.key);
    let long = "a".repeat(10_000);
    let sessions = [
        "..%2F..%2F..%2Fetc%2Fpasswd",
        "%2e%2e",
        "session_abcdefgh1234567%00",
        "session_abcdefgh12345678%00",
        "session_abcdefgh12345678%2F..%2Fsession_x",
        "session_abcdefgh1234%E2%80%AE5",
        "session_%C0%AE%C0%AEabcdefghij",
        "session_abcdefgh12345678%20",
        "session_*",
        "session_abcdefgh12345678;rm%20-rf",
        &format!("session_{long}"),
    ];
    for id in sessions {
        for (method, path) in [
            ("POST", format!("/v1/sessions/{id}/messages")),
            ("DELETE", format!("/v1/sessions/{id}")),
            ("GET", format!("/v1/sessions/{id}/messages")),
            ("GET", format!("/v1/sessions/{id}/stream")),
        ] {
            let head =
                format!("{method} {path} HTTP/1.1\r\n{key}\r\nContent-Type: application/json");
            let r = raw(addr, &head, br#"{"content":"hi"}"#).await;
            let code = r.refused(&format!("{method} {path}"));
            assert!(
                ["invalid_request", "session_not_found", "not_found"].contains(&code.as_str()),
                "{method} {id}: {code}"
            );
        }
    }
    // Dot segments sent raw are not resolved into another route.
    for path in [
        "/v1/sessions/../analytics/usage",
        "/v1/analytics/usage/..",
        "/v1/../../etc/passwd",
        "//v1/analytics/usage",
    ] {
        let r = raw(addr, &format!("GET {path} HTTP/1.1\r\n{key}"), b"").await;
        let code = r.refused(path);
        assert!(!r.body.contains("billingPeriod"), "{path}: {}", r.body);
        assert!(!code.is_empty());
    }
    let token = jwt::mint(&svc.service.jwt_secret, "tester", 600);
    for id in [
        "..%2F..%2Fetc%2Fpasswd",
        "%00",
        "treasury%00",
        "' OR '1'='1",
        "*",
    ] {
        let path = format!(
            "/v1/wallets/{}",
            id.replace(' ', "%20").replace('\'', "%27")
        );
        let r = raw(
            addr,
            &format!("GET {path} HTTP/1.1\r\nAuthorization: Bearer {token}"),
            b"",
        )
        .await;
        let code = r.refused(&path);
        assert!(
            ["wallet_not_found", "invalid_request"].contains(&code.as_str()),
            "{path}: {code}"
        );
    }
    still_up(&svc).await;
}

/// Printable ASCII without spaces, as the service requires of an `Idempotency-Key`.
const IDEM: &str = "'OR'1'='1';DELETE/**/FROM/**/idempotency_keys;--";

#[tokio::test]
async fn sql_metacharacters_are_stored_and_returned_as_text() {
    let svc = start_default().await;
    let sid = session();
    let nasty = "'); DROP TABLE messages; -- \" OR 1=1; /* */ %_ \\' ; SELECT * FROM api_keys;";
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", IDEM)
        .json(&json!({"content": nasty, "role": "system", "metadata": {"q": "' OR 1=1 --", "'; DROP TABLE sessions; --": [nasty]}}))
        .send()
        .await
        .unwrap();
    let (status, first) = crate::common::json(resp).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    // The key is data: the same key replays the first reply.
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", IDEM)
        .json(&json!({"content": "other"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["idempotent-replayed"], "true");
    assert_eq!(crate::common::json(resp).await.1, first);
    let (status, history) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(history["messages"][0]["content"], nasty);
    assert_eq!(
        history["messages"][0]["metadata"]["'; DROP TABLE sessions; --"][0],
        nasty
    );
    // In query parameters and ids they are refused, and nothing else happens.
    for query in [
        "startDate=2026-11-01T00:00:00Z'--&endDate=2026-11-02T00:00:00Z",
        "startDate=2026-11-01T00:00:00Z&endDate=2026-11-02T00:00:00Z&granularity=day'%20OR%20'1'='1",
        "startDate=2026-11-01T00:00:00Z&endDate=2026-11-02T00:00:00Z%3B%20DROP%20TABLE%20message_log",
    ] {
        let (status, body) = svc.get(&format!("/v1/analytics/metrics?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request");
    }
    let (status, body) = svc
        .post("session_'%20OR%201=1%20--", json!({"content": "x"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Every table is still there and holds what it should.
    let (_, list) = svc.get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(svc.usage().await["sessions"]["active"], 1);
    still_up(&svc).await;
}

#[tokio::test]
async fn wrong_types_and_broken_json_get_a_400_envelope() {
    let svc = start_default().await;
    let addr = svc.service.addr;
    let sid = session();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_meta = format!(
        r#"{{"content":"hi","metadata":{{"a":{}{}}}}}"#,
        "{\"a\":".repeat(5_000),
        "1".to_string() + &"}".repeat(5_000)
    );
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        ("array", b"[]".to_vec()),
        ("null", b"null".to_vec()),
        ("number", b"42".to_vec()),
        ("string", br#""content""#.to_vec()),
        ("content null", br#"{"content":null}"#.to_vec()),
        ("content array", br#"{"content":["hi"]}"#.to_vec()),
        ("content object", br#"{"content":{"text":"hi"}}"#.to_vec()),
        (
            "metadata array",
            br#"{"content":"hi","metadata":[1]}"#.to_vec(),
        ),
        ("lone surrogate", br#"{"content":"\ud800"}"#.to_vec()),
        ("NaN", br#"{"content":"hi","metadata":{"n":NaN}}"#.to_vec()),
        (
            "trailing garbage",
            br#"{"content":"hi"} {"content":"again"}"#.to_vec(),
        ),
        (
            "invalid UTF-8",
            b"{\"content\":\"\xff\xfe\xc0\xaf\"}".to_vec(),
        ),
        ("nested 100k deep", deep.into_bytes()),
        ("metadata 5k deep", deep_meta.into_bytes()),
        ("truncated", br#"{"content":"hi"#.to_vec()),
        ("NUL bytes", b"{\"content\":\"hi\"}\0\0\0".to_vec()),
    ];
    for (name, body) in bodies {
        let head = format!(
            "POST /v1/sessions/{sid}/messages HTTP/1.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json",
            svc.key
        );
        let r = raw(addr, &head, &body).await;
        assert_eq!(r.status, 400, "{name}: {}", r.body);
        assert_eq!(r.envelope()["error"]["code"], "invalid_request", "{name}");
    }
    // Nothing of it was stored.
    let (status, _) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    still_up(&svc).await;
}

#[tokio::test]
async fn oversized_and_lying_bodies_get_a_413_envelope() {
    let svc = start_default().await;
    let addr = svc.service.addr;
    let auth = format!("Authorization: Bearer {}", svc.key);
    let sid = session();
    // A length far over the cap: refused once the cap is passed, not after 10 GB.
    let r = raw(
        addr,
        &format!("POST /v1/sessions/{sid}/messages HTTP/1.1\r\n{auth}\r\nContent-Type: application/json\r\nContent-Length: 10000000000"),
        &vec![b' '; 300 * 1024],
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.envelope()["error"]["code"], "payload_too_large");
    // A chunked body with no length that grows past the cap.
    let mut chunked = Vec::new();
    let piece = format!(r#"{{"content":"{}"#, "x".repeat(1000));
    chunked.extend_from_slice(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes());
    let filler = "y".repeat(32 * 1024);
    for _ in 0..12 {
        chunked.extend_from_slice(format!("{:x}\r\n{filler}\r\n", filler.len()).as_bytes());
    }
    chunked.extend_from_slice(b"2\r\n\"}\r\n0\r\n\r\n");
    let r = raw(
        addr,
        &format!("POST /v1/sessions/{sid}/messages HTTP/1.1\r\n{auth}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked"),
        &chunked,
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.envelope()["error"]["code"], "payload_too_large");
    // A body shorter than its length: the server waits, the client gives up; no harm done.
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(format!("POST /v1/sessions/{sid}/messages HTTP/1.1\r\nHost: x\r\n{auth}\r\nContent-Length: 100\r\n\r\n{{\"content\":").as_bytes())
        .await
        .unwrap();
    drop(sock);
    still_up(&svc).await;
}

#[tokio::test]
async fn huge_query_strings_and_keys_get_a_4xx_envelope() {
    let svc = start_default().await;
    let addr = svc.service.addr;
    let auth = format!("Authorization: Bearer {}", svc.key);
    for size in [3_000, 30_000] {
        let q = "a=b&".repeat(size / 4);
        let path = format!("/v1/analytics/metrics?startDate=2026-11-01&endDate=2026-11-02&{q}");
        let r = raw(addr, &format!("GET {path} HTTP/1.1\r\n{auth}"), b"").await;
        assert_eq!(
            r.refused(&format!("query of {size} bytes")),
            "invalid_request"
        );
    }
    let r = raw(
        addr,
        &format!(
            "GET /v1/analytics/usage HTTP/1.1\r\nAuthorization: Bearer service_live_{}",
            "A".repeat(30_000)
        ),
        b"",
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r.body.len() < 1_000, "the key is not echoed back");
    still_up(&svc).await;
}

/// Requests whose head is too big for the HTTP parser (hyper) itself.
#[tokio::test]
async fn oversized_request_heads_get_a_4xx_envelope() {
    let svc = start_default().await;
    let addr = svc.service.addr;
    let auth = format!("Authorization: Bearer {}", svc.key);
    let mut failures = Vec::new();
    let q = "a=b&".repeat(25_000);
    let many: String = (0..2_000).map(|i| format!("X-H{i}: v\r\n")).collect();
    let heads = [
        (
            "a 100 KB query",
            format!("GET /v1/analytics/metrics?{q} HTTP/1.1\r\n{auth}"),
        ),
        (
            "2,000 headers",
            format!(
                "GET /v1/analytics/usage HTTP/1.1\r\n{auth}\r\n{}",
                many.trim_end()
            ),
        ),
    ];
    for (name, head) in heads {
        let r = raw(addr, &head, b"").await;
        let ok = (400..500).contains(&r.status)
            && serde_json::from_str::<Value>(&r.body).is_ok_and(|v| v["error"]["code"].is_string());
        if !ok {
            failures.push(format!("{name}: {} {:?}", r.status, r.body));
        }
    }
    still_up(&svc).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_floods_and_oversized_frames_leave_the_service_up() {
    let svc = start_default().await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    // A flood of frames the service ignores.
    for i in 0..5_000 {
        ws.feed(WsMessage::Text(
            format!("{{\"type\":\"delta\",\"n\":{i}}}").into(),
        ))
        .await
        .unwrap();
        if i % 10 == 0 {
            ws.feed(WsMessage::Binary(vec![0u8; 1024].into()))
                .await
                .unwrap();
            ws.feed(WsMessage::Ping(vec![1, 2, 3].into()))
                .await
                .unwrap();
        }
    }
    ws.flush().await.unwrap();
    // The same connection still carries the session's replies.
    let (status, body) = svc
        .post(&sid, json!({"content": "after the flood", "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["messageId"].as_str().unwrap().to_string();
    let events = until_end(&mut ws, &id).await;
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })));

    // A frame over the 64 KiB limit ends that connection, and only that one.
    let mut other = svc.ws(&sid).await;
    let _ = ws
        .send(WsMessage::Text("z".repeat(1024 * 1024).into()))
        .await;
    let ended = tokio::time::timeout(GUARD, async {
        loop {
            match ws.next().await {
                None | Some(Err(_)) | Some(Ok(WsMessage::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the oversized frame closed the connection");
    let (status, body) = svc
        .post(&sid, json!({"content": "and again", "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["messageId"].as_str().unwrap().to_string();
    let events = until_end(&mut other, &id).await;
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })));
    // Many connections opened and dropped without a close handshake.
    for _ in 0..50 {
        drop(svc.ws(&sid).await);
    }
    let mut fresh = svc.ws(&sid).await;
    svc.send_text(&sid, "one more").await;
    assert!(matches!(
        next_event(&mut fresh).await,
        StreamEvent::Delta { .. } | StreamEvent::Snapshot { .. } | StreamEvent::Done { .. }
    ));
    still_up(&svc).await;
}

#[tokio::test]
async fn one_key_cannot_see_stream_send_to_or_delete_another_keys_sessions() {
    let other = generate_api_key();
    let mut config = ServiceConfig::ephemeral(0);
    config.api_keys.push((other.clone(), Tier::Pro));
    let svc = start_with(config).await;
    let sid = session();
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", "shared-key-1")
        .json(&json!({"content": "secret plans"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let as_other = |method: reqwest::Method, path: String| {
        svc.http.request(method, svc.url(&path)).bearer_auth(&other)
    };
    // The same Idempotency-Key from the other key does not replay the first reply.
    let resp = as_other(
        reqwest::Method::POST,
        format!("/v1/sessions/{sid}/messages"),
    )
    .header("idempotency-key", "shared-key-1")
    .json(&json!({"content": "secret plans"}))
    .send()
    .await
    .unwrap();
    assert!(resp.headers().get("idempotent-replayed").is_none());
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body = resp.text().await.unwrap();
    assert!(!body.contains("secret"), "{body}");
    for (method, path) in [
        (reqwest::Method::GET, format!("/v1/sessions/{sid}/messages")),
        (reqwest::Method::DELETE, format!("/v1/sessions/{sid}")),
        (
            reqwest::Method::POST,
            format!("/v1/sessions/{sid}/messages"),
        ),
    ] {
        let resp = as_other(method.clone(), path.clone())
            .json(&json!({"content": "let me in"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{method} {path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "session_not_found");
    }
    // Not listed, not streamable (404 before the upgrade), not in its numbers.
    let list: Value = as_other(reqwest::Method::GET, "/v1/sessions".into())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["sessions"], json!([]));
    assert_eq!(svc.ws_refused(&sid, &other).await, 404);
    let now = chrono::Utc::now();
    let metrics: Value = as_other(
        reqwest::Method::GET,
        format!(
            "/v1/analytics/metrics?startDate={}&endDate={}",
            (now - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
            (now + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
        ),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(metrics["messages"]["total"], 0, "{metrics}");
    // The owner's session is untouched.
    let (status, history) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(history["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn keys_tokens_and_secrets_never_reach_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("serve.log");
    let key = generate_api_key();
    let free_key = generate_api_key();
    let unknown = generate_api_key();
    let secret = "jwt-secret-that-must-not-be-logged-0123456789";
    let child_log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_convo"))
        .args([
            "serve",
            "--engine",
            "builtin",
            "--addr",
            "127.0.0.1:0",
            "--db",
            ":memory:",
            "--engine-pace-ms",
            "0",
        ])
        .args(["--api-key", &key, "--api-key", &format!("{free_key}=free")])
        .args(["--jwt-secret", secret])
        .env_remove("CONVO_API_KEY")
        .env_remove("CONVO_SERVE_API_KEYS")
        .env_remove("CONVO_JWT_SECRET")
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(child_log)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| {
            panic!(
                "first line {line:?}: {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            )
        })
        .to_string();
    let token = jwt::mint(secret, "alice", 600);
    let bad_token = jwt::mint("wrong-secret", "alice", 600);

    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let sid = session();
        for k in [&key, &free_key, &unknown, &token] {
            let _ = http
                .post(format!("{base}/v1/sessions/{sid}/messages"))
                .bearer_auth(k)
                .json(&json!({"content": "hello"}))
                .send()
                .await
                .unwrap();
            let _ = http
                .get(format!("{base}/v1/analytics/usage"))
                .bearer_auth(k)
                .send()
                .await
                .unwrap();
        }
        let _ = http
            .get(format!("{base}/v1/analytics/usage"))
            .header("authorization", format!("Bearer {key}x"))
            .send()
            .await
            .unwrap();
        for t in [&token, &bad_token, &key] {
            let _ = http
                .get(format!("{base}/v1/wallets/treasury"))
                .bearer_auth(t)
                .send()
                .await
                .unwrap();
        }
        let ws_url = format!("{}/v1/sessions/{sid}/stream", base.replace("http", "ws"));
        for k in [&key, &unknown] {
            use tokio_tungstenite::tungstenite::client::IntoClientRequest;
            let mut req = ws_url.as_str().into_client_request().unwrap();
            req.headers_mut()
                .insert("authorization", format!("Bearer {k}").parse().unwrap());
            if let Ok((mut ws, _)) = tokio_tungstenite::connect_async(req).await {
                let _ = ws.close(None).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    child.wait().unwrap();
    let mut log = String::new();
    std::fs::File::open(&log_path)
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.lines().count() > 10, "the log was written: {log}");
    for (what, secret_text) in [
        ("the key", key.as_str()),
        ("the key's secret part", &key["service_live_".len()..]),
        ("the free key", free_key.as_str()),
        ("an unknown key", unknown.as_str()),
        ("a token", token.as_str()),
        ("a token's signature", token.rsplit('.').next().unwrap()),
        ("a bad token", bad_token.as_str()),
        ("the JWT secret", secret),
    ] {
        assert!(!log.contains(secret_text), "{what} is in the log");
    }
}

#[tokio::test]
async fn huge_query_strings_on_every_endpoint_are_400() {
    let svc = start_default().await;
    let addr = svc.service.addr;
    let auth = format!("Authorization: Bearer {}", svc.key);
    let q = "a=b&".repeat(1_000);
    for path in [
        format!("/v1/analytics/usage?{q}"),
        format!("/v1/sessions?{q}"),
        format!("/v1/sessions/{}/messages?{q}", session()),
    ] {
        let r = raw(addr, &format!("GET {path} HTTP/1.1\r\n{auth}"), b"").await;
        assert_eq!(r.refused(&path[..30]), "invalid_request");
    }
}
