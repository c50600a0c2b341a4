//! `GET /metrics`: Prometheus's scrape target, behind the admin key (`auth::admin`). Each
//! scrape reads what the service holds now into a `metrics::Snapshot` (the engine's
//! counters, listeners, replies in flight, the relay, the pool, and the usage of the
//! `MAX_ACCOUNT_SERIES` accounts nearest a limit, read from the database so that every
//! replica reports the same numbers) and answers the registry's text. `convo serve
//! --metrics-addr` serves the same scrape without the admin key on a bind of its own
//! (`server::serve_metrics`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use crate::error::HttpError;
use crate::metrics::{AccountUsage, CONTENT_TYPE, MAX_ACCOUNT_SERIES, RelayState, Snapshot};
use crate::storage::rows::AccountsQuery;
use crate::storage::{Db, Storage};
use crate::{AppState, auth, time};
use convo_core::Tier;
use convo_wire::admin::AccountSort;

pub(crate) async fn scrape(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    auth::admin(&state, &headers)?;
    Ok(answer(&state).await)
}

/// The scrape of the `--metrics-addr` bind: no credential asked (that bind serves nothing
/// else, for a Prometheus on a private network).
pub(crate) async fn scrape_open(State(state): State<Arc<AppState>>) -> Response {
    answer(&state).await
}

/// The registry's text with what the service holds now.
async fn answer(state: &AppState) -> Response {
    let snapshot = snapshot(state).await;
    let text = state.metrics.encode(snapshot);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}

/// What the service holds now. A database that cannot be read leaves the accounts out (and
/// is logged): the rest still says what is wrong.
pub(crate) async fn snapshot(state: &AppState) -> Snapshot {
    let replies_in_flight = {
        let mut turns = state.turns.lock().unwrap_or_else(|p| p.into_inner());
        while turns.try_join_next().is_some() {}
        turns.len() as u64
    };
    let relay = state
        .relay
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|relay| RelayState {
            up: relay.connected(),
            lag_seconds: relay.probe_seconds(),
        });
    let pool = match &state.store {
        Db::Postgres(pg) => Some(pg.pool_use()),
        Db::Sqlite(_) => None,
    };
    let query = AccountsQuery {
        period_start_ms: time::billing_period(Utc::now()).0.timestamp_millis(),
        sort: AccountSort::Share,
        limit: MAX_ACCOUNT_SERIES,
        offset: 0,
        q: None,
        ids: None,
    };
    let (accounts_total, accounts) = match state.store.admin_accounts(query).await {
        Ok(page) => (
            page.total,
            page.rows
                .into_iter()
                .filter_map(|row| {
                    let limits = row.tier.parse::<Tier>().ok()?.limits();
                    Some(AccountUsage {
                        account: row.id,
                        requests: row.requests,
                        requests_limit: limits.requests,
                        tokens: row.tokens,
                        tokens_limit: limits.tokens,
                        sessions: row.sessions,
                        sessions_limit: limits.sessions,
                    })
                })
                .collect(),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the accounts' usage for /metrics");
            (0, Vec::new())
        }
    };
    Snapshot {
        engine: state.engine.stats(),
        replies_in_flight,
        listeners: state.hub.listeners(),
        relay,
        pool,
        accounts_total,
        accounts,
    }
}
