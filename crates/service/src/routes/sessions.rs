//! `DELETE /v1/sessions/{sessionId}`, and the extensions `GET /v1/sessions` and
//! `GET /v1/sessions/{sessionId}/messages`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;

use serde::{Deserialize, Serialize};

use crate::error::HttpError;
use crate::paths::{MESSAGES, SESSION, SESSIONS};
use crate::storage::Storage;
use crate::{AppState, auth, time};
use convo_wire::{Deleted, Message};

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Deleted>, HttpError> {
    let account = auth::admit(&state, &headers, "DELETE", SESSION).await?;
    let session_id = super::session_id(path)?;
    let deleted = state
        .store
        .delete_session(account.id, session_id.clone(), time::now_ms())
        .await?;
    if deleted {
        state.stoppers.stop(&session_id);
        tracing::info!(account = account.id, session = %session_id, "session deleted");
        Ok(Json(Deleted {
            deleted: true,
            session_id,
        }))
    } else {
        Err(HttpError::session_not_found(&session_id))
    }
}

/// One entry of `GET /v1/sessions` (extension).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub created_at: String,
    pub last_activity_at: String,
    pub message_count: u64,
    pub tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
}

/// One stored message of `GET /v1/sessions/{id}/messages` (extension): the Message fields
/// plus the metadata sent with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredMessage {
    #[serde(flatten)]
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageList {
    pub session_id: String,
    pub messages: Vec<StoredMessage>,
}

/// `GET /v1/sessions` (extension): the account's live sessions, most recently active first.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Json<SessionList>, HttpError> {
    let account = auth::admit(&state, &headers, "GET", SESSIONS).await?;
    let rows = state.store.list_sessions(account.id).await?;
    Ok(Json(SessionList {
        sessions: rows
            .into_iter()
            .map(|r| SessionSummary {
                session_id: r.id,
                created_at: time::ms_to_rfc3339(r.created_at_ms),
                last_activity_at: time::ms_to_rfc3339(r.last_activity_ms),
                message_count: r.messages,
                tokens: r.tokens,
            })
            .collect(),
    }))
}

/// `GET /v1/sessions/{sessionId}/messages` (extension): the stored history, oldest first.
pub(crate) async fn history(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<MessageList>, HttpError> {
    let account = auth::admit(&state, &headers, "GET", MESSAGES).await?;
    let session_id = super::session_id(path)?;
    let rows = state
        .store
        .session_messages(account.id, session_id.clone())
        .await?
        .ok_or_else(|| HttpError::session_not_found(&session_id))?;
    Ok(Json(MessageList {
        session_id: session_id.clone(),
        messages: rows
            .into_iter()
            .map(|r| StoredMessage {
                message: Message {
                    message_id: r.id,
                    session_id: session_id.clone(),
                    role: r.role,
                    content: r.content,
                    tokens: r.tokens,
                    created_at: time::ms_to_rfc3339(r.created_at_ms),
                },
                metadata: r.metadata.and_then(|m| serde_json::from_str(&m).ok()),
            })
            .collect(),
    }))
}
