//! Errors of the client, typed by the service's `error.code` (never by HTTP status alone,
//! docs/design.md, "Against other servers"), with network and protocol failures kept apart.

use std::time::Duration;

use super::types::ErrorBody;
use convo_wire::exit;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// `context_overflow`: the message would exceed the session's context window.
    #[error("context_overflow: {message} ({current}/{max} tokens)")]
    ContextOverflow {
        current: u64,
        max: u64,
        message: String,
    },
    /// `session_not_found`: the session does not exist or was deleted.
    #[error("session_not_found: {message}")]
    SessionNotFound { message: String },
    /// `unauthorized`: missing, malformed or unknown credentials.
    #[error("unauthorized: {message}")]
    Unauthorized { message: String },
    /// `quota_exceeded`: a plan limit was reached.
    #[error("quota_exceeded: {message}{}", quota_suffix(limit.as_deref(), reset_at.as_deref()))]
    QuotaExceeded {
        /// `requests`, `tokens` or `sessions`, when the server says.
        limit: Option<String>,
        /// ISO 8601 time at which the limit resets, when the server says.
        reset_at: Option<String>,
        /// The `Retry-After` header, when present.
        retry_after: Option<Duration>,
        message: String,
    },
    /// `invalid_request`: the request was malformed; `message` names the field.
    #[error("invalid_request: {message}")]
    InvalidRequest { message: String },
    /// `reply_in_progress` (409, an extension): the session has a reply being generated, so
    /// it cannot be changed (undo) until the reply is complete.
    #[error("reply_in_progress: {message}")]
    ReplyInProgress { message: String },
    /// Any other error code the server sent, kept with its message.
    #[error("{code}: {message}")]
    Service {
        status: u16,
        code: String,
        message: String,
    },
    /// The server could not be reached, or the connection failed or timed out.
    #[error("network error: {0}")]
    Network(String),
    /// The message was sent, but the stream carrying its reply was lost and the reply could
    /// not be recovered; the message says whether the service kept it.
    #[error("stream_lost: {0}")]
    StreamLost(String),
    /// The server answered something that is not the interface (bad JSON, body too large,
    /// an error without the envelope…).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The client is not configured to make this request (no wallet token, bad URL…).
    #[error("{0}")]
    Config(String),
}

/// Whitespace runs (newlines included) folded to single spaces; control characters (C0, C1)
/// and bidi overrides dropped, so that a message is safe on a terminal.
fn one_line(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|&c| {
            !c.is_control()
                && !matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
        })
        .collect()
}

fn quota_suffix(limit: Option<&str>, reset_at: Option<&str>) -> String {
    match (limit, reset_at) {
        (Some(l), Some(r)) => format!(" (limit: {l}, resets at {r})"),
        (Some(l), None) => format!(" (limit: {l})"),
        (None, Some(r)) => format!(" (resets at {r})"),
        (None, None) => String::new(),
    }
}

impl ApiError {
    /// Build the typed error from the envelope the server sent.
    pub fn from_body(status: u16, body: ErrorBody, retry_after: Option<Duration>) -> ApiError {
        let ErrorBody {
            code,
            message,
            current_tokens,
            max_tokens,
            limit,
            reset_at,
        } = body;
        // Display is one line whatever the server wrote.
        let message = one_line(&message);
        let code = one_line(&code);
        match code.as_str() {
            "context_overflow" => ApiError::ContextOverflow {
                current: current_tokens.unwrap_or(0),
                max: max_tokens.unwrap_or(0),
                message,
            },
            "session_not_found" => ApiError::SessionNotFound { message },
            "unauthorized" => ApiError::Unauthorized { message },
            "quota_exceeded" => ApiError::QuotaExceeded {
                limit,
                reset_at,
                retry_after,
                message,
            },
            "invalid_request" => ApiError::InvalidRequest { message },
            "reply_in_progress" => ApiError::ReplyInProgress { message },
            _ => ApiError::Service {
                status,
                code,
                message,
            },
        }
    }

    /// The error code as the service names it (`context_overflow`, …), or `network`,
    /// `stream_lost`, `protocol`, `config` for failures on this side.
    pub fn code(&self) -> &str {
        match self {
            ApiError::ContextOverflow { .. } => "context_overflow",
            ApiError::SessionNotFound { .. } => "session_not_found",
            ApiError::Unauthorized { .. } => "unauthorized",
            ApiError::QuotaExceeded { .. } => "quota_exceeded",
            ApiError::InvalidRequest { .. } => "invalid_request",
            ApiError::ReplyInProgress { .. } => "reply_in_progress",
            ApiError::Service { code, .. } => code,
            ApiError::Network(_) => "network",
            ApiError::StreamLost(_) => "stream_lost",
            ApiError::Protocol(_) => "protocol",
            ApiError::Config(_) => "config",
        }
    }

    /// The message without the code in front of it (what `Display` adds): the server's
    /// message, with the figures `Display` shows (tokens, limit, reset time) kept.
    pub fn detail(&self) -> String {
        let full = self.to_string();
        let prefix = match self {
            ApiError::Network(_) => "network error: ".to_string(),
            ApiError::Protocol(_) => "protocol error: ".to_string(),
            ApiError::Config(_) => String::new(),
            other => format!("{}: ", other.code()),
        };
        match full.strip_prefix(prefix.as_str()) {
            Some(rest) => rest.to_string(),
            None => full,
        }
    }

    /// True for failures of the connection: the server could not be reached, or the
    /// connection (or the stream of a reply) was lost.
    pub fn is_network(&self) -> bool {
        matches!(self, ApiError::Network(_) | ApiError::StreamLost(_))
    }

    /// The process exit code for this error (docs/design.md, "Exit codes"): 1 service error, 2 usage or
    /// configuration error, 3 network error.
    pub fn exit_code(&self) -> u8 {
        match self {
            ApiError::Network(_) | ApiError::StreamLost(_) => exit::NETWORK_ERROR,
            ApiError::Config(_) => exit::USAGE_ERROR,
            _ => exit::SERVICE_ERROR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_variants() {
        let mut body = ErrorBody::new("context_overflow", "too long");
        body.current_tokens = Some(9000);
        body.max_tokens = Some(8192);
        let e = ApiError::from_body(400, body, None);
        assert_eq!(
            e,
            ApiError::ContextOverflow {
                current: 9000,
                max: 8192,
                message: "too long".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "context_overflow: too long (9000/8192 tokens)"
        );
        let e = ApiError::from_body(418, ErrorBody::new("teapot", "short and stout"), None);
        assert_eq!(e.code(), "teapot");
        assert_eq!(e.to_string(), "teapot: short and stout");
        assert_eq!(e.exit_code(), 1);
        assert_eq!(ApiError::Network("x".into()).exit_code(), 3);
        let e = ApiError::from_body(
            500,
            ErrorBody::new("internal", "line one\nline two\x1b[0m"),
            None,
        );
        assert_eq!(e.to_string(), "internal: line one line two[0m");
        let e = ApiError::from_body(
            401,
            ErrorBody::new("unauthorized", "bad\u{202E}key\u{2066}\u{9b}31m"),
            None,
        );
        assert_eq!(e.to_string(), "unauthorized: badkey31m");
        assert_eq!(ApiError::Config("x".into()).exit_code(), 2);
        let lost = ApiError::StreamLost("gone".into());
        assert_eq!((lost.code(), lost.exit_code()), ("stream_lost", 3));
        assert_eq!(lost.detail(), "gone");
    }

    #[test]
    fn detail_is_the_message_without_its_code() {
        let mut body = ErrorBody::new("quota_exceeded", "monthly requests used up");
        body.limit = Some("requests".into());
        body.reset_at = Some("2026-12-01T00:00:00Z".into());
        let e = ApiError::from_body(429, body, None);
        assert_eq!(
            e.detail(),
            "monthly requests used up (limit: requests, resets at 2026-12-01T00:00:00Z)"
        );
        let e = ApiError::from_body(
            404,
            ErrorBody::new("wallet_not_found", "no such wallet"),
            None,
        );
        assert_eq!(e.detail(), "no such wallet");
        assert_eq!(ApiError::Network("refused".into()).detail(), "refused");
        assert_eq!(ApiError::Protocol("HTTP 502".into()).detail(), "HTTP 502");
        assert_eq!(ApiError::Config("no token".into()).detail(), "no token");
    }
}
