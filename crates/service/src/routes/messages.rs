//! `POST /v1/sessions/{sessionId}/messages`: validate, start the turn, then answer with the
//! complete reply (200) or, with `stream: true`, the reply to come (202).

use std::sync::Arc;

use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

use crate::account_events::{Change, tell};
use crate::engine::ReplyRequest;
use crate::error::HttpError;
use crate::paths::MESSAGES;
use crate::storage::Storage;
use crate::turn::{self, Turn};
use crate::{AppState, auth, ids, time};
use convo_core::Recorded;
use convo_core::{TurnRefusal, TurnStart, TurnStarted, UserMessage};
use convo_tokens as tokens;
use convo_wire::account_stream::SessionChange;
use convo_wire::{Message, Role};

use convo_wire::limits::MAX_CONTENT_CHARS;
/// Maximum size of `metadata`, serialized.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Maximum length of an `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// A validated send-message body.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub content: String,
    pub role: Role,
    pub stream: bool,
    pub metadata: Option<String>,
}

/// Validates the body field by field, naming the field in the error.
pub fn parse_send(body: &[u8]) -> Result<SendRequest, HttpError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| HttpError::invalid(format!("the body is not valid JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(HttpError::invalid("the body must be a JSON object"));
    };
    let content = match map.get("content") {
        None | Some(Value::Null) => return Err(HttpError::invalid("`content` is required")),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(HttpError::invalid("`content` must be a string")),
    };
    if content.trim().is_empty() {
        return Err(HttpError::invalid("`content` must not be empty"));
    }
    // One answer on both storage backends (docs/design.md, "Content"): PostgreSQL's TEXT
    // cannot hold U+0000, so it is refused here, before anything is counted as a turn; other
    // control characters are stored as given.
    if let Some(at) = content.chars().position(|c| c == '\0') {
        return Err(HttpError::invalid(format!(
            "`content` must not contain the NUL character (U+0000; found at character {at})"
        )));
    }
    let chars = content.chars().count();
    if chars > MAX_CONTENT_CHARS {
        return Err(HttpError::invalid(format!(
            "`content` is {chars} characters long; the maximum is 10,000"
        )));
    }
    let role = match map.get("role") {
        None | Some(Value::Null) => Role::User,
        Some(Value::String(s)) if s == "user" => Role::User,
        Some(Value::String(s)) if s == "system" => Role::System,
        Some(_) => return Err(HttpError::invalid("`role` must be `user` or `system`")),
    };
    let stream = match map.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(HttpError::invalid("`stream` must be a boolean")),
    };
    let metadata = match map.get("metadata") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => {
            let text = v.to_string();
            if text.len() > MAX_METADATA_BYTES {
                return Err(HttpError::invalid(format!(
                    "`metadata` is {} bytes serialized; the maximum is 16 KiB",
                    text.len()
                )));
            }
            Some(text)
        }
        Some(_) => return Err(HttpError::invalid("`metadata` must be a JSON object")),
    };
    Ok(SendRequest {
        content,
        role,
        stream,
        metadata,
    })
}

/// The `Idempotency-Key` header, validated.
pub fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, HttpError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|k| {
            !k.is_empty()
                && k.len() <= MAX_IDEMPOTENCY_KEY_LEN
                && k.bytes().all(|b| b.is_ascii_graphic())
        })
        .ok_or_else(|| {
            HttpError::invalid("`Idempotency-Key` must be 1 to 255 printable ASCII characters")
        })?;
    Ok(Some(key.to_string()))
}

/// The path, body and `Idempotency-Key` of a send, checked in the documented order.
fn check_send(
    path: Result<Path<String>, PathRejection>,
    body: Result<axum::body::Bytes, BytesRejection>,
    headers: &HeaderMap,
) -> Result<(String, SendRequest, Option<String>), HttpError> {
    let session_id = super::session_id(path)?;
    let body = super::body(body)?;
    let request = parse_send(&body)?;
    let idempotency_key = idempotency_key(headers)?;
    Ok((session_id, request, idempotency_key))
}

pub(crate) async fn send(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Response, HttpError> {
    let account = auth::account(&state, &headers)?;
    let (session_id, request, idempotency_key) = match check_send(path, body, &headers) {
        Ok(checked) => checked,
        Err(e) => {
            // Counted like any request (or refused with 429 first when over the limit).
            auth::count(&state, account, "POST", MESSAGES).await?;
            return Err(e);
        }
    };
    let message_tokens = tokens::count_async(&request.content).await;

    let guard = state.session_locks.lock(&session_id).await;
    let now = chrono::Utc::now();
    let now_ms = now.timestamp_millis();
    let (period_start, period_end) = time::billing_period(now);
    let reply_id = ids::new_message_id();
    let created_at = time::ms_to_rfc3339(now_ms);
    let accepted_body = request.stream.then(|| {
        let placeholder = Message {
            message_id: reply_id.clone(),
            session_id: session_id.clone(),
            role: Role::Assistant,
            content: String::new(),
            tokens: 0,
            created_at,
            finish_reason: None,
        };
        serde_json::to_string(&placeholder).unwrap_or_default()
    });
    let user_message_id = ids::new_message_id();
    let start = TurnStart {
        account,
        session_id: session_id.clone(),
        reply_id: reply_id.clone(),
        message: UserMessage {
            id: user_message_id.clone(),
            role: request.role,
            content: request.content,
            tokens: message_tokens,
            metadata: request.metadata,
        },
        idempotency_key: idempotency_key.clone(),
        accepted_response: accepted_body.as_ref().map(|body| Recorded {
            status: 202,
            body: body.clone(),
        }),
        max_context_tokens: state.context_limit(),
        period_start_ms: period_start.timestamp_millis(),
        now_ms,
    };
    // The request is counted and the turn started in one transaction (a refused turn still
    // counts as a request).
    let request_count = auth::RequestCount::new(account, "POST", MESSAGES, now);
    let admitted = state.store.start_turn(request_count, start).await?;
    let started = auth::answer(&request_count, admitted)?;
    let (history, context_tokens) = match started {
        Err(TurnRefusal::SessionNotFound) => return Err(HttpError::session_not_found(&session_id)),
        Err(TurnRefusal::Quota(limit)) => return Err(HttpError::quota_exceeded(limit, period_end)),
        Err(TurnRefusal::ContextOverflow { current, max }) => {
            return Err(HttpError::context_overflow(current, max));
        }
        Ok(TurnStarted::Replay(recorded)) => {
            let status = StatusCode::from_u16(recorded.status).unwrap_or(StatusCode::OK);
            let mut resp = super::json_text(status, recorded.body);
            resp.headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            return Ok(resp);
        }
        Ok(TurnStarted::Ready {
            history,
            context_tokens,
        }) => (history, context_tokens),
    };
    // The first message creates the session.
    let change = if history.len() == 1 {
        Change::Created
    } else {
        Change::Updated(SessionChange::Message)
    };
    tell(&state, account.id, &session_id, change);
    let streamed = request.stream || state.hub.has_listeners(&session_id);
    let outcome = turn::spawn(
        state.clone(),
        Turn {
            account,
            session_id: session_id.clone(),
            user_message_id,
            reply_id,
            created_at_ms: now_ms,
            idempotency_key,
            record_response: !request.stream,
            request: ReplyRequest {
                session_id,
                history,
                context_tokens,
                max_context_tokens: state.context_limit(),
                streamed,
            },
        },
        guard,
    );
    if let Some(body) = accepted_body {
        return Ok(super::json_text(StatusCode::ACCEPTED, body));
    }
    match outcome.await {
        Ok(Ok((_message, body))) => Ok(super::json_text(StatusCode::OK, body)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(HttpError::internal()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        parse_send(body.as_bytes()).unwrap_err().body.message
    }

    #[test]
    fn bodies_are_validated_field_by_field() {
        assert!(err("{").contains("not valid JSON"));
        assert!(err("[]").contains("JSON object"));
        assert!(err("{}").contains("`content`"));
        assert!(err(r#"{"content": 5}"#).contains("`content` must be a string"));
        assert!(err(r#"{"content": "  "}"#).contains("must not be empty"));
        assert!(err(r#"{"content": "a\u0000b"}"#).contains("`content` must not contain the NUL"));
        let controls = parse_send(br#"{"content": "a\u0001\u001b[31mb\u007f"}"#).unwrap();
        assert_eq!(controls.content, "a\u{1}\u{1b}[31mb\u{7f}");
        assert!(err(r#"{"content": "hi", "role": "assistant"}"#).contains("`role`"));
        assert!(err(r#"{"content": "hi", "stream": "yes"}"#).contains("`stream`"));
        assert!(err(r#"{"content": "hi", "metadata": [1]}"#).contains("`metadata`"));
        let long = format!(r#"{{"content": "{}"}}"#, "é".repeat(10_001));
        assert!(err(&long).contains("10,000"));
        let ok = format!(
            r#"{{"content": "{}", "role": "system", "stream": true, "metadata": {{"a": 1}}, "x": 1}}"#,
            "é".repeat(10_000)
        );
        let parsed = parse_send(ok.as_bytes()).unwrap();
        assert_eq!(parsed.role, Role::System);
        assert!(parsed.stream);
        assert_eq!(parsed.metadata.as_deref(), Some(r#"{"a":1}"#));
    }
}
