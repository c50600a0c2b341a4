//! `DELETE /v1/sessions/{sessionId}`, and the extensions `GET /v1/sessions`,
//! `PATCH /v1/sessions/{sessionId}` (the title), `GET /v1/sessions/{sessionId}/messages` and
//! `DELETE /v1/sessions/{sessionId}/messages/last` (undo) and `POST /v1/sessions/{sessionId}/fork`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};

use serde::Deserialize;

use crate::account_events::{Change, summary, tell};
use crate::error::HttpError;
use crate::paths::{FORK, LAST_EXCHANGE, MESSAGES, SESSION, SESSIONS};
use crate::storage::Storage;
use crate::storage::rows::{Fork, ForkRequest, Undo};
use crate::{AppState, auth, time};
use convo_wire::account_stream::SessionChange;
pub use convo_wire::sessions::{MessageList, SessionList, SessionSummary, StoredMessage, Undone};
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
        state.forget_deleted(&session_id);
        tell(&state, account.id, &session_id, Change::Deleted);
        tracing::info!(account = account.id, session = %session_id, "session deleted");
        Ok(Json(Deleted {
            deleted: true,
            session_id,
        }))
    } else {
        Err(HttpError::session_not_found(&session_id))
    }
}

/// `GET /v1/sessions` (extension): the account's live sessions, most recently active first.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Json<SessionList>, HttpError> {
    let account = auth::admit(&state, &headers, "GET", SESSIONS).await?;
    let rows = state.store.list_sessions(account.id).await?;
    Ok(Json(SessionList {
        sessions: rows.into_iter().map(summary).collect(),
        database_id: Some(state.database_id.clone()),
        deleted_session_ids: Some(recently_deleted(&state, account.id).await?),
    }))
}

/// The ids of the account's sessions deleted in the last `DELETIONS_LISTED_DAYS` days, which
/// a whole list names beside the live ones (`GET /v1/sessions`, the account stream's `hello`).
pub(crate) async fn recently_deleted(
    state: &AppState,
    account_id: i64,
) -> Result<Vec<String>, HttpError> {
    let since = convo_wire::sessions::deletions_listed_since(time::now_ms());
    Ok(state.store.deleted_sessions(account_id, since).await?)
}

/// The body of `PATCH /v1/sessions/{sessionId}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionPatch {
    title: String,
}

/// `PATCH /v1/sessions/{sessionId}` (extension): sets the session's title
/// (`convo_core::sessions::check_title`) and answers the session as `GET /v1/sessions` lists it.
pub(crate) async fn patch(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<Json<SessionSummary>, HttpError> {
    let account = auth::admit(&state, &headers, "PATCH", SESSION).await?;
    let session_id = super::session_id(path)?;
    let body = super::body(body)?;
    let patch: SessionPatch = serde_json::from_slice(&body).map_err(|e| {
        HttpError::invalid(format!(
            "the body must be a JSON object {{\"title\": string}}: {e}"
        ))
    })?;
    let title = convo_core::sessions::check_title(&patch.title).map_err(HttpError::invalid)?;
    if !state
        .store
        .set_title(account.id, session_id.clone(), title)
        .await?
    {
        return Err(HttpError::session_not_found(&session_id));
    }
    let row = state
        .store
        .session_summary(account.id, session_id.clone())
        .await?
        // Deleted between the two transactions.
        .ok_or_else(|| HttpError::session_not_found(&session_id))?;
    tracing::info!(account = account.id, session = %session_id, "session titled");
    tell(
        &state,
        account.id,
        &session_id,
        Change::Updated(SessionChange::Title),
    );
    Ok(Json(summary(row)))
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
                    finish_reason: r.finish_reason,
                },
                metadata: r.metadata.and_then(|m| serde_json::from_str(&m).ok()),
            })
            .collect(),
    }))
}

/// `DELETE /v1/sessions/{sessionId}/messages/last` (extension): removes the last exchange
/// (`convo_core::sessions::last_exchange_start`); 409 `reply_in_progress` while a turn of the
/// session runs (here: its lock is taken; on PostgreSQL also on another replica).
pub(crate) async fn undo(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Undone>, HttpError> {
    let account = auth::admit(&state, &headers, "DELETE", LAST_EXCHANGE).await?;
    let session_id = super::session_id(path)?;
    let busy = || {
        HttpError::new(
            StatusCode::CONFLICT,
            "reply_in_progress",
            "a reply is being generated in this session; undo once it is complete",
        )
    };
    // Held until the messages are gone, so no turn of this service starts meanwhile.
    let _guard = state.session_locks.try_lock(&session_id).ok_or_else(busy)?;
    match state
        .store
        .undo_last_exchange(account.id, session_id.clone())
        .await?
    {
        Undo::NoSession => Err(HttpError::session_not_found(&session_id)),
        Undo::NothingToUndo => Err(HttpError::new(
            StatusCode::NOT_FOUND,
            "message_not_found",
            "the session has no user message to undo",
        )),
        Undo::Busy => Err(busy()),
        Undo::Removed(removed_message_ids) => {
            tracing::info!(account = account.id, session = %session_id, removed = removed_message_ids.len(), "last exchange undone");
            // Before the session's lock goes, so that its next reply finds the engine trimmed.
            state.undone_here(account.id, &session_id).await;
            tell(
                &state,
                account.id,
                &session_id,
                Change::Updated(SessionChange::Undo),
            );
            Ok(Json(Undone {
                session_id,
                removed_message_ids,
            }))
        }
    }
}

/// The body of `POST /v1/sessions/{sessionId}/fork`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ForkBody {
    message_id: String,
    #[serde(default)]
    session_id: Option<String>,
}

/// `POST /v1/sessions/{sessionId}/fork` (extension): a new session holding the source's
/// messages up to and including `messageId` (`convo_core::sessions::fork_length`); 201 and the
/// session as `GET /v1/sessions` lists it.
pub(crate) async fn fork(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<SessionSummary>), HttpError> {
    let account = auth::admit(&state, &headers, "POST", FORK).await?;
    let source = super::session_id(path)?;
    let body = super::body(body)?;
    let request: ForkBody = serde_json::from_slice(&body).map_err(|e| {
        HttpError::invalid(format!(
            "the body must be a JSON object {{\"messageId\": string, \"sessionId\"?: string}}: {e}"
        ))
    })?;
    let new_session_id = match request.session_id {
        Some(id) if convo_wire::is_valid_session_id(&id) => id,
        Some(_) => {
            return Err(HttpError::invalid(
                "`sessionId` must be `session_` followed by 16 letters or digits",
            ));
        }
        None => convo_wire::new_session_id(),
    };
    let fork = ForkRequest {
        account,
        source: source.clone(),
        message_id: request.message_id,
        new_session_id: new_session_id.clone(),
        now_ms: time::now_ms(),
    };
    match state.store.fork_session(fork).await? {
        Fork::NoSession => return Err(HttpError::session_not_found(&source)),
        Fork::NoMessage => {
            return Err(HttpError::new(
                StatusCode::NOT_FOUND,
                "message_not_found",
                format!("session {source} has no message by that id"),
            ));
        }
        Fork::Exists => {
            return Err(HttpError::new(
                StatusCode::CONFLICT,
                "session_exists",
                format!("session {new_session_id} already exists (or existed); choose another id"),
            ));
        }
        Fork::SessionLimit => {
            let period_end = crate::time::billing_period(chrono::Utc::now()).1;
            return Err(HttpError::quota_exceeded("sessions", period_end));
        }
        Fork::Forked => {}
    }
    tracing::info!(account = account.id, source = %source, session = %new_session_id, "session forked");
    tell(&state, account.id, &new_session_id, Change::Created);
    let row = state
        .store
        .session_summary(account.id, new_session_id.clone())
        .await?
        // Deleted between the two transactions.
        .ok_or_else(|| HttpError::session_not_found(&new_session_id))?;
    Ok((StatusCode::CREATED, Json(summary(row))))
}
