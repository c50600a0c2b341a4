//! `GET /v1/sessions/{sessionId}/stream`: the WebSocket of docs/design.md, "Streaming".

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::ws::{
    CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade,
    rejection::WebSocketUpgradeRejection,
};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use tokio::sync::broadcast::error::RecvError;

use crate::error::HttpError;
use crate::paths::STREAM;
use crate::storage::Storage;
use crate::stream::event_message_id;
use crate::{AppState, auth};
use convo_core::{Account, SessionStatus};
use convo_wire::stream_errors::REPLICA_STOPPING;
use convo_wire::{ErrorBody, StreamEvent};

/// Largest inbound frame and message (clients send pings, close and cancel frames).
pub const MAX_INBOUND_BYTES: usize = 64 * 1024;
/// Interval of the server's pings.
pub const PING_INTERVAL: Duration = Duration::from_secs(20);

pub(crate) async fn connect(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    let account = auth::admit(&state, &headers, "GET", STREAM).await?;
    let session_id = super::session_id(path)?;
    let status = state
        .store
        .session_status(account.id, session_id.clone())
        .await?;
    if status == SessionStatus::Gone {
        return Err(HttpError::session_not_found(&session_id));
    }
    let upgrade = upgrade.map_err(|e| {
        HttpError::new(
            e.status(),
            "invalid_request",
            format!("this endpoint needs a WebSocket upgrade: {e}"),
        )
    })?;
    // On PostgreSQL, the other replicas know of this listener before its handshake is
    // answered, so a reply they start afterwards reaches it from its first piece.
    state.hub.announce(&session_id).await;
    Ok(upgrade
        .max_message_size(MAX_INBOUND_BYTES)
        .max_frame_size(MAX_INBOUND_BYTES)
        .on_upgrade(move |socket| listen(state, account, session_id, socket)))
}

async fn send(socket: &mut WebSocket, event: &StreamEvent) -> bool {
    match serde_json::to_string(event) {
        Ok(text) => socket.send(WsMessage::Text(text.into())).await.is_ok(),
        Err(_) => true,
    }
}

/// Relays every reply of the session until the client leaves or the service stops.
async fn listen(state: Arc<AppState>, account: Account, session_id: String, mut socket: WebSocket) {
    let subscription = state.hub.subscribe(&session_id);
    let mut events = subscription.events;
    // Replies this listener has seen start but not end.
    let mut open: HashSet<String> = HashSet::new();
    let mut alive = true;
    for snapshot in &subscription.snapshots {
        open.insert(event_message_id(snapshot).to_string());
        alive = alive && send(&mut socket, snapshot).await;
    }
    let mut ping = tokio::time::interval(PING_INTERVAL);
    ping.tick().await;
    let mut shutdown = state.shutdown.clone();
    let stopping = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    tokio::pin!(stopping);
    while alive {
        tokio::select! {
            // A stop is seen before anything else that is ready.
            biased;
            _ = &mut stopping => {
                // What already happened goes out first, then an error for each reply still
                // in flight.
                let mut last = Vec::new();
                while let Ok(event) = events.try_recv() {
                    last.push(event);
                }
                last.extend(stopping_errors(&state, &session_id));
                for event in &last {
                    if !send(&mut socket, event).await {
                        break;
                    }
                }
                let _ = socket
                    .send(WsMessage::Close(Some(CloseFrame {
                        code: 1001,
                        reason: "the service is shutting down".into(),
                    })))
                    .await;
                break;
            }
            event = events.recv() => match event {
                Ok(event) => {
                    track(&mut open, &event);
                    alive = send(&mut socket, &event).await;
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(session = %session_id, missed, "stream listener lagged; resyncing");
                    let fresh = state.hub.resync(&session_id, &mut open);
                    events = fresh.events;
                    for event in &fresh.snapshots {
                        alive = alive && send(&mut socket, event).await;
                    }
                }
                Err(RecvError::Closed) => break,
            },
            inbound = socket.recv() => match inbound {
                // Pings are answered by the WebSocket layer; a cancel frame is done and
                // answered on this socket (`routes/cancel.rs`); other frames are ignored.
                Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(WsMessage::Text(text))) => {
                    if let Some(answer) =
                        super::cancel::frame(&state, &account, &session_id, &text).await
                    {
                        alive = socket.send(WsMessage::Text(answer.into())).await.is_ok();
                    }
                }
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                alive = socket.send(WsMessage::Ping(Vec::new().into())).await.is_ok();
            }
        }
    }
    drop(events);
    state.hub.release(&session_id);
}

/// What a listener of a stopping replica is told before the close, for each reply in flight
/// in its session: an `error` event with the code `replica_stopping`, saying whether the
/// reply was cancelled with this replica or goes on on another one.
fn stopping_errors(state: &AppState, session_id: &str) -> Vec<StreamEvent> {
    state
        .hub
        .replies_in_flight(session_id)
        .into_iter()
        .map(|(message_id, here)| StreamEvent::Error {
            session_id: session_id.to_string(),
            message_id,
            error: ErrorBody::new(
                REPLICA_STOPPING,
                if here {
                    "the service is shutting down: the reply was cancelled and its turn rolled back; send the message again"
                } else {
                    "this replica is shutting down; the reply goes on on another replica: reconnect to follow it"
                },
            ),
        })
        .collect()
}

fn track(open: &mut HashSet<String>, event: &StreamEvent) {
    match event {
        StreamEvent::Delta { message_id, .. } | StreamEvent::Snapshot { message_id, .. } => {
            open.insert(message_id.clone());
        }
        StreamEvent::Done { .. } | StreamEvent::Error { .. } => {
            open.remove(event_message_id(event));
        }
        // Before any text: the reply's snapshot opened it already.
        StreamEvent::Progress { .. } => {}
    }
}
