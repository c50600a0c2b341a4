//! Limits on every connection (issue 26), against the real `convo serve`: thousands of idle,
//! slowloris and slow-body connections are closed by the header and body timeouts while
//! `/healthz` keeps answering and a WebSocket stream stays open; a client over its address's
//! cap, and everyone over the replica's, gets a clear 503; a declared body over the limit is
//! refused before it is read, `Expect: 100-continue` or not; the open-file limit is raised,
//! and where it cannot be, connections past it are refused with a 503 instead of failing
//! `accept`.

use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convo_client::api::StreamEvent;
use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const BIN: &str = env!("CARGO_BIN_EXE_convo");
const KEY: &str = "service_live_connectionLimitsKey01";
/// Failure guard only: no test asserts on timing.
const GUARD: Duration = Duration::from_secs(60);

/// A `convo serve` child; its stderr is collected as it comes.
struct Serve {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Serve {
    /// `convo serve` on `127.0.0.1:0` with `flags`, run through `sh -c "SHELL; exec …"` so that
    /// the test can set resource limits first (`shell` may be empty).
    fn start(shell: &str, flags: &[&str]) -> Serve {
        let mut script = String::from(shell);
        if !script.is_empty() {
            script.push_str("; ");
        }
        script.push_str(r#"exec "$0" "$@""#);
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(BIN)
            .args([
                "serve",
                "--engine",
                "builtin",
                "--addr",
                "127.0.0.1:0",
                "--db",
                ":memory:",
            ])
            .args(["--api-key", KEY, "--engine-pace-ms", "0"])
            .args(["--jwt-secret", "a-jwt-secret-of-32-bytes-or-more-0123"])
            .args(flags)
            .env_remove("CONVO_SERVE_API_KEYS")
            .env_remove("CONVO_JWT_SECRET")
            .env("RUST_LOG", "convo=info,warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut pipe = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            let mut line = String::new();
            while pipe.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let base = line
            .trim_end()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}; stderr: {}",
                    stderr.lock().unwrap()
                )
            });
        Serve {
            addr: base.parse().unwrap(),
            child,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection to `addr` from the loopback address `127.0.0.{from}`.
async fn connect_from(from: u8, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, from), 0)))
        .unwrap();
    tokio::time::timeout(GUARD, socket.connect(addr))
        .await
        .expect("connected in time")
        .unwrap()
}

/// How the server ended a connection.
#[derive(Debug)]
enum End {
    /// It answered (status, body) and closed.
    Answered(u16, String),
    /// It closed (or reset) without a word.
    Closed,
}

/// Reads what the server sends until it closes the connection.
async fn until_closed(mut stream: TcpStream) -> End {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(GUARD, stream.read(&mut buf))
            .await
            .expect("the server ends the connection in time")
        {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    if answer.is_empty() {
        return End::Closed;
    }
    let text = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    End::Answered(status, body.to_string())
}

/// `GET /healthz` from `127.0.0.{from}`: the status and body.
async fn health(addr: SocketAddr, from: u8) -> End {
    let mut stream = connect_from(from, addr).await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    until_closed(stream).await
}

fn code_of(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["error"]["code"].as_str().unwrap().to_string()
}

/// Waits until `/healthz` from `127.0.0.{from}` answers 200.
async fn until_healthy(addr: SocketAddr, from: u8) {
    let waited = async {
        loop {
            if let End::Answered(200, _) = health(addr, from).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(GUARD, waited)
        .await
        .expect("healthy in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed_by_their_timeouts_while_health_answers() {
    const IDLE: usize = 1_500;
    const SLOWLORIS: usize = 500;
    const SLOW_BODY: usize = 500;
    let serve = Serve::start(
        "",
        &["--header-read-timeout", "3", "--body-read-timeout", "3"],
    );
    let addr = serve.addr;
    let session = convo_client::api::new_session_id();

    // A WebSocket stream opened first: long-lived, it must outlive both timeouts.
    let mut request = format!("ws://{addr}/v1/sessions/{session}/stream")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();

    let started = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..IDLE {
        idle.push(connect_from(1, addr).await);
    }
    // Slowloris: a head that never ends, one more header line every 700 ms.
    let mut slowloris = Vec::new();
    for i in 0..SLOWLORIS {
        let mut stream = connect_from(1, addr).await;
        stream
            .write_all(format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-N: {i}\r\n").as_bytes())
            .await
            .unwrap();
        slowloris.push(tokio::spawn(async move {
            let (mut read, mut write) = stream.into_split();
            let trickle = async {
                loop {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    if write.write_all(b"X-More: 1\r\n").await.is_err() {
                        break;
                    }
                }
            };
            let mut answer = Vec::new();
            let read_all = async {
                let mut buf = [0u8; 1024];
                while let Ok(n @ 1..) = read.read(&mut buf).await {
                    answer.extend_from_slice(&buf[..n]);
                }
            };
            tokio::time::timeout(GUARD, async {
                tokio::select! {
                    _ = trickle => {}
                    _ = read_all => {}
                }
            })
            .await
            .expect("the server closes a slowloris connection in time");
            // The head never ended: the server cannot have answered; it closed.
            assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
        }));
    }
    // Slow bodies: a whole head, then one byte of the promised 1,000 every 700 ms until the
    // server answers.
    let mut slow_bodies = Vec::new();
    for _ in 0..SLOW_BODY {
        let mut stream = connect_from(1, addr).await;
        stream
            .write_all(
                format!(
                    "POST /v1/sessions/{session}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 1000\r\n\r\n{{"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        slow_bodies.push(tokio::spawn(async move {
            let mut buf = [0u8; 1];
            // A byte whenever 700 ms pass with nothing from the server.
            let quiet = Duration::from_millis(700);
            while tokio::time::timeout(quiet, stream.peek(&mut buf))
                .await
                .is_err()
            {
                if stream.write_all(b" ").await.is_err() {
                    break;
                }
            }
            until_closed(stream).await
        }));
    }
    let opened = started.elapsed();

    // Everyone else is still served meanwhile.
    assert!(matches!(health(addr, 2).await, End::Answered(200, _)));

    // The idle ones are closed without a word once the header read timeout passes.
    for stream in idle {
        assert!(matches!(until_closed(stream).await, End::Closed));
    }
    let idle_closed = started.elapsed();
    for task in slowloris {
        task.await.unwrap();
    }
    let mut timed_out = 0;
    for task in slow_bodies {
        match task.await.unwrap() {
            End::Answered(408, body) => {
                assert_eq!(code_of(&body), "request_timeout");
                timed_out += 1;
            }
            // A reset can overtake the answer when a byte crossed the close.
            End::Closed => {}
            End::Answered(status, body) => panic!("a slow body answered {status} {body}"),
        }
    }
    assert!(timed_out > 0, "the slow bodies get 408 request_timeout");
    println!(
        "{} connections opened in {opened:?}; the idle ones closed by {idle_closed:?}; \
         {timed_out}/{SLOW_BODY} slow bodies read their 408",
        IDLE + SLOWLORIS + SLOW_BODY
    );

    // One body that stops short is answered 408 (nothing crosses the close here).
    let mut short = connect_from(3, addr).await;
    short
        .write_all(
            format!(
                "POST /v1/sessions/{session}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 100\r\n\r\n{{\"content\":"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    match until_closed(short).await {
        End::Answered(408, body) => assert_eq!(code_of(&body), "request_timeout"),
        other => panic!("{other:?}"),
    }

    // The WebSocket, idle through both timeouts, still carries a reply.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let sent: Value = http
        .post(format!("http://{addr}/v1/sessions/{session}/messages"))
        .bearer_auth(KEY)
        .json(&serde_json::json!({"content": "still there?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let message_id = sent["messageId"].as_str().unwrap().to_string();
    loop {
        let frame = tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("an event in time")
            .expect("the stream stays open")
            .expect("a frame");
        if let WsMessage::Text(text) = frame
            && let Ok(StreamEvent::Done { message }) = serde_json::from_str(text.as_str())
            && message.message_id == message_id
        {
            break;
        }
    }
    assert!(
        !serve.stderr().contains("accept error"),
        "{}",
        serve.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_a_cap_get_a_clear_503_and_others_are_served() {
    let serve = Serve::start(
        "",
        &[
            "--max-connections",
            "80",
            "--max-connections-per-address",
            "50",
        ],
    );
    let addr = serve.addr;
    let mut from_one = Vec::new();
    for _ in 0..50 {
        from_one.push(connect_from(1, addr).await);
    }
    // The 51st from the same address is refused, with the envelope and Retry-After.
    let mut refused = connect_from(1, addr).await;
    let mut answer = String::new();
    tokio::time::timeout(GUARD, refused.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(answer.contains("retry-after: 1\r\n"), "{answer}");
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    assert_eq!(code_of(body), "too_many_connections");
    assert!(body.contains("--max-connections-per-address"), "{body}");
    // Another address is served.
    assert!(matches!(health(addr, 2).await, End::Answered(200, _)));

    // The replica's cap: 50 + 30 held, the next from anywhere is refused.
    let mut from_three = Vec::new();
    for _ in 0..30 {
        from_three.push(connect_from(3, addr).await);
    }
    match health(addr, 4).await {
        End::Answered(503, body) => {
            assert_eq!(code_of(&body), "too_many_connections");
            assert!(body.contains("this replica has 80 connections"), "{body}");
        }
        other => panic!("{other:?}"),
    }
    // Places come back as connections close.
    drop(from_one);
    until_healthy(addr, 1).await;
    drop(from_three);
    assert!(
        serve
            .stderr()
            .contains("connections refused: too many connections"),
        "the refusals are logged"
    );
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_before_it_is_read() {
    let serve = Serve::start("", &[]);
    let session = convo_client::api::new_session_id();
    for expect in ["", "Expect: 100-continue\r\n"] {
        let mut stream = connect_from(1, serve.addr).await;
        stream
            .write_all(
                format!(
                    "POST /v1/sessions/{session}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n{expect}\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        // Not a byte of the body is sent: the answer comes anyway, and it is not `100 Continue`.
        match until_closed(stream).await {
            End::Answered(413, body) => assert_eq!(code_of(&body), "payload_too_large"),
            other => panic!("{expect:?}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_soft_open_file_limit_is_raised_to_the_hard_one() {
    let hard = hard_open_file_limit();
    if hard < 1_000 {
        panic!("this machine's hard open-file limit is {hard}; the test needs 1,000");
    }
    // A soft limit of 300: without the raise, 400 connections could not all be served.
    let serve = Serve::start("ulimit -Sn 300", &[]);
    let mut held = Vec::new();
    for _ in 0..400 {
        held.push(connect_from(1, serve.addr).await);
    }
    // Every one of them is served, and kept alive.
    for stream in &mut held {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
    }
    for stream in &mut held {
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(GUARD, stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200 "), "{:?}", &buf[..n]);
    }
    assert!(
        serve.stderr().contains("open-file limit raised"),
        "{}",
        serve.stderr()
    );
    assert!(!serve.stderr().contains("accept error"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_an_open_file_limit_it_cannot_raise_connections_are_refused_with_503() {
    // Soft and hard limit 400: the cap is lowered to 400 - 256 reserved = 144.
    let serve = Serve::start("ulimit -n 400", &["--header-read-timeout", "600"]);
    assert!(
        serve.stderr().contains("max_connections=144"),
        "{}",
        serve.stderr()
    );
    let mut held = Vec::new();
    for _ in 0..144 {
        held.push(connect_from(1, serve.addr).await);
    }
    // Past it, each new connection gets a clean 503, never a dead accept loop.
    for _ in 0..100 {
        match health(serve.addr, 2).await {
            End::Answered(503, body) => assert_eq!(code_of(&body), "too_many_connections"),
            other => panic!("{other:?}"),
        }
    }
    drop(held);
    until_healthy(serve.addr, 2).await;
    assert!(
        !serve.stderr().contains("accept error"),
        "{}",
        serve.stderr()
    );
}

/// This process's hard open-file limit (what `ulimit -Hn` says).
fn hard_open_file_limit() -> u64 {
    let mut out = String::new();
    Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let out = out.trim();
    if out == "unlimited" {
        u64::MAX
    } else {
        out.parse().unwrap()
    }
}
