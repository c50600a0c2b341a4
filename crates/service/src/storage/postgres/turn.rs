//! What a turn on PostgreSQL needs on either path (turn_batch.rs writes every turn, alone
//! as a batch of one or in batches): the transaction of two round trips (`Pipelined`:
//! `BEGIN` with the first statement, `COMMIT` with the last), the admission of a turn on the
//! facts PostgreSQL read (`decide`), how its transaction commits (`commit_of`: a send answered
//! with its reply does not wait for the WAL flush at its start), what its sender is answered
//! (`answered`), and a reply to store (`Completion`, `stored`). The account's counters are
//! shard rows (counters.rs), so turns of one account hold no row in common.

use std::sync::Arc;

use deadpool_postgres::{ClientWrapper, Object};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::history_cache::{self, Held};
use super::{role, status_of};
use crate::error::StoreError;
use crate::storage::rows::Reply;
use convo_core::admission::{self, Admission, SessionFacts, TurnFacts};
use convo_core::{HistoryEntry, Recorded, SessionStatus, TurnRefusal, TurnStart, TurnStarted};

type Params<'a> = [&'a (dyn ToSql + Sync)];

/// A pooled connection whose transaction is opened by the round trip of its first statement
/// and closed by that of its last. Dropped while open (an error, or a request cancelled
/// between the two), the connection leaves the pool and closes, which rolls it back.
pub(super) struct Pipelined {
    client: Option<Object>,
    open: bool,
}

impl Pipelined {
    pub(super) fn new(client: Object) -> Pipelined {
        Pipelined {
            client: Some(client),
            open: false,
        }
    }

    fn client(&self) -> &ClientWrapper {
        self.client
            .as_ref()
            .expect("the connection is held until drop")
    }

    /// `BEGIN` and the first statement, in one round trip; its rows.
    pub(super) async fn first_rows(
        &mut self,
        stmt: &str,
        params: &Params<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        let c = self.client();
        let stmt = c.prepare_cached(stmt).await?;
        self.open = true;
        let c = self.client();
        let (begin, rows) = tokio::join!(c.batch_execute("BEGIN"), c.query(&stmt, params));
        begin?;
        Ok(rows?)
    }

    /// The last statement and `COMMIT` (after `SET LOCAL synchronous_commit TO off` for an
    /// unflushed commit), in one round trip; the statement's own result, its rows (the
    /// connection goes back to the pool). After an error the transaction was rolled back (a
    /// `COMMIT` after an error does that).
    pub(super) async fn last(
        mut self,
        stmt: &str,
        params: &Params<'_>,
        commit: Commit,
    ) -> Result<Result<Vec<Row>, tokio_postgres::Error>, StoreError> {
        let c = self.client();
        let stmt = c.prepare_cached(stmt).await?;
        let (done, committed) = match commit {
            Commit::Flushed => {
                tokio::join!(c.query(&stmt, params), c.batch_execute("COMMIT"))
            }
            Commit::Unflushed => {
                let (set, done, committed) = tokio::join!(
                    c.batch_execute("SET LOCAL synchronous_commit TO off"),
                    c.query(&stmt, params),
                    c.batch_execute("COMMIT")
                );
                (set.and(done), committed)
            }
        };
        committed?;
        drop(self.close());
        Ok(done)
    }

    pub(super) async fn rollback(mut self) -> Result<Object, StoreError> {
        self.client().batch_execute("ROLLBACK").await?;
        Ok(self.close())
    }

    /// The connection, its transaction ended.
    fn close(&mut self) -> Object {
        self.open = false;
        self.client
            .take()
            .expect("the connection is held until drop")
    }
}

impl Drop for Pipelined {
    fn drop(&mut self) {
        if self.open
            && let Some(client) = self.client.take()
        {
            drop(Object::take(client));
        }
    }
}

/// Whether a transaction's `COMMIT` waits for its WAL to be flushed to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Commit {
    Flushed,
    /// Answered once written to the WAL buffers; PostgreSQL's WAL writer flushes it within
    /// `wal_writer_delay`. A crash of the PostgreSQL host before that loses the transaction.
    Unflushed,
}

/// How the writes of an admitted turn are committed. Those of a turn whose sender waits for
/// the reply (not streamed) are acknowledged only with it, after `convo_turn_complete`'s
/// commit, which waits for the WAL to be flushed up to itself, and so past this earlier
/// commit: they need not wait for a flush of their own. Nothing acknowledged is lost in a
/// crash; a start lost in one is a send whose reply never came. A streamed turn's start is
/// acknowledged at once (202), so it waits for the flush.
fn turn_commit(t: &TurnStart) -> Commit {
    if t.accepted_response.is_some() {
        Commit::Flushed
    } else {
        Commit::Unflushed
    }
}

/// How the transaction that writes `decided` for `t` commits: a refusal or a replay (its
/// request counted) waits for the flush; an admitted turn as `turn_commit` says.
pub(super) fn commit_of(decided: &Admission, t: &TurnStart) -> Commit {
    match decided {
        Admission::Admitted { .. } => turn_commit(t),
        Admission::Refused(_) | Admission::Replay(_) => Commit::Flushed,
    }
}

/// The arguments of `convo_turn_facts_2` that name what the replica holds of each session's
/// history (`held`, in the order of the sessions): its change count (-1 for none, which no
/// session has) and its last message (0 for none).
pub(super) fn held_arguments(held: &[Option<Held>]) -> (Vec<i64>, Vec<i64>) {
    held.iter()
        .map(|h| h.as_ref().map_or((-1, 0), |h| (h.changes, h.last)))
        .unzip()
}

/// What `convo_turn_facts_2` found.
struct Found {
    status: SessionStatus,
    busy: bool,
    facts: TurnFacts,
    history: Vec<HistoryEntry>,
    /// The history to keep for the session's next turn: as read, or as held where nothing
    /// was read of a live session.
    read: Option<Held>,
}

/// The facts of `t` in `row`, where the replica held `held` of the session's history: the
/// history is what it held followed by the messages read after it when the session's change
/// count is still the one held (PostgreSQL then read only those), else the messages read.
fn found(
    row: &Row,
    account_id: i64,
    t: &TurnStart,
    held: Option<Held>,
) -> Result<Found, StoreError> {
    let owner: Option<i64> = row.get(0);
    let deleted_at: Option<i64> = row.get(1);
    let status = status_of(owner.map(|o| (o, deleted_at)), account_id);
    let busy: bool = row.get(2);
    let changes: Option<i64> = row.get(10);
    let last: Option<i64> = row.get(11);
    let (mut history, unused) = match held {
        Some(held) if changes == Some(held.changes) && last.is_some() => {
            (Arc::unwrap_or_clone(held.entries), None)
        }
        held => (Vec::new(), held),
    };
    if let (Some(roles), Some(contents), Some(tokens)) = (
        row.get::<_, Option<Vec<String>>>(4),
        row.get::<_, Option<Vec<String>>>(5),
        row.get::<_, Option<Vec<i64>>>(6),
    ) {
        for ((r, content), tokens) in roles.iter().zip(contents).zip(tokens) {
            history.push(HistoryEntry {
                role: role(r)?,
                content,
                tokens: tokens.max(0) as u64,
            });
        }
    }
    let read = match (changes, last) {
        (Some(changes), Some(last)) if history_cache::worth_keeping(&history) => Some(Held {
            changes,
            last,
            entries: Arc::new(history.clone()),
        }),
        (Some(_), Some(_)) => None,
        // Nothing read (a turn in flight): what was held is as right as it was.
        _ if status == SessionStatus::Live => unused,
        _ => None,
    };
    let session = match status {
        SessionStatus::Gone => SessionFacts::Gone,
        SessionStatus::Unused => SessionFacts::New {
            live_sessions: row.get::<_, Option<i64>>(3).unwrap_or(0).max(0) as u64,
        },
        SessionStatus::Live => SessionFacts::Existing {
            stored_tokens: history.iter().map(|m| m.tokens).sum(),
        },
    };
    let replay = match (
        row.get::<_, Option<i32>>(7),
        row.get::<_, Option<String>>(8),
    ) {
        (Some(status), Some(body)) => Some(Recorded {
            status: status as u16,
            body,
        }),
        _ => None,
    };
    let facts = TurnFacts {
        session,
        replay,
        tokens_used: row.get::<_, Option<i64>>(9).unwrap_or(0).max(0) as u64,
        limits: t.account.tier.limits(),
        message_tokens: t.message.tokens,
        max_context_tokens: t.max_context_tokens,
    };
    Ok(Found {
        status,
        busy,
        facts,
        history,
        read,
    })
}

/// The most live sessions the account may have for the admission to decide as it did on
/// `facts` (for a new session; the account's row is not locked while it decides, so
/// `convo_turn_write_counted_n` checks this bound under that lock). Asked of `admission::admit` itself,
/// which can only turn to a refusal as the count grows: the last count deciding the same.
fn live_sessions_bound(facts: &TurnFacts, decided: &Admission) -> u64 {
    let SessionFacts::New { live_sessions } = facts.session else {
        return u64::MAX;
    };
    let same = |live_sessions| {
        let facts = TurnFacts {
            session: SessionFacts::New { live_sessions },
            ..facts.clone()
        };
        admission::admit(facts) == *decided
    };
    let (mut lo, mut hi) = (live_sessions, u64::MAX);
    if same(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if same(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// A turn as its admission decided it, from the row `convo_turn_facts_2` answered.
pub(super) struct Decided {
    pub(super) admission: Admission,
    /// The bound `convo_turn_write_counted_n` checks (`live_sessions_bound`), as PostgreSQL
    /// stores it.
    pub(super) max_live: i64,
    /// What the session held before the turn.
    pub(super) history: Vec<HistoryEntry>,
}

/// The admission of `t` on `row` (of `convo_turn_facts_2`, where the replica held `held` of
/// the session's history); `None` while its session has a turn in flight (on another replica,
/// or left by a dead one): its sender waits and asks again. Beside it, the session's history as
/// read, to keep for its next turn.
pub(super) fn decide(
    row: &Row,
    t: &TurnStart,
    held: Option<Held>,
) -> Result<(Option<Decided>, Option<Held>), StoreError> {
    let Found {
        status,
        busy,
        facts,
        history,
        read,
    } = found(row, t.account.id, t, held)?;
    if busy && status == SessionStatus::Live {
        return Ok((None, read));
    }
    let admission = admission::admit(facts.clone());
    let max_live = i64::try_from(live_sessions_bound(&facts, &admission)).unwrap_or(i64::MAX);
    Ok((
        Some(Decided {
            admission,
            max_live,
            history,
        }),
        read,
    ))
}

/// The status and body of the response a turn's idempotency record remembers at its start (a
/// streamed send's 202), if any.
pub(super) fn recorded_response(t: &TurnStart) -> (Option<i32>, Option<&str>) {
    match &t.accepted_response {
        Some(r) => (Some(i32::from(r.status)), Some(r.body.as_str())),
        None => (None, None),
    }
}

/// What the sender of `t` is answered once `decided` is written: an admitted turn's history
/// (`history`, what was stored before) ends with its message.
pub(super) fn answered(
    decided: Admission,
    mut history: Vec<HistoryEntry>,
    t: &TurnStart,
) -> Result<TurnStarted, TurnRefusal> {
    match decided {
        Admission::Refused(refusal) => Err(refusal),
        Admission::Replay(recorded) => Ok(TurnStarted::Replay(recorded)),
        Admission::Admitted { context_tokens, .. } => {
            let m = &t.message;
            history.push(HistoryEntry {
                role: m.role,
                content: m.content.clone(),
                tokens: m.tokens,
            });
            Ok(TurnStarted::Ready {
                history,
                context_tokens,
            })
        }
    }
}

/// A reply to store and its turn to end (`Storage::complete_turn`'s arguments).
pub(super) struct Completion {
    pub(super) account_id: i64,
    pub(super) session_id: String,
    pub(super) reply: Reply,
    /// The key and the response to remember for it (a send answered with its reply).
    pub(super) idempotent: Option<(String, Recorded)>,
    pub(super) now_ms: i64,
}

impl Completion {
    /// The idempotency key, status and body to remember, if any.
    pub(super) fn remembered(&self) -> (Option<&str>, Option<i32>, Option<&str>) {
        match &self.idempotent {
            Some((key, r)) => (
                Some(key.as_str()),
                Some(i32::from(r.status)),
                Some(r.body.as_str()),
            ),
            None => (None, None, None),
        }
    }
}

/// What `convo_turn_complete_n`'s outcome means: stored (true), or the session not live
/// (false, nothing stored).
pub(super) fn stored(outcome: i32) -> Result<bool, StoreError> {
    match outcome {
        0 => Ok(true),
        1 => Ok(false),
        // Another replica found this one's lease expired and rolled the turn back.
        _ => Err(StoreError::Commit(
            "the turn was rolled back by another replica (its lease expired)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use convo_core::{Account, Tier, UserMessage};
    use convo_wire::Role;

    fn start(accepted_response: Option<Recorded>) -> TurnStart {
        TurnStart {
            account: Account {
                id: 1,
                tier: Tier::Free,
            },
            session_id: "session_a".into(),
            reply_id: "msg_reply".into(),
            message: UserMessage {
                id: "msg_user".into(),
                role: Role::User,
                content: "hello".into(),
                tokens: 1,
                metadata: None,
            },
            idempotency_key: None,
            accepted_response,
            max_context_tokens: 8192,
            period_start_ms: 0,
            now_ms: 0,
        }
    }

    /// A streamed send is answered (202) when its start commits: that commit waits for the
    /// flush. A send answered with its reply leaves the flush to the reply's commit.
    #[test]
    fn only_a_start_answered_at_once_waits_for_its_own_flush() {
        let accepted = Recorded {
            status: 202,
            body: "{}".into(),
        };
        assert_eq!(turn_commit(&start(Some(accepted))), Commit::Flushed);
        assert_eq!(turn_commit(&start(None)), Commit::Unflushed);
    }
}
