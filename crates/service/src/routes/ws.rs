//! What the service's three WebSockets share (the session stream, `stream.rs`; the account
//! stream, `account_stream.rs`; the admin stream, `admin.rs`): the upgrade with its inbound
//! limits, a JSON event sent as a text frame, a close with a code, and the loop that keeps a
//! listener ([`run`]): its own events, the client's frames, the server's pings and, when the
//! service stops, a close with 1001.

use std::future::Future;
use std::time::Duration;

use axum::extract::ws::{
    CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade,
    rejection::WebSocketUpgradeRejection,
};
use tokio::time::Instant;

use crate::AppState;
use crate::error::HttpError;

/// Largest inbound frame and message (clients send pings, close and cancel frames).
pub const MAX_INBOUND_BYTES: usize = 64 * 1024;
/// Interval of the server's pings.
pub const PING_INTERVAL: Duration = Duration::from_secs(20);
/// The close code and reason every listener gets when the service stops.
pub const GOING_AWAY: (u16, &str) = (1001, "the service is shutting down");

/// The upgrade of a WebSocket route, with the inbound limits; a request that is no upgrade is
/// `invalid_request` (with the status axum gives it, 400 or 426).
pub(crate) fn upgrade(
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<WebSocketUpgrade, HttpError> {
    let upgrade = upgrade.map_err(|e| {
        HttpError::new(
            e.status(),
            "invalid_request",
            format!("this endpoint needs a WebSocket upgrade: {e}"),
        )
    })?;
    Ok(upgrade
        .max_message_size(MAX_INBOUND_BYTES)
        .max_frame_size(MAX_INBOUND_BYTES))
}

/// Sends `event` as JSON in a text frame; false when the socket is gone. (An event that cannot
/// be encoded is skipped: every event type encodes.)
pub(crate) async fn send<T: serde::Serialize>(socket: &mut WebSocket, event: &T) -> bool {
    match serde_json::to_string(event) {
        Ok(text) => send_text(socket, text).await,
        Err(_) => true,
    }
}

/// Sends `text` as a text frame; false when the socket is gone.
pub(crate) async fn send_text(socket: &mut WebSocket, text: String) -> bool {
    socket.send(WsMessage::Text(text.into())).await.is_ok()
}

/// Closes the socket with `code` and `reason` (a socket already gone is left as it is).
pub(crate) async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    let _ = socket
        .send(WsMessage::Close(Some(CloseFrame {
            code,
            reason: reason.to_string().into(),
        })))
        .await;
}

/// Resolves at `due`, never when there is none.
pub(crate) async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// A listener's own part of [`run`]'s loop: where its events come from and what it does with
/// each.
pub(crate) trait Listener: Send {
    type Event: Send;

    /// The next thing to act on. Awaited beside the shutdown, the client's frames and the
    /// pings, and dropped when one of them comes first: it must lose nothing when dropped.
    fn next(&mut self) -> impl Future<Output = Self::Event> + Send;

    /// Acts on `event`; false ends the loop (the socket is gone, or was closed).
    fn handle(
        &mut self,
        socket: &mut WebSocket,
        event: Self::Event,
    ) -> impl Future<Output = bool> + Send;

    /// A text frame from the client; false ends the loop. Ignored unless the listener takes
    /// requests on its socket (the session stream's cancel frame).
    fn text(&mut self, _socket: &mut WebSocket, _text: &str) -> impl Future<Output = bool> + Send {
        async { true }
    }

    /// What the listener still has to say when the service stops, before the close 1001.
    fn stopping(&mut self, _socket: &mut WebSocket) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Keeps `listener` on `socket` until the client leaves, the listener ends it, or the service
/// stops: then the listener's last words ([`Listener::stopping`]) and a close with 1001
/// ([`GOING_AWAY`]). A stop is seen before anything else that is ready, then the listener's
/// events, then the client's frames (pings are answered by the WebSocket layer; text frames go
/// to [`Listener::text`]; binary frames are ignored), then the server's ping every [`PING_INTERVAL`].
pub(crate) async fn run<L: Listener>(state: &AppState, socket: &mut WebSocket, listener: &mut L) {
    let mut ping = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut shutdown = state.shutdown.clone();
    let stopping = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    tokio::pin!(stopping);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopping => {
                listener.stopping(socket).await;
                close(socket, GOING_AWAY.0, GOING_AWAY.1).await;
                return;
            }
            event = listener.next() => {
                if !listener.handle(socket, event).await {
                    return;
                }
            }
            inbound = socket.recv() => match inbound {
                Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(WsMessage::Text(text))) => {
                    if !listener.text(socket, text.as_str()).await {
                        return;
                    }
                }
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if socket.send(WsMessage::Ping(Vec::new().into())).await.is_err() {
                    return;
                }
            }
        }
    }
}
