//! `GET /v1/stream` (an extension): the account stream of docs/service.md, "The account
//! stream". One WebSocket per client: a `hello` with the account's sessions and usage, then
//! every change to them as it happens (`convo_wire::account_stream::AccountEvent`), from this
//! replica and, on PostgreSQL, from the others (through the hub and its relay). Usage changes
//! are coalesced: at most one `usage` event per `USAGE_EVERY` per listener.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{
    CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade,
    rejection::WebSocketUpgradeRejection,
};
use axum::http::HeaderMap;
use axum::response::Response;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::analytics::usage_of;
use super::stream::{MAX_INBOUND_BYTES, PING_INTERVAL};
use crate::account_events::summary;
use crate::error::HttpError;
use crate::paths::ACCOUNT_STREAM;
use crate::storage::Storage;
use crate::stream::AccountSignal;
use crate::{AppState, auth};
use convo_core::Account;
use convo_wire::account_stream::AccountEvent;

/// Least time between two `usage` events to one listener (bursts of changes are coalesced
/// into the last state).
pub const USAGE_EVERY: Duration = Duration::from_millis(300);

pub(crate) async fn connect(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    let account = auth::admit(&state, &headers, "GET", ACCOUNT_STREAM).await?;
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
        .on_upgrade(move |socket| listen(state, account, socket)))
}

async fn send(socket: &mut WebSocket, event: &AccountEvent) -> bool {
    match serde_json::to_string(event) {
        Ok(text) => socket.send(WsMessage::Text(text.into())).await.is_ok(),
        Err(_) => true,
    }
}

/// The account's sessions and usage now.
async fn hello(state: &AppState, account: Account) -> Result<AccountEvent, HttpError> {
    let rows = state.store.list_sessions(account.id).await?;
    let usage = usage_of(state, account).await?;
    Ok(AccountEvent::Hello {
        sessions: rows.into_iter().map(summary).collect(),
        usage,
    })
}

/// Sends a fresh `hello`; false when the socket is gone or the state cannot be read (the
/// socket is then closed with 1011, and the client reconnects).
async fn send_hello(state: &AppState, account: Account, socket: &mut WebSocket) -> bool {
    match hello(state, account).await {
        Ok(event) => send(socket, &event).await,
        Err(e) => {
            tracing::warn!(account = account.id, error = %e.body.message, "cannot read the account stream's hello");
            let _ = socket
                .send(WsMessage::Close(Some(CloseFrame {
                    code: 1011,
                    reason: "the account's state cannot be read now; reconnect".into(),
                })))
                .await;
            false
        }
    }
}

/// Tells the listener of every change to the account until it leaves or the service stops.
async fn listen(state: Arc<AppState>, account: Account, mut socket: WebSocket) {
    let mut signals = state.hub.subscribe_account(account.id);
    // On PostgreSQL the other replicas are told of this listener before its `hello` is read,
    // so a change they make afterwards reaches it.
    if let Some(told) = state.hub.flushed() {
        let _ = tokio::time::timeout(Duration::from_secs(2), told).await;
    }
    let mut alive = send_hello(&state, account, &mut socket).await;
    let mut last_usage = Instant::now();
    let mut usage_due: Option<Instant> = None;
    let mut ping = tokio::time::interval(PING_INTERVAL);
    ping.tick().await;
    let mut shutdown = state.shutdown.clone();
    let stopping = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    tokio::pin!(stopping);
    while alive {
        tokio::select! {
            biased;
            _ = &mut stopping => {
                let _ = socket
                    .send(WsMessage::Close(Some(CloseFrame {
                        code: 1001,
                        reason: "the service is shutting down".into(),
                    })))
                    .await;
                break;
            }
            signal = signals.recv() => match signal {
                Ok(AccountSignal::Event(event)) => alive = send(&mut socket, &event).await,
                Ok(AccountSignal::Usage) => {
                    usage_due.get_or_insert_with(|| (last_usage + USAGE_EVERY).max(Instant::now()));
                }
                Ok(AccountSignal::Resync) | Err(RecvError::Lagged(_)) => {
                    // What was missed is replaced by the state now (which has the usage too).
                    alive = send_hello(&state, account, &mut socket).await;
                    last_usage = Instant::now();
                    usage_due = None;
                }
                Err(RecvError::Closed) => break,
            },
            _ = sleep_until(usage_due) => {
                usage_due = None;
                last_usage = Instant::now();
                match usage_of(&state, account).await {
                    Ok(usage) => alive = send(&mut socket, &AccountEvent::Usage { usage }).await,
                    Err(e) => tracing::warn!(account = account.id, error = %e.body.message, "cannot read the account's usage"),
                }
            }
            inbound = socket.recv() => match inbound {
                // Pings are answered by the WebSocket layer; text and binary frames are ignored.
                Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                alive = socket.send(WsMessage::Ping(Vec::new().into())).await.is_ok();
            }
        }
    }
    drop(signals);
    state.hub.release_account(account.id);
}

/// Resolves at `due`, never when there is none.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}
