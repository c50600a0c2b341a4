//! Replicas that stop, as processes (`convo serve` on the tests' PostgreSQL), seen from the
//! outside: SIGTERM tells each listener of the stopping replica, for each reply in flight in
//! its session, an `error` with the code `replica_stopping` (cancelled here, or going on on
//! another replica) before the close 1001; the lease of a replica killed with SIGKILL is
//! removed by the live one, and its turn failed.

use std::process::{Child, Command};
use std::time::Duration;

use convo_client::api::StreamEvent;
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::backends::TestDb;
use super::binary::{BIN, started};
use super::common::{GUARD, Ws, json as body_json, next_event, session, until_end};
use super::pg_proxy::eventually;

const KEY: &str = "service_live_replicaStopKey0123456789";

/// A `convo serve` process; killed (SIGKILL) if still running when dropped.
struct Replica {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Replica {
    fn start(db: &TestDb, pace_ms: u64, lease_ms: Option<u64>) -> Replica {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut command = Command::new(BIN);
        command
            .args([
                "serve",
                "--engine",
                "builtin",
                "--addr",
                "127.0.0.1:0",
                "--api-key",
                KEY,
            ])
            .args(["--jwt-secret", "a-secret-shared-by-the-replicas-here"])
            .args(["--engine-pace-ms", &pace_ms.to_string()])
            .env_remove("CONVO_SERVE_API_KEYS")
            .env_remove("CONVO_SERVE_LEASE_MS")
            .env("CONVO_SERVE_DB", db.url());
        if let Some(ms) = lease_ms {
            command.env("CONVO_SERVE_LEASE_MS", ms.to_string());
        }
        let (child, base, _stdout) = started(&mut command);
        Replica {
            child,
            base,
            http: reqwest::Client::new(),
        }
    }

    async fn post(&self, sid: &str, body: Value) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("{}/v1/sessions/{sid}/messages", self.base))
            .bearer_auth(KEY)
            .json(&body)
            .send()
            .await
            .expect("request");
        body_json(resp).await
    }

    async fn start_reply(&self, sid: &str, text: &str) -> String {
        let (status, accepted) = self
            .post(sid, json!({"content": text, "stream": true}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
        accepted["messageId"].as_str().unwrap().to_string()
    }

    async fn history(&self, sid: &str) -> Vec<Value> {
        let resp = self
            .http
            .get(format!("{}/v1/sessions/{sid}/messages", self.base))
            .bearer_auth(KEY)
            .send()
            .await
            .expect("request");
        let (status, body) = body_json(resp).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["messages"].as_array().unwrap().clone()
    }

    async fn ws(&self, sid: &str) -> Ws {
        let url = format!(
            "{}/v1/sessions/{sid}/stream",
            self.base.replace("http://", "ws://")
        );
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
        tokio::time::timeout(GUARD, tokio_tungstenite::connect_async(request))
            .await
            .expect("connect in time")
            .expect("websocket connects")
            .0
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// Every event up to the close frame, and the close code.
async fn until_close(ws: &mut Ws) -> (Vec<StreamEvent>, Option<CloseCode>) {
    let mut events = Vec::new();
    loop {
        let frame = tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("a frame in time");
        match frame {
            Some(Ok(WsMessage::Text(text))) => {
                events.push(serde_json::from_str(text.as_str()).expect("a stream event"))
            }
            Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_))) => {}
            Some(Ok(WsMessage::Close(frame))) => return (events, frame.map(|f| f.code)),
            other => panic!("expected events then a close frame, got {other:?}"),
        }
    }
}

/// The one error of `reply` among `events`, after which only the close came.
fn stopping_error<'a>(events: &'a [StreamEvent], reply: &str) -> &'a convo_wire::ErrorBody {
    match events.last() {
        Some(StreamEvent::Error {
            message_id, error, ..
        }) if message_id == reply => error,
        other => panic!("expected the reply's error last, got {other:?} in {events:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sigterm_each_listener_gets_an_error_for_its_replies_before_the_close() {
    let db = TestDb::create().await;
    let a = Replica::start(&db, 100, None);
    let b = Replica::start(&db, 100, None);
    // On a: one listener follows a reply generated on b, another a reply generated on a.
    let (elsewhere, here) = (session(), session());
    let mut relayed = a.ws(&elsewhere).await;
    let mut local = a.ws(&here).await;
    let far = b
        .start_reply(&elsewhere, "write a long answer with code")
        .await;
    let near = a.start_reply(&here, "write a long answer with code").await;
    for (ws, reply) in [(&mut relayed, &far), (&mut local, &near)] {
        let first = next_event(ws).await;
        assert!(
            matches!(&first, StreamEvent::Delta { message_id, .. } if message_id == reply),
            "{first:?}"
        );
    }

    a.signal("-TERM");
    let (events, code) = until_close(&mut relayed).await;
    assert_eq!(code, Some(CloseCode::Away));
    let error = stopping_error(&events, &far);
    assert_eq!(error.code, "replica_stopping");
    assert!(error.message.contains("goes on"), "{}", error.message);
    let (events, code) = until_close(&mut local).await;
    assert_eq!(code, Some(CloseCode::Away));
    let error = stopping_error(&events, &near);
    assert_eq!(error.code, "replica_stopping");
    assert!(error.message.contains("cancelled"), "{}", error.message);
    let mut a = a;
    let status = a.child.wait().unwrap();
    assert!(status.success(), "{status}");

    // The reply generated on b did go on; the one cancelled with a was rolled back.
    eventually(GUARD, "b's reply stored", || async {
        b.history(&elsewhere).await.len() == 2
    })
    .await;
    let kept = b.history(&here).await;
    assert!(
        kept.is_empty(),
        "nothing of the cancelled turn is kept: {kept:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_of_a_killed_replica_is_removed_by_the_live_one_and_its_turn_failed() {
    let db = TestDb::create().await;
    let lease_ms = 1_500;
    let a = Replica::start(&db, 300, Some(lease_ms));
    let b = Replica::start(&db, 0, Some(lease_ms));
    let client = db.client().await;
    let leases = || async {
        client
            .query("SELECT id FROM replicas ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
    };
    assert_eq!(leases().await.len(), 2);
    let sid = session();
    let mut ws = b.ws(&sid).await;
    let reply = a.start_reply(&sid, "write a long answer with code").await;
    assert!(matches!(
        next_event(&mut ws).await,
        StreamEvent::Delta { .. }
    ));
    let a_lease: String = client
        .query_one("SELECT replica FROM turns WHERE reply_id = $1", &[&reply])
        .await
        .unwrap()
        .get(0);

    let mut a = a;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let events = tokio::time::timeout(GUARD, until_end(&mut ws, &reply))
        .await
        .expect("the turn is failed in time");
    match events.last().unwrap() {
        StreamEvent::Error { error, .. } => assert_eq!(error.code, "engine_error"),
        other => panic!("expected an error, got {other:?}"),
    }
    eventually(GUARD, "the dead replica's lease removed", || async {
        let live = leases().await;
        live.len() == 1 && !live.contains(&a_lease)
    })
    .await;
    // b's own lease stays, renewed.
    tokio::time::sleep(Duration::from_millis(2 * lease_ms)).await;
    assert_eq!(leases().await.len(), 1);
    assert!(b.history(&sid).await.is_empty());
}
