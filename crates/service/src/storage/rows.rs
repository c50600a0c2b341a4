//! What both storages hand back and forth: rows of the interface's resources, the request to
//! count, the key hash. The domain types (turns, accounts, plans) are `convo_core`'s.

use chrono::{DateTime, Utc};
use convo_wire::{FinishReason, Role};
use sha2::{Digest, Sha256};

use convo_core::{Account, Tier};
use convo_wire::admin::AccountSort;

use crate::time;

/// How long an `Idempotency-Key` is kept: 24 hours.
pub const IDEMPOTENCY_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// One request to count against its account's plan, made where the request is handled: the
/// count runs on the writer thread (alone in `count`, or ahead of the request's own writes in
/// the same closure), and `auth::answer` turns its outcome into the request's fate (the
/// storage never builds HTTP answers).
#[derive(Debug, Clone, Copy)]
pub struct RequestCount {
    account: Account,
    method: &'static str,
    route: &'static str,
    now: DateTime<Utc>,
}

impl RequestCount {
    pub fn new(
        account: Account,
        method: &'static str,
        route: &'static str,
        now: DateTime<Utc>,
    ) -> RequestCount {
        RequestCount {
            account,
            method,
            route,
            now,
        }
    }

    pub fn account(&self) -> Account {
        self.account
    }

    /// Start of the billing period the request counts in.
    pub fn period_start_ms(&self) -> i64 {
        time::billing_period(self.now).0.timestamp_millis()
    }

    /// The route that counts, for the log.
    pub fn method_route(&self) -> (&'static str, &'static str) {
        (self.method, self.route)
    }

    /// End of the billing period the request counts in (when a refused one may try again).
    pub fn period_end(&self) -> DateTime<Utc> {
        time::billing_period(self.now).1
    }
}

/// The finished assistant reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub id: String,
    pub content: String,
    pub tokens: u64,
    pub created_at_ms: i64,
    /// How the reply ended (stored with it, so that a reloaded history says so).
    pub finish_reason: FinishReason,
}

/// How many messages a session list reads of a session past its kept summary before it keeps
/// a new one (`session_summaries`: PostgreSQL's migration 22, SQLite's 11). A list reads a
/// session's summary and the messages after it, so what it reads of a session is what came
/// since a list last kept its summary: fewer than this many, unless more came since the last
/// list, and then that list keeps a new summary. A shorter session is read whole each time,
/// which costs less than writing its summary, and a summary is written once per this many
/// messages at most.
pub const SUMMARY_AFTER: i64 = 32;

/// A live session of an account, for the `GET /v1/sessions` extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub created_at_ms: i64,
    /// Time of the last stored message, or creation.
    pub last_activity_ms: i64,
    pub messages: u64,
    pub tokens: u64,
    /// The title the user set, if any.
    pub title: Option<String>,
    /// The content of its first user message, if any (the title's fallback).
    pub first_user_message: Option<String>,
    /// Where a fork came from: the source session and the source's message it was forked
    /// at (kept when the source is deleted); none for a session that is not a fork.
    pub forked_from: Option<(String, String)>,
}

/// What undoing a session's last exchange did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// No live session of the account by that id.
    NoSession,
    /// The session has no user message (`convo_core::sessions::last_exchange_start`).
    NothingToUndo,
    /// A turn of the session is in flight (on PostgreSQL, on any replica): nothing removed.
    Busy,
    /// The ids of the removed messages, oldest first.
    Removed(Vec<String>),
}

/// A session whose last exchange was undone (`Storage::undone_since`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    pub session_id: String,
    pub account_id: i64,
    /// When it was last undone (the undoing node's clock, before its commit).
    pub at_ms: i64,
}

/// What forking a session did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fork {
    /// No live source session of the account by that id.
    NoSession,
    /// The source session has no message by that id.
    NoMessage,
    /// The new session's id is taken (live, deleted, or another account's).
    Exists,
    /// The account's session limit is reached (`convo_core::admission::session_limit_reached`).
    SessionLimit,
    /// The new session exists with the copied messages.
    Forked,
}

/// A fork to make: the source session, the message it ends at, the new session's id.
#[derive(Debug, Clone)]
pub struct ForkRequest {
    pub account: Account,
    pub source: String,
    pub message_id: String,
    pub new_session_id: String,
    pub now_ms: i64,
}

/// A stored message with everything the `GET /v1/sessions/{id}/messages` extension shows.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRow {
    pub id: String,
    pub role: Role,
    pub content: String,
    pub tokens: u64,
    pub metadata: Option<String>,
    pub created_at_ms: i64,
    /// Replies stored since the column exists; `None` for user and system messages.
    pub finish_reason: Option<FinishReason>,
}

/// A stored `finish_reason` column, read back.
pub fn finish_reason(
    stored: Option<String>,
) -> Result<Option<FinishReason>, crate::error::StoreError> {
    stored
        .map(|s| s.parse().map_err(crate::error::StoreError::Corrupt))
        .transpose()
}

/// Raw numbers of the usage resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageCounts {
    pub requests: u64,
    pub tokens: u64,
    pub sessions: u64,
}

/// Raw numbers of the metrics resource over `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MetricCounts {
    pub sessions_total: u64,
    pub sessions_active: u64,
    /// Sum over active sessions of (last − first message in range), milliseconds.
    pub duration_ms_sum: i64,
    pub messages_total: u64,
    pub user_messages: u64,
    pub system_messages: u64,
    pub assistant_messages: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl MetricCounts {
    /// Adds the ledger's `count` messages of `role` holding `tokens`: a user's or a system
    /// message's tokens are the prompt's, an assistant's the completion's.
    pub fn add_role(
        &mut self,
        role: &str,
        count: u64,
        tokens: u64,
    ) -> Result<(), crate::error::StoreError> {
        let (messages, spent) = match role {
            "user" => (&mut self.user_messages, &mut self.prompt_tokens),
            "system" => (&mut self.system_messages, &mut self.prompt_tokens),
            "assistant" => (&mut self.assistant_messages, &mut self.completion_tokens),
            other => {
                return Err(crate::error::StoreError::Corrupt(format!(
                    "unknown role {other} in message_log"
                )));
            }
        };
        *messages += count;
        *spent += tokens;
        self.messages_total += count;
        Ok(())
    }
}

/// What `Storage::admin_accounts` reads: one page of the deployment's accounts with their
/// usage in the billing period starting at `period_start_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountsQuery {
    pub period_start_ms: i64,
    pub sort: AccountSort,
    pub limit: u32,
    pub offset: u64,
    /// Only accounts with this tier, this id, or a key hint containing it (ignoring case).
    pub q: Option<String>,
    /// Only these accounts (the admin stream reads the accounts that changed).
    pub ids: Option<Vec<i64>>,
}

impl AccountsQuery {
    /// The plans' limits as SQL rows `(tier, requests, tokens, sessions)`, from
    /// `convo_core`'s plans (constants, never user input), for both storages' queries.
    pub fn limits_sql() -> String {
        Tier::ALL
            .iter()
            .map(|t| {
                let l = t.limits();
                format!(
                    "('{}', {}, {}, {})",
                    t.as_str(),
                    l.requests.max(1),
                    l.tokens.max(1),
                    l.sessions.max(1)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The order of a page, the same in both storages: descending by the sort key (except
    /// `name`), then by account id so that pages never overlap.
    pub fn order_sql(&self) -> &'static str {
        match self.sort {
            AccountSort::Share => "share DESC, id",
            AccountSort::Requests => "requests DESC, id",
            AccountSort::Tokens => "tokens DESC, id",
            AccountSort::Name => "first_hint, id",
        }
    }
}

/// One account of a page: what the operator's list shows of it.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountRow {
    pub id: i64,
    pub tier: String,
    /// The last 4 characters of each of its keys, oldest first.
    pub key_hints: Vec<String>,
    pub requests: u64,
    pub tokens: u64,
    pub sessions: u64,
    /// The largest of used / limit over requests, tokens and sessions.
    pub share: f64,
    /// When its last message was stored.
    pub last_active_ms: Option<i64>,
}

/// A page of accounts and how many match the query in all.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccountPage {
    pub total: u64,
    pub rows: Vec<AccountRow>,
}

/// Key hints as both storages aggregate them: joined by commas (hints are letters and digits).
pub fn split_hints(joined: &str) -> Vec<String> {
    joined
        .split(',')
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect()
}

/// Hex SHA-256 of an API key.
pub fn hash_key(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
