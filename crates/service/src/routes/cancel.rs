//! `POST /v1/sessions/{sessionId}/messages/{messageId}/cancel` (extension): stop a reply being
//! generated. The turn keeps the text so far as the reply, with `finishReason: "stopped"`, and
//! its `done` follows on the session's stream (with no text yet, the turn is rolled back and
//! the stream says `reply_stopped`). Answers 202 at once; a reply that already ended (stored,
//! or its engine finished and it is being stored) is 409 `reply_finished`, an unknown one 404
//! `message_not_found`. The same cancel is a frame on the session's WebSocket (`frame`),
//! answered on that socket.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};

use crate::error::HttpError;
use crate::paths::CANCEL;
use crate::storage::Storage;
use crate::stream::Cancel;
use crate::{AppState, auth};
use convo_core::{Account, SessionStatus};
use convo_wire::{Cancelled, ErrorBody};
use serde::Serialize;

/// Longest message id accepted in the path (ours are far shorter).
const MAX_MESSAGE_ID_LEN: usize = 128;

pub(crate) async fn cancel(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(StatusCode, Json<Cancelled>), HttpError> {
    let account = auth::admit(&state, &headers, "POST", CANCEL).await?;
    let Path((session_id, message_id)) =
        path.map_err(|e| HttpError::invalid(format!("the path: {e}")))?;
    let session_id = super::session_id(Ok(Path(session_id)))?;
    let cancelled = cancel_reply(&state, &account, session_id, message_id).await?;
    Ok((StatusCode::ACCEPTED, Json(cancelled)))
}

/// The answer to a cancel frame on the session's WebSocket, to that socket alone:
/// `{"type": "cancelled", "sessionId", "messageId", "stopping": true}` as the route's 202,
/// else `"stopping": false` with the `error` the route answers with (`messageId` null when
/// the frame named none).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CancelAnswer {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: String,
    message_id: Option<String>,
    stopping: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorBody>,
}

/// A text frame from a listener of `session_id`: a cancel (`{"type": "cancel", "messageId":
/// "…"}`) is done as the route does it, and the answer frame's text returned; any other frame
/// is ignored (`None`), as the stream always has.
pub(crate) async fn frame(
    state: &AppState,
    account: &Account,
    session_id: &str,
    text: &str,
) -> Option<String> {
    let frame: serde_json::Value = serde_json::from_str(text).ok()?;
    if frame.get("type").and_then(|t| t.as_str()) != Some("cancel") {
        return None;
    }
    let message_id = frame
        .get("messageId")
        .and_then(|m| m.as_str())
        .map(str::to_string);
    let outcome = match &message_id {
        Some(id) => cancel_reply(state, account, session_id.to_string(), id.clone())
            .await
            .map(|_| ()),
        None => Err(HttpError::invalid(
            "a cancel frame is {\"type\": \"cancel\", \"messageId\": \"…\"}: `messageId` must be a string",
        )),
    };
    let answer = CancelAnswer {
        kind: "cancelled",
        session_id: session_id.to_string(),
        message_id,
        stopping: outcome.is_ok(),
        error: outcome.err().map(|e| *e.body),
    };
    serde_json::to_string(&answer).ok()
}

/// Stops the reply `message_id` of `session_id` (the one cancel, for the route and the
/// WebSocket frame): asks its turn here, or the replica generating it.
pub(crate) async fn cancel_reply(
    state: &AppState,
    account: &Account,
    session_id: String,
    message_id: String,
) -> Result<Cancelled, HttpError> {
    if message_id.is_empty() || message_id.len() > MAX_MESSAGE_ID_LEN {
        return Err(HttpError::invalid(format!(
            "`messageId` must be 1 to {MAX_MESSAGE_ID_LEN} characters"
        )));
    }
    if state
        .store
        .session_status(account.id, session_id.clone())
        .await?
        != SessionStatus::Live
    {
        return Err(HttpError::session_not_found(&session_id));
    }
    let stopping = match state.hub.cancel(&session_id, &message_id) {
        Cancel::Here | Cancel::Relayed => true,
        Cancel::Finished => return Err(reply_finished(&message_id)),
        // Not followed here: on PostgreSQL its turn may run on another replica.
        Cancel::Unknown => {
            state
                .store
                .turn_running(account.id, session_id.clone(), message_id.clone())
                .await?
                && state.hub.cancel_elsewhere(&session_id, &message_id)
        }
    };
    if stopping {
        tracing::info!(account = account.id, session = %session_id, message = %message_id, "reply cancelled");
        return Ok(Cancelled {
            session_id,
            message_id,
            stopping: true,
        });
    }
    let stored = state
        .store
        .session_messages(account.id, session_id.clone())
        .await?
        .unwrap_or_default();
    if stored.iter().any(|m| m.id == message_id) {
        Err(reply_finished(&message_id))
    } else {
        Err(HttpError::new(
            StatusCode::NOT_FOUND,
            "message_not_found",
            format!("session {session_id} has no reply {message_id} in flight or stored"),
        ))
    }
}

/// The answer for a reply that has ended, or whose engine has finished: nothing to stop.
fn reply_finished(message_id: &str) -> HttpError {
    HttpError::new(
        StatusCode::CONFLICT,
        "reply_finished",
        format!("the reply {message_id} has already ended; there is nothing to stop"),
    )
}
