//! Turns started and replies stored in batches (batch.rs), and a turn that comes alone as a
//! batch of one, run again as long as it may not decide (`start_alone`, `complete_alone`):
//! the set-based functions of migration 11, one statement per table per batch, in one
//! transaction, taking the locks in the order one turn takes them (sessions by id, then
//! accounts and their counters by account), so that two batches do not deadlock. What both
//! paths share (the two-round-trip transaction, the admission, the commit) is in turn.rs.
//!
//! - **Starts**: `convo_turn_facts_2` (with `BEGIN`) reads each turn's facts under its
//!   session's lock (of its history, only what came after the part this replica holds:
//!   history_cache.rs); `convo_core::admission::admit` decides each; `convo_turn_write_counted_n`
//!   (with `COMMIT`) counts every request, an account's together (within its shard's
//!   allowance, or by a refill that counts them all), and writes the admitted ones. An account
//!   whose request limit is reached is refused in the batch (its turns answered `None`,
//!   nothing of them written or counted) and the batch goes on. A turn whose session has a
//!   turn in flight is left alone (its caller waits for it as on the path of a turn alone).
//!   Anything the batch must not decide (a session created concurrently, the account's
//!   sessions changed past the admission's bound, a limit that leaves some requests but the
//!   shard fewer than the batch counts) fails the transaction, and every turn of it runs
//!   alone, where the limit is applied one request at a time.
//! - **Replies**: `convo_turn_complete_n`, one statement, its outcomes in order.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Object;

use super::PgStore;
use super::batch::{Batch, Slot};
use super::counters::{self, TAKEN, raised};
use super::history_cache::HistoryCache;
use super::leases::{EndedTurn, Unended, keep_unended};
use super::turn::{
    self, Commit, Completion, Decided, Pipelined, answered, commit_of, decide, recorded_response,
    stored,
};
use crate::error::StoreError;
use crate::storage::interface::TurnAdmission;
use crate::storage::rows::{IDEMPOTENCY_TTL_MS, RequestCount};
use convo_core::admission::Admission;
use convo_core::{TurnStart, TurnStarted};
use convo_wire::Role;

/// SQLSTATE of `convo_turn_write_counted_n` when another transaction created the session first, or the
/// account's live sessions changed past what the admission decided on.
const RACED: &str = "CVR01";

/// Turn starts (`Storage::start_turn`) in batches.
pub(super) struct Starts {
    pub(super) replica: Arc<str>,
    pub(super) unended: Unended,
    pub(super) history: Arc<HistoryCache>,
}

impl Batch for Starts {
    type In = (RequestCount, TurnStart);
    type Out = TurnAdmission;

    async fn write(
        &self,
        client: Object,
        inputs: &[Self::In],
    ) -> Result<Vec<Option<TurnAdmission>>, StoreError> {
        start(client, &self.replica, &self.history, inputs).await
    }

    /// A turn started for a sender that is gone: nobody runs its reply, so it is rolled back.
    fn unanswered(&self, (_, t): Self::In, out: TurnAdmission) {
        if let Some(Ok(TurnStarted::Ready { .. })) = out {
            keep_unended(
                &self.unended,
                EndedTurn {
                    session_id: t.session_id,
                    message_id: t.reply_id,
                },
            );
        }
    }
}

/// Replies (`Storage::complete_turn`) in batches.
pub(super) struct Completions;

impl Batch for Completions {
    type In = Completion;
    type Out = Result<bool, StoreError>;

    async fn write(
        &self,
        client: Object,
        inputs: &[Completion],
    ) -> Result<Vec<Option<Self::Out>>, StoreError> {
        complete(client, inputs).await
    }
}

/// The places of `items` in the order of `key`.
fn order_by<T, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| key(&items[i]));
    order
}

async fn start(
    client: Object,
    replica: &str,
    history: &HistoryCache,
    jobs: &[(RequestCount, TurnStart)],
) -> Result<Vec<Option<TurnAdmission>>, StoreError> {
    let mut tx = Pipelined::new(client);
    let decided = decide_all(&mut tx, history, jobs).await?;
    if decided.iter().all(Option::is_none) {
        drop(tx.rollback().await?);
        return Ok(decided.iter().map(|_| None).collect());
    }
    let refused = write_all(tx, replica, jobs, &decided).await??;
    Ok(decided
        .into_iter()
        .zip(jobs)
        .map(|(d, (_, t))| {
            d.map(|d| {
                (!refused.contains(&t.account.id)).then(|| answered(d.admission, d.history, t))
            })
        })
        .collect())
}

/// Opens the transaction of `jobs` with `convo_turn_facts_2` (one round trip) and decides
/// each turn on its facts (`turn::decide`): `None` where its session has a turn in flight.
/// Of each session whose history this replica holds (`history`), only the messages after it
/// are read, and the history read is kept for the session's next turn.
pub(super) async fn decide_all(
    tx: &mut Pipelined,
    history: &HistoryCache,
    jobs: &[(RequestCount, TurnStart)],
) -> Result<Vec<Option<Decided>>, StoreError> {
    let by_session = order_by(jobs, |(_, t)| t.session_id.clone());
    let accounts: Vec<i64> = by_session.iter().map(|&i| jobs[i].1.account.id).collect();
    let sessions: Vec<&str> = by_session
        .iter()
        .map(|&i| jobs[i].1.session_id.as_str())
        .collect();
    let keys: Vec<Option<&str>> = by_session
        .iter()
        .map(|&i| jobs[i].1.idempotency_key.as_deref())
        .collect();
    let periods: Vec<i64> = by_session
        .iter()
        .map(|&i| jobs[i].1.period_start_ms)
        .collect();
    let held: Vec<_> = sessions.iter().map(|s| history.take(s)).collect();
    let (changes, after) = turn::held_arguments(&held);
    let earliest = jobs.iter().map(|(_, t)| t.now_ms).min().unwrap_or(0);
    let expired = earliest - IDEMPOTENCY_TTL_MS;
    let rows = tx
        .first_rows(
            "SELECT o_owner, o_deleted_at, o_busy, o_live_sessions, o_roles, o_contents, o_tokens,
                    o_replay_status, o_replay_body, o_tokens_used, o_changes, o_last
             FROM convo_turn_facts_2($1, $2, $3, $4, $5, $6, $7)",
            &[
                &accounts, &sessions, &keys, &expired, &periods, &changes, &after,
            ],
        )
        .await?;
    if rows.len() != jobs.len() {
        return Err(StoreError::Corrupt(format!(
            "the facts of {} turns came back as {} rows",
            jobs.len(),
            rows.len()
        )));
    }
    let mut decided: Vec<Option<Decided>> = (0..jobs.len()).map(|_| None).collect();
    for ((row, &i), held) in rows.iter().zip(&by_session).zip(held) {
        let t = &jobs[i].1;
        let (d, read) = decide(row, t, held)?;
        if let Some(read) = read {
            history.put(&t.session_id, read);
        }
        decided[i] = d;
    }
    Ok(decided)
}

/// Writes the turns of `jobs` as `decided` (those decided; an admitted one's rows, every
/// one's request counted) with `convo_turn_write_counted_n`, and commits: one round trip. The
/// accounts refused for their request limit (nothing of their turns written or counted). The
/// statement's own error (a SQLSTATE of the function) comes back as the inner error, after
/// which nothing was kept.
pub(super) async fn write_all(
    tx: Pipelined,
    replica: &str,
    jobs: &[(RequestCount, TurnStart)],
    decided: &[Option<Decided>],
) -> Result<Result<Vec<i64>, tokio_postgres::Error>, StoreError> {
    // In the order of accounts.
    let order: Vec<usize> = order_by(jobs, |(_, t)| (t.account.id, t.session_id.clone()))
        .into_iter()
        .filter(|&i| decided[i].is_some())
        .collect();
    let mut w = Writes::default();
    let mut commit = Commit::Unflushed;
    for &i in &order {
        let (request, t) = &jobs[i];
        let d = decided[i].as_ref().expect("only decided turns are written");
        if commit_of(&d.admission, t) == Commit::Flushed {
            commit = Commit::Flushed;
        }
        // A refusal or a replay counts the request only.
        let (write, create) = match d.admission {
            Admission::Admitted { create_session, .. } => (true, create_session),
            Admission::Refused(_) | Admission::Replay(_) => (false, false),
        };
        w.write.push(write);
        let m = &t.message;
        let (status, body) = recorded_response(t);
        w.accounts.push(t.account.id);
        w.sessions.push(&t.session_id);
        w.create.push(create);
        w.max_live.push(d.max_live);
        w.now.push(t.now_ms);
        w.messages.push(&m.id);
        w.roles.push(m.role.as_str());
        w.contents.push(&m.content);
        w.tokens.push(m.tokens as i64);
        w.metadata.push(m.metadata.as_deref());
        w.keys.push(t.idempotency_key.as_deref());
        w.statuses.push(status);
        w.bodies.push(body);
        w.replies.push(&t.reply_id);
        w.periods.push(request.period_start_ms());
        w.limits.push(counters::request_limit(request));
    }
    let written = tx.last(
        "SELECT convo_turn_write_counted_n($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
        &[
            &w.write,
            &w.accounts,
            &w.sessions,
            &w.create,
            &w.max_live,
            &w.now,
            &w.messages,
            &w.roles,
            &w.contents,
            &w.tokens,
            &w.metadata,
            &w.keys,
            &w.statuses,
            &w.bodies,
            &replica,
            &w.replies,
            &w.periods,
            &w.limits,
        ],
        commit,
    )
    .await?;
    Ok(written.map(|rows| {
        rows.first()
            .map(|row| row.get::<_, Vec<i64>>(0))
            .unwrap_or_default()
    }))
}

/// The arguments of `convo_turn_write_counted_n`, one element per turn.
#[derive(Default)]
struct Writes<'a> {
    write: Vec<bool>,
    accounts: Vec<i64>,
    sessions: Vec<&'a str>,
    create: Vec<bool>,
    max_live: Vec<i64>,
    now: Vec<i64>,
    messages: Vec<&'a str>,
    roles: Vec<&'static str>,
    contents: Vec<&'a str>,
    tokens: Vec<i64>,
    metadata: Vec<Option<&'a str>>,
    keys: Vec<Option<&'a str>>,
    statuses: Vec<Option<i32>>,
    bodies: Vec<Option<&'a str>>,
    replies: Vec<&'a str>,
    periods: Vec<i64>,
    limits: Vec<i64>,
}

/// Stores `items` with `convo_turn_complete_n` (one statement); each one's answer, in order.
pub(super) async fn complete(
    client: Object,
    items: &[Completion],
) -> Result<Vec<Option<Result<bool, StoreError>>>, StoreError> {
    let order = order_by(items, |c| (c.account_id, c.session_id.clone()));
    let each = |f: &dyn Fn(&Completion) -> i64| -> Vec<i64> {
        order.iter().map(|&i| f(&items[i])).collect()
    };
    let accounts = each(&|c| c.account_id);
    let tokens = each(&|c| c.reply.tokens as i64);
    let created = each(&|c| c.reply.created_at_ms);
    let now = each(&|c| c.now_ms);
    let mut sessions = Vec::new();
    let mut replies = Vec::new();
    let mut contents = Vec::new();
    let mut keys = Vec::new();
    let mut statuses = Vec::new();
    let mut bodies = Vec::new();
    let mut finish = Vec::new();
    for &i in &order {
        let c = &items[i];
        let (key, status, body) = c.remembered();
        sessions.push(c.session_id.as_str());
        replies.push(c.reply.id.as_str());
        contents.push(c.reply.content.as_str());
        keys.push(key);
        statuses.push(status);
        bodies.push(body);
        finish.push(c.reply.finish_reason.as_str());
    }
    let stmt = client
        .prepare_cached(
            "SELECT convo_turn_complete_n($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .await?;
    let outcomes: Vec<i32> = client
        .query_one(
            &stmt,
            &[
                &accounts,
                &sessions,
                &replies,
                &Role::Assistant.as_str(),
                &contents,
                &tokens,
                &created,
                &keys,
                &statuses,
                &bodies,
                &now,
                &finish,
            ],
        )
        .await?
        .get(0);
    if outcomes.len() != items.len() {
        return Err(StoreError::Corrupt(format!(
            "{} replies were stored with {} outcomes",
            items.len(),
            outcomes.len()
        )));
    }
    let mut answers: Vec<Option<Result<bool, StoreError>>> = items.iter().map(|_| None).collect();
    for (&i, outcome) in order.iter().zip(outcomes) {
        answers[i] = Some(stored(outcome));
    }
    Ok(answers)
}

/// `Storage::start_turn` for a turn that came alone: a batch of one, in one
/// transaction of two round trips, run again as long as it may not decide.
/// `slot`, the batch slot a turn that came alone holds (batch.rs), is given up before
/// waiting for another replica's turn in the session.
pub(super) async fn start_alone(
    store: &PgStore,
    request: RequestCount,
    t: TurnStart,
    mut slot: Option<Slot>,
) -> Result<TurnAdmission, StoreError> {
    // A session first used by two replicas at once: the loser runs again and finds it (so
    // does a new session whose account's live sessions changed past the admission's bound). A
    // session with a turn in flight elsewhere: wait (without a connection) and run again. A
    // counter shard taken between the count's read and its update (`TAKEN`): run again.
    // Nothing of an attempt that runs again is kept, not even its request count. The request
    // limit reached (the account refused): nothing of the turn is written and the request is
    // refused. (`CVQ03` is not raised for one request: a share of what the limit leaves is
    // at least one request while it leaves any.)
    let (mut races, mut taken, mut pause) = (0, 0, Duration::from_millis(2));
    let jobs = [(request, t)];
    loop {
        let mut tx = Pipelined::new(store.client().await?);
        let mut decided = decide_all(&mut tx, &store.history, &jobs).await?;
        if decided[0].is_none() {
            drop(tx.rollback().await?);
            drop(slot.take());
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
            continue;
        }
        let written = write_all(tx, store.replica(), &jobs, &decided).await?;
        let [(_, t)] = &jobs;
        match written {
            Ok(refused) if refused.contains(&t.account.id) => return Ok(None),
            Ok(_) => {
                let d = decided.pop().flatten().expect("the turn was decided");
                return Ok(Some(answered(d.admission, d.history, t)));
            }
            Err(e) if raised(&e, TAKEN) => {
                taken += 1;
                if taken >= counters::TAKEN_TIMES {
                    return Err(counters::taken_too_often());
                }
            }
            Err(e) if raised(&e, RACED) => {
                races += 1;
                if races > 8 {
                    return Err(StoreError::Contended(
                        "the session or the account's sessions kept changing concurrently".into(),
                    ));
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// `Storage::complete_turn` for a reply that came alone: a batch of one.
pub(super) async fn complete_alone(store: &PgStore, c: &Completion) -> Result<bool, StoreError> {
    let mut answers = complete(store.client().await?, std::slice::from_ref(c)).await?;
    answers
        .pop()
        .flatten()
        .ok_or_else(|| StoreError::Corrupt("a reply was stored without an outcome".into()))?
}
