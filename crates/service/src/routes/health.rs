//! `GET /healthz` (extension, no auth): liveness, the process answers. `GET /readyz`
//! (extension, no auth): readiness, what a load balancer checks before it sends requests here.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::AppState;
use crate::storage::{Db, Storage};

/// How long the database has to answer a readiness check.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// 200 `{"status":"ready"}` when the database answers a trivial query within
/// `READY_TIMEOUT` and, on PostgreSQL, the stream relay is connected; else 503
/// `{"status":"unavailable","reasons":[…]}`, one reason per failed check.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let mut reasons = Vec::new();
    if let Err(e) = state.store.ready(READY_TIMEOUT).await {
        tracing::warn!(error = %e, "not ready: the database does not answer");
        reasons.push(format!(
            "database: no answer to a trivial query within {} s",
            READY_TIMEOUT.as_secs()
        ));
    }
    let relay_down = matches!(state.store, Db::Postgres(_))
        && state
            .relay
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_none_or(|relay| !relay.connected());
    if relay_down {
        reasons.push(
            "relay: not connected to PostgreSQL (replies generated on other replicas do not reach listeners here)"
                .to_string(),
        );
    }
    if *state.shutdown.borrow() {
        reasons.push("stopping: the replica is shutting down".to_string());
    }
    if reasons.is_empty() {
        (StatusCode::OK, Json(json!({"status": "ready"}))).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "reasons": reasons})),
        )
            .into_response()
    }
}
