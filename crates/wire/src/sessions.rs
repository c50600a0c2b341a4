//! The shapes of the session extensions of `convo serve` (docs/service.md, "Extensions"):
//! `GET /v1/sessions`, `PATCH /v1/sessions/{id}`, `GET /v1/sessions/{id}/messages`,
//! `POST /v1/sessions/{id}/fork` and `DELETE /v1/sessions/{id}/messages/last`. The service
//! writes them and the client reads them; other servers may have none of them.

use serde::{Deserialize, Serialize};

use crate::types::Message;

/// One entry of `GET /v1/sessions`; also what `PATCH` and `fork` answer and what the account
/// stream's `session.created` / `session.updated` events carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub created_at: String,
    pub last_activity_at: String,
    pub message_count: u64,
    pub tokens: u64,
    /// The title set with `PATCH`, else the start of the first user message (the rule the
    /// TUI titles sessions by, `crate::title::plain_title`); null when neither exists.
    pub title: Option<String>,
    /// Where a fork came from; absent for a session that is not a fork (and on servers that
    /// do not record it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
}

/// The source of a forked session: the session and the message it was forked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedFrom {
    pub session_id: String,
    pub message_id: String,
}

/// `GET /v1/sessions`: the account's live sessions, most recently active first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
    /// The id the service's database was given when it was made ([`DatabaseId`]); absent on
    /// servers that do not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_id: Option<DatabaseId>,
    /// The ids of the account's sessions deleted in the last [`DELETIONS_LISTED_DAYS`] days,
    /// most recent first; absent on servers that do not say. A client erases its copy of a
    /// session the list lacks only when it is named here: one missing for another reason (a
    /// database restored from an older backup) is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_session_ids: Option<Vec<String>>,
}

/// How far back `GET /v1/sessions` names deleted sessions ([`SessionList::deleted_session_ids`]).
pub const DELETIONS_LISTED_DAYS: i64 = 90;

/// The earliest deletion time (Unix milliseconds) a list made at `now_ms` names
/// ([`DELETIONS_LISTED_DAYS`] before it).
pub fn deletions_listed_since(now_ms: i64) -> i64 {
    now_ms - DELETIONS_LISTED_DAYS * 86_400_000
}

/// The id a service's database was given when it was made: the same for every replica on
/// it and across restarts, another one for a new (or reset) database. A client that finds
/// another id than the one it saw last knows that the sessions it kept from this server were
/// not deleted one by one: the server starts over (its whole list is another database's).
pub type DatabaseId = String;

/// The response header in which `convo serve` says its [`DatabaseId`] on every answer, so that
/// a client that only sends learns it too.
pub const DATABASE_ID_HEADER: &str = "convo-database-id";

/// One stored message of `GET /v1/sessions/{id}/messages`: the Message fields plus the
/// metadata sent with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredMessage {
    #[serde(flatten)]
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

/// `GET /v1/sessions/{id}/messages`: the stored history, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageList {
    pub session_id: String,
    pub messages: Vec<StoredMessage>,
}

/// The body of `POST /v1/sessions/{id}/fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkRequest {
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The answer of `DELETE /v1/sessions/{id}/messages/last`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Undone {
    pub session_id: String,
    /// The removed messages, oldest first: the last user message and what followed it.
    pub removed_message_ids: Vec<String>,
}
