//! Replicas that stop, as processes (`convo serve` on the tests' PostgreSQL), seen from the
//! outside: SIGTERM tells each listener of the stopping replica, for each reply in flight in
//! its session, an `error` with the code `replica_stopping` (cancelled here, or going on on
//! another replica) before the close 1001; the lease of a replica killed with SIGKILL is
//! removed by the live one, and its turn failed (its listeners and its account's stream told).

use std::time::Duration;

use convo_client::api::StreamEvent;
use convo_wire::account_stream::AccountEvent;
use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::backends::TestDb;
use super::common::{GUARD, Ws, next_event, next_json, session, until_end, until_session_emptied};
use super::pg_proxy::eventually;
use super::replica_harness::Replica;

const KEY: &str = "service_live_replicaStopKey0123456789";

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
    let a = Replica::start(&db, KEY, 100, None);
    let b = Replica::start(&db, KEY, 100, None);
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
    let status = a.wait();
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
    let a = Replica::start(&db, KEY, 300, Some(lease_ms));
    let b = Replica::start(&db, KEY, 0, Some(lease_ms));
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
    let mut account = b.account_ws().await;
    assert!(matches!(
        next_json(&mut account).await,
        AccountEvent::Hello { .. }
    ));
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
    a.kill();
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
    // The account's stream on b heard of the session begun on a (its user message), then, once
    // b rolled the turn back, of the session without it and of the tokens given back.
    let told = until_session_emptied(&mut account, &sid).await;
    assert!(
        told.iter().any(|e| matches!(e,
            AccountEvent::SessionCreated { session } if session.session_id == sid && session.message_count == 1)),
        "{told:?}"
    );
    match next_json(&mut account).await {
        AccountEvent::Usage { usage } => assert_eq!(usage.tokens.used, 0, "{usage:?}"),
        other => panic!("expected the usage after the rollback, got {other:?}"),
    }
    // b's own lease stays, renewed.
    tokio::time::sleep(Duration::from_millis(2 * lease_ms)).await;
    assert_eq!(leases().await.len(), 1);
    assert!(b.history(&sid).await.is_empty());
}
