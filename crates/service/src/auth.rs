//! Bearer authentication: API keys on the session, message and analytics endpoints (each
//! request counted against the plan first), HS256 JWTs on the wallet endpoint, the admin key
//! (`--admin-key`) on the operator's endpoints and `/metrics`. Each kind of credential is
//! refused, saying so, where another is expected.

use axum::http::{HeaderMap, header};

use super::AppState;
use super::config::is_valid_api_key;
use super::error::HttpError;
use super::jwt;
use super::storage::Storage;
pub use super::storage::rows::RequestCount;
use super::storage::rows::hash_key;
use convo_core::Account;
use convo_wire::admin::{ADMIN_KEY_PREFIX, is_valid_admin_key};
use subtle::ConstantTimeEq;

/// The bearer credential of a request.
fn bearer(headers: &HeaderMap) -> Result<&str, HttpError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| HttpError::unauthorized("missing `Authorization: Bearer …` header"))?;
    let value = value
        .to_str()
        .map_err(|_| HttpError::unauthorized("the Authorization header is not valid text"))?;
    let (scheme, credential) = value.split_once(' ').ok_or_else(|| {
        HttpError::unauthorized("the Authorization header must be `Bearer <credential>`")
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") || credential.trim().is_empty() {
        return Err(HttpError::unauthorized(
            "the Authorization header must be `Bearer <credential>`",
        ));
    }
    Ok(credential.trim())
}

fn looks_like_jwt(credential: &str) -> bool {
    credential.split('.').count() == 3 && !credential.starts_with("service_live_")
}

/// Resolves the API key of the request to its account, without counting it.
pub(crate) fn account(state: &AppState, headers: &HeaderMap) -> Result<Account, HttpError> {
    let credential = bearer(headers)?;
    if looks_like_jwt(credential) {
        return Err(HttpError::unauthorized(
            "this endpoint takes an API key (`service_live_…`), not a JWT",
        ));
    }
    if credential.starts_with(ADMIN_KEY_PREFIX) {
        return Err(HttpError::forbidden(
            "the admin key is not accepted here: this endpoint takes an API key (`service_live_…`)",
        ));
    }
    if !is_valid_api_key(credential) {
        return Err(HttpError::unauthorized(
            "malformed API key: expected `service_live_` followed by at least 16 letters or digits",
        ));
    }
    state
        .accounts
        .get(&hash_key(credential))
        .copied()
        .ok_or_else(|| HttpError::unauthorized("unknown API key"))
}

/// The admin key as the service keeps it: its SHA-256 digest, never the key itself.
pub(crate) struct AdminKey([u8; 32]);

impl AdminKey {
    /// `key` checked for the admin key's form (`service_admin_` + at least 32 of
    /// `[A-Za-z0-9]`); the error says what is wrong without showing it.
    pub fn new(key: &str) -> Result<AdminKey, String> {
        if key.starts_with("service_live_") {
            return Err(
                "the admin key must not be an API key: it is `service_admin_` followed by at least 32 letters or digits"
                    .into(),
            );
        }
        if !is_valid_admin_key(key) {
            return Err(format!(
                "the admin key must be `{ADMIN_KEY_PREFIX}` followed by at least {} letters or digits",
                convo_wire::admin::ADMIN_KEY_MIN_CHARS
            ));
        }
        Ok(AdminKey(digest(key)))
    }

    /// Whether `credential` is this key; the digests are compared in constant time.
    fn matches(&self, credential: &str) -> bool {
        bool::from(digest(credential).ct_eq(&self.0))
    }
}

fn digest(text: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes()).into()
}

/// Authenticates a request to an operator's endpoint (`/v1/admin/…`, `/metrics`): the admin
/// key only. Nothing is counted against any account. With no admin key configured the
/// endpoints answer 404 `admin_disabled` saying how to turn them on.
pub(crate) fn admin(state: &AppState, headers: &HeaderMap) -> Result<(), HttpError> {
    let Some(key) = &state.admin_key else {
        return Err(HttpError::new(
            axum::http::StatusCode::NOT_FOUND,
            "admin_disabled",
            "the operator's endpoints are off: start `convo serve` with `--admin-key` (or CONVO_SERVE_ADMIN_KEY)",
        ));
    };
    let credential = bearer(headers)?;
    if credential.starts_with("service_live_") {
        return Err(HttpError::forbidden(
            "an API key is not accepted here: the operator's endpoints take the admin key (`service_admin_…`)",
        ));
    }
    if looks_like_jwt(credential) {
        return Err(HttpError::forbidden(
            "a JWT is not accepted here: the operator's endpoints take the admin key (`service_admin_…`)",
        ));
    }
    if key.matches(credential) {
        Ok(())
    } else {
        Err(HttpError::unauthorized("unknown admin key"))
    }
}

/// Authenticates an API-key request and counts it against the plan's request limit; a request
/// over the limit is refused with 429 before any work and is not counted.
pub(crate) async fn admit(
    state: &AppState,
    headers: &HeaderMap,
    method: &'static str,
    route: &'static str,
) -> Result<Account, HttpError> {
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
) -> Result<(), HttpError> {
    let request = RequestCount::new(account, method, route, chrono::Utc::now());
    let admitted = state.store.count_request(request).await?;
    // The account stream's listeners get the new request count.
    state.hub.usage_changed(account.id);
    answer(&request, admitted)
}

/// What counting `request` returned means for it: its result, or 429 `quota_exceeded`
/// (`requests`) when the limit was reached.
pub(crate) fn answer<T>(request: &RequestCount, admitted: Option<T>) -> Result<T, HttpError> {
    let account = request.account().id;
    let (method, route) = request.method_route();
    match admitted {
        Some(result) => {
            tracing::debug!(account, method, route, "request");
            Ok(result)
        }
        None => Err(HttpError::quota_exceeded("requests", request.period_end())),
    }
}

/// Verifies the JWT of a wallet request.
pub(crate) fn wallet_token(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<jwt::Claims, HttpError> {
    let credential = bearer(headers)?;
    if credential.starts_with("service_live_") {
        return Err(HttpError::unauthorized(
            "the wallet endpoint takes a JWT access token, not an API key",
        ));
    }
    if credential.starts_with(ADMIN_KEY_PREFIX) {
        return Err(HttpError::forbidden(
            "the admin key is not accepted here: the wallet endpoint takes a JWT access token",
        ));
    }
    jwt::verify_with_leeway(&state.jwt_secret, credential, state.jwt_leeway_secs)
        .map_err(|e| HttpError::unauthorized(format!("invalid token: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DbLocation, Tier};
    use crate::ids::generate_api_key;
    use crate::storage::SqliteStore;
    use crate::storage::sqlite::accounts::ensure_keys;
    use chrono::Utc;

    use crate::error::StoreError;
    use crate::storage::sqlite::usage;
    use crate::time;

    /// The count is kept whatever the closure run after it does, and a request over the limit
    /// writes nothing and runs nothing.
    #[test]
    fn a_request_stays_counted_when_its_work_fails_and_over_the_limit_nothing_runs() {
        let store = SqliteStore::open(&DbLocation::Memory).unwrap();
        let now = Utc::now();
        let period_start = time::billing_period(now).0.timestamp_millis();
        store
            .blocking(|c| {
                let keys = vec![(generate_api_key(), Tier::Free)];
                let account = *ensure_keys(c, &keys, now.timestamp_millis())?
                    .values()
                    .next()
                    .unwrap();
                let request = RequestCount::new(account, "POST", "/x", now);
                c.execute_batch("BEGIN")?;
                let failed = request.run(c, |_| {
                    Err::<(), _>(StoreError::Corrupt("the turn failed".into()))
                });
                assert!(matches!(failed, Err(StoreError::Corrupt(_))));
                c.execute_batch("COMMIT")?;
                assert_eq!(usage::requests_used(c, account.id, period_start)?, 1);
                let limit = account.tier.limits().requests;
                for _ in 1..limit {
                    assert_eq!(request.run(c, |_| Ok(7))?, Some(7));
                }
                let ran = std::cell::Cell::new(false);
                let over = request.run(c, |_| {
                    ran.set(true);
                    Ok(())
                })?;
                assert_eq!(over, None);
                assert!(!ran.get());
                assert_eq!(usage::requests_used(c, account.id, period_start)?, limit);
                let refused = answer(&request, None::<()>).unwrap_err();
                assert_eq!(refused.status, axum::http::StatusCode::TOO_MANY_REQUESTS);
                Ok(())
            })
            .unwrap();
    }
}
