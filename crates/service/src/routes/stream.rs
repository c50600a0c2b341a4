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
use convo_core::SessionStatus;
use convo_wire::StreamEvent;

/// Largest inbound frame and message (clients only send pings and close).
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
    Ok(upgrade
        .max_message_size(MAX_INBOUND_BYTES)
        .max_frame_size(MAX_INBOUND_BYTES)
        .on_upgrade(move |socket| listen(state, session_id, socket)))
}

async fn send(socket: &mut WebSocket, event: &StreamEvent) -> bool {
    match serde_json::to_string(event) {
        Ok(text) => socket.send(WsMessage::Text(text.into())).await.is_ok(),
        Err(_) => true,
    }
}

/// Relays every reply of the session until the client leaves or the service stops.
async fn listen(state: Arc<AppState>, session_id: String, mut socket: WebSocket) {
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
                // Pings are answered by the WebSocket layer; text and binary frames are ignored.
                Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                alive = socket.send(WsMessage::Ping(Vec::new().into())).await.is_ok();
            }
            _ = &mut stopping => {
                let _ = socket
                    .send(WsMessage::Close(Some(CloseFrame {
                        code: 1001,
                        reason: "the service is shutting down".into(),
                    })))
                    .await;
                break;
            }
        }
    }
    drop(events);
    state.hub.release(&session_id);
}

fn track(open: &mut HashSet<String>, event: &StreamEvent) {
    match event {
        StreamEvent::Delta { message_id, .. } | StreamEvent::Snapshot { message_id, .. } => {
            open.insert(message_id.clone());
        }
        StreamEvent::Done { .. } | StreamEvent::Error { .. } => {
            open.remove(event_message_id(event));
        }
    }
}
