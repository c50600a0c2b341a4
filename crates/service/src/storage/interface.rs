//! The storage interface of the service: everything it asks of its database, each method one
//! transaction. Implemented by SQLite's `SqliteStore` and PostgreSQL's `PgStore` (`backend.rs`).

use std::collections::HashMap;
use std::future::Future;

use super::rows::{
    AccountPage, AccountsQuery, Fork, ForkRequest, MessageRow, MetricCounts, Reply, RequestCount,
    SessionRow, Undo, Undone, UsageCounts,
};
use crate::error::StoreError;
use convo_core::Account;
use convo_core::Tier;
use convo_core::{Recorded, SessionStatus, TurnRefusal, TurnStart, TurnStarted};

/// What `start_turn` answers: `None` when the request limit is reached (nothing written),
/// else the turn's fate.
pub type TurnAdmission = Option<Result<TurnStarted, TurnRefusal>>;

/// Everything the service asks of its database. Each method is one transaction.
pub trait Storage: Send + Sync {
    /// Makes sure every configured key has an account with its tier; the accounts by key hash.
    fn ensure_keys(
        &self,
        keys: Vec<(String, Tier)>,
        now_ms: i64,
    ) -> impl Future<Output = Result<HashMap<String, Account>, StoreError>> + Send;

    /// Counts one request; `None` (nothing counted) when the request limit is reached.
    fn count_request(
        &self,
        request: RequestCount,
    ) -> impl Future<Output = Result<Option<()>, StoreError>> + Send;

    /// Counts the send as a request and, when admitted, starts its turn (the checks and the
    /// user message); a refused turn still counts.
    fn start_turn(
        &self,
        request: RequestCount,
        turn: TurnStart,
    ) -> impl Future<Output = Result<TurnAdmission, StoreError>> + Send;

    /// Stores the reply; false (nothing stored) when the session was deleted meanwhile. On
    /// PostgreSQL a store that fails leaves the turn to be rolled back at the replica's next
    /// heartbeat (`postgres::leases::EndedTurn`).
    fn complete_turn(
        &self,
        account_id: i64,
        session_id: String,
        reply: Reply,
        idempotent: Option<(String, Recorded)>,
        now_ms: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Undoes a turn whose reply failed (user message, ledger row, idempotency record). On
    /// PostgreSQL a rollback that fails is retried at the replica's heartbeats.
    fn roll_back_turn(
        &self,
        account_id: i64,
        session_id: String,
        user_message_id: String,
        created_at_ms: i64,
        idempotency_key: Option<String>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Deletes a live session of the account; false when there is none.
    fn delete_session(
        &self,
        account_id: i64,
        session_id: String,
        now_ms: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    fn session_status(
        &self,
        account_id: i64,
        session_id: String,
    ) -> impl Future<Output = Result<SessionStatus, StoreError>> + Send;

    fn list_sessions(
        &self,
        account_id: i64,
    ) -> impl Future<Output = Result<Vec<SessionRow>, StoreError>> + Send;

    /// The ids of the account's sessions deleted at or after `since_ms`, the most recently
    /// deleted first (a deleted session keeps its row, without content: `delete_session`).
    fn deleted_sessions(
        &self,
        account_id: i64,
        since_ms: i64,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

    /// The sessions of every account deleted at `since_ms` or later, with their deletion's
    /// time (`deletions.rs`: what this node keeps of them goes).
    fn deleted_since(
        &self,
        since_ms: i64,
    ) -> impl Future<Output = Result<Vec<(String, i64)>, StoreError>> + Send;

    /// The live sessions of every account whose last exchange was undone at `since_ms` or
    /// later (`deletions.rs`: what this node's engine keeps of each is cut to what remains).
    fn undone_since(
        &self,
        since_ms: i64,
    ) -> impl Future<Output = Result<Vec<Undone>, StoreError>> + Send;

    /// A live session of the account as `list_sessions` gives it; `None` when it is not live.
    fn session_summary(
        &self,
        account_id: i64,
        session_id: String,
    ) -> impl Future<Output = Result<Option<SessionRow>, StoreError>> + Send;

    /// Sets the title of a live session of the account; false when there is none.
    fn set_title(
        &self,
        account_id: i64,
        session_id: String,
        title: String,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Removes the last exchange of a live session of the account (its last user message and
    /// what follows it) unless a turn of it is in flight. The `Idempotency-Key` records of the
    /// sends it undid answer 409 `exchange_undone` from then on
    /// (`convo_core::sessions::records_after_undo`).
    fn undo_last_exchange(
        &self,
        account_id: i64,
        session_id: String,
    ) -> impl Future<Output = Result<Undo, StoreError>> + Send;

    /// Makes a new session of the account holding the source session's messages up to and
    /// including one (`convo_core::sessions::fork_length`); their tokens are not counted again.
    fn fork_session(
        &self,
        fork: ForkRequest,
    ) -> impl Future<Output = Result<Fork, StoreError>> + Send;

    /// The stored messages of a live session of the account; `None` when it is not live.
    fn session_messages(
        &self,
        account_id: i64,
        session_id: String,
    ) -> impl Future<Output = Result<Option<Vec<MessageRow>>, StoreError>> + Send;

    /// Whether the turn of reply `reply_id` of the account's session runs on some replica (a
    /// cancel that reached a replica not following it). SQLite records no turns (a single
    /// service's stream hub knows its own): always false there.
    fn turn_running(
        &self,
        account_id: i64,
        session_id: String,
        reply_id: String,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    fn usage_counts(
        &self,
        account_id: i64,
        period_start_ms: i64,
    ) -> impl Future<Output = Result<UsageCounts, StoreError>> + Send;

    fn metric_counts(
        &self,
        account_id: i64,
        start_ms: i64,
        end_ms: i64,
    ) -> impl Future<Output = Result<MetricCounts, StoreError>> + Send;

    /// One page of every account with its usage, sorted and filtered as `query` asks, read in
    /// one query (the operator's `GET /v1/admin/accounts`, the admin stream, `/metrics`).
    fn admin_accounts(
        &self,
        query: AccountsQuery,
    ) -> impl Future<Output = Result<AccountPage, StoreError>> + Send;

    /// The id this database was given when its schema was made (SQLite's migration 9,
    /// PostgreSQL's 14): `GET /v1/sessions` and the account stream's `hello` say it, so that
    /// a client tells a new database from sessions deleted (`convo_wire::sessions::DatabaseId`).
    fn database_id(&self) -> impl Future<Output = Result<String, StoreError>> + Send;

    /// Readiness: a trivial query answers within `within`; else why not, for the log.
    fn ready(&self, within: std::time::Duration)
    -> impl Future<Output = Result<(), String>> + Send;

    /// Last work before the service stops (SQLite: the final checkpoint).
    fn close(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
}
