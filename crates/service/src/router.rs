//! The routes of the service. `ROUTES` lists every (method, path) the router serves; a test
//! keeps `docs/openapi.yaml` in step with it.

use std::sync::Arc;

use std::panic::AssertUnwindSafe;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use futures_util::FutureExt;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::AppState;
use super::error::HttpError;
pub use super::paths::{
    ACCOUNT_STREAM, ADMIN_ACCOUNT_METRICS, ADMIN_ACCOUNTS, ADMIN_STREAM, CANCEL, FORK, HEALTH,
    LAST_EXCHANGE, MAX_BODY_BYTES, MESSAGES, METRICS, PROMETHEUS, READY, SESSION, SESSIONS, STREAM,
    USAGE, WALLET,
};
use super::routes;
pub use super::routes::analytics::MAX_QUERY_BYTES;

/// Every (method, path) served, in the path syntax of OpenAPI.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", MESSAGES),
    ("GET", MESSAGES),
    ("GET", SESSIONS),
    ("DELETE", SESSION),
    ("PATCH", SESSION),
    ("DELETE", LAST_EXCHANGE),
    ("POST", CANCEL),
    ("POST", FORK),
    ("GET", STREAM),
    ("GET", ACCOUNT_STREAM),
    ("GET", METRICS),
    ("GET", USAGE),
    ("GET", WALLET),
    ("GET", HEALTH),
    ("GET", READY),
    ("GET", ADMIN_ACCOUNTS),
    ("GET", ADMIN_ACCOUNT_METRICS),
    ("GET", ADMIN_STREAM),
    ("GET", PROMETHEUS),
];

pub(crate) fn build(state: Arc<AppState>) -> Router {
    let body_reader = axum::middleware::from_fn_with_state(state.clone(), read_body);
    Router::new()
        .route(
            MESSAGES,
            post(routes::messages::send).get(routes::sessions::history),
        )
        .route(SESSIONS, get(routes::sessions::list))
        .route(
            SESSION,
            delete(routes::sessions::delete).patch(routes::sessions::patch),
        )
        .route(LAST_EXCHANGE, delete(routes::sessions::undo))
        .route(CANCEL, post(routes::cancel::cancel))
        .route(FORK, post(routes::sessions::fork))
        .route(STREAM, get(routes::stream::connect))
        .route(ACCOUNT_STREAM, get(routes::account_stream::connect))
        .route(METRICS, get(routes::analytics::metrics))
        .route(USAGE, get(routes::analytics::usage))
        .route(WALLET, get(routes::wallets::get))
        .route(HEALTH, get(routes::health::healthz))
        .route(READY, get(routes::health::readyz))
        .route(ADMIN_ACCOUNTS, get(routes::admin::accounts))
        .route(ADMIN_ACCOUNT_METRICS, get(routes::admin::account_metrics))
        .route(ADMIN_STREAM, get(routes::admin::stream))
        .route(PROMETHEUS, get(routes::prometheus::scrape))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        // `read_body` has read the body whole, under `MAX_BODY_BYTES`: no second limit.
        .layer(DefaultBodyLimit::disable())
        .layer(body_reader)
        .layer(axum::middleware::from_fn(limit_query))
        .layer(axum::middleware::from_fn(catch_panic))
        .layer(axum::middleware::from_fn(log_request))
        .layer(axum::middleware::map_response(say_database(&state)))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            record_request,
        ))
        .with_state(state)
}

/// Counts every answered request for `/metrics`: by method, the route's path template
/// (never the ids in the path; `metrics::route_label`) and status, with the time to the
/// answer's head.
async fn record_request(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let method = match *request.method() {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(crate::metrics::UNMATCHED.to_string(), |path| {
            crate::metrics::route_label(path.as_str())
        });
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    state.metrics.record(
        method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// What every answer gets: the database's id in `convo_wire::sessions::DATABASE_ID_HEADER`,
/// its header value made once here.
fn say_database(
    state: &AppState,
) -> impl Fn(Response) -> std::future::Ready<Response> + Clone + Send + Sync + 'static {
    let id = HeaderValue::from_str(&state.database_id).ok();
    move |mut response: Response| {
        if let Some(id) = &id {
            (response.headers_mut()).insert(convo_wire::sessions::DATABASE_ID_HEADER, id.clone());
        }
        std::future::ready(response)
    }
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

/// Every request's body is read whole before routing and authentication, under one limit and
/// one deadline: a declared `Content-Length` over `MAX_BODY_BYTES` is refused with 413
/// `payload_too_large` before a byte of it is read (so a client that sent `Expect:
/// 100-continue` gets the 413, never `100 Continue`); a body that grows past the limit is
/// refused with 413 as soon as it does; one not whole within the body read timeout gets 408
/// `request_timeout`. Both close the connection. A request without a body (a WebSocket
/// upgrade) passes at once.
async fn read_body(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return closing(HttpError::payload_too_large());
    }
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let read = Limited::new(body, MAX_BODY_BYTES).collect();
    match tokio::time::timeout(state.body_read_timeout, read).await {
        Ok(Ok(collected)) => {
            let body = Body::from(collected.to_bytes());
            next.run(Request::from_parts(parts, body)).await
        }
        Ok(Err(e)) if e.is::<LengthLimitError>() => closing(HttpError::payload_too_large()),
        Ok(Err(e)) => closing(HttpError::invalid(format!(
            "cannot read the request body: {e}"
        ))),
        Err(_) => closing(HttpError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request body did not arrive whole within {} s (--body-read-timeout)",
                state.body_read_timeout.as_secs_f64()
            ),
        )),
    }
}

/// `error`'s answer, closing the connection after it (the rest of the body is not read).
fn closing(error: HttpError) -> Response {
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
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
