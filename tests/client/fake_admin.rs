//! A fake deployment with the operator's endpoints (`GET /v1/admin/accounts`,
//! `GET /v1/admin/accounts/{id}/metrics`, the admin stream), serving the wire types of
//! `convo_wire::admin` with an admin key, for the client, TUI and CLI tests until the service
//! has them. Its pages hold at most [`MAX_PAGE`] accounts, so that a client fetching the whole
//! list must page.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::ws::{Message as WsMessage, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use convo_client::api::types::{
    BillingPeriod, Granularity, MessageMetrics, Metrics, MetricsPeriod, Quota, SessionMetrics,
    SessionQuota, TokenMetrics,
};
use convo_client::api::{AdminAccount, AdminAccounts, AdminEvent};
use serde_json::json;
use tokio::sync::broadcast;

/// The fake's admin key.
pub const ADMIN_KEY: &str = "service_admin_abcdefghijklmnopqrstuvwxyz0123456789";
/// The largest page the fake answers.
pub const MAX_PAGE: usize = 500;

/// Account `id` of a fake deployment: `key …{id:04}`, a `free` plan of 100 requests, 1000
/// tokens and 5 sessions, with `requests` used.
pub fn account(id: u64, requests: u64) -> AdminAccount {
    let tier = if id.is_multiple_of(3) { "pro" } else { "free" };
    let tokens = (id * 37) % 1000;
    let sessions = id % 6;
    let share = (requests as f64 / 100.0)
        .max(tokens as f64 / 1000.0)
        .max(sessions as f64 / 5.0);
    AdminAccount {
        account_id: id,
        name: format!("key …{:04}", id % 10_000),
        tier: tier.into(),
        key_hints: if id.is_multiple_of(4) {
            vec![format!("{:04}", id % 10_000), "zz99".into()]
        } else {
            vec![format!("{:04}", id % 10_000)]
        },
        requests: Quota {
            used: requests,
            limit: 100,
            percentage: requests as f64,
        },
        tokens: Quota {
            used: tokens,
            limit: 1000,
            percentage: tokens as f64 / 10.0,
        },
        sessions: SessionQuota {
            active: sessions,
            limit: 5,
            percentage: sessions as f64 * 20.0,
        },
        share,
        last_active_at: None,
    }
}

/// `n` accounts with requests used spread over 0..=110.
pub fn accounts(n: u64) -> Vec<AdminAccount> {
    (1..=n).map(|id| account(id, (id * 7) % 111)).collect()
}

/// The fake's state: its accounts, and the stream's sender of changes.
#[derive(Clone)]
pub struct FakeAdmin {
    pub accounts: Arc<Mutex<Vec<AdminAccount>>>,
    pub changes: broadcast::Sender<AdminAccount>,
    /// The queries of `GET /v1/admin/accounts`, in order.
    pub queries: Arc<Mutex<Vec<String>>>,
}

impl FakeAdmin {
    pub fn new(accounts: Vec<AdminAccount>) -> Self {
        FakeAdmin {
            accounts: Arc::new(Mutex::new(accounts)),
            changes: broadcast::channel(64).0,
            queries: Arc::default(),
        }
    }

    /// An account changed: kept, and sent to every stream.
    pub fn change(&self, account: AdminAccount) {
        {
            let mut all = self.accounts.lock().unwrap();
            match all.iter_mut().find(|a| a.account_id == account.account_id) {
                Some(a) => *a = account.clone(),
                None => all.push(account.clone()),
            }
        }
        let _ = self.changes.send(account);
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/admin/accounts", get(list))
            .route("/v1/admin/accounts/{id}/metrics", get(metrics))
            .route("/v1/admin/stream", get(stream))
            .with_state(self.clone())
    }
}

fn refused(headers: &HeaderMap) -> Option<Response> {
    let ok = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {ADMIN_KEY}"));
    (!ok).then(|| {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": {"code": "unauthorized", "message": "admin key required"}})),
        )
            .into_response()
    })
}

#[derive(serde::Deserialize)]
struct ListQuery {
    sort: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
    q: Option<String>,
}

async fn list(
    State(fake): State<FakeAdmin>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    if let Some(r) = refused(&headers) {
        return r;
    }
    fake.queries.lock().unwrap().push(format!(
        "sort={} limit={:?} offset={:?} q={:?}",
        query.sort.as_deref().unwrap_or(""),
        query.limit,
        query.offset,
        query.q
    ));
    let mut all: Vec<AdminAccount> = fake.accounts.lock().unwrap().clone();
    if let Some(q) = query.q.as_deref() {
        all.retain(|a| {
            a.tier == q
                || a.account_id.to_string() == q
                || a.key_hints.iter().any(|h| h.contains(q))
        });
    }
    match query.sort.as_deref().unwrap_or("share") {
        "requests" => all.sort_by_key(|a| std::cmp::Reverse(a.requests.used)),
        "tokens" => all.sort_by_key(|a| std::cmp::Reverse(a.tokens.used)),
        "name" => all.sort_by(|a, b| a.name.cmp(&b.name)),
        _ => all.sort_by(|a, b| b.share.total_cmp(&a.share)),
    }
    let total = all.len() as u64;
    let offset = query.offset.unwrap_or(0).min(all.len());
    let limit = query.limit.unwrap_or(50).min(MAX_PAGE);
    let page = all.into_iter().skip(offset).take(limit).collect();
    axum::Json(AdminAccounts {
        billing_period: BillingPeriod {
            start: "2026-11-01T00:00:00Z".into(),
            end: "2026-12-01T00:00:00Z".into(),
        },
        total,
        accounts: page,
    })
    .into_response()
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetricsQuery {
    start_date: String,
    end_date: String,
}

async fn metrics(
    State(fake): State<FakeAdmin>,
    headers: HeaderMap,
    Path(id): Path<u64>,
    Query(q): Query<MetricsQuery>,
) -> Response {
    if let Some(r) = refused(&headers) {
        return r;
    }
    if !fake
        .accounts
        .lock()
        .unwrap()
        .iter()
        .any(|a| a.account_id == id)
    {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(
                json!({"error": {"code": "account_not_found", "message": "no such account"}}),
            ),
        )
            .into_response();
    }
    // A day's numbers from its date, so that each day differs and a snapshot is stable.
    let day: u64 = q.start_date[8..10].parse().unwrap_or(1);
    axum::Json(Metrics {
        period: MetricsPeriod {
            start: q.start_date,
            end: q.end_date,
            granularity: Granularity::Day,
        },
        sessions: SessionMetrics {
            total: day % 4,
            active: 0,
            average_duration: 60.0,
        },
        messages: MessageMetrics {
            total: day * 3 + id,
            average_per_session: 2.0,
            user_messages: day,
            assistant_messages: day,
        },
        tokens: TokenMetrics {
            total: day * 250 + id,
            prompt: day * 100,
            completion: day * 150,
            average_per_message: 10.0,
        },
    })
    .into_response()
}

async fn stream(
    State(fake): State<FakeAdmin>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if let Some(r) = refused(&headers) {
        return r;
    }
    let mut changes = fake.changes.subscribe();
    let total = fake.accounts.lock().unwrap().len() as u64;
    ws.on_upgrade(move |mut socket| async move {
        let hello = serde_json::to_string(&AdminEvent::Hello { total }).unwrap();
        if socket.send(WsMessage::Text(hello.into())).await.is_err() {
            return;
        }
        while let Ok(account) = changes.recv().await {
            let text = serde_json::to_string(&AdminEvent::Account { account }).unwrap();
            if socket.send(WsMessage::Text(text.into())).await.is_err() {
                return;
            }
        }
    })
}
