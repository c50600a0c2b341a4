//! What the routes that change an account's sessions tell its account stream
//! (`GET /v1/stream`, `routes::account_stream`): one call per change, [`tell`], which reads
//! the session's state after the change and hands the event to the hub (`stream::StreamHub`:
//! its listeners here, and the replicas that watch the account). Nothing is read when nobody
//! listens to the account anywhere; the usage change is told in any case (the admin stream
//! hears of every account's).

use convo_wire::account_stream::{AccountEvent, SessionChange};
use convo_wire::sessions::SessionSummary;

use crate::AppState;
use crate::storage::Storage;
use crate::storage::rows::SessionRow;
use crate::time;

/// What happened to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// It began (its first message, or a fork).
    Created,
    /// It changed: a message stored or removed, a title set, an exchange undone.
    Updated(SessionChange),
    /// It was deleted.
    Deleted,
}

/// A stored session as the extensions list it (`GET /v1/sessions`, `PATCH`, `fork`, and the
/// account stream's events).
pub(crate) fn summary(r: SessionRow) -> SessionSummary {
    let title = r.title.or_else(|| {
        r.first_user_message
            .as_deref()
            .and_then(|m| convo_wire::title::plain_title(m, convo_wire::title::TITLE_CHARS))
    });
    SessionSummary {
        session_id: r.id,
        created_at: time::ms_to_rfc3339(r.created_at_ms),
        last_activity_at: time::ms_to_rfc3339(r.last_activity_ms),
        message_count: r.messages,
        tokens: r.tokens,
        title,
        forked_from: r.forked_from.map(|(session_id, message_id)| {
            convo_wire::sessions::ForkedFrom {
                session_id,
                message_id,
            }
        }),
    }
}

/// Tells the account's stream listeners (on every replica) of `change` to `session_id`, and
/// that the account's usage changed. A session gone by the time it is read is told as
/// deleted (a turn that created it was rolled back). Errors reading it are logged: the
/// change itself happened, and a listener catches up with its next `hello`.
///
/// The session's events are read and handed on one at a time (`AppState::tell_order`): two
/// changes told at once (a reply's end and the next send, two titles) could otherwise be read
/// in one order and published in the other, leaving listeners with the older state.
pub(crate) async fn tell(state: &AppState, account: i64, session_id: &str, change: Change) {
    if !state.hub.account_watched(account) {
        // Nothing to read for the account's stream; the admin stream still hears of it.
        state.hub.usage_changed(account);
        return;
    }
    let _in_order = state.tell_order.lock(session_id).await;
    let deleted = || AccountEvent::SessionDeleted {
        session_id: session_id.to_string(),
    };
    let event = match change {
        Change::Deleted => deleted(),
        Change::Created | Change::Updated(_) => match state.store.list_sessions(account).await {
            Ok(rows) => match rows.into_iter().find(|r| r.id == session_id) {
                None => deleted(),
                Some(row) => {
                    let session = summary(row);
                    match change {
                        Change::Updated(change) => AccountEvent::SessionUpdated { session, change },
                        _ => AccountEvent::SessionCreated { session },
                    }
                }
            },
            Err(e) => {
                tracing::warn!(account, session = %session_id, error = %e, "cannot read a changed session for the account stream");
                state.hub.usage_changed(account);
                return;
            }
        },
    };
    state.hub.account_event(account, event);
    state.hub.usage_changed(account);
}
