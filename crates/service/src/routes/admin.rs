//! The operator's endpoints (extensions; docs/service.md, "Operators"), all behind the admin
//! key (`auth::admin`) and counted against no account: `GET /v1/admin/accounts` (one page of
//! every account with its usage, sorted and filtered by the database, so every replica gives
//! the same numbers), `GET /v1/admin/accounts/{accountId}/metrics` (`/v1/analytics/metrics`
//! of that account) and `GET /v1/admin/stream` (a WebSocket: `hello`, then an `account`
//! event for each account whose usage changed, at most one a second per account, from every
//! replica).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::ws::{WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{Path, RawQuery, State, rejection::PathRejection};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use super::analytics::{metrics_from_counts, parse_metrics_query, percentage};
use super::ws::{self, Listener};
use crate::error::HttpError;
use crate::storage::Storage;
use crate::storage::rows::{AccountRow, AccountsQuery};
use crate::stream::AdminSignal;
use crate::{AppState, auth, time};
use convo_core::Tier;
use convo_wire::admin::{AccountSort, AdminAccount, AdminAccounts, AdminEvent};
use convo_wire::{BillingPeriod, Metrics, Quota, SessionQuota};

/// Accounts per page when `limit` is not given, and the most a page holds.
pub const DEFAULT_PAGE: u32 = 100;
pub const MAX_PAGE: u32 = 1000;
/// Longest `q`.
pub const MAX_FILTER_CHARS: usize = 64;
/// Least time between two `account` events of one account to an admin listener.
pub const ACCOUNT_EVERY: Duration = Duration::from_secs(1);

/// The admin list's query string, validated.
fn parse_accounts_query(raw: Option<&str>) -> Result<AccountsQuery, HttpError> {
    let mut query = AccountsQuery {
        period_start_ms: time::billing_period(Utc::now()).0.timestamp_millis(),
        sort: AccountSort::default(),
        limit: DEFAULT_PAGE,
        offset: 0,
        q: None,
        ids: None,
    };
    let mut seen = BTreeSet::new();
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if !seen.insert(name.to_string()) {
            return Err(HttpError::invalid(format!(
                "`{name}` is given more than once"
            )));
        }
        match name.as_ref() {
            "sort" => {
                query.sort = serde_json::from_value(serde_json::Value::String(value.to_string()))
                    .map_err(|_| {
                    HttpError::invalid("`sort` must be one of share, requests, tokens, name")
                })?;
            }
            "limit" => {
                query.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| {
                        HttpError::invalid(format!(
                            "`limit` must be a whole number from 1 to {MAX_PAGE}"
                        ))
                    })?;
            }
            "offset" => {
                query.offset = value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= i64::MAX as u64)
                    .ok_or_else(|| {
                        HttpError::invalid("`offset` must be a whole number, 0 or more")
                    })?;
            }
            "q" => {
                let q = value.trim();
                if q.chars().count() > MAX_FILTER_CHARS {
                    return Err(HttpError::invalid(format!(
                        "`q` is longer than {MAX_FILTER_CHARS} characters"
                    )));
                }
                query.q = (!q.is_empty()).then(|| q.to_string());
            }
            _ => {}
        }
    }
    Ok(query)
}

/// A stored account as operators see it.
fn admin_account(row: AccountRow) -> Result<AdminAccount, HttpError> {
    let tier: Tier = row.tier.parse().map_err(|_| {
        HttpError::from(crate::error::StoreError::Corrupt(format!(
            "account {} has an unknown tier {:?}",
            row.id, row.tier
        )))
    })?;
    let limits = tier.limits();
    let name = match row.key_hints.first() {
        Some(hint) => format!("key …{hint}"),
        None => format!("account {}", row.id),
    };
    Ok(AdminAccount {
        account_id: row.id.max(0) as u64,
        name,
        tier: tier.as_str().to_string(),
        key_hints: row.key_hints,
        requests: Quota {
            used: row.requests,
            limit: limits.requests,
            percentage: percentage(row.requests, limits.requests),
        },
        tokens: Quota {
            used: row.tokens,
            limit: limits.tokens,
            percentage: percentage(row.tokens, limits.tokens),
        },
        sessions: SessionQuota {
            active: row.sessions,
            limit: limits.sessions,
            percentage: percentage(row.sessions, limits.sessions),
        },
        share: row.share,
        last_active_at: row.last_active_ms.map(time::ms_to_rfc3339),
    })
}

/// One page of accounts, as `GET /v1/admin/accounts` answers it.
pub(crate) async fn page(
    state: &AppState,
    query: AccountsQuery,
) -> Result<AdminAccounts, HttpError> {
    let (start, end) = time::billing_period(Utc::now());
    let page = state.store.admin_accounts(query).await?;
    Ok(AdminAccounts {
        billing_period: BillingPeriod {
            start: time::to_rfc3339(start),
            end: time::to_rfc3339(end),
        },
        total: page.total,
        accounts: page
            .rows
            .into_iter()
            .map(admin_account)
            .collect::<Result<_, _>>()?,
    })
}

pub(crate) async fn accounts(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<AdminAccounts>, HttpError> {
    auth::admin(&state, &headers)?;
    let query = parse_accounts_query(raw.as_deref())?;
    Ok(Json(page(&state, query).await?))
}

pub(crate) async fn account_metrics(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Metrics>, HttpError> {
    auth::admin(&state, &headers)?;
    let Path(id) = path.map_err(|e| HttpError::invalid(format!("`accountId` in the path: {e}")))?;
    let id = id.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
        HttpError::invalid("`accountId` must be an account's id, a whole number from 1")
    })?;
    let query = parse_metrics_query(raw.as_deref())?;
    let exists = AccountsQuery {
        ids: Some(vec![id]),
        limit: 1,
        ..parse_accounts_query(None)?
    };
    if state.store.admin_accounts(exists).await?.rows.is_empty() {
        return Err(HttpError::new(
            StatusCode::NOT_FOUND,
            "account_not_found",
            format!("no account {id}"),
        ));
    }
    let (start, end) = (query.start.timestamp_millis(), query.end.timestamp_millis());
    let counts = state.store.metric_counts(id, start, end).await?;
    Ok(Json(metrics_from_counts(&query, &counts)))
}

pub(crate) async fn stream(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    auth::admin(&state, &headers)?;
    let upgrade = ws::upgrade(upgrade)?;
    Ok(upgrade.on_upgrade(move |socket| listen(state, socket)))
}

/// Closes the socket with 1011 after a failed read (the client reconnects).
async fn unreadable(socket: &mut WebSocket, error: &HttpError) {
    tracing::warn!(error = %error.body.message, "cannot read the accounts for the admin stream");
    ws::close(socket, 1011, "the accounts cannot be read now; reconnect").await;
}

/// Sends `hello` with the account count now; false when the socket is gone or closed.
async fn send_hello(state: &AppState, socket: &mut WebSocket) -> bool {
    let count = async {
        let query = AccountsQuery {
            limit: 1,
            ..parse_accounts_query(None)?
        };
        Ok::<_, HttpError>(state.store.admin_accounts(query).await?.total)
    };
    match count.await {
        Ok(total) => ws::send(socket, &AdminEvent::Hello { total }).await,
        Err(e) => {
            unreadable(socket, &e).await;
            false
        }
    }
}

/// Sends an `account` event for each of `changed` (read in one query); false when the socket
/// is gone or closed.
async fn send_changed(state: &AppState, socket: &mut WebSocket, changed: Vec<i64>) -> bool {
    let query = match parse_accounts_query(None) {
        Ok(base) => AccountsQuery {
            limit: changed.len().min(u32::MAX as usize) as u32,
            ids: Some(changed),
            ..base
        },
        Err(_) => return true,
    };
    match page(state, query).await {
        Ok(page) => {
            for account in page.accounts {
                if !ws::send(socket, &AdminEvent::Account { account }).await {
                    return false;
                }
            }
            true
        }
        Err(e) => {
            unreadable(socket, &e).await;
            false
        }
    }
}

/// Tells the operator of every account whose usage changes, until it leaves or the service
/// stops. Changes are gathered and sent at most once per `ACCOUNT_EVERY`.
async fn listen(state: Arc<AppState>, mut socket: WebSocket) {
    let signals = state.hub.subscribe_admin();
    // On PostgreSQL the other replicas are told of this listener before its `hello` is read.
    if let Some(told) = state.hub.flushed() {
        let _ = tokio::time::timeout(Duration::from_secs(2), told).await;
    }
    let alive = send_hello(&state, &mut socket).await;
    let mut listener = AdminListener {
        state: &state,
        signals,
        changed: BTreeSet::new(),
        last_sent: None,
        due: None,
    };
    if alive {
        ws::run(&state, &mut socket, &mut listener).await;
    }
    drop(listener);
    state.hub.release_admin();
}

/// The admin stream's part of the loop: the hub's usage changes, gathered until they are
/// due.
struct AdminListener<'a> {
    state: &'a AppState,
    signals: broadcast::Receiver<AdminSignal>,
    /// The accounts changed since the last `account` events.
    changed: BTreeSet<i64>,
    last_sent: Option<Instant>,
    due: Option<Instant>,
}

enum AdminWake {
    Signal(Result<AdminSignal, RecvError>),
    Due,
}

impl Listener for AdminListener<'_> {
    type Event = AdminWake;

    async fn next(&mut self) -> AdminWake {
        tokio::select! {
            biased;
            signal = self.signals.recv() => AdminWake::Signal(signal),
            _ = ws::sleep_until(self.due) => AdminWake::Due,
        }
    }

    async fn handle(&mut self, socket: &mut WebSocket, wake: AdminWake) -> bool {
        match wake {
            AdminWake::Signal(Ok(AdminSignal::Usage(account))) => {
                self.changed.insert(account);
                let last_sent = self.last_sent;
                self.due.get_or_insert_with(|| match last_sent {
                    Some(at) => (at + ACCOUNT_EVERY).max(Instant::now()),
                    None => Instant::now(),
                });
                true
            }
            AdminWake::Signal(Ok(AdminSignal::Resync) | Err(RecvError::Lagged(_))) => {
                // What was missed is replaced by a fresh `hello`: the client fetches the list
                // again.
                self.changed.clear();
                self.due = None;
                send_hello(self.state, socket).await
            }
            AdminWake::Signal(Err(RecvError::Closed)) => false,
            AdminWake::Due => {
                self.due = None;
                self.last_sent = Some(Instant::now());
                let accounts = std::mem::take(&mut self.changed).into_iter().collect();
                send_changed(self.state, socket, accounts).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_queries_are_validated() {
        let q = parse_accounts_query(Some("sort=tokens&limit=5&offset=10&q=%20ab%20")).unwrap();
        assert_eq!((q.sort, q.limit, q.offset), (AccountSort::Tokens, 5, 10));
        assert_eq!(q.q.as_deref(), Some("ab"));
        let q = parse_accounts_query(None).unwrap();
        assert_eq!(
            (q.sort, q.limit, q.q),
            (AccountSort::Share, DEFAULT_PAGE, None)
        );
        let msg = |raw: &str| parse_accounts_query(Some(raw)).unwrap_err().body.message;
        assert!(msg("sort=size").contains("share, requests, tokens, name"));
        assert!(msg("limit=0").contains("`limit`"));
        assert!(msg("limit=1001").contains("`limit`"));
        assert!(msg("offset=-1").contains("`offset`"));
        assert!(msg("sort=name&sort=share").contains("more than once"));
        assert!(msg(&format!("q={}", "x".repeat(65))).contains("`q`"));
    }
}
