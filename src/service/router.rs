//! The routes of the service. `ROUTES` lists every (method, path) the router serves; a test
//! keeps `docs/openapi.yaml` in step with it.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};

use super::AppState;
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
        .with_state(state)
}
