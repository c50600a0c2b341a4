//! The client's local store: one SQLite file (`convo.db` in the data dir) holding the
//! sessions this client knows, their transcripts and unsent drafts, each session filed under
//! its *target* (the server and account it lives on, [`crate::target::TargetId`]). It is a
//! cache per target: a handle ([`Store::for_target`]) lists, finds and searches only its
//! target's sessions. Against a server that lists sessions (`GET /v1/sessions`) what the
//! server says is merged in ([`Store::merge_service`], `targets.rs`); against one with the
//! seed's interface only, the store is the client's history of record.
//!
//! The API is blocking; async callers use `tokio::task::spawn_blocking`. `Store` is cheap to
//! clone (one shared connection behind a mutex). Every write is one transaction; the schema
//! is versioned with `PRAGMA user_version`.
//!
//! ```no_run
//! use convo_client::store::{Store, StoredMessage};
//! use convo_client::api::Role;
//! let store = Store::open(std::path::Path::new("/tmp/convo.db")).unwrap();
//! store
//!     .append_message("session_abcdefgh12345678", &StoredMessage::user(Role::User, "hi"))
//!     .unwrap();
//! for s in store.list_sessions().unwrap() {
//!     println!("{} {}", s.id, s.title.unwrap_or_default());
//! }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::api::{FinishReason, Message, Role};

mod catch_up;
mod forks;
mod metric_buckets;
mod search;
mod targets;
pub use catch_up::missing_from;
pub use search::{SearchHit, SnippetPart, fts_query};
pub use targets::{Archived, Aside, Merged, ServiceSessions};

use crate::target::TargetId;

pub use convo_wire::title::{TITLE_CHARS, plain_title, user_title};

/// Schema migrations, applied in order; `user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, transcripts, drafts, small key-value state.
    "CREATE TABLE sessions (
         id            TEXT PRIMARY KEY,
         title         TEXT,
         created_at    TEXT NOT NULL,
         last_activity TEXT NOT NULL,
         tokens        INTEGER NOT NULL DEFAULT 0,
         deleted       INTEGER NOT NULL DEFAULT 0
     );
     CREATE INDEX sessions_by_activity ON sessions (deleted, last_activity);
     CREATE TABLE messages (
         id          INTEGER PRIMARY KEY AUTOINCREMENT,
         session_id  TEXT NOT NULL REFERENCES sessions (id),
         role        TEXT NOT NULL,
         content     TEXT NOT NULL,
         tokens      INTEGER NOT NULL,
         created_at  TEXT NOT NULL,
         message_id  TEXT,
         status      TEXT NOT NULL
     );
     CREATE INDEX messages_by_session ON messages (session_id, id);
     CREATE TABLE drafts (
         session_id TEXT PRIMARY KEY,
         text       TEXT NOT NULL,
         updated_at TEXT NOT NULL
     );
     CREATE TABLE state (
         key   TEXT PRIMARY KEY,
         value TEXT NOT NULL
     );",
    // 2: complete metrics buckets per account (`store/metric_buckets.rs`).
    "CREATE TABLE metric_buckets (
         account     TEXT NOT NULL,
         granularity TEXT NOT NULL,
         start       TEXT NOT NULL,
         end_at      TEXT NOT NULL,
         metrics     TEXT NOT NULL,
         PRIMARY KEY (account, granularity, start)
     ) WITHOUT ROWID;",
    // 3: a title the user gave (`/title`, `convo title`): later messages never replace it.
    "ALTER TABLE sessions ADD COLUMN title_set INTEGER NOT NULL DEFAULT 0;",
    // 4: full-text search over the messages (`search.rs`): an FTS5 index whose text is read
    // from `messages` (external content), kept by triggers, filled from what is stored.
    // `secure-delete` removes a deleted message's words from the index itself.
    "CREATE VIRTUAL TABLE messages_fts USING fts5 (
         content,
         content = 'messages',
         content_rowid = 'id',
         tokenize = 'unicode61 remove_diacritics 2'
     );
     INSERT INTO messages_fts (messages_fts, rank) VALUES ('secure-delete', 1);
     CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
         INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
     END;
     CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
         INSERT INTO messages_fts (messages_fts, rowid, content)
             VALUES ('delete', old.id, old.content);
     END;
     CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
         INSERT INTO messages_fts (messages_fts, rowid, content)
             VALUES ('delete', old.id, old.content);
         INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
     END;
     INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');",
    // 5: every session belongs to a target (`crate::target`): the server and account it lives
    // on. Rows from before belong to the embedded service's target, as a guess
    // (`target_guessed`): the first target whose service lists the id takes it
    // (`targets.rs`). `title_pending`: a title the user gave that the service has not
    // confirmed yet (sent with `PATCH /v1/sessions/{id}` where the service has titles).
    // `targets` holds the label lists show for each target id.
    "ALTER TABLE sessions ADD COLUMN target TEXT NOT NULL DEFAULT 'embedded';
     ALTER TABLE sessions ADD COLUMN target_guessed INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE sessions ADD COLUMN title_pending INTEGER NOT NULL DEFAULT 0;
     UPDATE sessions SET target_guessed = 1, title_pending = title_set;
     CREATE INDEX sessions_by_target ON sessions (target, deleted, last_activity);
     CREATE TABLE targets (
         id    TEXT PRIMARY KEY,
         label TEXT NOT NULL
     );
     INSERT INTO targets (id, label) VALUES ('embedded', 'embedded');",
    // 6: where a fork came from (`local_store/forks.rs`): the source session and the source's
    // message it was forked at; NULL for a session that is not a fork.
    "ALTER TABLE sessions ADD COLUMN forked_from TEXT;
     ALTER TABLE sessions ADD COLUMN forked_at_message TEXT;",
    // 7: how a reply ended, as the service said (`finishReason`: `stop`, `length`,
    // `stopped`); NULL for other messages and when the service did not say.
    "ALTER TABLE messages ADD COLUMN finish_reason TEXT;",
    // 8: the id of the database each target's service last said it has (`targets.rs`): a
    // new one means that service started over, and the sessions kept from before are moved
    // to a target of their own instead of being taken as deleted. NULL until a service says.
    "ALTER TABLE targets ADD COLUMN database_id TEXT;",
];

/// The columns [`SessionRow::read`] reads, in its order.
const SESSION_COLUMNS: &str =
    "id, title, created_at, last_activity, tokens, deleted, title_set, target, forked_from";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("local store {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("cannot create the data directory {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "local store {} has schema version {found}, newer than this convo knows ({known}); upgrade convo",
        path.display()
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    /// The file is not a database SQLite can read (another file in its place, a damaged
    /// one): what to do about it is part of the message.
    #[error(
        "local store {}: {source}: move it aside (`mv \"{0}\" \"{0}.broken\"`) and convo starts a new one; the server's sessions come back from the server, and what only this device had stays in the moved file",
        path.display()
    )]
    Unreadable {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("local store {}: bad value in column {column}: {value}", path.display())]
    Corrupt {
        path: PathBuf,
        column: &'static str,
        value: String,
    },
}

/// A store that cannot be opened because its file is not a readable database says how to
/// start again without losing it.
fn unreadable(e: StoreError) -> StoreError {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    match e {
        StoreError::Sqlite { path, source }
            if matches!(
                source.sqlite_error_code(),
                Some(NotADatabase | DatabaseCorrupt)
            ) =>
        {
            StoreError::Unreadable { path, source }
        }
        other => other,
    }
}

/// How a stored message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageStatus {
    Complete,
    /// A streamed reply cut short (the user stopped it, or the connection dropped).
    Interrupted,
    /// A message that was not delivered, or a reply that failed.
    Failed,
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Complete => "complete",
            MessageStatus::Interrupted => "interrupted",
            MessageStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "complete" => Some(MessageStatus::Complete),
            "interrupted" => Some(MessageStatus::Interrupted),
            "failed" => Some(MessageStatus::Failed),
            _ => None,
        }
    }
}

/// A session this client knows.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: String,
    /// The title the user gave, else the first line of the first user message (of the first
    /// system message while there is none), at most [`TITLE_CHARS`] characters.
    pub title: Option<String>,
    /// The title is the user's (`/title`, `convo title`), not taken from a message.
    pub title_set: bool,
    pub created_at: DateTime<Utc>,
    pub last_activity: DateTime<Utc>,
    /// Sum of the tokens of the session's stored messages.
    pub tokens: u64,
    pub deleted: bool,
    /// The id of the target the session belongs to ([`TargetId::id`]).
    pub target: String,
    /// The session it was forked from, if it is a fork (`local_store/forks.rs`).
    pub forked_from: Option<String>,
}

impl SessionRecord {
    /// Whether nothing was sent to the session yet ([`nothing_sent`]).
    pub fn is_unsent(&self) -> bool {
        nothing_sent(
            self.title.as_deref(),
            self.tokens,
            self.forked_from.as_deref(),
        )
    }
}

/// Whether a session with this title (`None`: none yet), token total and fork source is one
/// nothing was sent to yet: the TUI's new session, kept here for its draft, which no server
/// has. A message sent gives it tokens (and a title); a fork starts with its source's
/// history. The one rule for the one-shot commands (`SessionRecord::is_unsent`) and the TUI's
/// sessions pane.
pub fn nothing_sent(title: Option<&str>, tokens: u64, forked_from: Option<&str>) -> bool {
    title.is_none() && tokens == 0 && forked_from.is_none()
}

/// One message of a transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub role: Role,
    pub content: String,
    pub tokens: u64,
    pub created_at: DateTime<Utc>,
    /// The server's id, for replies.
    pub message_id: Option<String>,
    pub status: MessageStatus,
    /// How a reply ended, as the service said (`finishReason`); `None` for other messages
    /// and when the service did not say.
    pub finish_reason: Option<FinishReason>,
}

impl StoredMessage {
    /// A message written by the user (role `user` or `system`), now, complete, with its
    /// tokens estimated locally (see [`estimate_tokens`]).
    pub fn user(role: Role, content: &str) -> Self {
        StoredMessage {
            role,
            content: content.to_string(),
            tokens: estimate_tokens(content),
            created_at: Utc::now(),
            message_id: None,
            status: MessageStatus::Complete,
            finish_reason: None,
        }
    }

    /// A reply as the server returned it.
    pub fn from_reply(message: &Message) -> Self {
        StoredMessage {
            role: message.role,
            content: message.content.clone(),
            tokens: message.tokens,
            created_at: parse_time(&message.created_at).unwrap_or_else(Utc::now),
            message_id: Some(message.message_id.clone()),
            status: MessageStatus::Complete,
            finish_reason: message.finish_reason,
        }
    }

    pub fn with_status(mut self, status: MessageStatus) -> Self {
        self.status = status;
        self
    }
}

/// A finish reason as the store writes it ([`FinishReason::as_str`]).
fn parse_finish(s: &str) -> Option<FinishReason> {
    [
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::Stopped,
    ]
    .into_iter()
    .find(|r| r.as_str() == s)
}

/// The o200k token count of `text` (what the local service counts); the interface does not
/// return the tokens of a sent message, so the client counts them itself.
///
/// The same count as the service's: special-token text counts as ordinary text.
pub fn estimate_tokens(text: &str) -> u64 {
    convo_tokens::count(text)
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn fmt_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A session's title from its first message, at most [`TITLE_CHARS`] characters
/// ([`plain_title`]).
pub fn title_of(content: &str) -> Option<String> {
    plain_title(content, TITLE_CHARS)
}

/// What a session id (or the start of one, or a title) names in the store
/// ([`Store::find_session`]).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionLookup {
    Found(SessionRecord),
    /// The store knows the session as deleted: its messages are gone.
    Deleted(String),
    /// Several sessions match: their ids, most recent first.
    Ambiguous(Vec<String>),
    /// The store knows the id, on another target (its label): not this one's to use.
    Elsewhere {
        id: String,
        target: String,
        /// The other target is where this one's sessions are kept aside (`targets.rs`: those
        /// of its service's earlier database, or missing from its list): the service may
        /// have a session of that id now, which takes it.
        kept_aside: bool,
    },
    NotFound,
}

/// Handle to the local store. Cheap to clone; `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    path: Arc<PathBuf>,
    /// The target this handle lists, finds and files new sessions under.
    target: Arc<TargetId>,
}

impl Store {
    /// Open (creating if needed) the store at `path` and bring its schema up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let existed = path.exists();
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
        if !existed {
            // Transcripts are private; SQLite gives the -wal and -shm files the same mode.
            restrict_to_owner(path);
        }
        let store = Store {
            conn: Arc::new(Mutex::new(conn)),
            path: Arc::new(path.to_path_buf()),
            target: Arc::new(TargetId::embedded()),
        };
        store.init().map_err(unreadable)?;
        Ok(store)
    }

    /// A store in memory, for tests.
    pub fn in_memory() -> Result<Store, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Sqlite {
            path: path.clone(),
            source,
        })?;
        let store = Store {
            conn: Arc::new(Mutex::new(conn)),
            path: Arc::new(path),
            target: Arc::new(TargetId::embedded()),
        };
        store.init()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle on the same store for `target`'s sessions (a handle opened with
    /// [`Store::open`] is the embedded service's), its label kept for lists of every target.
    pub fn for_target(&self, target: &TargetId) -> Result<Store, StoreError> {
        self.lock()
            .execute(
                "INSERT INTO targets (id, label) VALUES (?1, ?2)
                 ON CONFLICT (id) DO UPDATE SET label = ?2",
                params![target.id(), target.label()],
            )
            .map_err(|e| self.err(e))?;
        Ok(Store {
            conn: self.conn.clone(),
            path: self.path.clone(),
            target: Arc::new(target.clone()),
        })
    }

    /// The target this handle is for.
    pub fn target(&self) -> &TargetId {
        &self.target
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (transactions roll back).
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.to_path_buf(),
            source,
        }
    }

    fn init(&self) -> Result<(), StoreError> {
        let mut conn = self.lock();
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| self.err(e))?;
        // WAL for concurrent readers (TUI and one-shot commands); secure_delete so that
        // deleted transcripts do not linger in the file's bytes.
        // Switching a new file to WAL takes its write lock, and SQLite answers "busy" at once
        // (no busy handler) when another connection holds a read lock meanwhile: retry.
        let started = std::time::Instant::now();
        loop {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())) {
                Ok(()) => break,
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && started.elapsed() < std::time::Duration::from_secs(5) =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA secure_delete = ON;")
            .map_err(|e| self.err(e))?;
        // The version is read and the migrations run under one write lock: two processes
        // opening a new store at once (the TUI and a one-shot command) must not both see
        // version 0 and both create the tables.
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let known = MIGRATIONS.len() as i64;
        if version > known {
            return Err(StoreError::TooNew {
                path: self.path.to_path_buf(),
                found: version,
                known,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(|e| self.err(e))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Record that the session exists, with activity at `at` (creating it if new, on this
    /// handle's target).
    pub fn upsert_session(&self, session_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        upsert(&tx, self.target.id(), session_id, &at).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// This target's sessions not deleted, most recent activity first.
    pub fn list_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE target = ?1 AND deleted = 0
                 ORDER BY last_activity DESC, id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![self.target.id()], SessionRow::read)
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(self.record(row.map_err(|e| self.err(e))?)?);
        }
        Ok(out)
    }

    /// The sessions of every target not deleted, most recent activity first, each with its
    /// target's label (`convo sessions --all-targets`).
    pub fn list_all_sessions(&self) -> Result<Vec<(SessionRecord, String)>, StoreError> {
        let conn = self.lock();
        let columns: Vec<String> = SESSION_COLUMNS
            .split(", ")
            .map(|c| format!("s.{c}"))
            .collect();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {}, coalesce(t.label, s.target) FROM sessions s
                 LEFT JOIN targets t ON t.id = s.target
                 WHERE s.deleted = 0 ORDER BY s.last_activity DESC, s.id",
                columns.join(", ")
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                // The label comes after the session's columns.
                let label = r.get::<_, String>(columns.len())?;
                Ok((SessionRow::read(r)?, label))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (row, label) = row.map_err(|e| self.err(e))?;
            out.push((self.record(row)?, label));
        }
        Ok(out)
    }

    /// The label of a target id, as lists show it.
    pub fn target_label(&self, target_id: &str) -> Result<String, StoreError> {
        self.lock()
            .query_row(
                "SELECT label FROM targets WHERE id = ?1",
                params![target_id],
                |r| r.get(0),
            )
            .optional()
            .map(|l| l.unwrap_or_else(|| target_id.to_string()))
            .map_err(|e| self.err(e))
    }

    fn record(&self, row: SessionRow) -> Result<SessionRecord, StoreError> {
        Ok(SessionRecord {
            id: row.id,
            // A user's title was cleaned when it was set; titles taken from messages and
            // stored before they were made plain text are cleaned on the way out.
            title: if row.title_set {
                row.title
            } else {
                row.title.and_then(|t| title_of(&t))
            },
            title_set: row.title_set,
            created_at: self.time("created_at", &row.created)?,
            last_activity: self.time("last_activity", &row.last)?,
            tokens: row.tokens.max(0) as u64,
            deleted: row.deleted,
            target: row.target,
            forked_from: row.forked_from,
        })
    }

    /// Give the session the user's title (`Some`), kept whatever messages come later, or
    /// take it away (`None`): the title is then the first message's again. Returns the
    /// session as it is now; `None` when the store does not know the session or it was
    /// deleted.
    pub fn set_title(
        &self,
        session_id: &str,
        title: Option<&str>,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let title = title.and_then(user_title);
        {
            let conn = self.lock();
            let changed = match &title {
                Some(t) => conn.execute(
                    "UPDATE sessions SET title = ?2, title_set = 1, title_pending = 1
                     WHERE id = ?1 AND deleted = 0",
                    params![session_id, t],
                ),
                None => conn.execute(
                    "UPDATE sessions SET title_set = 0, title_pending = 0, title = coalesce(
                         (SELECT content FROM messages WHERE session_id = ?1 AND role = 'user'
                          ORDER BY id LIMIT 1),
                         (SELECT content FROM messages WHERE session_id = ?1 AND role = 'system'
                          ORDER BY id LIMIT 1))
                     WHERE id = ?1 AND deleted = 0",
                    params![session_id],
                ),
            }
            .map_err(|e| self.err(e))?;
            if changed == 0 {
                return Ok(None);
            }
        }
        self.session(session_id)
    }

    /// One session, deleted or not.
    pub fn session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let conn = self.lock();
        let row = conn
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"),
                params![session_id],
                SessionRow::read,
            )
            .optional()
            .map_err(|e| self.err(e))?;
        drop(conn);
        row.map(|row| self.record(row)).transpose()
    }

    /// The session of this target `query` names: the one with that id; else the one whose
    /// id starts with it (with or without `session_`); else the one with that title, ignoring
    /// case. Deleted sessions are found only by their whole id, and so are those of another
    /// target ([`SessionLookup::Elsewhere`]; its deleted ones are not found at all).
    pub fn find_session(&self, query: &str) -> Result<SessionLookup, StoreError> {
        if let Some(session) = self.session(query)? {
            // Another target's deleted session is only a tombstone: it names nothing here.
            if session.target != self.target.id() && session.deleted {
                return Ok(SessionLookup::NotFound);
            }
            if session.target != self.target.id() {
                let target = self.target_label(&session.target)?;
                let kept_aside = targets::is_aside(self.target.id(), &session.target);
                return Ok(SessionLookup::Elsewhere {
                    id: session.id,
                    target,
                    kept_aside,
                });
            }
            return Ok(if session.deleted {
                SessionLookup::Deleted(session.id)
            } else {
                SessionLookup::Found(session)
            });
        }
        let query = query.trim();
        if query.is_empty() {
            return Ok(SessionLookup::NotFound);
        }
        let sessions = self.list_sessions()?;
        let starts = |s: &&SessionRecord| {
            s.id.starts_with(query)
                || (s.id.strip_prefix("session_")).is_some_and(|rest| rest.starts_with(query))
        };
        let mut matches: Vec<&SessionRecord> = sessions.iter().filter(starts).collect();
        if matches.is_empty() {
            let wanted = query.to_lowercase();
            matches = (sessions.iter())
                .filter(|s| s.title.as_deref().map(str::to_lowercase).as_ref() == Some(&wanted))
                .collect();
        }
        Ok(match matches.as_slice() {
            [] => SessionLookup::NotFound,
            [one] => SessionLookup::Found((*one).clone()),
            many => SessionLookup::Ambiguous(many.iter().map(|s| s.id.clone()).collect()),
        })
    }

    /// Mark the session deleted and remove its transcript and draft, as the service
    /// removes them: a deleted session leaves no content behind.
    pub fn mark_deleted(&self, session_id: &str) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        delete_in(&tx, self.target.id(), session_id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        checkpoint_after_delete(&conn);
        Ok(())
    }

    /// Append a message to the session's transcript (creating the session if new), update
    /// its activity, token total and its title (the first user message's; until there is
    /// one, the first system message's). Returns the
    /// message's row id (for [`Store::update_message`]). A message already stored in the
    /// session (`stored_copy`) is not stored twice: one with a service id replaces that row in
    /// place (a reply cut short, then fetched whole from the service), one without leaves it.
    pub fn append_message(
        &self,
        session_id: &str,
        message: &StoredMessage,
    ) -> Result<i64, StoreError> {
        if let Some(row) = self.stored_copy(session_id, message)? {
            if message.message_id.is_some() {
                self.update_message(row, message)?;
            }
            return Ok(row);
        }
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        upsert(&tx, self.target.id(), session_id, &message.created_at).map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO messages (session_id, role, content, tokens, created_at, message_id, status,
                 finish_reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                session_id,
                message.role.as_str(),
                message.content,
                message.tokens as i64,
                fmt_time(&message.created_at),
                message.message_id,
                message.status.as_str(),
                message.finish_reason.map(FinishReason::as_str),
            ],
        )
        .map_err(|e| self.err(e))?;
        let row = tx.last_insert_rowid();
        // The first user message titles the session; until there is one, the first system
        // message does. A title the user gave stays.
        if message.role == Role::User {
            tx.execute(
                "UPDATE sessions SET title = ?2 WHERE id = ?1 AND title_set = 0 AND (title IS NULL
                     OR NOT EXISTS (SELECT 1 FROM messages
                                    WHERE session_id = ?1 AND role = 'user' AND id <> ?3))",
                params![session_id, title_of(&message.content), row],
            )
            .map_err(|e| self.err(e))?;
        } else if message.role == Role::System {
            tx.execute(
                "UPDATE sessions SET title = ?2 WHERE id = ?1 AND title IS NULL AND title_set = 0",
                params![session_id, title_of(&message.content)],
            )
            .map_err(|e| self.err(e))?;
        }
        refresh_tokens(&tx, session_id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(row)
    }

    /// The row of the session that holds `message` already: the one with its service id; or,
    /// when only one of the two has the service id, one with the same role, text and time. Two
    /// writers of this store (`convo send` beside the TUI, in one session) store one exchange
    /// each, one of them knowing the user message's service id (read from the history) and
    /// the other not.
    fn stored_copy(
        &self,
        session_id: &str,
        message: &StoredMessage,
    ) -> Result<Option<i64>, StoreError> {
        let (role, at) = (message.role.as_str(), fmt_time(&message.created_at));
        let conn = self.lock();
        let found = match &message.message_id {
            Some(id) => conn.query_row(
                "SELECT id FROM messages WHERE session_id = ?1 AND (message_id = ?2
                     OR (message_id IS NULL AND role = ?3 AND content = ?4 AND created_at = ?5))
                 ORDER BY message_id IS NULL, id LIMIT 1",
                params![session_id, id, role, message.content, at],
                |r| r.get(0),
            ),
            None => conn.query_row(
                "SELECT id FROM messages WHERE session_id = ?1 AND message_id IS NOT NULL
                     AND role = ?2 AND content = ?3 AND created_at = ?4
                 ORDER BY id LIMIT 1",
                params![session_id, role, message.content, at],
                |r| r.get(0),
            ),
        };
        found.optional().map_err(|e| self.err(e))
    }

    /// Mark the latest stored copy of `message` (same role, text and time) as failed: it
    /// was stored as sent, and the service turned out not to keep it.
    pub fn mark_failed(&self, session_id: &str, message: &StoredMessage) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        tx.execute(
            "UPDATE messages SET status = 'failed' WHERE id = (SELECT id FROM messages
                 WHERE session_id = ?1 AND role = ?2 AND content = ?3 AND created_at = ?4
                 ORDER BY id DESC LIMIT 1)",
            params![
                session_id,
                message.role.as_str(),
                message.content,
                fmt_time(&message.created_at),
            ],
        )
        .map_err(|e| self.err(e))?;
        // A failed message is not the service's: the session's tokens no longer count it.
        refresh_tokens(&tx, session_id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// Replace a stored message (e.g. a streamed reply when it completes or is cut short).
    pub fn update_message(&self, row_id: i64, message: &StoredMessage) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        let session: Option<String> = tx
            .query_row(
                "SELECT session_id FROM messages WHERE id = ?1",
                params![row_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(session_id) = session else {
            return Err(self.err(rusqlite::Error::QueryReturnedNoRows));
        };
        tx.execute(
            "UPDATE messages SET role = ?2, content = ?3, tokens = ?4, created_at = ?5,
                 message_id = ?6, status = ?7, finish_reason = ?8 WHERE id = ?1",
            params![
                row_id,
                message.role.as_str(),
                message.content,
                message.tokens as i64,
                fmt_time(&message.created_at),
                message.message_id,
                message.status.as_str(),
                message.finish_reason.map(FinishReason::as_str),
            ],
        )
        .map_err(|e| self.err(e))?;
        // The row's own session, wherever it is filed (even kept aside).
        upsert_row(&tx, self.target.id(), &session_id, &message.created_at)
            .map_err(|e| self.err(e))?;
        refresh_tokens(&tx, &session_id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// The session's messages, oldest first.
    pub fn transcript(&self, session_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT role, content, tokens, created_at, message_id, status, finish_reason
                 FROM messages WHERE session_id = ?1 ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![session_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (role, content, tokens, created, message_id, status, finish) =
                row.map_err(|e| self.err(e))?;
            let finish_reason = match finish {
                Some(f) => Some(parse_finish(&f).ok_or_else(|| self.corrupt("finish_reason", &f))?),
                None => None,
            };
            out.push(StoredMessage {
                role: role.parse().map_err(|_| self.corrupt("role", &role))?,
                content,
                tokens: tokens.max(0) as u64,
                created_at: self.time("created_at", &created)?,
                message_id,
                status: MessageStatus::parse(&status)
                    .ok_or_else(|| self.corrupt("status", &status))?,
                finish_reason,
            });
        }
        Ok(out)
    }

    /// Save the unsent text of a session's composer; an empty text clears it.
    pub fn save_draft(&self, session_id: &str, text: &str) -> Result<(), StoreError> {
        let conn = self.lock();
        if text.is_empty() {
            conn.execute(
                "DELETE FROM drafts WHERE session_id = ?1",
                params![session_id],
            )
        } else {
            conn.execute(
                "INSERT INTO drafts (session_id, text, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id) DO UPDATE SET text = ?2, updated_at = ?3",
                params![session_id, text, fmt_time(&Utc::now())],
            )
        }
        .map(|_| ())
        .map_err(|e| self.err(e))
    }

    pub fn draft(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT text FROM drafts WHERE session_id = ?1",
            params![session_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| self.err(e))
    }

    /// The session of this target that was open when the TUI last quit on it, unless it was
    /// deleted since. (A store from before targets kept one for all: it counts for the target
    /// its session belongs to.)
    pub fn last_open_session(&self) -> Result<Option<String>, StoreError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT s.value FROM state s JOIN sessions ON sessions.id = s.value
             WHERE s.key IN (?1, 'last_open_session') AND sessions.deleted = 0
                 AND sessions.target = ?2
             ORDER BY s.key = 'last_open_session' LIMIT 1",
            params![last_open_key(self.target.id()), self.target.id()],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| self.err(e))
    }

    /// Remember `session_id` as this target's open session.
    pub fn set_last_open_session(&self, session_id: &str) -> Result<(), StoreError> {
        let conn = self.lock();
        conn.execute(
            "INSERT INTO state (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = ?2",
            params![last_open_key(self.target.id()), session_id],
        )
        .map(|_| ())
        .map_err(|e| self.err(e))
    }

    fn time(&self, column: &'static str, value: &str) -> Result<DateTime<Utc>, StoreError> {
        parse_time(value).ok_or_else(|| self.corrupt(column, value))
    }

    fn corrupt(&self, column: &'static str, value: &str) -> StoreError {
        StoreError::Corrupt {
            path: self.path.to_path_buf(),
            column,
            value: value.chars().take(40).collect(),
        }
    }
}

/// A row of `sessions`, as read.
struct SessionRow {
    id: String,
    title: Option<String>,
    created: String,
    last: String,
    tokens: i64,
    deleted: bool,
    title_set: bool,
    target: String,
    forked_from: Option<String>,
}

impl SessionRow {
    /// Reads [`SESSION_COLUMNS`].
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
        Ok(SessionRow {
            id: r.get(0)?,
            title: r.get(1)?,
            created: r.get(2)?,
            last: r.get(3)?,
            tokens: r.get(4)?,
            deleted: r.get(5)?,
            title_set: r.get(6)?,
            target: r.get(7)?,
            forked_from: r.get(8)?,
        })
    }
}

#[cfg(unix)]
fn restrict_to_owner(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        tracing::warn!(path = %path.display(), error = %e, "cannot make the local store private");
    }
}

#[cfg(not(unix))]
fn restrict_to_owner(_path: &Path) {}

/// The `state` key of a target's last open session.
fn last_open_key(target: &str) -> String {
    format!("last_open_session:{target}")
}

/// Creates the session on `target` if new; a known one keeps its target, but a copy of
/// `target`'s kept aside gives the id up (`targets::free_id`).
fn upsert(
    conn: &Connection,
    target: &str,
    session_id: &str,
    at: &DateTime<Utc>,
) -> rusqlite::Result<()> {
    targets::free_id(conn, target, session_id)?;
    upsert_row(conn, target, session_id, at)
}

/// Creates the session on `target` if new; a known one keeps its target and its id.
fn upsert_row(
    conn: &Connection,
    target: &str,
    session_id: &str,
    at: &DateTime<Utc>,
) -> rusqlite::Result<()> {
    let at = fmt_time(at);
    // Timestamps are fixed-width UTC RFC 3339, so text order is time order.
    conn.execute(
        "INSERT INTO sessions (id, target, created_at, last_activity) VALUES (?1, ?3, ?2, ?2)
         ON CONFLICT (id) DO UPDATE SET
             last_activity = max(last_activity, ?2),
             created_at = min(created_at, ?2)",
        params![session_id, at, target],
    )
    .map(|_| ())
}

/// Marks the session deleted (creating the row on `target` if new) and removes its
/// transcript, draft and any target's memory of it as the last open session. A session of
/// `target`'s kept aside is not the one its service deleted (or never had): it stays as it is.
fn delete_in(conn: &Connection, target: &str, session_id: &str) -> rusqlite::Result<()> {
    if targets::aside_target(conn, target, session_id)?.is_some() {
        return Ok(());
    }
    let now = fmt_time(&Utc::now());
    conn.execute(
        "INSERT INTO sessions (id, target, created_at, last_activity, deleted)
         VALUES (?1, ?3, ?2, ?2, 1)
         ON CONFLICT (id) DO UPDATE SET deleted = 1, title = NULL, title_set = 0, tokens = 0,
             title_pending = 0",
        params![session_id, now, target],
    )?;
    erase_content(conn, session_id)
}

/// What a deleted session leaves behind goes: its messages, its draft, and its place as a
/// target's last open session.
fn erase_content(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM messages WHERE session_id = ?1",
        params![session_id],
    )?;
    conn.execute(
        "DELETE FROM drafts WHERE session_id = ?1",
        params![session_id],
    )?;
    conn.execute(
        "DELETE FROM state WHERE (key = 'last_open_session' OR key LIKE 'last_open_session:%')
             AND value = ?1",
        params![session_id],
    )?;
    Ok(())
}

/// Older copies of the pages live on in the WAL until a checkpoint; truncate it so that the
/// deleted text is gone from the files' bytes (secure_delete zeroed it in the pages
/// themselves). Busy readers only delay this; it is not an error.
fn checkpoint_after_delete(conn: &Connection) {
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        tracing::debug!(error = %e, "checkpoint after delete deferred");
    }
}

fn refresh_tokens(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE sessions SET tokens =
             (SELECT coalesce(sum(tokens), 0) FROM messages
              WHERE session_id = ?1 AND status != 'failed')
         WHERE id = ?1",
        params![session_id],
    )
    .map(|_| ())
}

/// A transaction that writes. It takes the write lock as it begins (`BEGIN IMMEDIATE`): while
/// another process writes to the store (the TUI and a one-shot command beside it), it waits
/// for the busy timeout like any other statement. A deferred transaction that read first
/// could not: its snapshot is stale once the other commits, and SQLite then answers "database
/// is locked" at once, without waiting.
pub(crate) fn write_tx(conn: &mut Connection) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_new_store_opened_by_several_processes_at_once_is_migrated_once() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("convo.db");
            let barrier = std::sync::Barrier::new(6);
            std::thread::scope(|s| {
                let opened: Vec<_> = (0..6)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            Store::open(&path).map(|_| ())
                        })
                    })
                    .collect();
                for o in opened {
                    let result = o.join().unwrap();
                    assert!(result.is_ok(), "{result:?}");
                }
            });
            let store = Store::open(&path).unwrap();
            store
                .upsert_session("session_0123456789abcdef", Utc::now())
                .unwrap();
            assert_eq!(store.list_sessions().unwrap().len(), 1);
        }
    }

    #[test]
    fn estimates_tokens_as_the_service_counts_them() {
        for text in [
            "",
            "hello world",
            "How do lifetimes work in Rust?\n\n```rust\nfn f() {}\n```",
        ] {
            assert_eq!(estimate_tokens(text), convo_tokens::count(text), "{text:?}");
        }
        assert!(estimate_tokens("hello world") > 0);
    }

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    fn msg(role: Role, content: &str, tokens: u64, t: i64) -> StoredMessage {
        StoredMessage {
            role,
            content: content.into(),
            tokens,
            created_at: at(t),
            message_id: None,
            status: MessageStatus::Complete,
            finish_reason: None,
        }
    }

    #[test]
    fn sessions_are_listed_by_recent_activity_with_titles_and_tokens() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::System, "be brief", 2, 0))
            .unwrap();
        s.append_message(
            "session_a",
            &msg(Role::User, "  \n first line \nsecond", 5, 1),
        )
        .unwrap();
        s.append_message("session_a", &msg(Role::Assistant, "reply", 7, 2))
            .unwrap();
        s.append_message("session_b", &msg(Role::User, &"x".repeat(100), 1, 10))
            .unwrap();
        let list = s.list_sessions().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].id, "session_b");
        assert_eq!(list[0].title.as_ref().unwrap().chars().count(), TITLE_CHARS);
        assert_eq!(list[1].title.as_deref(), Some("first line"));
        assert_eq!(list[1].tokens, 14);
        assert_eq!(list[1].created_at, at(0));
        assert_eq!(list[1].last_activity, at(2));
        let t = s.transcript("session_a").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[2], msg(Role::Assistant, "reply", 7, 2));
    }

    #[test]
    fn a_session_of_system_messages_is_titled_until_a_user_message_comes() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::System, "You are a pirate.", 5, 0))
            .unwrap();
        s.append_message("session_a", &msg(Role::System, "Speak briefly.", 3, 1))
            .unwrap();
        let title = |s: &Store| s.list_sessions().unwrap()[0].title.clone();
        assert_eq!(title(&s).as_deref(), Some("You are a pirate."));
        s.append_message("session_a", &msg(Role::User, "Where is the gold?", 5, 2))
            .unwrap();
        assert_eq!(title(&s).as_deref(), Some("Where is the gold?"));
        s.append_message("session_a", &msg(Role::User, "And the map?", 4, 3))
            .unwrap();
        assert_eq!(title(&s).as_deref(), Some("Where is the gold?"));
    }

    #[test]
    fn deleting_removes_content_and_hides_the_session() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::User, "secret", 1, 0))
            .unwrap();
        s.save_draft("session_a", "draft").unwrap();
        s.set_last_open_session("session_a").unwrap();
        s.mark_deleted("session_a").unwrap();
        assert!(s.list_sessions().unwrap().is_empty());
        assert!(s.transcript("session_a").unwrap().is_empty());
        assert_eq!(s.draft("session_a").unwrap(), None);
        assert_eq!(s.last_open_session().unwrap(), None);
        assert!(s.session("session_a").unwrap().unwrap().deleted);
    }

    #[test]
    fn deleted_text_leaves_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        let s = Store::open(&path).unwrap();
        let secret = "zebra-crossing-4417-secret";
        s.append_message("session_a", &msg(Role::User, secret, 1, 0))
            .unwrap();
        s.append_message("session_b", &msg(Role::User, "keep me", 1, 0))
            .unwrap();
        s.save_draft("session_a", secret).unwrap();
        s.mark_deleted("session_a").unwrap();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "deleted text found in the store's files"
            );
        }
        assert_eq!(s.transcript("session_b").unwrap().len(), 1);
    }

    #[test]
    fn a_file_that_is_not_a_database_says_how_to_start_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let err = Store::open(&path).expect_err("not a database");
        assert!(matches!(err, StoreError::Unreadable { .. }), "{err:?}");
        let said = err.to_string();
        assert!(
            said.contains("file is not a database")
                && said.contains(&format!("mv \"{0}\" \"{0}.broken\"", path.display())),
            "{said}"
        );
        // The file is left as it was.
        assert_eq!(std::fs::read(&path).unwrap(), vec![0x5a; 8192]);
    }

    #[test]
    fn drafts_and_last_open_session_round_trip() {
        let s = Store::in_memory().unwrap();
        assert_eq!(s.draft("session_a").unwrap(), None);
        s.save_draft("session_a", "half a thought").unwrap();
        s.save_draft("session_a", "a whole thought").unwrap();
        assert_eq!(
            s.draft("session_a").unwrap().as_deref(),
            Some("a whole thought")
        );
        s.save_draft("session_a", "").unwrap();
        assert_eq!(s.draft("session_a").unwrap(), None);
        s.upsert_session("session_a", at(0)).unwrap();
        s.set_last_open_session("session_a").unwrap();
        assert_eq!(s.last_open_session().unwrap().as_deref(), Some("session_a"));
    }

    #[test]
    fn updating_a_streamed_reply_refreshes_the_total() {
        let s = Store::in_memory().unwrap();
        let row = s
            .append_message(
                "session_a",
                &msg(Role::Assistant, "par", 0, 0).with_status(MessageStatus::Interrupted),
            )
            .unwrap();
        s.update_message(row, &msg(Role::Assistant, "partial reply", 3, 1))
            .unwrap();
        let t = s.transcript("session_a").unwrap();
        assert_eq!(t, vec![msg(Role::Assistant, "partial reply", 3, 1)]);
        assert_eq!(s.list_sessions().unwrap()[0].tokens, 3);
    }

    #[test]
    fn a_message_stored_again_under_its_id_replaces_the_row() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::User, "hi", 1, 0))
            .unwrap();
        let mut cut = msg(Role::Assistant, "par", 0, 1).with_status(MessageStatus::Interrupted);
        cut.message_id = Some("msg_1".into());
        let row = s.append_message("session_a", &cut).unwrap();
        let mut whole = msg(Role::Assistant, "partial reply, whole", 5, 1);
        whole.message_id = Some("msg_1".into());
        assert_eq!(s.append_message("session_a", &whole).unwrap(), row);
        let t = s.transcript("session_a").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1], whole);
        assert_eq!(s.list_sessions().unwrap()[0].tokens, 6);
        // The same id in another session is another message.
        s.append_message("session_b", &whole).unwrap();
        assert_eq!(s.transcript("session_b").unwrap().len(), 1);
    }

    /// `convo send` beside the TUI in one session: each stores the exchange, the TUI with the
    /// user message's service id (from the history) and the command without it; in either
    /// order the store holds it once, with the id. A message of the same text at another
    /// time is another message.
    #[test]
    fn one_message_stored_by_two_writers_with_and_without_its_id_is_kept_once() {
        let with_id = |text: &str, t: i64| {
            let mut m = msg(Role::User, text, 2, t);
            m.message_id = Some(format!("msg_{text}"));
            m
        };
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &with_id("rain", 0)).unwrap();
        s.append_message("session_a", &msg(Role::User, "rain", 2, 0))
            .unwrap();
        s.append_message("session_a", &msg(Role::User, "snow", 2, 1))
            .unwrap();
        s.append_message("session_a", &with_id("snow", 1)).unwrap();
        assert_eq!(
            s.transcript("session_a").unwrap(),
            vec![with_id("rain", 0), with_id("snow", 1)]
        );
        s.append_message("session_a", &msg(Role::User, "rain", 2, 2))
            .unwrap();
        assert_eq!(s.transcript("session_a").unwrap().len(), 3);
        assert_eq!(s.list_sessions().unwrap()[0].tokens, 6);
    }

    #[test]
    fn a_message_the_service_did_not_keep_is_marked_failed() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::User, "hi", 1, 0))
            .unwrap();
        s.append_message("session_a", &msg(Role::User, "again", 1, 1))
            .unwrap();
        s.mark_failed("session_a", &msg(Role::User, "again", 1, 1))
            .unwrap();
        let t = s.transcript("session_a").unwrap();
        assert_eq!(t[0].status, MessageStatus::Complete);
        assert_eq!(t[1].status, MessageStatus::Failed);
        // The session's tokens are those of what the service holds.
        assert_eq!(s.list_sessions().unwrap()[0].tokens, 1);
    }

    #[test]
    fn reopening_keeps_data_and_refuses_newer_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("convo.db");
        let s = Store::open(&path).unwrap();
        s.append_message("session_a", &msg(Role::User, "hello", 1, 0))
            .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "private: {mode:o}");
        }
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.list_sessions().unwrap().len(), 1);
        s.lock().pragma_update(None, "user_version", 99).unwrap();
        drop(s);
        let e = Store::open(&path).unwrap_err().to_string();
        assert!(e.contains("schema version 99"), "{e}");
    }

    #[test]
    fn the_store_can_be_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<Store>();
        let s = Store::in_memory().unwrap();
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for j in 0..10 {
                        s.append_message("session_a", &msg(Role::User, &format!("{i}-{j}"), 1, j))
                            .unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(s.transcript("session_a").unwrap().len(), 40);
        assert_eq!(s.list_sessions().unwrap()[0].tokens, 40);
    }

    proptest::proptest! {
        #[test]
        fn titles_are_one_short_line(content in "\\PC{0,200}(\n\\PC{0,50}){0,3}") {
            if let Some(t) = title_of(&content) {
                proptest::prop_assert!(t.chars().count() <= TITLE_CHARS);
                proptest::prop_assert!(!t.contains('\n'));
                proptest::prop_assert!(!t.is_empty());
            } else {
                proptest::prop_assert!(content.trim().is_empty());
            }
        }
    }

    #[test]
    fn titles_drop_markdown_syntax_and_collapse_whitespace() {
        let cases = [
            (
                "**Bold** question about `Vec<T>`",
                "Bold question about Vec<T>",
            ),
            ("# Heading here", "Heading here"),
            ("## *Sub*  heading ##", "Sub heading"),
            ("- first item\n- second", "first item"),
            ("1. numbered item", "numbered item"),
            ("> quoted _words_", "quoted words"),
            (
                "see [the docs](https://example.com) please",
                "see the docs please",
            ),
            ("~~gone~~ and __strong__", "gone and strong"),
            ("a   lot\tof    space", "a lot of space"),
            ("```rust\nfn main() {}\n```\nafter", "fn main() {}"),
            ("```\n\nlet a = 1;\nlet b = 2;\n```", "let a = 1;"),
            (
                "\n\n  hello  *there*\nworld\n\nnext paragraph",
                "hello there",
            ),
            ("- [x] done task", "done task"),
            ("***", "***"),
            ("#", "#"),
        ];
        for (content, want) in cases {
            assert_eq!(title_of(content).as_deref(), Some(want), "{content:?}");
        }
        // Control characters and escapes never reach a title.
        let t = title_of("\u{1b}[31mred\u{1b}[0m **x**").unwrap();
        assert!(
            !t.contains('\u{1b}') && t.contains("red") && t.ends_with('x'),
            "{t:?}"
        );
    }

    #[test]
    fn titles_stored_with_markdown_are_listed_plain() {
        let s = Store::in_memory().unwrap();
        s.upsert_session("session_a", Utc::now()).unwrap();
        // As an older convo stored it: the raw first line.
        s.lock()
            .execute(
                "UPDATE sessions SET title = '## **Raw**  `title`' WHERE id = 'session_a'",
                [],
            )
            .unwrap();
        assert_eq!(
            s.list_sessions().unwrap()[0].title.as_deref(),
            Some("Raw title")
        );
        assert_eq!(
            s.session("session_a").unwrap().unwrap().title.as_deref(),
            Some("Raw title")
        );
    }

    #[test]
    fn sessions_are_found_by_id_prefix_or_title() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_AAAAAAAAAAAAAAAA", &msg(Role::User, "first", 1, 0))
            .unwrap();
        s.append_message(
            "session_AABBBBBBBBBBBBBB",
            &msg(Role::User, "Second one", 1, 1),
        )
        .unwrap();
        s.append_message("session_CCCCCCCCCCCCCCCC", &msg(Role::User, "gone", 1, 2))
            .unwrap();
        s.mark_deleted("session_CCCCCCCCCCCCCCCC").unwrap();
        let found = |q: &str| match s.find_session(q).unwrap() {
            SessionLookup::Found(r) => r.id,
            other => format!("{other:?}"),
        };
        assert_eq!(
            found("session_AAAAAAAAAAAAAAAA"),
            "session_AAAAAAAAAAAAAAAA"
        );
        assert_eq!(found("AAB"), "session_AABBBBBBBBBBBBBB");
        assert_eq!(found("session_AAB"), "session_AABBBBBBBBBBBBBB");
        assert_eq!(found("second ONE"), "session_AABBBBBBBBBBBBBB");
        assert_eq!(
            s.find_session("AA").unwrap(),
            SessionLookup::Ambiguous(vec![
                "session_AABBBBBBBBBBBBBB".into(),
                "session_AAAAAAAAAAAAAAAA".into()
            ])
        );
        assert_eq!(
            s.find_session("session_CCCCCCCCCCCCCCCC").unwrap(),
            SessionLookup::Deleted("session_CCCCCCCCCCCCCCCC".into())
        );
        assert_eq!(s.find_session("CCC").unwrap(), SessionLookup::NotFound);
        assert_eq!(s.find_session(" ").unwrap(), SessionLookup::NotFound);
        assert_eq!(s.find_session("nothing").unwrap(), SessionLookup::NotFound);
    }

    #[test]
    fn a_title_the_user_gave_stays_until_cleared() {
        let s = Store::in_memory().unwrap();
        assert_eq!(s.set_title("session_a", Some("nope")).unwrap(), None);
        s.append_message("session_a", &msg(Role::System, "be brief", 1, 0))
            .unwrap();
        let set = s
            .set_title("session_a", Some("  My   **plan**\nfor v2 "))
            .unwrap()
            .unwrap();
        assert_eq!(set.title.as_deref(), Some("My **plan** for v2"));
        assert!(set.title_set);
        // Later messages, the first user message among them, leave it alone.
        s.append_message("session_a", &msg(Role::User, "first question", 1, 1))
            .unwrap();
        s.append_message("session_a", &msg(Role::Assistant, "answer", 1, 2))
            .unwrap();
        let listed = &s.list_sessions().unwrap()[0];
        assert_eq!(listed.title.as_deref(), Some("My **plan** for v2"));
        assert!(listed.title_set);
        // Cleared: the first user message titles it again.
        let cleared = s.set_title("session_a", None).unwrap().unwrap();
        assert_eq!(cleared.title.as_deref(), Some("first question"));
        assert!(!cleared.title_set);
        // Blank text clears too; a long title is cut.
        s.set_title("session_a", Some(&"é".repeat(80))).unwrap();
        let long = s.session("session_a").unwrap().unwrap().title.unwrap();
        assert_eq!(long.chars().count(), TITLE_CHARS);
        assert!(long.ends_with('…'));
        let blank = s.set_title("session_a", Some("   ")).unwrap().unwrap();
        assert_eq!(blank.title.as_deref(), Some("first question"));
    }

    #[test]
    fn a_cleared_title_falls_back_to_the_system_message_then_to_none() {
        let s = Store::in_memory().unwrap();
        s.upsert_session("session_a", at(0)).unwrap();
        s.set_title("session_a", Some("named")).unwrap();
        assert_eq!(s.set_title("session_a", None).unwrap().unwrap().title, None);
        s.append_message("session_a", &msg(Role::System, "You are a pirate.", 1, 1))
            .unwrap();
        s.set_title("session_a", Some("named")).unwrap();
        let cleared = s.set_title("session_a", None).unwrap().unwrap();
        assert_eq!(cleared.title.as_deref(), Some("You are a pirate."));
    }

    #[test]
    fn a_user_title_survives_reopening_and_goes_with_a_deletion() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        let s = Store::open(&path).unwrap();
        s.append_message("session_a", &msg(Role::User, "hello", 1, 0))
            .unwrap();
        s.set_title("session_a", Some("Kept")).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let r = s.session("session_a").unwrap().unwrap();
        assert_eq!((r.title.as_deref(), r.title_set), (Some("Kept"), true));
        s.mark_deleted("session_a").unwrap();
        let r = s.session("session_a").unwrap().unwrap();
        assert_eq!((r.title, r.title_set), (None, false));
        assert_eq!(s.set_title("session_a", Some("again")).unwrap(), None);
    }

    #[test]
    fn a_store_of_the_first_schema_gains_the_title_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, last_activity)
                 VALUES ('session_a', 'old title', ?1, ?1)",
                params![fmt_time(&at(0))],
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let r = s.session("session_a").unwrap().unwrap();
        assert_eq!(
            (r.title.as_deref(), r.title_set),
            (Some("old title"), false)
        );
    }

    #[test]
    fn a_store_from_before_targets_files_its_rows_on_the_embedded_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        {
            let conn = Connection::open(&path).unwrap();
            for m in &MIGRATIONS[..4] {
                conn.execute_batch(m).unwrap();
            }
            conn.pragma_update(None, "user_version", 4).unwrap();
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, last_activity, title_set)
                 VALUES ('session_OLDOLDOLDOLDOLDO', 'kept', ?1, ?1, 1)",
                params![fmt_time(&at(0))],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO messages (session_id, role, content, tokens, created_at, status)
                 VALUES ('session_OLDOLDOLDOLDOLDO', 'user', 'old words', 2, ?1, 'complete')",
                params![fmt_time(&at(0))],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO state (key, value) VALUES ('last_open_session', 'session_OLDOLDOLDOLDOLDO')",
                [],
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let listed = s.list_sessions().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].target, crate::target::EMBEDDED);
        assert_eq!(listed[0].title.as_deref(), Some("kept"));
        assert_eq!(s.search("words", 5).unwrap().len(), 1);
        assert_eq!(
            s.last_open_session().unwrap().as_deref(),
            Some("session_OLDOLDOLDOLDOLDO")
        );
        // Another target sees none of it.
        let mut o = crate::api::ClientOptions::new("http://127.0.0.1:9".parse().unwrap());
        o.api_key = Some("service_live_abcdefghijklmnopqrst".into());
        let remote = s.for_target(&TargetId::remote(&o)).unwrap();
        assert!(remote.list_sessions().unwrap().is_empty());
        assert!(remote.search("words", 5).unwrap().is_empty());
        assert_eq!(remote.last_open_session().unwrap(), None);
        // The user's title waits to be sent to a service that has titles.
        assert_eq!(
            s.pending_titles().unwrap(),
            [("session_OLDOLDOLDOLDOLDO".to_string(), "kept".to_string())]
        );
    }

    #[test]
    fn a_reply_keeps_how_it_ended_across_reopening_and_replacement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        let s = Store::open(&path).unwrap();
        let reply = |id: &str, finish| StoredMessage {
            message_id: Some(id.into()),
            finish_reason: finish,
            ..msg(Role::Assistant, "some words", 2, 1)
        };
        s.append_message("session_a", &msg(Role::User, "hello", 1, 0))
            .unwrap();
        s.append_message(
            "session_a",
            &reply("msg_stopped", Some(FinishReason::Stopped)),
        )
        .unwrap();
        s.append_message("session_a", &reply("msg_cut", Some(FinishReason::Length)))
            .unwrap();
        s.append_message("session_a", &reply("msg_whole", None))
            .unwrap();
        // The service says later how the last one ended: the same row takes it.
        s.append_message("session_a", &reply("msg_whole", Some(FinishReason::Stop)))
            .unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let finishes: Vec<_> = s
            .transcript("session_a")
            .unwrap()
            .into_iter()
            .map(|m| m.finish_reason)
            .collect();
        assert_eq!(
            finishes,
            [
                None,
                Some(FinishReason::Stopped),
                Some(FinishReason::Length),
                Some(FinishReason::Stop)
            ]
        );
        // A value this client does not know is a clear error, not a guess.
        s.lock()
            .execute("UPDATE messages SET finish_reason = 'exploded'", [])
            .unwrap();
        let err = s.transcript("session_a").unwrap_err().to_string();
        assert!(
            err.contains("finish_reason") && err.contains("exploded"),
            "{err}"
        );
    }

    #[test]
    fn a_store_from_before_finish_reasons_reads_its_replies_as_unsaid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        {
            let conn = Connection::open(&path).unwrap();
            for m in &MIGRATIONS[..6] {
                conn.execute_batch(m).unwrap();
            }
            conn.pragma_update(None, "user_version", 6).unwrap();
            conn.execute(
                "INSERT INTO sessions (id, created_at, last_activity) VALUES ('session_a', ?1, ?1)",
                params![fmt_time(&at(0))],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO messages (session_id, role, content, tokens, created_at, message_id, status)
                 VALUES ('session_a', 'assistant', 'old reply', 2, ?1, 'msg_old', 'complete')",
                params![fmt_time(&at(0))],
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let t = s.transcript("session_a").unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].finish_reason, None);
    }

    #[test]
    fn titles_take_the_first_non_empty_line() {
        assert_eq!(title_of("\n\n  hello  \nworld").as_deref(), Some("hello"));
        assert_eq!(title_of("   "), None);
        let long = "é".repeat(80);
        let t = title_of(&long).unwrap();
        assert_eq!(t.chars().count(), TITLE_CHARS);
        assert!(t.ends_with('…'));
    }
}
