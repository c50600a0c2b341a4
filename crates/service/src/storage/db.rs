//! The two implementations of `Storage` (`storage.rs`) behind one handle, `Db`: SQLite (`SqliteStore`, the embedded default: one writer thread committing groups)
//! and PostgreSQL (`PgStore`, shared by replicas). Every operation is one transaction of the
//! database. `Db` dispatches with a `match`, so a call costs no boxing beyond what the chosen
//! store itself does (the SQLite writer's closure, exactly as before the trait).

use std::collections::HashMap;

use super::DbLocation;
use super::SqliteStore;
use super::interface::{Storage, TurnAdmission};
use super::postgres::PgStore;
use super::rows::{
    AccountPage, AccountsQuery, Fork, ForkRequest, MessageRow, MetricCounts, Reply, RequestCount,
    SessionRow, Undo, Undone, UsageCounts,
};
use super::sqlite::{accounts, admin, messages, usage};
use crate::error::StoreError;
use convo_core::Account;
use convo_core::Tier;
use convo_core::{Recorded, SessionStatus, TurnStart};

impl Storage for SqliteStore {
    async fn ensure_keys(
        &self,
        keys: Vec<(String, Tier)>,
        now_ms: i64,
    ) -> Result<HashMap<String, Account>, StoreError> {
        self.call(move |c| accounts::ensure_keys(c, &keys, now_ms))
            .await
    }

    async fn count_request(&self, request: RequestCount) -> Result<Option<()>, StoreError> {
        self.call(move |c| request.run(c, |_| Ok(()))).await
    }

    async fn start_turn(
        &self,
        request: RequestCount,
        turn: TurnStart,
    ) -> Result<TurnAdmission, StoreError> {
        // The request is counted and the turn started in one round trip to the writer thread;
        // the turn's savepoint is the only one (a refused turn still counts as a request).
        self.call(move |c| request.run(c, |c| messages::start_turn(c, &turn)))
            .await
    }

    async fn complete_turn(
        &self,
        account_id: i64,
        session_id: String,
        reply: Reply,
        idempotent: Option<(String, Recorded)>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.call(move |c| {
            messages::complete_turn(
                c,
                account_id,
                &session_id,
                &reply,
                idempotent.as_ref().map(|(k, r)| (k.as_str(), r)),
                now_ms,
            )
        })
        .await
    }

    async fn roll_back_turn(
        &self,
        account_id: i64,
        session_id: String,
        user_message_id: String,
        created_at_ms: i64,
        idempotency_key: Option<String>,
    ) -> Result<(), StoreError> {
        self.call(move |c| {
            messages::roll_back_turn(
                c,
                account_id,
                &session_id,
                &user_message_id,
                created_at_ms,
                idempotency_key.as_deref(),
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        account_id: i64,
        session_id: String,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.call_alone(move |c| messages::delete_session(c, account_id, &session_id, now_ms))
            .await
    }

    async fn session_status(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<SessionStatus, StoreError> {
        self.call(move |c| messages::session_status(c, account_id, &session_id))
            .await
    }

    async fn list_sessions(&self, account_id: i64) -> Result<Vec<SessionRow>, StoreError> {
        self.call(move |c| messages::list_sessions(c, account_id))
            .await
    }

    async fn deleted_sessions(
        &self,
        account_id: i64,
        since_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        self.call(move |c| messages::deleted_sessions(c, account_id, since_ms))
            .await
    }

    async fn deleted_since(&self, since_ms: i64) -> Result<Vec<(String, i64)>, StoreError> {
        self.call(move |c| messages::deleted_since(c, since_ms))
            .await
    }

    async fn undone_since(&self, since_ms: i64) -> Result<Vec<Undone>, StoreError> {
        self.call(move |c| messages::undone_since(c, since_ms))
            .await
    }

    async fn session_summary(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Option<SessionRow>, StoreError> {
        self.call(move |c| messages::session_summary(c, account_id, &session_id))
            .await
    }

    async fn set_title(
        &self,
        account_id: i64,
        session_id: String,
        title: String,
    ) -> Result<bool, StoreError> {
        self.call(move |c| messages::set_title(c, account_id, &session_id, &title))
            .await
    }

    async fn fork_session(&self, fork: ForkRequest) -> Result<Fork, StoreError> {
        self.call(move |c| messages::fork_session(c, &fork)).await
    }

    async fn undo_last_exchange(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Undo, StoreError> {
        self.call_alone(move |c| messages::undo_last_exchange(c, account_id, &session_id))
            .await
    }

    async fn session_messages(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Option<Vec<MessageRow>>, StoreError> {
        self.call(move |c| {
            if messages::session_status(c, account_id, &session_id)? != SessionStatus::Live {
                return Ok(None);
            }
            messages::session_messages(c, &session_id).map(Some)
        })
        .await
    }

    async fn turn_running(
        &self,
        _account_id: i64,
        _session_id: String,
        _reply_id: String,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn usage_counts(
        &self,
        account_id: i64,
        period_start_ms: i64,
    ) -> Result<UsageCounts, StoreError> {
        self.call(move |c| usage::usage_counts(c, account_id, period_start_ms))
            .await
    }

    async fn metric_counts(
        &self,
        account_id: i64,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<MetricCounts, StoreError> {
        self.call(move |c| usage::metric_counts(c, account_id, start_ms, end_ms))
            .await
    }

    async fn admin_accounts(&self, query: AccountsQuery) -> Result<AccountPage, StoreError> {
        self.call(move |c| admin::accounts(c, &query)).await
    }

    async fn database_id(&self) -> Result<String, StoreError> {
        self.call(|c| Ok(c.query_row("SELECT id FROM database_identity", [], |r| r.get(0))?))
            .await
    }

    async fn ready(&self, within: std::time::Duration) -> Result<(), String> {
        SqliteStore::ready(self, within).await
    }

    async fn close(&self) -> Result<(), StoreError> {
        SqliteStore::close(self).await
    }
}

/// The service's database: SQLite or PostgreSQL, chosen by `DbLocation`.
#[derive(Clone)]
pub enum Db {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

impl Db {
    /// Opens (creating if needed) and migrates the database.
    pub async fn open(location: &DbLocation) -> Result<Db, StoreError> {
        match location {
            DbLocation::Postgres(url) => Ok(Db::Postgres(PgStore::open(url).await?)),
            _ => {
                let location = location.clone();
                let store = tokio::task::spawn_blocking(move || SqliteStore::open(&location))
                    .await
                    .map_err(|e| StoreError::Join(e.to_string()))??;
                Ok(Db::Sqlite(store))
            }
        }
    }

    /// Which database this is, for the log: `sqlite` or `postgres`.
    pub fn kind(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }
}

/// `Db`'s methods: the same call on whichever store it holds.
macro_rules! dispatch {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        match $self {
            Db::Sqlite(s) => s.$method($($arg),*).await,
            Db::Postgres(s) => s.$method($($arg),*).await,
        }
    };
}

impl Storage for Db {
    async fn ensure_keys(
        &self,
        keys: Vec<(String, Tier)>,
        now_ms: i64,
    ) -> Result<HashMap<String, Account>, StoreError> {
        dispatch!(self.ensure_keys(keys, now_ms))
    }

    async fn count_request(&self, request: RequestCount) -> Result<Option<()>, StoreError> {
        dispatch!(self.count_request(request))
    }

    async fn start_turn(
        &self,
        request: RequestCount,
        turn: TurnStart,
    ) -> Result<TurnAdmission, StoreError> {
        dispatch!(self.start_turn(request, turn))
    }

    async fn complete_turn(
        &self,
        account_id: i64,
        session_id: String,
        reply: Reply,
        idempotent: Option<(String, Recorded)>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        dispatch!(self.complete_turn(account_id, session_id, reply, idempotent, now_ms))
    }

    async fn roll_back_turn(
        &self,
        account_id: i64,
        session_id: String,
        user_message_id: String,
        created_at_ms: i64,
        idempotency_key: Option<String>,
    ) -> Result<(), StoreError> {
        dispatch!(self.roll_back_turn(
            account_id,
            session_id,
            user_message_id,
            created_at_ms,
            idempotency_key
        ))
    }

    async fn delete_session(
        &self,
        account_id: i64,
        session_id: String,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        dispatch!(self.delete_session(account_id, session_id, now_ms))
    }

    async fn session_status(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<SessionStatus, StoreError> {
        dispatch!(self.session_status(account_id, session_id))
    }

    async fn list_sessions(&self, account_id: i64) -> Result<Vec<SessionRow>, StoreError> {
        dispatch!(self.list_sessions(account_id))
    }

    async fn deleted_sessions(
        &self,
        account_id: i64,
        since_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        dispatch!(self.deleted_sessions(account_id, since_ms))
    }

    async fn deleted_since(&self, since_ms: i64) -> Result<Vec<(String, i64)>, StoreError> {
        dispatch!(self.deleted_since(since_ms))
    }

    async fn undone_since(&self, since_ms: i64) -> Result<Vec<Undone>, StoreError> {
        dispatch!(self.undone_since(since_ms))
    }

    async fn session_summary(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Option<SessionRow>, StoreError> {
        dispatch!(self.session_summary(account_id, session_id))
    }

    async fn set_title(
        &self,
        account_id: i64,
        session_id: String,
        title: String,
    ) -> Result<bool, StoreError> {
        dispatch!(self.set_title(account_id, session_id, title))
    }

    async fn fork_session(&self, fork: ForkRequest) -> Result<Fork, StoreError> {
        dispatch!(self.fork_session(fork))
    }

    async fn undo_last_exchange(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Undo, StoreError> {
        dispatch!(self.undo_last_exchange(account_id, session_id))
    }

    async fn session_messages(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Option<Vec<MessageRow>>, StoreError> {
        dispatch!(self.session_messages(account_id, session_id))
    }

    async fn turn_running(
        &self,
        account_id: i64,
        session_id: String,
        reply_id: String,
    ) -> Result<bool, StoreError> {
        dispatch!(self.turn_running(account_id, session_id, reply_id))
    }

    async fn usage_counts(
        &self,
        account_id: i64,
        period_start_ms: i64,
    ) -> Result<UsageCounts, StoreError> {
        dispatch!(self.usage_counts(account_id, period_start_ms))
    }

    async fn metric_counts(
        &self,
        account_id: i64,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<MetricCounts, StoreError> {
        dispatch!(self.metric_counts(account_id, start_ms, end_ms))
    }

    async fn admin_accounts(&self, query: AccountsQuery) -> Result<AccountPage, StoreError> {
        dispatch!(self.admin_accounts(query))
    }

    async fn database_id(&self) -> Result<String, StoreError> {
        dispatch!(self.database_id())
    }

    async fn ready(&self, within: std::time::Duration) -> Result<(), String> {
        dispatch!(self.ready(within))
    }

    async fn close(&self) -> Result<(), StoreError> {
        dispatch!(self.close())
    }
}
