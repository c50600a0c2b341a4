//! The account stream client (`convo_client::api::account_stream`): against the local service
//! in-process (a `hello`, then what changes, and after the service restarts on the same
//! address a fresh `hello`), against a server without the endpoint (unsupported), and against
//! one that sends event types this client does not know and frames that are not events
//! (skipped).

use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message as WsMessage, WebSocketUpgrade};
use axum::routing::get;
use convo_client::api::account_stream::{AccountEvent, AccountStream, AccountUpdate};
use convo_client::api::{Client, ClientOptions, SendMessage, StreamTiming, new_session_id};
use convo_service::ServiceConfig;
use serde_json::json;
use tokio::sync::mpsc;

use super::support::{options, serve};

fn fast() -> StreamTiming {
    StreamTiming {
        ping_interval: Duration::from_secs(3600),
        silence_timeout: Duration::from_secs(3600),
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
    }
}

async fn next(rx: &mut mpsc::Receiver<AccountUpdate>) -> AccountUpdate {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("an update (guard against a hang)")
        .expect("the stream task is alive")
}

/// The next event, `usage` events skipped.
async fn next_change(rx: &mut mpsc::Receiver<AccountUpdate>) -> AccountEvent {
    loop {
        match next(rx).await {
            AccountUpdate::Event(AccountEvent::Usage { .. }) => continue,
            AccountUpdate::Event(event) => return event,
            other => panic!("expected an event, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_local_service_says_hello_then_what_changes() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let svc = convo_service::start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut o = ClientOptions::new(svc.base_url().parse().unwrap());
    o.api_key = Some(svc.api_key.clone());
    let client = Client::new(o.clone()).unwrap();
    let (_handle, mut rx) = AccountStream::connect_with(o, fast());
    assert_eq!(next(&mut rx).await, AccountUpdate::Connected);
    match next_change(&mut rx).await {
        AccountEvent::Hello {
            sessions, usage, ..
        } => {
            assert!(sessions.is_empty());
            assert_eq!(usage.requests.used, 1);
        }
        other => panic!("expected hello, got {other:?}"),
    }
    let sid = new_session_id();
    client
        .post_message(
            &sid,
            &SendMessage {
                content: "from another device".into(),
                role: None,
                stream: None,
                metadata: None,
            },
            "key-1",
        )
        .await
        .unwrap();
    match next_change(&mut rx).await {
        AccountEvent::SessionCreated { session } => assert_eq!(session.session_id, sid),
        other => panic!("expected session.created, got {other:?}"),
    }
    svc.shutdown().await;
    // The service is gone: the task says so and keeps trying.
    loop {
        match next(&mut rx).await {
            AccountUpdate::Disconnected { retry_in, .. } => {
                assert!(retry_in.is_some());
                break;
            }
            AccountUpdate::Event(_) => {}
            other => panic!("expected a disconnect, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_server_without_the_account_stream_is_unsupported() {
    let base = serve(Router::new()).await;
    let (_handle, mut rx) = AccountStream::connect_with(options(&base), fast());
    assert_eq!(next(&mut rx).await, AccountUpdate::Unsupported);
    assert!(rx.recv().await.is_none(), "the task ended");
}

#[tokio::test]
async fn unknown_event_types_and_bad_frames_are_skipped() {
    let router = Router::new().route(
        "/v1/stream",
        get(|ws: WebSocketUpgrade| async move {
            ws.on_upgrade(|mut socket| async move {
                for text in [
                    json!({"type": "session.moved", "sessionId": "x"}).to_string(),
                    "{not json".to_string(),
                    json!({"type": "session.deleted"}).to_string(),
                    json!({"type": "session.deleted", "sessionId": "session_abcdefgh12345678"})
                        .to_string(),
                ] {
                    if socket.send(WsMessage::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                while let Some(Ok(_)) = socket.recv().await {}
            })
        }),
    );
    let base = serve(router).await;
    let (_handle, mut rx) = AccountStream::connect_with(options(&base), fast());
    assert_eq!(next(&mut rx).await, AccountUpdate::Connected);
    assert_eq!(
        next(&mut rx).await,
        AccountUpdate::Event(AccountEvent::SessionDeleted {
            session_id: "session_abcdefgh12345678".into()
        })
    );
}
