//! The account stream of `convo serve`, `GET /v1/stream` (an extension; docs/service.md,
//! "The account stream"): one WebSocket per client carrying what changes in the account, so
//! clients keep their session list and usage gauges current without polling. Each text frame
//! is one `AccountEvent` as JSON. Clients ignore event types they do not know.

use serde::{Deserialize, Serialize};

use crate::sessions::SessionSummary;
use crate::types::Usage;

/// Why a `session.updated` event was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionChange {
    /// A message was stored (a user message, or a reply that completed or failed).
    Message,
    /// The title was set (`PATCH`).
    Title,
    /// The last exchange was removed (`DELETE …/messages/last`).
    Undo,
}

/// One text frame of `GET /v1/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum AccountEvent {
    /// Sent first on every connection: the account's sessions and usage now, so a client
    /// that was away needs no other request to catch up.
    #[serde(rename = "hello")]
    Hello {
        sessions: Vec<SessionSummary>,
        usage: Usage,
        /// As in `GET /v1/sessions` ([`crate::sessions::DatabaseId`]).
        #[serde(
            default,
            rename = "databaseId",
            skip_serializing_if = "Option::is_none"
        )]
        database_id: Option<crate::sessions::DatabaseId>,
        /// As in `GET /v1/sessions` ([`crate::sessions::SessionList::deleted_session_ids`]).
        #[serde(
            default,
            rename = "deletedSessionIds",
            skip_serializing_if = "Option::is_none"
        )]
        deleted_session_ids: Option<Vec<String>>,
    },
    /// A session began (its first message, or a fork).
    #[serde(rename = "session.created")]
    SessionCreated { session: SessionSummary },
    /// A session changed; `session` is its state as the server sent the event: after the
    /// change, and after any change made since (a later event tells those too).
    #[serde(rename = "session.updated")]
    SessionUpdated {
        session: SessionSummary,
        change: SessionChange,
    },
    /// A session was deleted.
    #[serde(rename = "session.deleted", rename_all = "camelCase")]
    SessionDeleted { session_id: String },
    /// The account's usage after a change (the shape of `GET /v1/analytics/usage`).
    #[serde(rename = "usage")]
    Usage { usage: Usage },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_tagged_by_type() {
        let e = AccountEvent::SessionDeleted {
            session_id: "session_abcdefgh12345678".into(),
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"type":"session.deleted","sessionId":"session_abcdefgh12345678"}"#
        );
        assert_eq!(serde_json::from_str::<AccountEvent>(&json).unwrap(), e);
    }

    #[test]
    fn an_unknown_type_is_an_error_the_client_can_skip() {
        assert!(serde_json::from_str::<AccountEvent>(r#"{"type":"session.moved"}"#).is_err());
    }
}
