//! `GET /v1/sessions/{sessionId}/stream`: the WebSocket of docs/design.md, "Streaming".

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::ws::{WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use tokio::sync::broadcast::{self, error::RecvError};

use super::ws::{self, Listener};
use crate::error::HttpError;
use crate::paths::STREAM;
use crate::storage::Storage;
use crate::stream::{Subscription, event_message_id};
use crate::{AppState, auth};
use convo_core::{Account, SessionStatus};
use convo_wire::stream_errors::REPLICA_STOPPING;
use convo_wire::{ErrorBody, StreamEvent};

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
    let upgrade = ws::upgrade(upgrade)?;
    // On PostgreSQL, the other replicas know of this listener before its handshake is
    // answered, so a reply they start afterwards reaches it from its first piece.
    state.hub.announce(&session_id).await;
    // Here too: the listener holds its place in the hub before the client has the answer, so
    // a reply its client starts at once is not over before the socket is set up.
    let held = Held::new(state, session_id);
    Ok(upgrade.on_upgrade(move |socket| listen(held, account, socket)))
}

/// A listener's subscription to its session in the hub, taken before the handshake is
/// answered (what happens meanwhile waits in it); the hub is told the listener left when this
/// is dropped, whether or not the upgrade came.
struct Held {
    state: Arc<AppState>,
    session_id: String,
    subscription: Option<Subscription>,
}

impl Held {
    fn new(state: Arc<AppState>, session_id: String) -> Held {
        let subscription = Some(state.hub.subscribe(&session_id));
        Held {
            state,
            session_id,
            subscription,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Its receiver goes first: the hub counts listeners by receivers.
        drop(self.subscription.take());
        self.state.hub.release(&self.session_id);
    }
}

/// Relays every reply of the session until the client leaves or the service stops.
async fn listen(mut held: Held, account: Account, mut socket: WebSocket) {
    let subscription = held.subscription.take().expect("taken once, here");
    let state = held.state.clone();
    let session_id = held.session_id.clone();
    let mut listener = SessionListener {
        state: &state,
        account: &account,
        session_id: &session_id,
        events: subscription.events,
        open: HashSet::new(),
    };
    let mut alive = true;
    for snapshot in &subscription.snapshots {
        listener.open.insert(event_message_id(snapshot).to_string());
        alive = alive && ws::send(&mut socket, snapshot).await;
    }
    if alive {
        ws::run(&state, &mut socket, &mut listener).await;
    }
    drop(listener);
    drop(held);
}

/// The session stream's part of the loop: the hub's events of the session.
struct SessionListener<'a> {
    state: &'a AppState,
    account: &'a Account,
    session_id: &'a str,
    events: broadcast::Receiver<StreamEvent>,
    /// Replies this listener has seen start but not end.
    open: HashSet<String>,
}

impl Listener for SessionListener<'_> {
    type Event = Result<StreamEvent, RecvError>;

    async fn next(&mut self) -> Self::Event {
        self.events.recv().await
    }

    async fn handle(&mut self, socket: &mut WebSocket, event: Self::Event) -> bool {
        match event {
            Ok(event) => {
                track(&mut self.open, &event);
                ws::send(socket, &event).await
            }
            Err(RecvError::Lagged(missed)) => {
                tracing::debug!(session = %self.session_id, missed, "stream listener lagged; resyncing");
                let fresh = self.state.hub.resync(self.session_id, &mut self.open);
                self.events = fresh.events;
                let mut alive = true;
                for event in &fresh.snapshots {
                    alive = alive && ws::send(socket, event).await;
                }
                alive
            }
            Err(RecvError::Closed) => false,
        }
    }

    /// A cancel frame is done and answered on this socket (`routes/cancel.rs`); other text
    /// is ignored.
    async fn text(&mut self, socket: &mut WebSocket, text: &str) -> bool {
        match super::cancel::frame(self.state, self.account, self.session_id, text).await {
            Some(answer) => ws::send_text(socket, answer).await,
            None => true,
        }
    }

    /// What already happened goes out first, then an error for each reply still in flight.
    async fn stopping(&mut self, socket: &mut WebSocket) {
        let mut last = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            last.push(event);
        }
        last.extend(stopping_errors(self.state, self.session_id));
        for event in &last {
            if !ws::send(socket, event).await {
                break;
            }
        }
    }
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
        StreamEvent::Started { message_id, .. }
        | StreamEvent::Delta { message_id, .. }
        | StreamEvent::Snapshot { message_id, .. } => {
            open.insert(message_id.clone());
        }
        StreamEvent::Done { .. } | StreamEvent::Error { .. } => {
            open.remove(event_message_id(event));
        }
        // Before any text: the reply's snapshot opened it already.
        StreamEvent::Progress { .. } => {}
    }
}
