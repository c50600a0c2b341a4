//! HTTP handlers, one file per resource; shared request helpers here.

pub mod account_stream;
pub mod admin;
pub mod analytics;
pub mod cancel;
pub mod health;
pub mod messages;
pub mod prometheus;
pub mod sessions;
pub mod stream;
pub mod wallets;
pub mod ws;

use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::HttpError;
use convo_wire::is_valid_session_id;

/// The session id of the path, validated.
pub(crate) fn session_id(
    path: Result<axum::extract::Path<String>, PathRejection>,
) -> Result<String, HttpError> {
    let axum::extract::Path(id) =
        path.map_err(|e| HttpError::invalid(format!("`sessionId` in the path: {e}")))?;
    if is_valid_session_id(&id) {
        Ok(id)
    } else {
        Err(HttpError::invalid(
            "`sessionId` must be `session_` followed by 16 letters or digits",
        ))
    }
}

/// The request body, or the envelope for a body that is too large or unreadable. The body
/// limit itself is applied before routing (`router.rs`, `read_body`); this only words axum's own
/// refusal the same way.
pub(crate) fn body(
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<axum::body::Bytes, HttpError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            HttpError::payload_too_large()
        } else {
            HttpError::invalid(format!("cannot read the request body: {e}"))
        }
    })
}

/// A JSON response from an already serialized body.
pub(crate) fn json_text(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Fallback for paths that match no route.
pub(crate) async fn not_found(uri: axum::http::Uri) -> HttpError {
    HttpError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no such endpoint: {}", uri.path()),
    )
}

/// Fallback for a known path with a method it does not take.
pub(crate) async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> HttpError {
    HttpError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}
