//! One turn of a conversation after the user message is stored: run the engine, relay its
//! pieces (and its prompt progress) to the session's listeners, then store the reply with how
//! it ended, or roll the turn back on failure. A cancel (`StreamHub::cancel`) closes the
//! engine's channel and keeps the text so far as a `stopped` reply; with no text yet, the
//! turn is rolled back with `reply_stopped`. Once the engine has finished, a cancel comes too
//! late (`StreamHub::generated`): the reply is stored as the engine ended it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedMutexGuard, mpsc, oneshot, watch};

use super::AppState;
use super::account_events::{Change, tell};
use super::engine::{EngineError, EngineEvent, Finish, ReplyRequest};
use super::error::HttpError;
use super::storage::Storage;
use super::storage::rows::Reply;
use super::time;
use convo_core::{Account, Recorded};
use convo_tokens as tokens;
use convo_wire::account_stream::SessionChange;
use convo_wire::{ErrorBody, FinishReason, Message, Role, StreamEvent};

pub(crate) struct Turn {
    pub account: Account,
    pub session_id: String,
    pub user_message_id: String,
    pub reply_id: String,
    pub created_at_ms: i64,
    pub idempotency_key: Option<String>,
    /// A plain send records its 200 response under the idempotency key when complete
    /// (a streamed send recorded its 202 when it started).
    pub record_response: bool,
    pub request: ReplyRequest,
}

/// The stored reply and its serialized body (exactly as answered and remembered).
pub(crate) type TurnOutcome = Result<(Message, String), HttpError>;

/// Why a reply stopped when its session was deleted.
const SESSION_DELETED: &str = "the session was deleted";
/// Why a turn was rolled back when it was cancelled before any text.
const STOPPED_EMPTY: &str = "the reply was stopped before any text; the turn was rolled back";
/// Prompt progress reaches the listeners at most this often (the last report always does).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// A reply the engine ended, or that was stopped: its text and how it ended.
struct Generated {
    content: String,
    finish: FinishReason,
}

/// The turns being generated, by session, with a switch that stops each (a deleted
/// session's reply is not worth computing).
#[derive(Default)]
pub(crate) struct Stoppers {
    map: Mutex<HashMap<String, (String, watch::Sender<bool>)>>,
}

impl Stoppers {
    fn register(&self, session_id: &str, reply_id: &str) -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(false);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(session_id.to_string(), (reply_id.to_string(), tx));
        rx
    }

    fn unregister(&self, session_id: &str, reply_id: &str) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(session_id).is_some_and(|(id, _)| id == reply_id) {
            map.remove(session_id);
        }
    }

    /// Stops the reply being generated for `session_id`, if any.
    pub fn stop(&self, session_id: &str) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, tx)) = map.remove(session_id) {
            let _ = tx.send(true);
        }
    }
}

/// Runs the turn in the background (holding the session's lock until it ends), so that it
/// completes whether or not the sender is still waiting.
pub(crate) fn spawn(
    state: Arc<AppState>,
    turn: Turn,
    guard: OwnedMutexGuard<()>,
) -> oneshot::Receiver<TurnOutcome> {
    let (tx, rx) = oneshot::channel();
    let cancelled = state.hub.begin(
        &turn.session_id,
        &turn.reply_id,
        turn.idempotency_key.as_deref(),
    );
    let task_state = state.clone();
    let mut turns = state.turns.lock().unwrap_or_else(|p| p.into_inner());
    while turns.try_join_next().is_some() {}
    turns.spawn(async move {
        let outcome = run(&task_state, turn, cancelled, guard).await;
        let _ = tx.send(outcome);
    });
    rx
}

async fn generate(
    state: &AppState,
    request: ReplyRequest,
    reply_id: &str,
    session_id: &str,
    mut cancelled: watch::Receiver<bool>,
) -> Result<Generated, EngineError> {
    if state.engine.keeps_sessions() {
        // The engine may save an idle session's state as this reply takes its place: not one
        // deleted elsewhere (another process on the SQLite file; another replica, whose
        // deletion the heartbeat would find only within 5 s), nor one holding an exchange
        // undone there.
        state.catch_up_elsewhere().await;
    }
    let (tx, mut rx) = mpsc::channel::<EngineEvent>(64);
    let engine = state.engine.reply(request, tx);
    tokio::pin!(engine);
    let mut shutdown = state.shutdown.clone();
    let stopping = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    tokio::pin!(stopping);
    let mut stop = state.stoppers.register(session_id, reply_id);
    let deleted = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    tokio::pin!(deleted);
    let cancel = async move {
        // A switch dropped without being turned (the hub forgot the reply) is no cancel.
        if cancelled.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(cancel);
    let mut content = String::new();
    let mut result = None;
    let mut progress = Progress::default();
    loop {
        tokio::select! {
            piece = rx.recv() => match piece {
                Some(EngineEvent::Text(piece)) => {
                    if !piece.is_empty() {
                        state.hub.delta(session_id, reply_id, &piece);
                        content.push_str(&piece);
                    }
                }
                Some(EngineEvent::Progress { read, total }) => {
                    if content.is_empty() && progress.due(read, total, Instant::now()) {
                        state.hub.progress(session_id, reply_id, read, total);
                    }
                }
                // The engine dropped its sender: it has finished.
                None => break,
            },
            r = &mut engine, if result.is_none() => result = Some(r),
            _ = &mut stopping => return Err(EngineError("the service is shutting down".into())),
            _ = &mut deleted => return Err(EngineError(SESSION_DELETED.into())),
            _ = &mut cancel => {
                // Closing the channel is the engine's signal to stop; the text so far stays.
                drop(rx);
                if content.trim().is_empty() {
                    return Err(EngineError(STOPPED_EMPTY.into()));
                }
                return Ok(Generated { content, finish: FinishReason::Stopped });
            }
        }
    }
    let result = match result {
        Some(r) => r,
        None => engine.await,
    };
    // From here a cancel finds the reply ended; one that came first was answered "stopping"
    // and is honoured.
    if state.hub.generated(session_id, reply_id) {
        if content.trim().is_empty() {
            return Err(EngineError(STOPPED_EMPTY.into()));
        }
        return Ok(Generated {
            content,
            finish: FinishReason::Stopped,
        });
    }
    let finish = match result? {
        Finish::Complete => FinishReason::Stop,
        Finish::Length { .. } => FinishReason::Length,
    };
    if content.trim().is_empty() {
        return Err(EngineError("the engine returned an empty reply".into()));
    }
    Ok(Generated { content, finish })
}

/// When prompt progress is worth telling: at most every `PROGRESS_EVERY`, and the last
/// report (the whole prompt read) always.
#[derive(Default)]
struct Progress {
    last: Option<Instant>,
}

impl Progress {
    fn due(&mut self, read: u64, total: u64, now: Instant) -> bool {
        let due = read >= total
            || self
                .last
                .is_none_or(|last| now.duration_since(last) >= PROGRESS_EVERY);
        if due {
            self.last = Some(now);
        }
        due
    }
}

/// Generates the reply and stores it (or rolls the turn back). The session's lock (`guard`) is
/// released as the session's listeners are told the end (`done` or `error`), in the same step:
/// a client acting on that event (an undo, the next send) finds the session free.
async fn run(
    state: &AppState,
    turn: Turn,
    cancelled: watch::Receiver<bool>,
    guard: OwnedMutexGuard<()>,
) -> TurnOutcome {
    let Turn {
        account,
        session_id,
        user_message_id,
        reply_id,
        created_at_ms,
        idempotency_key,
        record_response,
        request,
    } = turn;
    let generated = generate(state, request, &reply_id, &session_id, cancelled).await;
    state.stoppers.unregister(&session_id, &reply_id);
    let Generated { content, finish } = match generated {
        Ok(generated) => generated,
        Err(e) => {
            if e.0 == STOPPED_EMPTY || e.0 == SESSION_DELETED {
                // Asked for: a stop before any text, or the session deleted meanwhile.
                tracing::info!(session = %session_id, why = %e, "reply stopped; turn rolled back");
            } else {
                tracing::warn!(session = %session_id, error = %e, "reply failed; turn rolled back");
            }
            let rolled = state
                .store
                .roll_back_turn(
                    account.id,
                    session_id.clone(),
                    user_message_id,
                    created_at_ms,
                    idempotency_key,
                )
                .await;
            let error = match rolled {
                Ok(()) if e.0 == SESSION_DELETED => HttpError::session_not_found(&session_id),
                Ok(()) if e.0 == STOPPED_EMPTY => HttpError::reply_stopped(STOPPED_EMPTY),
                Ok(()) => HttpError::engine(e.0),
                Err(store) => HttpError::from(store),
            };
            finish_with_error(state, &session_id, &reply_id, &error);
            drop(guard);
            tell(
                state,
                account.id,
                &session_id,
                Change::Updated(SessionChange::Message),
            );
            return Err(error);
        }
    };
    let tokens = tokens::count_async(&content).await;
    let message = Message {
        message_id: reply_id.clone(),
        session_id: session_id.clone(),
        role: Role::Assistant,
        content: content.clone(),
        tokens,
        created_at: time::ms_to_rfc3339(created_at_ms),
        finish_reason: Some(finish),
    };
    let body = serde_json::to_string(&message).unwrap_or_default();
    let reply = Reply {
        id: reply_id.clone(),
        content,
        tokens,
        created_at_ms,
        finish_reason: finish,
    };
    let record = record_response
        .then_some(idempotency_key)
        .flatten()
        .map(|key| {
            (
                key,
                Recorded {
                    status: 200,
                    body: body.clone(),
                },
            )
        });
    let stored = state
        .store
        .complete_turn(
            account.id,
            session_id.clone(),
            reply,
            record,
            time::now_ms(),
        )
        .await;
    let outcome = match stored {
        Ok(true) => {
            state.hub.finish(
                &session_id,
                &reply_id,
                StreamEvent::Done {
                    message: message.clone(),
                },
            );
            Ok((message, body))
        }
        Ok(false) => {
            let error = HttpError::session_not_found(&session_id);
            finish_with_error(state, &session_id, &reply_id, &error);
            Err(error)
        }
        Err(e) => {
            let error = HttpError::from(e);
            finish_with_error(state, &session_id, &reply_id, &error);
            Err(error)
        }
    };
    drop(guard);
    tell(
        state,
        account.id,
        &session_id,
        Change::Updated(SessionChange::Message),
    );
    outcome
}

fn finish_with_error(state: &AppState, session_id: &str, reply_id: &str, error: &HttpError) {
    let body: ErrorBody = (*error.body).clone();
    state.hub.finish(
        session_id,
        reply_id,
        StreamEvent::Error {
            session_id: session_id.to_string(),
            message_id: reply_id.to_string(),
            error: body,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_told_at_most_every_250_ms_and_always_at_the_end() {
        let start = Instant::now();
        let mut p = Progress::default();
        assert!(p.due(64, 1000, start));
        assert!(!p.due(128, 1000, start + Duration::from_millis(100)));
        assert!(p.due(512, 1000, start + Duration::from_millis(260)));
        assert!(!p.due(600, 1000, start + Duration::from_millis(300)));
        assert!(p.due(1000, 1000, start + Duration::from_millis(310)));
    }
}
