//! `DELETE /v1/sessions/{sessionId}`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;

use crate::api::Deleted;
use crate::service::error::ApiError;
use crate::service::router::SESSION;
use crate::service::store::messages;
use crate::service::{AppState, auth, time};

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Deleted>, ApiError> {
    let account = auth::admit(&state, &headers, "DELETE", SESSION).await?;
    let session_id = super::session_id(path)?;
    let sid = session_id.clone();
    let deleted = state
        .store
        .call(move |c| messages::delete_session(c, account.id, &sid, time::now_ms()))
        .await?;
    if deleted {
        tracing::info!(account = account.id, session = %session_id, "session deleted");
        Ok(Json(Deleted {
            deleted: true,
            session_id,
        }))
    } else {
        Err(ApiError::session_not_found(&session_id))
    }
}
