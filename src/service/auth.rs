//! Bearer authentication: API keys on the session, message and analytics endpoints (each
//! request counted against the plan first), HS256 JWTs on the wallet endpoint.

use axum::http::{HeaderMap, header};

use super::AppState;
use super::config::is_valid_api_key;
use super::error::ApiError;
use super::jwt;
use super::store::accounts::{Account, hash_key};
use super::store::usage::{self, RequestAdmission};
use super::time;

/// The bearer credential of a request.
fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing `Authorization: Bearer …` header"))?;
    let value = value
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not valid text"))?;
    let (scheme, credential) = value.split_once(' ').ok_or_else(|| {
        ApiError::unauthorized("the Authorization header must be `Bearer <credential>`")
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") || credential.trim().is_empty() {
        return Err(ApiError::unauthorized(
            "the Authorization header must be `Bearer <credential>`",
        ));
    }
    Ok(credential.trim())
}

fn looks_like_jwt(credential: &str) -> bool {
    credential.split('.').count() == 3 && !credential.starts_with("service_live_")
}

/// Resolves the API key of the request to its account, without counting it.
pub(crate) fn account(state: &AppState, headers: &HeaderMap) -> Result<Account, ApiError> {
    let credential = bearer(headers)?;
    if looks_like_jwt(credential) {
        return Err(ApiError::unauthorized(
            "this endpoint takes an API key (`service_live_…`), not a JWT",
        ));
    }
    if !is_valid_api_key(credential) {
        return Err(ApiError::unauthorized(
            "malformed API key: expected `service_live_` followed by at least 16 letters or digits",
        ));
    }
    state
        .accounts
        .get(&hash_key(credential))
        .copied()
        .ok_or_else(|| ApiError::unauthorized("unknown API key"))
}

/// Authenticates an API-key request and counts it against the plan's request limit; a request
/// over the limit is refused with 429 before any work and is not counted.
pub(crate) async fn admit(
    state: &AppState,
    headers: &HeaderMap,
    method: &'static str,
    route: &'static str,
) -> Result<Account, ApiError> {
    let account = account(state, headers)?;
    count(state, account, method, route).await?;
    Ok(account)
}

/// Counts a request of an authenticated `account` against the plan's request limit: 429 when
/// the limit is reached (and the request is not counted).
pub(crate) async fn count(
    state: &AppState,
    account: Account,
    method: &'static str,
    route: &'static str,
) -> Result<(), ApiError> {
    let now = chrono::Utc::now();
    let (period_start, period_end) = time::billing_period(now);
    let admission = state
        .store
        .call(move |c| {
            usage::admit_request(
                c,
                account,
                period_start.timestamp_millis(),
                now.timestamp_millis(),
                method,
                route,
            )
        })
        .await?;
    match admission {
        RequestAdmission::Admitted => {
            tracing::debug!(account = account.id, method, route, "request");
            Ok(())
        }
        RequestAdmission::OverLimit => Err(ApiError::quota_exceeded("requests", period_end)),
    }
}

/// Verifies the JWT of a wallet request.
pub(crate) fn wallet_token(state: &AppState, headers: &HeaderMap) -> Result<jwt::Claims, ApiError> {
    let credential = bearer(headers)?;
    if credential.starts_with("service_live_") {
        return Err(ApiError::unauthorized(
            "the wallet endpoint takes a JWT access token, not an API key",
        ));
    }
    jwt::verify(&state.jwt_secret, credential)
        .map_err(|e| ApiError::unauthorized(format!("invalid token: {e}")))
}
