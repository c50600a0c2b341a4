//! `GET /v1/stream` (an extension): the account stream of docs/service.md, "The account
//! stream". One WebSocket per client: a `hello` with the account's sessions and usage, then
//! every change to them as it happens (`convo_wire::account_stream::AccountEvent`), from this
//! replica and, on PostgreSQL, from the others (through the hub and its relay). Usage changes
//! are coalesced: at most one `usage` event per `USAGE_EVERY` per listener.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::http::HeaderMap;
use axum::response::Response;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use super::analytics::usage_of;
use super::ws::{self, Listener};
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
    let upgrade = ws::upgrade(upgrade)?;
    Ok(upgrade.on_upgrade(move |socket| listen(state, account, socket)))
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
        Ok(event) => ws::send(socket, &event).await,
        Err(e) => {
            tracing::warn!(account = account.id, error = %e.body.message, "cannot read the account stream's hello");
            ws::close(
                socket,
                1011,
                "the account's state cannot be read now; reconnect",
            )
            .await;
            false
        }
    }
}

/// Tells the listener of every change to the account until it leaves or the service stops.
async fn listen(state: Arc<AppState>, account: Account, mut socket: WebSocket) {
    let signals = state.hub.subscribe_account(account.id);
    // On PostgreSQL the other replicas are told of this listener before its `hello` is read,
    // so a change they make afterwards reaches it.
    if let Some(told) = state.hub.flushed() {
        let _ = tokio::time::timeout(Duration::from_secs(2), told).await;
    }
    let alive = send_hello(&state, account, &mut socket).await;
    let mut listener = AccountListener {
        state: &state,
        account,
        signals,
        last_usage: Instant::now(),
        usage_due: None,
    };
    if alive {
        ws::run(&state, &mut socket, &mut listener).await;
    }
    drop(listener);
    state.hub.release_account(account.id);
}

/// The account stream's part of the loop: the hub's signals of the account, and the `usage`
/// event due.
struct AccountListener<'a> {
    state: &'a AppState,
    account: Account,
    signals: broadcast::Receiver<AccountSignal>,
    last_usage: Instant,
    usage_due: Option<Instant>,
}

enum AccountWake {
    Signal(Result<AccountSignal, RecvError>),
    UsageDue,
}

impl Listener for AccountListener<'_> {
    type Event = AccountWake;

    async fn next(&mut self) -> AccountWake {
        tokio::select! {
            biased;
            signal = self.signals.recv() => AccountWake::Signal(signal),
            _ = ws::sleep_until(self.usage_due) => AccountWake::UsageDue,
        }
    }

    async fn handle(&mut self, socket: &mut WebSocket, wake: AccountWake) -> bool {
        let (state, account) = (self.state, self.account);
        match wake {
            AccountWake::Signal(Ok(AccountSignal::Event(event))) => ws::send(socket, &event).await,
            AccountWake::Signal(Ok(AccountSignal::Usage)) => {
                let last_usage = self.last_usage;
                self.usage_due
                    .get_or_insert_with(|| (last_usage + USAGE_EVERY).max(Instant::now()));
                true
            }
            AccountWake::Signal(Ok(AccountSignal::Resync) | Err(RecvError::Lagged(_))) => {
                // What was missed is replaced by the state now (which has the usage too).
                let alive = send_hello(state, account, socket).await;
                self.last_usage = Instant::now();
                self.usage_due = None;
                alive
            }
            AccountWake::Signal(Err(RecvError::Closed)) => false,
            AccountWake::UsageDue => {
                self.usage_due = None;
                self.last_usage = Instant::now();
                match usage_of(state, account).await {
                    Ok(usage) => ws::send(socket, &AccountEvent::Usage { usage }).await,
                    Err(e) => {
                        tracing::warn!(account = account.id, error = %e.body.message, "cannot read the account's usage");
                        true
                    }
                }
            }
        }
    }
}
