//! The operator's endpoints of `convo serve` (extensions; docs/service.md, "Operators"), with
//! the admin key (`[connection] admin_key`, `CONVO_ADMIN_KEY`) as the bearer:
//! `GET /v1/admin/accounts` (every account against its plan, sorted and filtered by the
//! server), `GET /v1/admin/accounts/{id}/metrics` (one account's metrics, the body of
//! `/v1/analytics/metrics`) and the admin stream `GET /v1/admin/stream` ([`AdminStream`]).
//!
//! Like every extension call they go by the one rule of `client.rs` (`extension`): `Ok(Some)`
//! when answered, `Ok(None)` when the server has no such endpoint (404 or 405 other than the
//! endpoint's own `account_not_found`), an error when it refused (a missing or wrong admin key
//! is `ApiError::Unauthorized`).
//!
//! ```no_run
//! # async fn demo(client: convo_client::api::Client) -> Result<(), convo_client::api::ApiError> {
//! use convo_client::api::admin::AccountsQuery;
//! use convo_client::api::AccountSort;
//! let query = AccountsQuery { sort: AccountSort::Share, limit: Some(20), ..Default::default() };
//! if let Some(page) = client.admin_accounts(&query).await? {
//!     println!("{} accounts", page.total);
//! }
//! # Ok(()) }
//! ```

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::Method;
use tokio::sync::mpsc;

use super::client::{Auth, Client, ClientOptions, Extension, extension};
use super::error::ApiError;
use super::stream::{Frame, StreamTiming, TaskHandle, Update, spawn_task};
use super::types::{Granularity, Metrics};
pub use convo_wire::admin::{AccountSort, AdminAccount, AdminAccounts, AdminEvent};

/// The question of `GET /v1/admin/accounts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountsQuery {
    pub sort: AccountSort,
    /// At most this many accounts (the server's default when `None`).
    pub limit: Option<u64>,
    pub offset: u64,
    /// Only the accounts matching this text (a key hint, a tier or an account id).
    pub q: Option<String>,
}

/// The code the service answers for an account it does not hold.
pub const ACCOUNT_NOT_FOUND: &str = "account_not_found";

impl Client {
    /// Whether an admin key is configured (else the admin calls are not tried).
    pub fn has_admin_key(&self) -> bool {
        self.options().admin_key.is_some()
    }

    fn require_admin_key(&self) -> Result<(), ApiError> {
        if self.has_admin_key() {
            Ok(())
        } else {
            Err(ApiError::Config(NO_ADMIN_KEY.into()))
        }
    }

    /// `GET /v1/admin/accounts`: one page of the accounts matching `query`, in its order.
    /// `Ok(None)` when the server has no admin endpoints.
    pub async fn admin_accounts(
        &self,
        query: &AccountsQuery,
    ) -> Result<Option<AdminAccounts>, ApiError> {
        self.require_admin_key()?;
        let mut url = self.options().endpoint(&["v1", "admin", "accounts"]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("sort", query.sort.as_str());
            if let Some(limit) = query.limit {
                q.append_pair("limit", &limit.to_string());
            }
            if query.offset > 0 {
                q.append_pair("offset", &query.offset.to_string());
            }
            if let Some(text) = query.q.as_deref().filter(|t| !t.trim().is_empty()) {
                q.append_pair("q", text.trim());
            }
        }
        let answer = self
            .request_with_status(Method::GET, url, Auth::AdminKey, None, None)
            .await;
        match extension(answer)? {
            Extension::Answered(page) => Ok(Some(page)),
            Extension::Refused(e) => Err(e),
            Extension::Unsupported => Ok(None),
        }
    }

    /// `GET /v1/admin/accounts/{id}/metrics` over `[start, end)`: one account's metrics, as
    /// `GET /v1/analytics/metrics` answers its own. `Ok(None)` when the server has no admin
    /// endpoints; `ApiError::Service` with [`ACCOUNT_NOT_FOUND`] for an unknown account.
    pub async fn admin_account_metrics(
        &self,
        account_id: u64,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        granularity: Option<Granularity>,
    ) -> Result<Option<Metrics>, ApiError> {
        self.require_admin_key()?;
        let id = account_id.to_string();
        let mut url = self
            .options()
            .endpoint(&["v1", "admin", "accounts", &id, "metrics"]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair(
                "startDate",
                &start.to_rfc3339_opts(SecondsFormat::AutoSi, true),
            );
            q.append_pair("endDate", &end.to_rfc3339_opts(SecondsFormat::AutoSi, true));
            if let Some(g) = granularity {
                q.append_pair("granularity", g.as_str());
            }
        }
        let answer = self
            .request_with_status(Method::GET, url, Auth::AdminKey, None, None)
            .await;
        match answer {
            Err(f) if f.error.code() == ACCOUNT_NOT_FOUND => Err(f.error),
            answer => match extension(answer)? {
                Extension::Answered(m) => Ok(Some(m)),
                Extension::Refused(e) => Err(e),
                Extension::Unsupported => Ok(None),
            },
        }
    }
}

/// What to tell someone without an admin key.
pub const NO_ADMIN_KEY: &str = "no admin key: set CONVO_ADMIN_KEY or [connection] admin_key \
     to the key `convo serve --admin-key` was started with";

/// What the admin stream task tells its owner.
pub type AdminUpdate = Update<AdminEvent>;

impl Frame for AdminEvent {
    fn parse(text: &str) -> Option<Self> {
        match serde_json::from_str(text) {
            Ok(event) => Some(event),
            Err(error) => {
                // Unknown event types are skipped quietly; anything else is logged.
                let known = serde_json::from_str::<serde_json::Value>(text)
                    .ok()
                    .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
                    .is_some_and(|kind| kind == "hello" || kind == "account");
                if known {
                    tracing::warn!(%error, "skipping a bad frame of the admin stream");
                } else {
                    tracing::debug!("skipping an admin stream frame of a type not known here");
                }
                None
            }
        }
    }
}

/// Handle of the admin stream task (`GET /v1/admin/stream`): it pings, reconnects with
/// capped backoff like the account stream, and says `Unsupported` against a server without
/// the endpoint. Dropping the handle closes the stream.
#[derive(Debug)]
pub struct AdminStream {
    _task: TaskHandle,
}

impl AdminStream {
    /// Opens the admin stream with default timings; `Err` without an admin key. Must be
    /// called within a tokio runtime.
    pub fn connect(
        options: &ClientOptions,
    ) -> Result<(AdminStream, mpsc::Receiver<AdminUpdate>), ApiError> {
        Self::connect_with(options, StreamTiming::default())
    }

    pub fn connect_with(
        options: &ClientOptions,
        timing: StreamTiming,
    ) -> Result<(AdminStream, mpsc::Receiver<AdminUpdate>), ApiError> {
        let key = options
            .admin_key
            .clone()
            .ok_or_else(|| ApiError::Config(NO_ADMIN_KEY.into()))?;
        // The stream task sends `api_key` as its bearer: here the admin key is its one key.
        let mut stream_options = options.clone();
        stream_options.api_key = Some(key);
        stream_options.wallet_token = None;
        stream_options.admin_key = None;
        let path = vec!["v1".into(), "admin".into(), "stream".into()];
        let (task, rx) = spawn_task(stream_options, path, timing);
        Ok((AdminStream { _task: task }, rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_events_are_read_and_unknown_ones_skipped() {
        assert_eq!(
            AdminEvent::parse(r#"{"type":"hello","total":3}"#),
            Some(AdminEvent::Hello { total: 3 })
        );
        assert_eq!(AdminEvent::parse(r#"{"type":"relay.lag","ms":3}"#), None);
        assert_eq!(AdminEvent::parse(r#"{"type":"account"}"#), None);
        assert_eq!(AdminEvent::parse("not json"), None);
    }

    #[test]
    fn the_admin_stream_needs_an_admin_key() {
        let options = ClientOptions::new("http://127.0.0.1:9".parse().unwrap());
        let err = AdminStream::connect(&options).unwrap_err();
        assert!(err.to_string().contains("CONVO_ADMIN_KEY"), "{err}");
    }
}
