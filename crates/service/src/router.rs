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
use super::error::HttpError;
pub use super::paths::{
    HEALTH, MAX_BODY_BYTES, MESSAGES, METRICS, READY, SESSION, SESSIONS, STREAM, USAGE, WALLET,
};
use super::routes;
pub use super::routes::analytics::MAX_QUERY_BYTES;

/// Every (method, path) served, in the path syntax of OpenAPI.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", MESSAGES),
    ("GET", MESSAGES),
    ("GET", SESSIONS),
    ("DELETE", SESSION),
    ("GET", STREAM),
    ("GET", METRICS),
    ("GET", USAGE),
    ("GET", WALLET),
    ("GET", HEALTH),
    ("GET", READY),
];

pub(crate) fn build(state: Arc<AppState>) -> Router {
    Router::new()
        .route(
            MESSAGES,
            post(routes::messages::send).get(routes::sessions::history),
        )
        .route(SESSIONS, get(routes::sessions::list))
        .route(SESSION, delete(routes::sessions::delete))
        .route(STREAM, get(routes::stream::connect))
        .route(METRICS, get(routes::analytics::metrics))
        .route(USAGE, get(routes::analytics::usage))
        .route(WALLET, get(routes::wallets::get))
        .route(HEALTH, get(routes::health::healthz))
        .route(READY, get(routes::health::readyz))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(limit_query))
        .layer(axum::middleware::from_fn(catch_panic))
        .layer(axum::middleware::from_fn(log_request))
        .with_state(state)
}

/// One log line per request: method, path (ids only, never credentials), status, duration.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        ms = started.elapsed().as_millis() as u64,
        "request"
    );
    response
}

/// Every endpoint refuses a query string over `MAX_QUERY_BYTES` with 400 `invalid_request`,
/// before authentication and routing. (URIs over hyper's own 65,534-byte limit never get here;
/// `head_errors` gives hyper's 414 the envelope.)
async fn limit_query(request: Request, next: Next) -> Response {
    let length = request.uri().query().map_or(0, str::len);
    if length > MAX_QUERY_BYTES {
        return HttpError::invalid(format!(
            "the query string is {length} bytes long; the maximum is {MAX_QUERY_BYTES}"
        ))
        .into_response();
    }
    next.run(request).await
}

/// A handler that panics answers 500 `internal` (no detail) instead of dropping the connection.
async fn catch_panic(request: Request, next: Next) -> Response {
    match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("a request handler panicked");
            HttpError::internal().into_response()
        }
    }
}
