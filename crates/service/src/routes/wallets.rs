//! `GET /v1/wallets/{walletId}` with a JWT bearer token.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};

use crate::AppState;
use crate::error::HttpError;
use crate::{auth, wallets};
use convo_wire::Wallet;

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Wallet>, HttpError> {
    let claims = auth::wallet_token(&state, &headers)?;
    let Path(wallet_id) =
        path.map_err(|e| HttpError::invalid(format!("`walletId` in the path: {e}")))?;
    tracing::debug!(sub = %claims.sub, wallet = %wallet_id, "wallet lookup");
    wallets::find(&wallet_id).cloned().map(Json).ok_or_else(|| {
        HttpError::new(
            StatusCode::NOT_FOUND,
            "wallet_not_found",
            format!("no wallet with id `{wallet_id}`"),
        )
    })
}
