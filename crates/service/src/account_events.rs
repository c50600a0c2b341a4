//! What the routes that change an account's sessions tell its account stream
//! (`GET /v1/stream`, `routes::account_stream`): one call per change, [`tell`], which hands the
//! hub (`stream::StreamHub`) the session's id and what happened to it, for its listeners here
//! and the replicas that watch the account; and what a listener then sends, [`event`], which
//! reads the session's state when the listener takes the signal.
//!
//! Read by the listener, not by the teller: a listener's signals come in the order they reach
//! it, from this replica and through the relay from others, and each of its events is read
//! after its signal came, so after the change it tells was committed. The last event a
//! listener sends of a session is read after every change told to it, whatever order the
//! changes were made, told or relayed in: it is the session's state.

use convo_wire::account_stream::AccountEvent;
use convo_wire::sessions::SessionSummary;

use crate::AppState;
use crate::error::StoreError;
use crate::storage::Storage;
use crate::storage::rows::SessionRow;
use crate::time;

/// What happened to a session (the hub's, which carries it to listeners and replicas).
pub(crate) use crate::stream::Change;

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
/// that the account's usage changed. Nothing is read here: each listener reads the session
/// when it takes the signal ([`event`]).
pub(crate) fn tell(state: &AppState, account: i64, session_id: &str, change: Change) {
    state.hub.session_changed(account, session_id, change);
    state.hub.usage_changed(account);
}

/// The event a listener of account `account` sends for `change` to `session_id`, read now: the
/// session's state as it is stored, told as deleted when it is gone (deleted since, or a turn
/// that created it was rolled back).
pub(crate) async fn event(
    state: &AppState,
    account: i64,
    session_id: &str,
    change: Change,
) -> Result<AccountEvent, StoreError> {
    let deleted = || AccountEvent::SessionDeleted {
        session_id: session_id.to_string(),
    };
    if change == Change::Deleted {
        return Ok(deleted());
    }
    let row = state
        .store
        .session_summary(account, session_id.to_string())
        .await?;
    Ok(match (row, change) {
        (None, _) => deleted(),
        (Some(row), Change::Updated(change)) => AccountEvent::SessionUpdated {
            session: summary(row),
            change,
        },
        (Some(row), _) => AccountEvent::SessionCreated {
            session: summary(row),
        },
    })
}
