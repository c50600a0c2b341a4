//! Errors of the service: `HttpError` is what a handler returns, rendered as the error
//! envelope of docs/design.md, "HTTP"; `ServiceError` is what `start` can fail with.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use convo_wire::{ErrorBody, ErrorEnvelope};

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("database: {0}")]
    Store(#[from] StoreError),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("internal: {0}")]
    Internal(String),
}

/// An error answered to a client: a status, the envelope body and maybe extra headers.
#[derive(Debug, Clone)]
pub struct HttpError {
    pub status: StatusCode,
    pub body: Box<ErrorBody>,
    /// Seconds for `Retry-After` (429).
    pub retry_after: Option<u64>,
}

impl HttpError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        HttpError {
            status,
            body: Box::new(ErrorBody::new(code, message)),
            retry_after: None,
        }
    }

    /// 400 `invalid_request`; `message` names the field.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403 `forbidden`: a credential of the wrong kind for the endpoint (the admin key on the
    /// interface's endpoints, an API key on the operator's).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn session_not_found(session_id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "session_not_found",
            format!("session {session_id} does not exist or was deleted"),
        )
    }

    pub fn context_overflow(current: u64, max: u64) -> Self {
        let mut e = Self::new(
            StatusCode::BAD_REQUEST,
            "context_overflow",
            format!(
                "the context window of this session would be exceeded ({current} of {max} tokens); \
                 enable compression or clear the session history (start a new session)"
            ),
        );
        e.body.current_tokens = Some(current);
        e.body.max_tokens = Some(max);
        e
    }

    /// 429 `quota_exceeded` for `limit` (`requests`, `tokens` or `sessions`).
    pub fn quota_exceeded(limit: &str, reset_at: chrono::DateTime<chrono::Utc>) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "quota_exceeded",
            format!("the plan limit of {limit} for this billing period is reached"),
        );
        e.body.limit = Some(limit.to_string());
        e.body.reset_at = Some(super::time::to_rfc3339(reset_at));
        let secs = (reset_at - chrono::Utc::now()).num_seconds().max(1);
        e.retry_after = Some(secs as u64);
        e
    }

    pub fn engine(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, "engine_error", message)
    }

    /// 409 `reply_stopped`: a cancel stopped the reply before it had any text, so the turn
    /// was rolled back (the plain send's answer, and the stream's `error`).
    pub fn reply_stopped(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "reply_stopped", message)
    }

    /// 413 `payload_too_large`: a request body over `paths::MAX_BODY_BYTES`.
    pub fn payload_too_large() -> Self {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the request body is larger than {} bytes",
                super::paths::MAX_BODY_BYTES
            ),
        )
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the service log",
        )
    }

    /// 503 `unavailable` with `Retry-After`: the database could not serve the request now
    /// (`StoreError::is_unavailable`); the same request may succeed in a moment.
    pub fn unavailable() -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the service's database is unavailable for now; try again in a moment",
        );
        e.retry_after = Some(UNAVAILABLE_RETRY_AFTER);
        e
    }
}

/// `Retry-After` of a 503 `unavailable`, in seconds: about what a PostgreSQL restart takes.
pub const UNAVAILABLE_RETRY_AFTER: u64 = 2;

impl From<StoreError> for HttpError {
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            tracing::warn!(error = %e, "the database is unavailable");
            HttpError::unavailable()
        } else {
            tracing::error!(error = %e, "storage failure");
            HttpError::internal()
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let mut resp =
            (self.status, axum::Json(ErrorEnvelope { error: *self.body })).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// A failure of the storage layer (never shown to clients beyond `internal`, or `unavailable`
/// when `is_unavailable`).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("postgres: {}", with_sources(.0))]
    Postgres(#[from] tokio_postgres::Error),
    #[error("postgres connection pool: {}", with_sources(.0))]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("database configuration: {0}")]
    Config(String),
    #[error("database task failed: {0}")]
    Join(String),
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    #[error("the transaction was not committed: {0}")]
    Commit(String),
    /// Other writers kept changing what an operation reads, so often that it gave up running
    /// again; the same operation can go through a moment later.
    #[error("given up under contention: {0}")]
    Contended(String),
}

/// `error: its source: its source…` (tokio-postgres shows the cause, e.g. "Connection refused",
/// only as a source).
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

impl StoreError {
    /// Whether PostgreSQL could not serve the operation now, though the same operation may
    /// succeed in a moment: the connection was lost or could not be made, the pool had none
    /// free in time, the server is shutting down or starting, a lock was not granted within
    /// `lock_timeout` (storage/postgres/mod.rs, `LOCK_WAIT`), a deadlock or serialization
    /// failure, an operation that ran again too often under contention (`Contended`).
    /// (SQLite's store is a file of this process's own.) Answered 503 `unavailable`
    /// (docs/design.md, "HTTP"); every other store error is a 500 `internal`.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Postgres(e) => postgres_unavailable(e),
            StoreError::Pool(deadpool_postgres::PoolError::Backend(e)) => postgres_unavailable(e),
            StoreError::Pool(
                deadpool_postgres::PoolError::Timeout(_) | deadpool_postgres::PoolError::Closed,
            ) => true,
            StoreError::Contended(_) => true,
            _ => false,
        }
    }
}

fn postgres_unavailable(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    match e.code() {
        Some(code) => {
            code.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::TOO_MANY_CONNECTIONS,
                    SqlState::LOCK_NOT_AVAILABLE,
                    SqlState::T_R_SERIALIZATION_FAILURE,
                    SqlState::T_R_DEADLOCK_DETECTED,
                    SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
                    SqlState::QUERY_CANCELED,
                ]
                .contains(code)
        }
        // No answer from the server: the connection closed, or its socket failed.
        None => e.is_closed() || io_source(e),
    }
}

fn io_source(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = e.source();
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadpool_postgres::{PoolError, TimeoutType};

    #[test]
    fn a_database_that_cannot_serve_now_is_503_with_retry_after_and_the_rest_500() {
        for unavailable in [
            StoreError::Pool(PoolError::Timeout(TimeoutType::Wait)),
            StoreError::Pool(PoolError::Timeout(TimeoutType::Create)),
            StoreError::Pool(PoolError::Closed),
            StoreError::Contended("a counter kept changing".into()),
        ] {
            assert!(unavailable.is_unavailable(), "{unavailable}");
            let e = HttpError::from(unavailable);
            assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(e.body.code, "unavailable");
            assert_eq!(e.retry_after, Some(UNAVAILABLE_RETRY_AFTER));
        }
        for failed in [
            StoreError::Corrupt("a role".into()),
            StoreError::Commit("rolled back by another replica".into()),
            StoreError::Config("not a URL".into()),
            StoreError::Sqlite(rusqlite::Error::QueryReturnedNoRows),
        ] {
            assert!(!failed.is_unavailable(), "{failed}");
            let e = HttpError::from(failed);
            assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(e.retry_after, None);
        }
    }
}
