//! The routes of the service. `ROUTES` lists every (method, path) the router serves; a test
//! keeps `docs/openapi.yaml` in step with it.

use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use futures_util::FutureExt;

use super::AppState;
use super::error::ApiError;
use super::routes;

pub const MESSAGES: &str = "/v1/sessions/{sessionId}/messages";
pub const SESSION: &str = "/v1/sessions/{sessionId}";
pub const STREAM: &str = "/v1/sessions/{sessionId}/stream";
pub const METRICS: &str = "/v1/analytics/metrics";
pub const USAGE: &str = "/v1/analytics/usage";
pub const WALLET: &str = "/v1/wallets/{walletId}";
pub const HEALTH: &str = "/healthz";

/// Every (method, path) served, in the path syntax of OpenAPI.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", MESSAGES),
    ("DELETE", SESSION),
    ("GET", STREAM),
    ("GET", METRICS),
    ("GET", USAGE),
    ("GET", WALLET),
    ("GET", HEALTH),
];

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

pub(crate) fn build(state: Arc<AppState>) -> Router {
    Router::new()
        .route(MESSAGES, post(routes::messages::send))
        .route(SESSION, delete(routes::sessions::delete))
        .route(STREAM, get(routes::stream::connect))
        .route(METRICS, get(routes::analytics::metrics))
        .route(USAGE, get(routes::analytics::usage))
        .route(WALLET, get(routes::wallets::get))
        .route(HEALTH, get(routes::health::healthz))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(catch_panic))
        .with_state(state)
}

/// A handler that panics answers 500 `internal` (no detail) instead of dropping the connection.
async fn catch_panic(request: Request, next: Next) -> Response {
    match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("a request handler panicked");
            ApiError::internal().into_response()
        }
    }
}
