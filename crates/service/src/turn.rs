//! One turn of a conversation after the user message is stored: run the engine, relay its
//! pieces to the session's listeners, then store the reply, or roll the turn back on failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, mpsc, oneshot, watch};

use super::AppState;
use super::account_events::{Change, tell};
use super::engine::{EngineError, EngineEvent, ReplyRequest};
use super::error::HttpError;
use super::storage::Storage;
use super::storage::rows::Reply;
use super::time;
use convo_core::{Account, Recorded};
use convo_tokens as tokens;
use convo_wire::account_stream::SessionChange;
use convo_wire::{ErrorBody, Message, Role, StreamEvent};

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
    state.hub.begin(&turn.session_id, &turn.reply_id);
    let task_state = state.clone();
    let mut turns = state.turns.lock().unwrap_or_else(|p| p.into_inner());
    while turns.try_join_next().is_some() {}
    turns.spawn(async move {
        let outcome = run(&task_state, turn).await;
        drop(guard);
        let _ = tx.send(outcome);
    });
    rx
}

async fn generate(
    state: &AppState,
    request: ReplyRequest,
    reply_id: &str,
    session_id: &str,
) -> Result<String, EngineError> {
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
    let mut content = String::new();
    let mut result = None;
    loop {
        tokio::select! {
            piece = rx.recv() => match piece {
                Some(EngineEvent::Text(piece)) => {
                    if !piece.is_empty() {
                        state.hub.delta(session_id, reply_id, &piece);
                        content.push_str(&piece);
                    }
                }
                // Not on the stream yet.
                Some(EngineEvent::Progress { .. }) => {}
                // The engine dropped its sender: it has finished.
                None => break,
            },
            r = &mut engine, if result.is_none() => result = Some(r),
            _ = &mut stopping => return Err(EngineError("the service is shutting down".into())),
            _ = &mut deleted => return Err(EngineError(SESSION_DELETED.into())),
        }
    }
    let result = match result {
        Some(r) => r,
        None => engine.await,
    };
    result?;
    if content.trim().is_empty() {
        return Err(EngineError("the engine returned an empty reply".into()));
    }
    Ok(content)
}

async fn run(state: &AppState, turn: Turn) -> TurnOutcome {
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
    let generated = generate(state, request, &reply_id, &session_id).await;
    state.stoppers.unregister(&session_id, &reply_id);
    let content = match generated {
        Ok(content) => content,
        Err(e) => {
            tracing::warn!(session = %session_id, error = %e, "reply failed; turn rolled back");
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
                Ok(()) => HttpError::engine(e.0),
                Err(store) => HttpError::from(store),
            };
            finish_with_error(state, &session_id, &reply_id, &error);
            tell(
                state,
                account.id,
                &session_id,
                Change::Updated(SessionChange::Message),
            )
            .await;
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
    };
    let body = serde_json::to_string(&message).unwrap_or_default();
    let reply = Reply {
        id: reply_id.clone(),
        content,
        tokens,
        created_at_ms,
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
    tell(
        state,
        account.id,
        &session_id,
        Change::Updated(SessionChange::Message),
    )
    .await;
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
