//! The HTTP client: one async method per endpoint of the interface.
//!
//! Policy (docs/client.md): connect and whole-request timeouts; up to `max_retries` retries
//! with capped exponential backoff on network errors, 5xx and 429 (honouring `Retry-After` up
//! to [`MAX_RETRY_AFTER`]); a POST is retried only with the same `Idempotency-Key`, so the
//! server answers a repeat with the first reply; response bodies capped at `max_body_bytes`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), convo_client::api::ApiError> {
//! use convo_client::api::{Client, ClientOptions, SendMessage, new_idempotency_key};
//! let mut options = ClientOptions::new("http://127.0.0.1:8080".parse().unwrap());
//! options.api_key = Some("service_live_example".into());
//! let client = Client::new(options)?;
//! let body = SendMessage { content: "hi".into(), role: None, stream: None, metadata: None };
//! let reply = client
//!     .send_message("session_abcdefgh12345678", &body, &new_idempotency_key())
//!     .await?;
//! println!("{}", reply.content);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use url::Url;

use super::error::ApiError;
use super::types::{
    Cancelled, Deleted, ErrorEnvelope, Granularity, Message, Metrics, SendMessage, Usage, Wallet,
};
use convo_wire::sessions::{ForkRequest, MessageList, SessionList, SessionSummary, Undone};

/// Longest `Retry-After` the client waits for by itself; beyond it the 429 is returned.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Default cap on a response body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

const BACKOFF_BASE: Duration = Duration::from_millis(200);
const BACKOFF_CAP: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Time to establish a connection.
    pub connect: Duration,
    /// Time for a whole request, from sending to the last byte of the response.
    pub request: Duration,
    /// Time for a send whose reply comes whole in the answer (`stream` not asked): the
    /// service answers once the reply is written, which a local model on a small machine
    /// may take minutes for.
    pub reply: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: crate::config::DEFAULT_CONNECT_TIMEOUT,
            request: crate::config::DEFAULT_REQUEST_TIMEOUT,
            reply: crate::config::DEFAULT_REPLY_TIMEOUT,
        }
    }
}

#[derive(Clone)]
pub struct ClientOptions {
    pub base_url: Url,
    /// `service_live_…`, for the session, message and analytics endpoints.
    pub api_key: Option<String>,
    /// JWT for the wallet endpoint.
    pub wallet_token: Option<String>,
    /// `service_admin_…`, for the operator's endpoints (`super::admin`).
    pub admin_key: Option<String>,
    pub timeouts: Timeouts,
    /// Retries after the first attempt (0: no retry).
    pub max_retries: u32,
    pub max_body_bytes: usize,
    /// Allow a key over plain http:// to a host other than loopback.
    pub allow_insecure: bool,
}

impl ClientOptions {
    /// Whose numbers and sessions this client sees, as the local store files what it keeps
    /// of them (complete metrics buckets, sessions; the id of `target::TargetId::remote`): a
    /// hash of the base URL and the API key, so that two keys or two deployments never share
    /// them and the key itself is not written down.
    pub fn account(&self) -> String {
        account_at(self.base_url.as_str(), self.api_key.as_deref())
    }
}

/// [`ClientOptions::account`] of a client on `base_url` with `api_key`.
pub(crate) fn account_at(base_url: &str, api_key: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(base_url.trim_end_matches('/'));
    h.update([0]);
    h.update(api_key.unwrap_or(""));
    let hex: String = h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("remote:{hex}")
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("base_url", &self.base_url.as_str())
            .field(
                "api_key",
                &self.api_key.as_deref().map(crate::config::redact_key),
            )
            .field(
                "wallet_token",
                &self.wallet_token.as_deref().map(crate::config::redact_key),
            )
            .field(
                "admin_key",
                &self.admin_key.as_deref().map(crate::config::redact_key),
            )
            .field("timeouts", &self.timeouts)
            .field("max_retries", &self.max_retries)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("allow_insecure", &self.allow_insecure)
            .finish()
    }
}

impl ClientOptions {
    /// Options with default timeouts, 3 retries and no credentials.
    pub fn new(base_url: Url) -> Self {
        ClientOptions {
            base_url,
            api_key: None,
            wallet_token: None,
            admin_key: None,
            timeouts: Timeouts::default(),
            max_retries: 3,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            allow_insecure: false,
        }
    }

    /// Options from the effective configuration; errors when no base URL is configured.
    pub fn from_config(config: &crate::config::Config) -> Result<Self, ApiError> {
        let c = &config.connection;
        let base_url = c
            .base_url
            .clone()
            .ok_or_else(|| ApiError::Config("no base URL configured".into()))?;
        Ok(ClientOptions {
            base_url,
            api_key: c.api_key.clone(),
            wallet_token: c.wallet_token.clone(),
            admin_key: c.admin_key.clone(),
            timeouts: Timeouts {
                connect: c.connect_timeout,
                request: c.request_timeout,
                reply: c.reply_timeout,
            },
            max_retries: c.max_retries,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            allow_insecure: c.allow_insecure,
        })
    }

    /// The URL of `segments` under the base URL (each segment percent-encoded).
    pub fn endpoint(&self, segments: &[&str]) -> Url {
        let mut url = self.base_url.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }
}

/// The reply to POST messages, with whether it is complete: a `stream: true` POST answered
/// 202 carries only the id of the reply to come.
#[derive(Debug, Clone, PartialEq)]
pub struct SendReply {
    pub message: Message,
    pub complete: bool,
}

/// Client of the Conversational Session Service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    options: Arc<ClientOptions>,
    /// The database id the server said last (`convo_wire::sessions::DATABASE_ID_HEADER`).
    database_id: Arc<std::sync::Mutex<Option<String>>>,
}

#[derive(Clone, Copy)]
pub(super) enum Auth {
    ApiKey,
    WalletToken,
    AdminKey,
}

/// A fresh `Idempotency-Key` for one send (reused by its retries).
pub fn new_idempotency_key() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..32)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// An attempt's failure, with whether another attempt may help and how long to wait.
pub(super) struct Failure {
    pub(super) error: ApiError,
    retryable: bool,
    wait: Option<Duration>,
    /// The HTTP status of an error answer (none when no answer came).
    pub(super) status: Option<StatusCode>,
}

impl Client {
    /// A client for these options. Refuses a key over plain http to a non-loopback host
    /// unless `allow_insecure`.
    pub fn new(options: ClientOptions) -> Result<Client, ApiError> {
        crate::config::check_transport(
            &options.base_url,
            options.api_key.is_some()
                || options.wallet_token.is_some()
                || options.admin_key.is_some(),
            options.allow_insecure,
        )
        .map_err(|e| ApiError::Config(e.to_string()))?;
        let http = reqwest::Client::builder()
            .connect_timeout(options.timeouts.connect)
            .timeout(options.timeouts.request)
            .user_agent(concat!("convo/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            http,
            options: Arc::new(options),
            database_id: Arc::default(),
        })
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The id of the database the server said it answers from, in its last answer that said
    /// one (`convo serve` says it in every answer); `None` before, and from other servers.
    pub fn database_id(&self) -> Option<String> {
        self.database_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// POST `/v1/sessions/{sessionId}/messages`: send a message, get the assistant reply.
    pub async fn send_message(
        &self,
        session_id: &str,
        message: &SendMessage,
        idempotency_key: &str,
    ) -> Result<Message, ApiError> {
        self.post_message(session_id, message, idempotency_key)
            .await
            .map(|r| r.message)
    }

    /// POST `/v1/sessions/{sessionId}/messages`, telling a complete reply (200) from one
    /// still to come over the stream (202).
    pub async fn post_message(
        &self,
        session_id: &str,
        message: &SendMessage,
        idempotency_key: &str,
    ) -> Result<SendReply, ApiError> {
        let url = self
            .options
            .endpoint(&["v1", "sessions", session_id, "messages"]);
        let body = serde_json::to_vec(message)
            .map_err(|e| ApiError::Config(format!("cannot encode the message: {e}")))?;
        // A reply that comes whole in the answer takes as long as it is written.
        let timeout = if message.stream == Some(true) {
            self.options.timeouts.request
        } else {
            self.options.timeouts.reply
        };
        let (status, reply): (StatusCode, Message) = self
            .request_within(
                Method::POST,
                url,
                Auth::ApiKey,
                Some(body),
                Some(idempotency_key),
                timeout,
            )
            .await
            .map_err(|f| f.error)?;
        let pending = status == StatusCode::ACCEPTED
            || (message.stream == Some(true) && reply.content.is_empty() && reply.tokens == 0);
        Ok(SendReply {
            message: reply,
            complete: !pending,
        })
    }

    /// DELETE `/v1/sessions/{sessionId}`.
    pub async fn delete_session(&self, session_id: &str) -> Result<Deleted, ApiError> {
        let url = self.options.endpoint(&["v1", "sessions", session_id]);
        self.request(Method::DELETE, url, Auth::ApiKey, None, None)
            .await
            .map(|(_, d)| d)
    }

    /// GET `/v1/analytics/metrics` over `[start, end)`.
    pub async fn metrics(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        granularity: Option<Granularity>,
    ) -> Result<Metrics, ApiError> {
        let mut url = self.options.endpoint(&["v1", "analytics", "metrics"]);
        {
            let mut q = url.query_pairs_mut();
            // AutoSi keeps sub-second digits only when there are any: truncating `end` to
            // the second would drop what happened in its last second.
            q.append_pair(
                "startDate",
                &start.to_rfc3339_opts(SecondsFormat::AutoSi, true),
            );
            q.append_pair("endDate", &end.to_rfc3339_opts(SecondsFormat::AutoSi, true));
            if let Some(g) = granularity {
                q.append_pair("granularity", g.as_str());
            }
        }
        self.request(Method::GET, url, Auth::ApiKey, None, None)
            .await
            .map(|(_, m)| m)
    }

    /// GET `/v1/analytics/usage`: the current billing period.
    pub async fn usage(&self) -> Result<Usage, ApiError> {
        let url = self.options.endpoint(&["v1", "analytics", "usage"]);
        self.request(Method::GET, url, Auth::ApiKey, None, None)
            .await
            .map(|(_, u)| u)
    }

    /// GET `/v1/wallets/{walletId}`, with the wallet token (JWT).
    pub async fn wallet(&self, wallet_id: &str) -> Result<Wallet, ApiError> {
        if self.options.wallet_token.is_none() {
            return Err(ApiError::Config(
                "no wallet token: pass --token or set CONVO_WALLET_TOKEN (a local service mints one with `convo token`)".into(),
            ));
        }
        let url = self.options.endpoint(&["v1", "wallets", wallet_id]);
        self.request(Method::GET, url, Auth::WalletToken, None, None)
            .await
            .map(|(_, w)| w)
    }

    /// `GET /v1/sessions/{sessionId}/messages`, an extension of the local service: the
    /// session's stored messages, oldest first (a reply still being generated is not among
    /// them). `Ok(None)` when the server has no such endpoint (a 404 other than
    /// `session_not_found`, or a 405); an empty list for a session the server does not hold.
    pub async fn session_messages(
        &self,
        session_id: &str,
    ) -> Result<Option<Vec<Message>>, ApiError> {
        Ok(match self.history(session_id).await? {
            History::Messages(m) => Some(m),
            History::NotFound => Some(Vec::new()),
            History::Unsupported => None,
        })
    }

    // ---- the session extensions: list, history, title (docs/client.md, "The service as the
    // source of truth") ----------------------------------------------------------------------

    /// `GET /v1/sessions/{sessionId}/messages` (`convo_wire::sessions::MessageList`), telling
    /// a session the server does not hold from a server without the endpoint.
    pub async fn history(&self, session_id: &str) -> Result<History, ApiError> {
        let url = self
            .options
            .endpoint(&["v1", "sessions", session_id, "messages"]);
        let answer = self
            .request_with_status::<MessageList>(Method::GET, url, Auth::ApiKey, None, None)
            .await;
        match extension(answer)? {
            Extension::Answered(list) => Ok(History::Messages(
                list.messages.into_iter().map(|m| m.message).collect(),
            )),
            Extension::Refused(ApiError::SessionNotFound { .. }) => Ok(History::NotFound),
            Extension::Refused(e) => Err(e),
            Extension::Unsupported => Ok(History::Unsupported),
        }
    }

    /// `GET /v1/sessions`: the account's live sessions, most recently active first, and the
    /// id of the database they are listed from where the server says it.
    /// `Ok(None)` when the server has no such endpoint (404, 405: the seed's interface).
    pub async fn list_sessions(&self) -> Result<Option<SessionList>, ApiError> {
        let url = self.options.endpoint(&["v1", "sessions"]);
        let answer = self
            .request_with_status::<SessionList>(Method::GET, url, Auth::ApiKey, None, None)
            .await;
        match extension(answer)? {
            Extension::Answered(list) => Ok(Some(list)),
            // No session is named: a 404 with an extension's code is not this endpoint's.
            Extension::Refused(_) | Extension::Unsupported => Ok(None),
        }
    }

    /// `PATCH /v1/sessions/{sessionId}` `{"title"}`: the session as the server lists it now.
    /// `Ok(None)` when the server has no titles (404 other than `session_not_found`, 405);
    /// `session_not_found` is an error.
    pub async fn set_title(
        &self,
        session_id: &str,
        title: &str,
    ) -> Result<Option<SessionSummary>, ApiError> {
        let url = self.options.endpoint(&["v1", "sessions", session_id]);
        let body = serde_json::to_vec(&serde_json::json!({ "title": title }))
            .map_err(|e| ApiError::Config(format!("cannot encode the title: {e}")))?;
        let answer = self
            .request_with_status::<SessionSummary>(
                Method::PATCH,
                url,
                Auth::ApiKey,
                Some(body),
                None,
            )
            .await;
        extension_or_error(answer)
    }

    /// `GET /healthz`, an extension of the local service (no credentials): `Ok(true)` when
    /// the server says it is up, `Ok(false)` when it has no such endpoint (any 404), an
    /// error when it cannot be reached or answers otherwise. Not retried: it is a probe.
    pub async fn health(&self) -> Result<bool, ApiError> {
        let mut url = self.options.base_url.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push("healthz");
        }
        let resp = self
            .http
            .get(url.clone())
            .send()
            .await
            .map_err(|e| ApiError::Network(describe_reqwest(&e, &url)))?;
        match resp.status() {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            s => Err(ApiError::Protocol(format!(
                "HTTP {} from {}",
                s.as_u16(),
                url.path()
            ))),
        }
    }

    async fn request<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        auth: Auth,
        body: Option<Vec<u8>>,
        idempotency_key: Option<&str>,
    ) -> Result<(StatusCode, T), ApiError> {
        self.request_with_status(method, url, auth, body, idempotency_key)
            .await
            .map_err(|f| f.error)
    }

    /// [`Client::request`], keeping the status of an error answer.
    pub(super) async fn request_with_status<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        auth: Auth,
        body: Option<Vec<u8>>,
        idempotency_key: Option<&str>,
    ) -> Result<(StatusCode, T), Failure> {
        let timeout = self.options.timeouts.request;
        self.request_within(method, url, auth, body, idempotency_key, timeout)
            .await
    }

    /// [`Client::request_with_status`], each attempt given `timeout` instead of the whole
    /// request's.
    async fn request_within<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        auth: Auth,
        body: Option<Vec<u8>>,
        idempotency_key: Option<&str>,
        timeout: Duration,
    ) -> Result<(StatusCode, T), Failure> {
        let mut attempt: u32 = 0;
        loop {
            match self
                .attempt(
                    &method,
                    &url,
                    auth,
                    body.as_deref(),
                    idempotency_key,
                    timeout,
                )
                .await
            {
                Ok(ok) => return Ok(ok),
                Err(f) if f.retryable && attempt < self.options.max_retries => {
                    let wait = f.wait.unwrap_or_else(|| backoff(attempt));
                    tracing::debug!(
                        %method, path = url.path(), attempt, ?wait, error = %f.error,
                        "retrying request"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(f) => return Err(f),
            }
        }
    }

    async fn attempt<T: DeserializeOwned>(
        &self,
        method: &Method,
        url: &Url,
        auth: Auth,
        body: Option<&[u8]>,
        idempotency_key: Option<&str>,
        timeout: Duration,
    ) -> Result<(StatusCode, T), Failure> {
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .timeout(timeout)
            .header(reqwest::header::ACCEPT, "application/json");
        let credential = match auth {
            Auth::ApiKey => self.options.api_key.as_deref(),
            Auth::WalletToken => self.options.wallet_token.as_deref(),
            Auth::AdminKey => self.options.admin_key.as_deref(),
        };
        if let Some(c) = credential {
            req = req.bearer_auth(c);
        }
        if let Some(k) = idempotency_key {
            req = req.header("Idempotency-Key", k);
        }
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_vec());
        }
        let mut resp = req.send().await.map_err(|e| Failure {
            error: ApiError::Network(describe_reqwest(&e, url)),
            retryable: true,
            wait: None,
            status: None,
        })?;
        let status = resp.status();
        if let Some(id) = (resp.headers())
            .get(convo_wire::sessions::DATABASE_ID_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            *self.database_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.to_string());
        }
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let bytes = read_capped(&mut resp, self.options.max_body_bytes, url).await?;

        if status.is_success() {
            return serde_json::from_slice::<T>(&bytes)
                .map(|v| (status, v))
                .map_err(|e| Failure {
                    error: ApiError::Protocol(format!(
                        "unexpected response from {} (HTTP {}): {e}",
                        url.path(),
                        status.as_u16()
                    )),
                    retryable: false,
                    wait: None,
                    status: Some(status),
                });
        }

        let error = match serde_json::from_slice::<ErrorEnvelope>(&bytes) {
            Ok(env) => ApiError::from_body(status.as_u16(), env.error, retry_after),
            Err(_) => ApiError::Protocol(format!(
                "HTTP {} from {} without an error body{}",
                status.as_u16(),
                url.path(),
                snippet(&bytes)
            )),
        };
        // A server asking for a longer wait than the cap (a quota resetting next month) gets
        // its answer returned rather than a client hanging on.
        let retryable = (status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS)
            && retry_after.is_none_or(|d| d <= MAX_RETRY_AFTER);
        Err(Failure {
            error,
            retryable,
            wait: retry_after,
            status: Some(status),
        })
    }
}

/// What `GET /v1/sessions/{id}/messages` said ([`Client::history`]).
#[derive(Debug, Clone, PartialEq)]
pub enum History {
    /// The stored messages, oldest first.
    Messages(Vec<Message>),
    /// `session_not_found`: the server does not hold the session (never used, deleted, or
    /// another account's).
    NotFound,
    /// The server has no such endpoint (the seed's interface).
    Unsupported,
}

/// The answer to a request of an extension.
pub(super) enum Extension<T> {
    Answered(T),
    /// The extension's own 404 or 409 (`session_not_found`, `message_not_found`,
    /// `reply_in_progress`): the server has the endpoint and refused this request.
    Refused(ApiError),
    /// The server has no such endpoint.
    Unsupported,
}

/// An extension's answer: apart from the extension's own codes (`session_not_found`,
/// `message_not_found`, `reply_in_progress`), a 404 or 405 means the server lacks it. The one
/// rule every extension call (list, history, title, fork, undo) goes by.
pub(super) fn extension<T>(
    answer: Result<(StatusCode, T), Failure>,
) -> Result<Extension<T>, ApiError> {
    match answer {
        Ok((_, t)) => Ok(Extension::Answered(t)),
        Err(Failure {
            error: e @ (ApiError::SessionNotFound { .. } | ApiError::ReplyInProgress { .. }),
            ..
        }) => Ok(Extension::Refused(e)),
        Err(Failure { error, .. }) if error.code() == "message_not_found" => {
            Ok(Extension::Refused(error))
        }
        Err(Failure {
            status: Some(StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED),
            ..
        }) => Ok(Extension::Unsupported),
        Err(f) => Err(f.error),
    }
}

/// For calls whose refusal is an error: `None` when the server lacks the endpoint.
fn extension_or_error<T>(answer: Result<(StatusCode, T), Failure>) -> Result<Option<T>, ApiError> {
    match extension(answer)? {
        Extension::Answered(t) => Ok(Some(t)),
        Extension::Refused(e) => Err(e),
        Extension::Unsupported => Ok(None),
    }
}

/// Whether `listed` is the session `id` forked from `source` at `message`.
fn is_fork_of(listed: &SessionSummary, id: &str, source: &str, message: &str) -> bool {
    listed.session_id == id
        && listed
            .forked_from
            .as_ref()
            .is_some_and(|f| f.session_id == source && f.message_id == message)
}

/// Read the body, refusing more than `cap` bytes.
async fn read_capped(
    resp: &mut reqwest::Response,
    cap: usize,
    url: &Url,
) -> Result<Vec<u8>, Failure> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(too_large(cap, url));
    }
    let mut bytes = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > cap {
                    return Err(too_large(cap, url));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(bytes),
            Err(e) => {
                return Err(Failure {
                    error: ApiError::Network(format!(
                        "the response from {} was cut off: {}",
                        url.path(),
                        error_chain(&e)
                    )),
                    retryable: true,
                    wait: None,
                    status: None,
                });
            }
        }
    }
}

fn too_large(cap: usize, url: &Url) -> Failure {
    Failure {
        error: ApiError::Protocol(format!(
            "the response from {} is larger than {cap} bytes",
            url.path()
        )),
        retryable: false,
        wait: None,
        status: None,
    }
}

/// The first 200 characters of a body, on one line, for error messages.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let one_line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    if one_line.is_empty() {
        String::new()
    } else {
        format!(": {one_line}")
    }
}

fn describe_reqwest(e: &reqwest::Error, url: &Url) -> String {
    let origin = url.origin().ascii_serialization();
    if e.is_timeout() {
        format!("{origin} did not answer in time")
    } else if e.is_connect() {
        format!("cannot connect to {origin}: {}", error_chain(e))
    } else {
        format!("request to {origin} failed: {}", error_chain(e))
    }
}

/// The innermost cause of an error, which is the one that says what happened
/// ("Connection refused"), on one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last.replace('\n', " ")
}

/// `Retry-After`: delay-seconds or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    let delta = at.with_timezone(&Utc) - Utc::now();
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

/// Capped exponential backoff with jitter for retry number `attempt` (0-based).
pub fn backoff(attempt: u32) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(2u32.saturating_pow(attempt.min(16)));
    let capped = exp.min(BACKOFF_CAP);
    // ±25 % jitter so that many clients do not retry in lockstep.
    let factor = rand::rng().random_range(0.75..1.25);
    capped.mul_f64(factor)
}

/// The session extensions fork and undo (docs/service.md, "Extensions"). Each answers
/// `Ok(None)` when the server has no such endpoint (a 404 other than `session_not_found` or
/// `message_not_found`, or a 405), so that a front end can say the server cannot do it.
impl Client {
    /// `POST /v1/sessions/{sessionId}/fork`: a new session, `new_session_id` (chosen here so
    /// that a retry cannot make two), holding the source's history up to and including
    /// `message_id`. A repeat of a fork that was made (its answer lost: a 5xx from a proxy, a
    /// cut connection, and the retry) finds the new session taken, 409 `session_exists`: then
    /// the session by that id is read ([`Client::list_sessions`]) and, when it is the fork of
    /// this source at this message, it is the answer; else the conflict is.
    pub async fn fork(
        &self,
        session_id: &str,
        message_id: &str,
        new_session_id: &str,
    ) -> Result<Option<SessionSummary>, ApiError> {
        let url = self
            .options
            .endpoint(&["v1", "sessions", session_id, "fork"]);
        let body = serde_json::to_vec(&ForkRequest {
            message_id: message_id.to_string(),
            session_id: Some(new_session_id.to_string()),
        })
        .map_err(|e| ApiError::Protocol(format!("cannot encode the fork request: {e}")))?;
        let answer = self
            .request_with_status::<SessionSummary>(
                Method::POST,
                url,
                Auth::ApiKey,
                Some(body),
                None,
            )
            .await;
        match answer {
            Err(Failure { error, .. }) if error.code() == "session_exists" => {
                let made = self
                    .list_sessions()
                    .await?
                    .map(|list| list.sessions)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|s| is_fork_of(s, new_session_id, session_id, message_id));
                made.map(Some).ok_or(error)
            }
            answer => extension_or_error(answer),
        }
    }

    /// `POST /v1/sessions/{sessionId}/messages/{messageId}/cancel`: asks the service to stop
    /// the reply `message_id`; its `done` (`finishReason: "stopped"`, the text so far) follows
    /// on the stream. `Ok(None)`: the server cannot stop replies. A reply that already ended
    /// is an error coded `reply_finished`, an unknown one `message_not_found`.
    pub async fn cancel(
        &self,
        session_id: &str,
        message_id: &str,
    ) -> Result<Option<Cancelled>, ApiError> {
        let url = self.options.endpoint(&[
            "v1", "sessions", session_id, "messages", message_id, "cancel",
        ]);
        let answer = self
            .request_with_status::<Cancelled>(Method::POST, url, Auth::ApiKey, None, None)
            .await;
        extension_or_error(answer)
    }

    /// `DELETE /v1/sessions/{sessionId}/messages/last`: removes the last exchange (the last
    /// user message and what followed it). `ApiError::ReplyInProgress` while a reply streams.
    pub async fn undo(&self, session_id: &str) -> Result<Option<Undone>, ApiError> {
        let url = self
            .options
            .endpoint(&["v1", "sessions", session_id, "messages", "last"]);
        let answer = self
            .request_with_status::<Undone>(Method::DELETE, url, Auth::ApiKey, None, None)
            .await;
        extension_or_error(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_the_base_path_and_encode_segments() {
        let o = ClientOptions::new(Url::parse("https://h.example/api/").unwrap());
        assert_eq!(
            o.endpoint(&["v1", "sessions", "a/b", "messages"]).as_str(),
            "https://h.example/api/v1/sessions/a%2Fb/messages"
        );
        let o = ClientOptions::new(Url::parse("http://127.0.0.1:9").unwrap());
        assert_eq!(
            o.endpoint(&["v1", "analytics", "usage"]).as_str(),
            "http://127.0.0.1:9/v1/analytics/usage"
        );
    }

    #[test]
    fn retry_after_parses_seconds_and_dates() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn backoff_is_capped() {
        for n in 0..40 {
            assert!(backoff(n) <= BACKOFF_CAP.mul_f64(1.25));
        }
        assert!(backoff(0) >= BACKOFF_BASE.mul_f64(0.75));
    }

    #[test]
    fn debug_output_redacts_credentials() {
        let mut o = ClientOptions::new(Url::parse("http://127.0.0.1:9").unwrap());
        o.api_key = Some("service_live_abcdefghijklmnopqrst".into());
        let s = format!("{o:?}");
        assert!(!s.contains("abcdefghijkl"), "{s}");
        assert!(s.contains("service_live_…qrst"), "{s}");
    }
}
