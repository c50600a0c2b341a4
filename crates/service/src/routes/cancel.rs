//! `POST /v1/sessions/{sessionId}/messages/{messageId}/cancel` (extension): stop a reply being
//! generated. The turn keeps the text so far as the reply, with `finishReason: "stopped"`, and
//! its `done` follows on the session's stream (with no text yet, the turn is rolled back and
//! the stream says `reply_stopped`). Answers 202 at once; a reply that already ended (stored,
//! or its engine finished and it is being stored) is 409 `reply_finished`, an unknown one 404
//! `message_not_found`.

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
use convo_core::SessionStatus;
use convo_wire::Cancelled;

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
        return Ok((
            StatusCode::ACCEPTED,
            Json(Cancelled {
                session_id,
                message_id,
                stopping: true,
            }),
        ));
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
