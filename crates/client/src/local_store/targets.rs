//! The store as a cache of what a target's service says: merging `GET /v1/sessions` (or one
//! event of the account stream) into the target's sessions, and taking sessions that rows
//! from before targets (`target_guessed`) left unclaimed.
//!
//! The rules, in one place:
//! - a listed session is this target's: a row of it filed on the embedded target by the
//!   migration (a guess) moves here the first time this target lists it; a row another
//!   target confirmed is left alone;
//! - the service's times, tokens (while the store holds fewer of its messages than the service
//!   has: none yet, or some before another device or process sent more) and title come
//!   in, except a title the user gave that the service has not confirmed yet: that one stays
//!   and is returned to be sent (`PATCH /v1/sessions/{id}`);
//! - a session of this target that the service no longer lists is marked deleted only if the
//!   service is known to have had it (a reply of it is stored), its activity is older than
//!   the list, and its target was not a guess: never a session of another target, nor one
//!   nothing was sent to yet;
//! - a whole list comes with the id of the service's database where the service says it
//!   (`convo_wire::sessions::DatabaseId`). When it is not the one this target's service said
//!   before, the service started over on a new database: its sessions were not deleted one
//!   by one, and none of this target's is taken as deleted. They move (all but those nothing
//!   was sent to yet), with their messages, to a target of their own, `TARGET@DATABASE`, labelled `LABEL (earlier database, until
//!   DATE)`, where every command that reads the store still finds them (`convo sessions
//!   --all-targets`, `convo export`), and the complete metrics buckets kept for this target
//!   go (they counted the other database);
//! - a session the service's whole list lacks, when the list names the sessions the service
//!   deleted lately (`deletedSessionIds`) and not this one, was not deleted (a database
//!   restored from an older backup): it moves, whole, to `TARGET@missing`, labelled `LABEL
//!   (missing from the server since DATE)`, instead of being erased; a list that names no
//!   deletions (an older server) erases it as before;
//! - a session id the service has is this target's even when a session kept aside has it
//!   (`convo send --session ID` to a server that started over creates ID anew): the kept
//!   copy gives the id up and is renamed `ID@DATABASE` with its
//!   messages, draft and forks ([`free_id`]), so the two databases' sessions are two sessions
//!   and neither database's messages land in the other's;
//! - one server reached at two addresses (replicas of one deployment, a new name, TLS put in
//!   front) is one set of sessions: a whole list whose database is the one another target
//!   with the same API key last heard of takes that target's sessions, whole
//!   (`Store::take_from_same_server`); the most recent address to list them holds them;
//! - a session of this target that the service says deleted (its account stream's event) is
//!   named in [`Merged::deleted`] even when another process of this device (`convo delete`)
//!   marked it deleted first, so that a TUI showing it lets it go.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::write_tx;
use super::{
    SessionRecord, Store, StoreError, checkpoint_after_delete, delete_in, erase_content, fmt_time,
    parse_time,
};
use convo_wire::sessions::SessionSummary;

/// What the target's service said about its sessions.
#[derive(Debug, Clone, Copy)]
pub enum ServiceSessions<'a> {
    /// The whole list (`GET /v1/sessions`), asked for at `asked_at`.
    All {
        sessions: &'a [SessionSummary],
        asked_at: DateTime<Utc>,
        /// The id of the database the service said it lists from; `None` when it did not say.
        database_id: Option<&'a str>,
        /// The sessions the service says were deleted lately; `None` when it does not say
        /// (then every session of this target it no longer lists is taken as deleted).
        deleted: Option<&'a [String]>,
    },
    /// One session created or changed.
    One(&'a SessionSummary),
    /// One session deleted.
    Deleted(&'a str),
}

/// What a merge changed that the caller acts on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    /// Sessions of this target marked deleted because the service no longer has them.
    pub deleted: Vec<String>,
    /// Titles the user gave that the service does not have: (session id, title) to send.
    pub titles_to_send: Vec<(String, String)>,
    /// The service's database is not the one it had: this target's sessions moved away.
    pub archived: Option<Archived>,
}

/// Where sessions of a target went when its service no longer had them, not deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Archived {
    /// How many sessions (not deleted) moved.
    pub sessions: usize,
    /// The label of the target they are under now (`convo sessions --all-targets`).
    pub label: String,
    /// Why they moved.
    pub why: Aside,
}

/// Why sessions were kept aside ([`Archived`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aside {
    /// The service's database turned out new: every session of the earlier one.
    EarlierDatabase,
    /// The service's list lacks them and does not name them deleted (a database restored
    /// from an older backup).
    Missing,
}

impl std::fmt::Display for Archived {
    /// What the user of the command line is told (`convo sessions`' warning).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.told(f, "(`convo sessions --all-targets`, `convo export`)")
    }
}

impl Archived {
    /// What the user is told, `where_` saying how to reach the sessions (the TUI's `/kept`,
    /// the command line's commands).
    pub fn told_with(&self, where_: &str) -> String {
        struct Told<'a>(&'a Archived, &'a str);
        impl std::fmt::Display for Told<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.told(f, self.1)
            }
        }
        Told(self, where_).to_string()
    }

    fn told(&self, f: &mut std::fmt::Formatter<'_>, where_: &str) -> std::fmt::Result {
        let n = self.sessions;
        let (sessions, are, them) = if n == 1 {
            ("session", "is", "it")
        } else {
            ("sessions", "are", "them")
        };
        let label = &self.label;
        match self.why {
            Aside::EarlierDatabase => write!(
                f,
                "the server's database is new: the {n} {sessions} kept from its earlier one {are} \
                 in the local store as “{label}” {where_}"
            ),
            Aside::Missing => write!(
                f,
                "{n} {sessions} kept here {are} no longer on the server, which did not delete \
                 {them} (its database restored from an older backup?): kept in the local store as \
                 “{label}” {where_}"
            ),
        }
    }
}

/// A row as the merge needs it.
struct Known {
    target: String,
    guessed: bool,
    deleted: bool,
    title: Option<String>,
    title_pending: bool,
    messages: i64,
}

fn known(conn: &Connection, id: &str) -> rusqlite::Result<Option<Known>> {
    conn.query_row(
        "SELECT target, target_guessed, deleted, title, title_pending,
             (SELECT count(*) FROM messages WHERE session_id = ?1)
         FROM sessions WHERE id = ?1",
        params![id],
        |r| {
            Ok(Known {
                target: r.get(0)?,
                guessed: r.get(1)?,
                deleted: r.get(2)?,
                title: r.get(3)?,
                title_pending: r.get(4)?,
                messages: r.get(5)?,
            })
        },
    )
    .optional()
}

/// Whether `other` is where `target`'s sessions are kept aside: those of its service's earlier
/// database (`TARGET@DATABASE`) or those missing from its list (`TARGET@missing`).
pub(super) fn is_aside(target: &str, other: &str) -> bool {
    other
        .strip_prefix(target)
        .is_some_and(|rest| rest.starts_with('@'))
}

/// The target `id` is filed on when that is one where `target`'s sessions are kept aside
/// ([`is_aside`]).
pub(super) fn aside_target(
    conn: &Connection,
    target: &str,
    id: &str,
) -> rusqlite::Result<Option<String>> {
    let filed: Option<String> = conn
        .query_row(
            "SELECT target FROM sessions WHERE id = ?1",
            params![id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(filed.filter(|filed| is_aside(target, filed)))
}

/// Makes `id` free for `target`: a session of `target`'s kept aside that has it (filed on
/// `TARGET@DATABASE` by [`Store::note_database`], or on `TARGET@missing` by
/// `Store::keep_missing`) is renamed `ID@DATABASE` (`ID@missing`), with its messages, its
/// draft and the forks of it kept beside it. Returns the new name. Any
/// other row with the id (this target's, another server's) is left as it is. Runs inside
/// the caller's transaction (the renames are checked at its commit).
pub(super) fn free_id(
    conn: &Connection,
    target: &str,
    id: &str,
) -> rusqlite::Result<Option<String>> {
    let Some(archive) = aside_target(conn, target, id)? else {
        return Ok(None);
    };
    let renamed = format!("{id}@{}", &archive[target.len() + 1..]);
    // The messages and the draft point at the session by id: checked at commit, not between
    // the updates.
    conn.execute_batch("PRAGMA defer_foreign_keys = ON")?;
    conn.execute(
        "UPDATE sessions SET id = ?2 WHERE id = ?1",
        params![id, renamed],
    )?;
    conn.execute(
        "UPDATE messages SET session_id = ?2 WHERE session_id = ?1",
        params![id, renamed],
    )?;
    conn.execute(
        "UPDATE drafts SET session_id = ?2 WHERE session_id = ?1",
        params![id, renamed],
    )?;
    conn.execute(
        "UPDATE sessions SET forked_from = ?2 WHERE forked_from = ?1 AND target = ?3",
        params![id, renamed, archive],
    )?;
    tracing::info!(session = %id, kept_as = %renamed,
        "the server has a session with the id of one kept aside here: the kept one is renamed");
    Ok(Some(renamed))
}

impl Store {
    /// Merges what this handle's target's service said into the store ([`ServiceSessions`];
    /// the rules are this file's header). One transaction.
    pub fn merge_service(&self, said: ServiceSessions<'_>) -> Result<Merged, StoreError> {
        let target = self.target.id().to_string();
        let mut merged = Merged::default();
        // Rows deleted here now (the file then gives their pages back).
        let mut newly_deleted = false;
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        match said {
            ServiceSessions::All {
                sessions,
                asked_at,
                database_id,
                deleted,
            } => {
                if let Some(database) = database_id {
                    merged.archived = self
                        .note_database(&tx, database, asked_at)
                        .map_err(|e| self.err(e))?;
                    self.take_from_same_server(&tx, database)
                        .map_err(|e| self.err(e))?;
                }
                for s in sessions {
                    merge_one(&tx, &target, s, &mut merged).map_err(|e| self.err(e))?;
                }
                let listed: HashSet<&str> =
                    sessions.iter().map(|s| s.session_id.as_str()).collect();
                let gone = gone_from(&tx, &target, &asked_at).map_err(|e| self.err(e))?;
                let mut missing = Vec::new();
                for id in gone.into_iter().filter(|id| !listed.contains(id.as_str())) {
                    // Not listed, and not said to be deleted: kept, aside.
                    if deleted.is_some_and(|d| !d.contains(&id)) {
                        missing.push(id);
                        continue;
                    }
                    delete_in(&tx, &target, &id).map_err(|e| self.err(e))?;
                    newly_deleted = true;
                    merged.deleted.push(id);
                }
                if !missing.is_empty() {
                    merged.archived = Some(
                        self.keep_missing(&tx, &missing, asked_at)
                            .map_err(|e| self.err(e))?,
                    );
                }
            }
            ServiceSessions::One(s) => {
                merge_one(&tx, &target, s, &mut merged).map_err(|e| self.err(e))?;
            }
            ServiceSessions::Deleted(id) => {
                let row = known(&tx, id).map_err(|e| self.err(e))?;
                if let Some(k) = row.filter(|k| k.target == target || k.guessed) {
                    if !k.deleted {
                        delete_in(&tx, &target, id).map_err(|e| self.err(e))?;
                        newly_deleted = true;
                    }
                    // Said deleted even when another process of this device (`convo delete`)
                    // marked it so first: a TUI beside it may still show it.
                    merged.deleted.push(id.to_string());
                }
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        if newly_deleted {
            checkpoint_after_delete(&conn);
        }
        Ok(merged)
    }

    /// The service of this handle's target said it answers from `database` (an answer's
    /// header, `Client::database_id`): recorded, and this target's sessions moved aside when
    /// it said another one before, as for a list ([`Store::merge_service`]). One transaction.
    pub fn database_said(&self, database: &str) -> Result<Option<Archived>, StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        let archived = (self.note_database(&tx, database, Utc::now())).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(archived)
    }

    /// Records `database` as the database of this handle's target's service; when it said
    /// another one before, moves the target's sessions to a target of their own first (the
    /// file's header). Returns where they went, if they did.
    fn note_database(
        &self,
        tx: &Connection,
        database: &str,
        asked_at: DateTime<Utc>,
    ) -> rusqlite::Result<Option<Archived>> {
        let target = self.target.id();
        let before: Option<String> = tx
            .query_row(
                "SELECT database_id FROM targets WHERE id = ?1",
                params![target],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        let archived = match before {
            Some(before) if before != database => {
                let id = format!("{target}@{before}");
                let label = format!(
                    "{} (earlier database, until {})",
                    self.target.label(),
                    asked_at.format("%Y-%m-%d %H:%M UTC")
                );
                tx.execute(
                    "INSERT INTO targets (id, label, database_id) VALUES (?1, ?2, ?3)
                     ON CONFLICT (id) DO NOTHING",
                    params![id, label, before],
                )?;
                // Every session of the earlier database: all but one nothing was sent to yet (no
                // message, no tokens), which neither database has and which stays.
                const OF_IT: &str = "target = ?1 AND (deleted = 1 OR tokens > 0
                     OR EXISTS (SELECT 1 FROM messages m WHERE m.session_id = sessions.id))";
                let sessions = tx.query_row(
                    &format!("SELECT count(*) FROM sessions WHERE {OF_IT} AND deleted = 0"),
                    params![target],
                    |r| r.get::<_, i64>(0),
                )?;
                tx.execute(
                    &format!("UPDATE sessions SET target = ?2 WHERE {OF_IT}"),
                    params![target, id],
                )?;
                tx.execute(
                    "DELETE FROM metric_buckets WHERE account = ?1",
                    params![target],
                )?;
                tx.execute(
                    "DELETE FROM state WHERE key = ?1",
                    params![super::last_open_key(target)],
                )?;
                let label = tx.query_row(
                    "SELECT label FROM targets WHERE id = ?1",
                    params![id],
                    |r| r.get(0),
                )?;
                (sessions > 0).then_some(Archived {
                    sessions: sessions as usize,
                    label,
                    why: Aside::EarlierDatabase,
                })
            }
            _ => None,
        };
        tx.execute(
            "INSERT INTO targets (id, label, database_id) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET database_id = ?3",
            params![target, self.target.label(), database],
        )?;
        Ok(archived)
    }

    /// The sessions of every other target with this one's API key whose service last said
    /// `database` (this target's service's, just said): one server reached at another address
    /// (another replica, a new name, TLS in front). They move here, whole, as the sessions this
    /// service lists; the other target keeps its label and whatever it kept aside. Nothing
    /// moves for a target without a key, nor between two keys (two accounts, or two keys of
    /// one account, are two targets as before).
    fn take_from_same_server(&self, tx: &Connection, database: &str) -> rusqlite::Result<()> {
        let me = self.target.id();
        let others: Vec<(String, String)> = tx
            .prepare("SELECT id, label FROM targets WHERE database_id = ?1 AND id <> ?2")?
            .query_map(params![database, me], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (other, label) in others {
            if !self.target.same_key_as(&other, &label) {
                continue;
            }
            let moved = tx.execute(
                "UPDATE sessions SET target = ?2, target_guessed = 0 WHERE target = ?1",
                params![other, me],
            )?;
            if moved > 0 {
                tracing::info!(sessions = moved, from = %label, to = %self.target.label(),
                    "the same server (its database and key) at another address: its sessions are listed here now");
            }
        }
        Ok(())
    }

    /// Moves `ids`, sessions of this handle's target its service no longer lists and did
    /// not say it deleted, to a target of their own, `TARGET@missing`, labelled `LABEL
    /// (missing from the server since DATE)`, whole; as sessions of an earlier database, they
    /// give their id up if the service has that id again (`free_id`).
    fn keep_missing(
        &self,
        tx: &Connection,
        ids: &[String],
        asked_at: DateTime<Utc>,
    ) -> rusqlite::Result<Archived> {
        let aside = format!("{}@missing", self.target.id());
        let label = format!(
            "{} (missing from the server since {})",
            self.target.label(),
            asked_at.format("%Y-%m-%d %H:%M UTC")
        );
        tx.execute(
            "INSERT INTO targets (id, label) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
            params![aside, label],
        )?;
        for id in ids {
            tx.execute(
                "UPDATE sessions SET target = ?2 WHERE id = ?1",
                params![id, aside],
            )?;
        }
        let label = tx.query_row(
            "SELECT label FROM targets WHERE id = ?1",
            params![aside],
            |r| r.get(0),
        )?;
        Ok(Archived {
            sessions: ids.len(),
            label,
            why: Aside::Missing,
        })
    }

    /// The sessions of this target kept aside (an earlier database's, or missing from the
    /// service's list), not deleted, most recent first, each with the label of where it is
    /// kept (`… (earlier database, until …)`, `… (missing from the server since …)`): what the
    /// TUI's kept view (`/kept`) lists.
    pub fn kept_aside_sessions(&self) -> Result<Vec<(SessionRecord, String)>, StoreError> {
        let target = self.target.id().to_string();
        Ok(self
            .list_all_sessions()?
            .into_iter()
            .filter(|(s, _)| is_aside(&target, &s.target))
            .collect())
    }

    /// One of this target's sessions kept aside ([`Store::kept_aside_sessions`]) erased at the
    /// user's word (the TUI's kept view): its messages and draft go, as a deletion's do, and
    /// its row stays, marked deleted, where it was kept. False, changing nothing, for any
    /// other session: a deletion by the service never reaches a kept copy ([`delete_in`]),
    /// and neither does this one reach a session of the service.
    pub fn erase_kept(&self, session_id: &str) -> Result<bool, StoreError> {
        let target = self.target.id();
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        if aside_target(&tx, target, session_id)
            .map_err(|e| self.err(e))?
            .is_none()
        {
            return Ok(false);
        }
        tx.execute(
            "UPDATE sessions SET deleted = 1, title = NULL, title_set = 0, tokens = 0,
                 title_pending = 0
             WHERE id = ?1",
            params![session_id],
        )
        .map_err(|e| self.err(e))?;
        erase_content(&tx, session_id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        checkpoint_after_delete(&conn);
        Ok(true)
    }

    /// The service of this handle's target holds `session_id` (it answered for it): the
    /// session is this target's from now on, live, created if the store did not know it.
    /// False, changing nothing, when another target has it live.
    /// A copy kept from the service's earlier database gives the id up ([`free_id`]).
    pub fn claim_session(&self, session_id: &str) -> Result<bool, StoreError> {
        let target = self.target.id();
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        let claimed = (|| {
            free_id(&tx, target, session_id)?;
            match known(&tx, session_id)? {
                Some(k) if k.target != target && !k.guessed && !k.deleted => Ok(false),
                Some(_) => tx
                    .execute(
                        "UPDATE sessions SET target = ?2, target_guessed = 0, deleted = 0
                         WHERE id = ?1",
                        params![session_id, target],
                    )
                    .map(|_| true),
                None => super::upsert(&tx, target, session_id, &Utc::now()).map(|_| true),
            }
        })()
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(claimed)
    }

    /// The service confirmed `title` for the session (`PATCH` answered): it is no longer
    /// pending, unless the user gave another one meanwhile.
    pub fn title_sent(&self, session_id: &str, title: &str) -> Result<(), StoreError> {
        self.lock()
            .execute(
                "UPDATE sessions SET title_pending = 0 WHERE id = ?1 AND title = ?2",
                params![session_id, title],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Titles of this target's sessions the service has not confirmed: (session id, title).
    pub fn pending_titles(&self) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT id, title FROM sessions WHERE target = ?1 AND deleted = 0
                     AND title_pending = 1 AND title IS NOT NULL ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![self.target.id()], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

/// Merges one listed session (see the file's header). A session whose times do not parse is
/// left out, changing nothing.
fn merge_one(
    conn: &Connection,
    target: &str,
    s: &SessionSummary,
    merged: &mut Merged,
) -> rusqlite::Result<()> {
    let (Some(created), Some(last)) = (parse_time(&s.created_at), parse_time(&s.last_activity_at))
    else {
        tracing::warn!(session = %s.session_id, "listed session with unreadable times skipped");
        return Ok(());
    };
    let (created, last) = (fmt_time(&created), fmt_time(&last));
    let title = s
        .title
        .as_deref()
        .map(|t| crate::sanitize::sanitize(t).into_owned());
    free_id(conn, target, &s.session_id)?;
    match known(conn, &s.session_id)? {
        None => {
            conn.execute(
                "INSERT INTO sessions (id, target, title, created_at, last_activity, tokens)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![s.session_id, target, title, created, last, s.tokens as i64],
            )?;
        }
        // Another target's, confirmed; or deleted here (the list was older than the delete).
        Some(k) if (k.target != target && !k.guessed) || k.deleted => {}
        Some(k) => {
            conn.execute(
                "UPDATE sessions SET target = ?2, target_guessed = 0,
                     created_at = min(created_at, ?3), last_activity = max(last_activity, ?4)
                 WHERE id = ?1",
                params![s.session_id, target, created, last],
            )?;
            if k.messages == 0 || s.message_count > k.messages.max(0) as u64 {
                conn.execute(
                    "UPDATE sessions SET tokens = ?2 WHERE id = ?1",
                    params![s.session_id, s.tokens as i64],
                )?;
            }
            if k.title_pending {
                if let Some(mine) = k.title.filter(|mine| Some(mine) != title.as_ref()) {
                    merged.titles_to_send.push((s.session_id.clone(), mine));
                } else {
                    conn.execute(
                        "UPDATE sessions SET title_pending = 0 WHERE id = ?1",
                        params![s.session_id],
                    )?;
                }
            } else if title.is_some() {
                conn.execute(
                    "UPDATE sessions SET title = ?2 WHERE id = ?1",
                    params![s.session_id, title],
                )?;
            }
        }
    }
    // Where a fork came from, as the service recorded it: a fork made on another device is
    // drawn under its source here too (`forks.rs`).
    if let Some(from) = &s.forked_from {
        conn.execute(
            "UPDATE sessions SET forked_from = ?2, forked_at_message = ?3
             WHERE id = ?1 AND target = ?4 AND forked_from IS NULL",
            params![s.session_id, from.session_id, from.message_id, target],
        )?;
    }
    Ok(())
}

/// Live sessions of `target` the service is known to have had (a reply of theirs is stored),
/// filed there for sure, whose last activity is older than `asked_at`.
fn gone_from(
    conn: &Connection,
    target: &str,
    asked_at: &DateTime<Utc>,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT id FROM sessions s WHERE target = ?1 AND deleted = 0 AND target_guessed = 0
             AND last_activity < ?2
             AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id
                         AND m.message_id IS NOT NULL AND m.status != 'failed')",
    )?;
    let rows = stmt.query_map(params![target, fmt_time(asked_at)], |r| r.get(0))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClientOptions, Role};
    use crate::local_store::{MessageStatus, SessionLookup, StoredMessage};
    use crate::target::TargetId;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    fn remote() -> TargetId {
        at_address("http://127.0.0.1:9", KEY)
    }

    fn summary(id: &str, title: Option<&str>, t: i64) -> SessionSummary {
        SessionSummary {
            session_id: id.into(),
            created_at: fmt_time(&at(t)),
            last_activity_at: fmt_time(&at(t)),
            message_count: 2,
            tokens: 40,
            title: title.map(String::from),
            forked_from: None,
        }
    }

    /// A session this store holds messages of gets the service's tokens while the service has
    /// more messages than it (another device sent, or another process on this one before it
    /// stored its exchange), and keeps the sum of its own once it holds them all.
    #[test]
    fn tokens_come_from_the_service_while_it_has_more_messages_than_the_store() {
        let s = Store::in_memory().unwrap().for_target(&remote()).unwrap();
        let id = "session_TOKENSTOKENSTOKE";
        exchanged(&s, id, 10);
        let before = s.session(id).unwrap().unwrap().tokens;
        let mut later = summary(id, None, 20);
        later.message_count = 4;
        later.tokens = 500;
        s.merge_service(ServiceSessions::One(&later)).unwrap();
        assert_eq!(s.session(id).unwrap().unwrap().tokens, 500);
        // The store holds as many as the service: its own sum stands.
        let mut same = summary(id, None, 30);
        same.tokens = 999;
        s.merge_service(ServiceSessions::One(&same)).unwrap();
        assert_eq!(s.session(id).unwrap().unwrap().tokens, 500);
        // A message stored: the sum of what the store holds again.
        let more = StoredMessage::user(Role::User, "and more");
        s.append_message(id, &more).unwrap();
        assert_eq!(s.session(id).unwrap().unwrap().tokens, before + more.tokens);
    }

    /// Two processes on one store (the TUI and a one-shot command beside it) write at once:
    /// a transaction that read before it writes waits for the other's, rather than failing
    /// with "database is locked" (a deferred transaction whose snapshot is stale cannot wait).
    #[test]
    fn two_handles_on_one_file_merging_and_storing_at_once_both_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("convo.db");
        let handles: Vec<Store> = (0..2)
            .map(|_| Store::open(&file).unwrap().for_target(&remote()).unwrap())
            .collect();
        let threads: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(n, s)| {
                std::thread::spawn(move || {
                    for i in 0..150 {
                        let id = format!("session_RACE{n}RACE{i:010}");
                        let mut listed = summary(&id, None, i);
                        listed.message_count = 4;
                        s.merge_service(ServiceSessions::One(&listed))?;
                        s.append_message(&id, &StoredMessage::user(Role::User, "hello"))?;
                        // The other handle's sessions too: reads, then writes, of rows it wrote.
                        let theirs = format!("session_RACE{}RACE{i:010}", 1 - n);
                        s.merge_service(ServiceSessions::One(&summary(&theirs, None, i)))?;
                    }
                    Ok::<(), StoreError>(())
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
    }

    /// A session with a user message and the service's reply, at `t`.
    fn exchanged(s: &Store, id: &str, t: i64) {
        let mut m = StoredMessage::user(Role::User, "hello");
        m.created_at = at(t);
        s.append_message(id, &m).unwrap();
        let reply = StoredMessage {
            role: Role::Assistant,
            content: "hi".into(),
            tokens: 1,
            created_at: at(t),
            message_id: Some(format!("msg_{id}")),
            status: MessageStatus::Complete,
            finish_reason: None,
        };
        s.append_message(id, &reply).unwrap();
    }

    /// `s`'s service listed `list` from `database` at `t`.
    fn listed(s: &Store, list: &[SessionSummary], database: &str, t: i64) -> Merged {
        s.merge_service(ServiceSessions::All {
            sessions: list,
            asked_at: at(t),
            database_id: Some(database),
            deleted: None,
        })
        .unwrap()
    }

    fn ids(list: Vec<crate::local_store::SessionRecord>) -> Vec<String> {
        list.into_iter().map(|r| r.id).collect()
    }

    #[test]
    fn a_fork_listed_by_the_service_keeps_its_origin() {
        let store = Store::in_memory().unwrap().for_target(&remote()).unwrap();
        let mut fork = summary("session_FFFFFFFFFFFFFFFF", Some("fork"), 1);
        fork.forked_from = Some(convo_wire::sessions::ForkedFrom {
            session_id: "session_SSSSSSSSSSSSSSSS".into(),
            message_id: "msg_1".into(),
        });
        store.merge_service(ServiceSessions::One(&fork)).unwrap();
        let listed = store.list_sessions().unwrap();
        assert_eq!(
            listed[0].forked_from.as_deref(),
            Some("session_SSSSSSSSSSSSSSSS")
        );
        // Listed again without an origin (an older server): the one known stays.
        store
            .merge_service(ServiceSessions::One(&summary(
                "session_FFFFFFFFFFFFFFFF",
                Some("fork"),
                2,
            )))
            .unwrap();
        assert_eq!(
            store.list_sessions().unwrap()[0].forked_from.as_deref(),
            Some("session_SSSSSSSSSSSSSSSS")
        );
    }

    #[test]
    fn each_target_sees_only_its_own_sessions() {
        let embedded = Store::in_memory().unwrap();
        let other = embedded.for_target(&remote()).unwrap();
        exchanged(&embedded, "session_EEEEEEEEEEEEEEEE", 0);
        exchanged(&other, "session_RRRRRRRRRRRRRRRR", 1);
        embedded
            .set_last_open_session("session_EEEEEEEEEEEEEEEE")
            .unwrap();
        other
            .set_last_open_session("session_RRRRRRRRRRRRRRRR")
            .unwrap();
        assert_eq!(
            ids(embedded.list_sessions().unwrap()),
            ["session_EEEEEEEEEEEEEEEE"]
        );
        assert_eq!(
            ids(other.list_sessions().unwrap()),
            ["session_RRRRRRRRRRRRRRRR"]
        );
        assert_eq!(
            embedded.last_open_session().unwrap().as_deref(),
            Some("session_EEEEEEEEEEEEEEEE")
        );
        assert_eq!(
            other.last_open_session().unwrap().as_deref(),
            Some("session_RRRRRRRRRRRRRRRR")
        );
        assert_eq!(embedded.search("hello", 10).unwrap().len(), 1);
        assert_eq!(
            embedded.search("hello", 10).unwrap()[0].session_id,
            "session_EEEEEEEEEEEEEEEE"
        );
        // The other target's id is found by its whole id only, as someone else's.
        assert_eq!(
            embedded.find_session("session_RRRRRRRRRRRRRRRR").unwrap(),
            SessionLookup::Elsewhere {
                id: "session_RRRRRRRRRRRRRRRR".into(),
                target: remote().label().into(),
                kept_aside: false,
            }
        );
        assert_eq!(
            embedded.find_session("RRR").unwrap(),
            SessionLookup::NotFound
        );
        let all = embedded.list_all_sessions().unwrap();
        let labels: Vec<(&str, &str)> = all
            .iter()
            .map(|(r, l)| (r.id.as_str(), l.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("session_RRRRRRRRRRRRRRRR", remote().label()),
                ("session_EEEEEEEEEEEEEEEE", "embedded")
            ]
        );
    }

    #[test]
    fn a_list_adds_sessions_of_other_devices_and_deletes_only_this_targets_gone_ones() {
        let embedded = Store::in_memory().unwrap();
        let s = embedded.for_target(&remote()).unwrap();
        exchanged(&embedded, "session_EEEEEEEEEEEEEEEE", 0);
        exchanged(&s, "session_GONEGONEGONEGONE", 0);
        // Nothing sent yet: the service cannot list it.
        s.upsert_session("session_NEWNEWNEWNEWNEWN", at(0)).unwrap();
        // Sent after the list was asked for.
        exchanged(&s, "session_LATELATELATELATE", 100);
        let listed = [summary(
            "session_OTHERDEVICE00001",
            Some("From the laptop"),
            5,
        )];
        let merged = s
            .merge_service(ServiceSessions::All {
                sessions: &listed,
                asked_at: at(50),
                database_id: None,
                deleted: None,
            })
            .unwrap();
        assert_eq!(merged.deleted, ["session_GONEGONEGONEGONE"]);
        let mut now = ids(s.list_sessions().unwrap());
        now.sort();
        assert_eq!(
            now,
            [
                "session_LATELATELATELATE",
                "session_NEWNEWNEWNEWNEWN",
                "session_OTHERDEVICE00001"
            ]
        );
        let other = s.session("session_OTHERDEVICE00001").unwrap().unwrap();
        assert_eq!(other.title.as_deref(), Some("From the laptop"));
        assert_eq!(other.tokens, 40);
        // The embedded target's session is untouched.
        assert_eq!(embedded.list_sessions().unwrap().len(), 1);
        // A deletion event for a session of another target changes nothing.
        let none = s
            .merge_service(ServiceSessions::Deleted("session_EEEEEEEEEEEEEEEE"))
            .unwrap();
        assert!(none.deleted.is_empty());
        assert_eq!(embedded.list_sessions().unwrap().len(), 1);
        let one = s
            .merge_service(ServiceSessions::Deleted("session_OTHERDEVICE00001"))
            .unwrap();
        assert_eq!(one.deleted, ["session_OTHERDEVICE00001"]);
        // Marked deleted here first by another process of this device (`convo delete` beside
        // a TUI): still said deleted, for a TUI that shows it.
        let again = s
            .merge_service(ServiceSessions::Deleted("session_OTHERDEVICE00001"))
            .unwrap();
        assert_eq!(again.deleted, ["session_OTHERDEVICE00001"]);
    }

    #[test]
    fn a_new_database_moves_the_targets_sessions_aside_instead_of_deleting_them() {
        let s = Store::in_memory().unwrap().for_target(&remote()).unwrap();
        let all = |list: &[SessionSummary], database: &str, t: i64| listed(&s, list, database, t);
        exchanged(&s, "session_KEPTKEPTKEPTKEPT", 0);
        s.save_draft("session_KEPTKEPTKEPTKEPT", "half a thought")
            .unwrap();
        // Nothing sent to it yet: no database's.
        s.upsert_session("session_UNSENTUNSENTUNSE", at(0)).unwrap();
        let listed = [summary("session_KEPTKEPTKEPTKEPT", Some("Kept"), 0)];
        // The first list names the database: recorded, nothing moves.
        assert_eq!(all(&listed, "db_first", 10), Merged::default());
        let target = s.target().id().to_string();
        s.lock()
            .execute(
                "INSERT INTO metric_buckets VALUES (?1, 'hour', 'a', 'b', '{}')",
                params![target],
            )
            .unwrap();
        // The same database again, without the session: deleted, as before.
        exchanged(&s, "session_GONEGONEGONEGONE", 20);
        let merged = all(&listed, "db_first", 30);
        assert_eq!(merged.deleted, ["session_GONEGONEGONEGONE"]);
        assert!(merged.archived.is_none());

        // Another database listing none of them: nothing is deleted, they move aside.
        let fresh = [summary("session_FRESHFRESHFRESHFR", None, 40)];
        let merged = all(&fresh, "db_second", 50);
        assert!(merged.deleted.is_empty());
        let archived = merged.archived.expect("moved aside");
        assert_eq!(archived.sessions, 1);
        assert!(
            archived.label.starts_with("http://127.0.0.1:9 #")
                && archived
                    .label
                    .contains("(earlier database, until 2023-11-14 "),
            "{}",
            archived.label
        );
        assert!(
            (archived.to_string()).contains("the 1 session kept from its earlier one is in"),
            "{archived}"
        );
        let mut now = ids(s.list_sessions().unwrap());
        now.sort();
        assert_eq!(
            now,
            ["session_FRESHFRESHFRESHFR", "session_UNSENTUNSENTUNSE"]
        );
        // Still whole, under the target of the earlier database, draft and all.
        let every = s.list_all_sessions().unwrap();
        let kept = every
            .iter()
            .find(|(r, _)| r.id == "session_KEPTKEPTKEPTKEPT")
            .expect("kept");
        assert_eq!(kept.1, archived.label);
        assert_eq!(kept.0.target, format!("{target}@db_first"));
        assert_eq!(s.transcript("session_KEPTKEPTKEPTKEPT").unwrap().len(), 2);
        assert_eq!(
            s.draft("session_KEPTKEPTKEPTKEPT").unwrap().as_deref(),
            Some("half a thought")
        );
        assert!(matches!(
            s.find_session("session_KEPTKEPTKEPTKEPT").unwrap(),
            SessionLookup::Elsewhere {
                kept_aside: true,
                ..
            }
        ));
        // The buckets counted the earlier database.
        let buckets: i64 = s
            .lock()
            .query_row("SELECT count(*) FROM metric_buckets", [], |r| r.get(0))
            .unwrap();
        assert_eq!(buckets, 0);
        // The new database from now on: the next list moves nothing.
        assert!(all(&fresh, "db_second", 60).archived.is_none());
        assert_eq!(ids(s.list_sessions().unwrap()).len(), 2);
    }

    #[test]
    fn an_id_the_new_database_has_too_is_its_own_and_the_kept_copy_is_renamed() {
        let s = Store::in_memory().unwrap().for_target(&remote()).unwrap();
        let all = |list: &[SessionSummary], database: &str, t: i64| listed(&s, list, database, t);
        const ID: &str = "session_SAMEIDSAMEIDSAME";
        const FORK: &str = "session_FORKOFITFORKOFIT";
        const LEFT: &str = "session_LEFTLEFTLEFTLEFT";
        exchanged(&s, ID, 0);
        s.save_draft(ID, "a draft of the earlier one").unwrap();
        exchanged(&s, FORK, 1);
        s.set_forked_from(FORK, ID, "msg_x").unwrap();
        exchanged(&s, LEFT, 2);
        let listed = [
            summary(ID, None, 0),
            summary(FORK, None, 1),
            summary(LEFT, None, 2),
        ];
        all(&listed, "db_first", 10);
        assert!(all(&[], "db_second", 20).archived.is_some());
        let kept = format!("{ID}@db_first");
        let reply_row: i64 = s
            .lock()
            .query_row(
                "SELECT max(id) FROM messages WHERE session_id = ?1",
                params![ID],
                |r| r.get(0),
            )
            .unwrap();

        // A reply of the kept copy that ends late is still its own: the id stays.
        let late = s.transcript(ID).unwrap().pop().unwrap();
        s.update_message(reply_row, &late).unwrap();
        assert!(matches!(
            s.find_session(ID).unwrap(),
            SessionLookup::Elsewhere {
                kept_aside: true,
                ..
            }
        ));
        // Deleting the id here (the new database has no such session) keeps the kept copy.
        s.mark_deleted(LEFT).unwrap();
        assert_eq!(s.transcript(LEFT).unwrap().len(), 2);

        // The new database has the id: listed, it is this target's, and the copy moves on.
        all(&[summary(ID, Some("New"), 30)], "db_second", 40);
        let mine = s.session(ID).unwrap().unwrap();
        assert_eq!(mine.target, s.target().id());
        assert!(s.transcript(ID).unwrap().is_empty());
        assert_eq!(s.draft(ID).unwrap(), None);
        let copy = s.session(&kept).unwrap().expect("renamed");
        assert_eq!(copy.target, format!("{}@db_first", s.target().id()));
        assert_eq!(s.transcript(&kept).unwrap().len(), 2);
        assert_eq!(
            s.draft(&kept).unwrap().as_deref(),
            Some("a draft of the earlier one")
        );
        assert_eq!(
            s.session(FORK).unwrap().unwrap().forked_from.as_deref(),
            Some(kept.as_str())
        );
        // A message of the new database goes to the new session only.
        s.append_message(ID, &StoredMessage::user(Role::User, "fresh"))
            .unwrap();
        assert_eq!(s.transcript(ID).unwrap().len(), 1);
        assert_eq!(s.transcript(&kept).unwrap().len(), 2);
        // An undo on the new database's session never reaches the kept copy.
        const UNDONE: &str = "session_UNDONEUNDONEUNDO";
        exchanged(&s, UNDONE, 3);
        all(&[], "db_third", 60);
        assert_eq!(s.remove_last_exchange(UNDONE).unwrap(), 0);
        let undone_copy = format!("{UNDONE}@db_second");
        assert_eq!(s.transcript(&undone_copy).unwrap().len(), 2);

        // The same through a claim (the server answered for the id) and an append.
        assert!(s.claim_session(FORK).unwrap());
        s.append_message(LEFT, &StoredMessage::user(Role::User, "new"))
            .unwrap();
        for id in [FORK, LEFT] {
            assert_eq!(s.session(id).unwrap().unwrap().target, s.target().id());
            let copy = format!("{id}@db_first");
            assert_eq!(s.transcript(&copy).unwrap().len(), 2, "{id}");
        }
        // Another server's session is never renamed: the id stays taken.
        let embedded = Store::in_memory().unwrap();
        exchanged(&embedded, "session_OTHERSERVER00000", 0);
        let other = embedded.for_target(&remote()).unwrap();
        assert!(!other.claim_session("session_OTHERSERVER00000").unwrap());
    }

    #[test]
    fn a_session_the_list_lacks_is_erased_only_when_the_list_names_it_deleted() {
        let s = Store::in_memory().unwrap().for_target(&remote()).unwrap();
        const DELETED: &str = "session_DELETEDDELETEDDE";
        const LOST: &str = "session_LOSTLOSTLOSTLOST";
        exchanged(&s, DELETED, 0);
        exchanged(&s, LOST, 0);
        s.save_draft(LOST, "unsent words").unwrap();
        let said = |deleted: Option<&[String]>, t: i64| {
            s.merge_service(ServiceSessions::All {
                sessions: &[],
                asked_at: at(t),
                database_id: Some("db_one"),
                deleted,
            })
            .unwrap()
        };
        let named = [DELETED.to_string(), "session_OTHEROTHEROTHERO".to_string()];
        let merged = said(Some(&named), 10);
        assert_eq!(merged.deleted, [DELETED]);
        let aside = merged.archived.expect("kept aside");
        assert_eq!((aside.sessions, aside.why), (1, Aside::Missing));
        assert!(
            aside
                .label
                .contains("(missing from the server since 2023-11-14 "),
            "{}",
            aside.label
        );
        assert!(
            aside.to_string().starts_with(
                "1 session kept here is no longer on the server, which did not delete it"
            ),
            "{aside}"
        );
        assert!(s.list_sessions().unwrap().is_empty());
        assert_eq!(s.transcript(LOST).unwrap().len(), 2);
        assert_eq!(s.draft(LOST).unwrap().as_deref(), Some("unsent words"));
        assert!(s.transcript(DELETED).unwrap().is_empty());
        // Listed as kept aside, with the label of where (the TUI's /kept).
        let kept = s.kept_aside_sessions().unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].0.id, LOST);
        assert_eq!(kept[0].1, aside.label);
        // Another target's handle sees none of them, and cannot erase them.
        let other = s.for_target(&TargetId::embedded()).unwrap();
        assert!(other.kept_aside_sessions().unwrap().is_empty());
        assert!(!other.erase_kept(LOST).unwrap());
        // Again: nothing more moves, nothing is said.
        assert_eq!(said(Some(&named), 20), Merged::default());
        // A server that names no deletions: what its list lacks is taken as deleted, as before.
        exchanged(&s, "session_OLDSERVEROLDSERVE", 0);
        assert_eq!(said(None, 30).deleted, ["session_OLDSERVEROLDSERVE"]);
        assert_eq!(s.transcript(LOST).unwrap().len(), 2, "kept aside stays");
        // Erased at the user's word: gone from the kept list, its messages and draft too.
        assert!(s.erase_kept(LOST).unwrap());
        assert!(s.kept_aside_sessions().unwrap().is_empty());
        assert!(s.transcript(LOST).unwrap().is_empty());
        assert_eq!(s.draft(LOST).unwrap(), None);
        // A session of the service is not a kept one.
        exchanged(&s, "session_SERVICESSERVICESS", 40);
        assert!(!s.erase_kept("session_SERVICESSERVICESS").unwrap());
        assert_eq!(s.transcript("session_SERVICESSERVICESS").unwrap().len(), 2);
    }

    #[test]
    fn a_guessed_row_moves_to_the_first_target_that_lists_it() {
        let embedded = Store::in_memory().unwrap();
        exchanged(&embedded, "session_MOVEMOVEMOVEMOVE", 0);
        exchanged(&embedded, "session_STAYSTAYSTAYSTAY", 0);
        embedded
            .lock()
            .execute("UPDATE sessions SET target_guessed = 1", [])
            .unwrap();
        let s = embedded.for_target(&remote()).unwrap();
        s.merge_service(ServiceSessions::All {
            sessions: &[summary("session_MOVEMOVEMOVEMOVE", None, 0)],
            asked_at: at(50),
            database_id: None,
            deleted: None,
        })
        .unwrap();
        assert_eq!(
            ids(s.list_sessions().unwrap()),
            ["session_MOVEMOVEMOVEMOVE"]
        );
        assert_eq!(
            ids(embedded.list_sessions().unwrap()),
            ["session_STAYSTAYSTAYSTAY"]
        );
        // The embedded service lists none: a guessed row is never marked deleted.
        let merged = embedded
            .merge_service(ServiceSessions::All {
                sessions: &[],
                asked_at: at(50),
                database_id: None,
                deleted: None,
            })
            .unwrap();
        assert!(merged.deleted.is_empty());
        // Once confirmed, a row stays with its target.
        assert!(!embedded.claim_session("session_MOVEMOVEMOVEMOVE").unwrap());
        assert!(embedded.claim_session("session_STAYSTAYSTAYSTAY").unwrap());
    }

    #[test]
    fn a_title_the_service_does_not_have_is_kept_and_sent() {
        let s = Store::in_memory().unwrap().for_target(&remote()).unwrap();
        exchanged(&s, "session_TTTTTTTTTTTTTTTT", 0);
        s.set_title("session_TTTTTTTTTTTTTTTT", Some("Mine"))
            .unwrap();
        assert_eq!(
            s.pending_titles().unwrap(),
            [("session_TTTTTTTTTTTTTTTT".to_string(), "Mine".to_string())]
        );
        let merged = s
            .merge_service(ServiceSessions::One(&summary(
                "session_TTTTTTTTTTTTTTTT",
                Some("hello"),
                0,
            )))
            .unwrap();
        assert_eq!(
            merged.titles_to_send,
            [("session_TTTTTTTTTTTTTTTT".to_string(), "Mine".to_string())]
        );
        let r = s.session("session_TTTTTTTTTTTTTTTT").unwrap().unwrap();
        assert_eq!(r.title.as_deref(), Some("Mine"));
        s.title_sent("session_TTTTTTTTTTTTTTTT", "Mine").unwrap();
        assert!(s.pending_titles().unwrap().is_empty());
        // Confirmed: a title set on another device comes in.
        s.merge_service(ServiceSessions::One(&summary(
            "session_TTTTTTTTTTTTTTTT",
            Some("Renamed elsewhere"),
            1,
        )))
        .unwrap();
        let r = s.session("session_TTTTTTTTTTTTTTTT").unwrap().unwrap();
        assert_eq!(r.title.as_deref(), Some("Renamed elsewhere"));
    }

    /// The target of `url` with `key`.
    fn at_address(url: &str, key: &str) -> TargetId {
        let mut o = ClientOptions::new(url.parse().unwrap());
        o.api_key = Some(key.into());
        TargetId::remote(&o)
    }

    const KEY: &str = "service_live_abcdefghijklmnopqrst";

    /// One server at two addresses (two replicas of a deployment, or its new name): whichever
    /// lists the sessions last holds them, whole, and nothing is taken as deleted or kept
    /// aside on the way.
    #[test]
    fn one_server_at_two_addresses_is_one_set_of_sessions() {
        let store = Store::in_memory().unwrap();
        let a = store
            .for_target(&at_address("http://10.0.0.1:8080", KEY))
            .unwrap();
        let b = store
            .for_target(&at_address("https://convo.example", KEY))
            .unwrap();
        const ONE: &str = "session_ONEONEONEONEONEO";
        const TWO: &str = "session_TWOTWOTWOTWOTWOT";
        exchanged(&a, ONE, 0);
        exchanged(&a, TWO, 1);
        a.save_draft(TWO, "half a thought").unwrap();
        let list = [summary(ONE, None, 0), summary(TWO, None, 1)];
        assert_eq!(listed(&a, &list, "db_one", 10), Merged::default());

        // Listed through the other address: its sessions now, with their messages and draft.
        let merged = listed(&b, &list, "db_one", 20);
        assert_eq!(merged, Merged::default(), "nothing deleted or kept aside");
        assert_eq!(ids(b.list_sessions().unwrap()), [TWO, ONE]);
        assert!(a.list_sessions().unwrap().is_empty());
        assert_eq!(b.transcript(ONE).unwrap().len(), 2);
        assert_eq!(b.draft(TWO).unwrap().as_deref(), Some("half a thought"));
        assert!(matches!(
            b.find_session(ONE).unwrap(),
            SessionLookup::Found(_)
        ));

        // Back on the first address: they follow.
        listed(&a, &list, "db_one", 30);
        assert_eq!(ids(a.list_sessions().unwrap()), [TWO, ONE]);
        assert!(b.list_sessions().unwrap().is_empty());
    }

    /// Another key (another account, or another key of one account) or another database is
    /// another target, as before: nothing moves.
    #[test]
    fn another_key_or_another_database_takes_nothing() {
        let store = Store::in_memory().unwrap();
        let a = store
            .for_target(&at_address("http://10.0.0.1:8080", KEY))
            .unwrap();
        const ONE: &str = "session_ONEONEONEONEONEO";
        exchanged(&a, ONE, 0);
        listed(&a, &[summary(ONE, None, 0)], "db_one", 10);

        let other_key = store
            .for_target(&at_address(
                "http://10.0.0.2:8080",
                "service_live_zyxwvutsrqponmlkjihg",
            ))
            .unwrap();
        listed(&other_key, &[], "db_one", 20);
        let other_database = store
            .for_target(&at_address("http://10.0.0.3:8080", KEY))
            .unwrap();
        listed(&other_database, &[], "db_two", 30);
        // A target read back from the store (no key known) takes nothing either.
        let known = store
            .for_target(&TargetId::known(
                "remote:0123456789abcdef0123456789abcdef",
                "x",
            ))
            .unwrap();
        listed(&known, &[], "db_one", 40);

        assert_eq!(ids(a.list_sessions().unwrap()), [ONE]);
        assert_eq!(a.transcript(ONE).unwrap().len(), 2);
        for t in [&other_key, &other_database, &known] {
            assert!(t.list_sessions().unwrap().is_empty());
        }
    }

    /// A store from an older convo knows its targets by id and label only: the sessions it
    /// filed under the first address are still found from the second, the key at the first
    /// address making that target's id; a session kept aside there (a target of another form)
    /// stays where it is.
    #[test]
    fn sessions_filed_by_an_older_convo_are_found_from_a_second_address() {
        let store = Store::in_memory().unwrap();
        let first = at_address("http://10.0.0.1:8080", KEY);
        // As an older convo filed them: a target known by its id and label.
        let a = store
            .for_target(&TargetId::known(first.id(), first.label()))
            .unwrap();
        const ONE: &str = "session_ONEONEONEONEONEO";
        const OLD: &str = "session_OLDOLDOLDOLDOLDO";
        exchanged(&a, OLD, 0);
        listed(&a, &[summary(OLD, None, 0)], "db_zero", 5);
        exchanged(&a, ONE, 6);
        assert!(
            listed(&a, &[summary(ONE, None, 6)], "db_one", 10)
                .archived
                .is_some()
        );

        let b = store
            .for_target(&at_address("https://convo.example", KEY))
            .unwrap();
        listed(&b, &[summary(ONE, None, 6)], "db_one", 20);
        assert_eq!(ids(b.list_sessions().unwrap()), [ONE]);
        assert!(a.list_sessions().unwrap().is_empty());
        // The earlier database's session stays kept aside under the first address.
        let all = store.list_all_sessions().unwrap();
        let kept: Vec<_> = all.iter().filter(|(r, _)| r.id == OLD).collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].0.target, format!("{}@db_zero", first.id()));
    }
}
