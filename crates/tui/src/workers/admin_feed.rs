//! The admin feed: what keeps the accounts view (F4) and its alerts current while the TUI
//! runs, whether or not F4 is shown.
//!
//! With an admin key (configured, or the embedded service's own) it holds the admin stream
//! (`GET /v1/admin/stream`) open and passes each changed account on as
//! `AccountsEvent::Changed`. On each (re)connection — the stream's `hello` — it fetches the
//! [`POLL_TOP`] accounts nearest their limits, so that what changed while away is seen and
//! the alerts have a baseline. While the stream is down or missing it polls that same page
//! every [`POLL_EVERY`]. Without an admin key it only says so and ends.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::Shared;
use crate::accounts_view::worker::failure_of;
use crate::accounts_view::{AccountsEvent, AdminFailure, POLL_TOP};
use crate::event::{AppEvent, EventSender};
use convo_client::api::admin::{AccountsQuery, AdminStream, AdminUpdate};
use convo_client::api::{AccountSort, AdminEvent, ApiError, Client};

/// How often the accounts are polled while the admin stream is down or missing.
pub const POLL_EVERY: Duration = Duration::from_secs(15);

fn send(events: &EventSender, ev: AccountsEvent) -> bool {
    events.send(AppEvent::Accounts(ev))
}

/// The accounts nearest their limits; `Err` ends the feed (no endpoints, key refused).
async fn poll(client: &Client, events: &EventSender) -> Result<bool, AdminFailure> {
    let query = AccountsQuery {
        sort: AccountSort::Share,
        limit: Some(POLL_TOP),
        ..Default::default()
    };
    match client.admin_accounts(&query).await {
        Ok(Some(page)) => Ok(send(events, AccountsEvent::Changed(page.accounts))),
        Ok(None) => Err(AdminFailure::Unsupported),
        Err(e @ (ApiError::Unauthorized { .. } | ApiError::Config(_))) => Err(failure_of(&e)),
        Err(e) => {
            tracing::debug!(error = %e, "the accounts poll failed; trying again later");
            Ok(true)
        }
    }
}

/// Runs the feed for the connected client (it waits for the connection: the app's first
/// `RefreshUsage` kick comes with it).
pub(super) async fn admin_feed(shared: Arc<Shared>, kick: Arc<Notify>, events: EventSender) {
    let client = loop {
        if let Some(client) = shared.client.get() {
            break client.clone();
        }
        kick.notified().await;
    };
    if !send(
        &events,
        AccountsEvent::FeedStarted {
            admin_key: client.has_admin_key(),
        },
    ) {
        return;
    }
    let Ok((_stream, mut updates)) = AdminStream::connect(client.options()) else {
        return;
    };
    let mut stream_open = true;
    let mut polling = true;
    let mut next_poll = Some(tokio::time::Instant::now());
    loop {
        let alive = tokio::select! {
            update = updates.recv(), if stream_open => match update {
                Some(AdminUpdate::Event(AdminEvent::Hello { total })) => {
                    send(&events, AccountsEvent::Hello { total })
                        && match poll(&client, &events).await {
                            Ok(alive) => alive,
                            Err(f) => {
                                send(&events, AccountsEvent::FeedFailed(f));
                                return;
                            }
                        }
                }
                Some(AdminUpdate::Event(AdminEvent::Account { account })) => {
                    send(&events, AccountsEvent::Changed(vec![account]))
                }
                Some(AdminUpdate::Connected) => {
                    polling = false;
                    next_poll = None;
                    send(&events, AccountsEvent::Live(true))
                }
                Some(AdminUpdate::Disconnected { retry_in: Some(_), error }) => {
                    tracing::debug!(%error, "the admin stream dropped; polling until it is back");
                    if !polling {
                        polling = true;
                        next_poll = Some(tokio::time::Instant::now());
                    }
                    send(&events, AccountsEvent::Live(false))
                }
                Some(AdminUpdate::Disconnected { retry_in: None, .. })
                | Some(AdminUpdate::Unsupported)
                | None => {
                    stream_open = false;
                    polling = true;
                    next_poll.get_or_insert_with(tokio::time::Instant::now);
                    send(&events, AccountsEvent::Live(false))
                }
            },
            _ = sleep_until(next_poll) => {
                next_poll = polling.then(|| tokio::time::Instant::now() + POLL_EVERY);
                match poll(&client, &events).await {
                    Ok(alive) => alive,
                    Err(f) => {
                        send(&events, AccountsEvent::FeedFailed(f));
                        return;
                    }
                }
            }
        };
        if !alive {
            return;
        }
    }
}

/// Resolves at `due`, never when there is none.
async fn sleep_until(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}
