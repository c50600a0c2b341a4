//! `GET /v1/stream` (an extension): the account stream of docs/service.md, "The account
//! stream". One WebSocket per client: a `hello` with the account's sessions and usage, then
//! every change to them as it happens (`convo_wire::account_stream::AccountEvent`), from this
//! replica and, on PostgreSQL, from the others (through the hub and its relay). A session's
//! event is read when the listener takes its signal (`account_events::event`), so the last one
//! it sends is the session's state. Usage changes are coalesced: at most one `usage` event per
//! `USAGE_EVERY` per listener.

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
use crate::account_events::{self, Change, summary};
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
        database_id: Some(state.database_id.clone()),
        deleted_session_ids: Some(super::sessions::recently_deleted(state, account.id).await?),
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
        unread: Unread::default(),
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
    unread: Unread,
}

/// First wait before a session whose event could not be read is read again; it doubles while
/// the reads fail, up to `UNREAD_RETRY_MAX`.
const UNREAD_RETRY_FIRST: Duration = Duration::from_millis(250);
const UNREAD_RETRY_MAX: Duration = Duration::from_secs(5);

/// The sessions whose event could not be read when their signal came (the database did not
/// answer), in the order their signals came: read again when due, until they can be, so that
/// the listener is told of every change once the database answers again, and stays connected
/// meanwhile. A later signal of the same session read meanwhile settles it.
#[derive(Default)]
struct Unread {
    sessions: Vec<(String, Change)>,
    due: Option<Instant>,
    wait: Option<Duration>,
}

impl Unread {
    /// The event of `session_id`'s `change` could not be read.
    fn failed(&mut self, session_id: String, change: Change) {
        match self.sessions.iter_mut().find(|(s, _)| *s == session_id) {
            // A session the listener may not know yet is told as created.
            Some((_, kept)) if *kept == Change::Created => {}
            Some((_, kept)) => *kept = change,
            None => self.sessions.push((session_id, change)),
        }
        if self.due.is_none() {
            let wait = self.wait.unwrap_or(UNREAD_RETRY_FIRST);
            self.due = Some(Instant::now() + wait);
            self.wait = Some((wait * 2).min(UNREAD_RETRY_MAX));
        }
    }

    /// `session_id`'s event was read and sent.
    fn settled(&mut self, session_id: &str) {
        self.sessions.retain(|(s, _)| s != session_id);
        if self.sessions.is_empty() {
            *self = Unread::default();
        }
    }
}

impl AccountListener<'_> {
    /// Sends the event of `session_id`'s `change`, read now; one that cannot be read is kept
    /// to be read again (`Unread`). False when the socket is gone.
    async fn tell(&mut self, socket: &mut WebSocket, session_id: String, change: Change) -> bool {
        let account = self.account.id;
        match account_events::event(self.state, account, &session_id, change).await {
            Ok(event) => {
                self.unread.settled(&session_id);
                ws::send(socket, &event).await
            }
            Err(e) => {
                tracing::warn!(account, session = %session_id, error = %e, "cannot read a changed session for the account stream; read again later");
                self.unread.failed(session_id, change);
                true
            }
        }
    }

    /// Sends a fresh `hello` (which has the usage and every session too); false when the
    /// socket is gone.
    async fn resync(&mut self, socket: &mut WebSocket) -> bool {
        let alive = send_hello(self.state, self.account, socket).await;
        self.last_usage = Instant::now();
        self.usage_due = None;
        self.unread = Unread::default();
        alive
    }
}

enum AccountWake {
    Signal(Result<AccountSignal, RecvError>),
    UsageDue,
    UnreadDue,
}

impl Listener for AccountListener<'_> {
    type Event = AccountWake;

    async fn next(&mut self) -> AccountWake {
        tokio::select! {
            biased;
            signal = self.signals.recv() => AccountWake::Signal(signal),
            _ = ws::sleep_until(self.usage_due) => AccountWake::UsageDue,
            _ = ws::sleep_until(self.unread.due) => AccountWake::UnreadDue,
        }
    }

    async fn handle(&mut self, socket: &mut WebSocket, wake: AccountWake) -> bool {
        let (state, account) = (self.state, self.account);
        match wake {
            AccountWake::Signal(Ok(AccountSignal::Session { session_id, change })) => {
                self.tell(socket, session_id, change).await
            }
            AccountWake::Signal(Ok(AccountSignal::Event(event))) => ws::send(socket, &event).await,
            AccountWake::Signal(Ok(AccountSignal::Usage)) => {
                let last_usage = self.last_usage;
                self.usage_due
                    .get_or_insert_with(|| (last_usage + USAGE_EVERY).max(Instant::now()));
                true
            }
            AccountWake::Signal(Ok(AccountSignal::Resync) | Err(RecvError::Lagged(_))) => {
                // What was missed is replaced by the state now.
                self.resync(socket).await
            }
            AccountWake::Signal(Err(RecvError::Closed)) => false,
            AccountWake::UnreadDue => {
                self.unread.due = None;
                let mut waiting = std::mem::take(&mut self.unread.sessions).into_iter();
                while let Some((session_id, change)) = waiting.next() {
                    if !self.tell(socket, session_id, change).await {
                        return false;
                    }
                    if !self.unread.sessions.is_empty() {
                        // Still not read: the database is still away; the rest wait with it.
                        self.unread.sessions.extend(waiting);
                        break;
                    }
                }
                true
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use convo_wire::account_stream::SessionChange;

    const TITLE: Change = Change::Updated(SessionChange::Title);
    const MESSAGE: Change = Change::Updated(SessionChange::Message);

    #[tokio::test(start_paused = true)]
    async fn unread_sessions_are_kept_in_order_read_again_later_and_settled_by_a_read() {
        let mut unread = Unread::default();
        assert_eq!(unread.due, None);
        unread.failed("s".into(), Change::Created);
        let first = unread.due.expect("a retry is due");
        assert_eq!(first, Instant::now() + UNREAD_RETRY_FIRST);
        // A session the listener may not know yet stays `Created`; the others keep their last.
        unread.failed("s".into(), TITLE);
        unread.failed("t".into(), TITLE);
        unread.failed("t".into(), MESSAGE);
        assert_eq!(unread.due, Some(first), "one retry at a time");
        assert_eq!(
            unread.sessions,
            vec![
                ("s".to_string(), Change::Created),
                ("t".to_string(), MESSAGE)
            ]
        );
        // The retry failed again: the wait doubles, up to its cap.
        let mut waits = Vec::new();
        for _ in 0..8 {
            unread.due = None;
            let before = Instant::now();
            unread.failed("s".into(), Change::Created);
            waits.push(unread.due.unwrap() - before);
        }
        assert_eq!(waits[0], UNREAD_RETRY_FIRST * 2);
        assert_eq!(waits[1], UNREAD_RETRY_FIRST * 4);
        assert_eq!(*waits.last().unwrap(), UNREAD_RETRY_MAX);
        // Read at last: settled; once none is left, nothing is due and the wait starts over.
        unread.settled("s");
        assert_eq!(unread.sessions, vec![("t".to_string(), MESSAGE)]);
        assert!(unread.due.is_some());
        unread.settled("t");
        assert!(unread.sessions.is_empty());
        assert_eq!(unread.due, None);
        unread.failed("u".into(), TITLE);
        assert_eq!(unread.due, Some(Instant::now() + UNREAD_RETRY_FIRST));
    }
}
