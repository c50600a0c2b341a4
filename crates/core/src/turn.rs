//! The domain types of a turn, shared by both storage backends and the routes.

use convo_wire::Role;

use crate::plans::Tier;

/// The account an authenticated request acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    pub id: i64,
    pub tier: Tier,
}

/// A response remembered under an `Idempotency-Key` (status and body, byte for byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub status: u16,
    pub body: String,
}

/// What a session id means to an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStatus {
    /// Never used: the first message creates it.
    Unused,
    /// Exists and belongs to the account.
    Live,
    /// Deleted, or owned by another account: treated as not found.
    Gone,
}

/// A stored message as the reply engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub role: Role,
    pub content: String,
    pub tokens: u64,
}

/// A message sent by a client, ready to be stored.
#[derive(Debug, Clone)]
pub struct UserMessage {
    pub id: String,
    pub role: Role,
    pub content: String,
    pub tokens: u64,
    /// Serialized JSON object.
    pub metadata: Option<String>,
}

/// Everything needed to start a turn.
#[derive(Debug, Clone)]
pub struct TurnStart {
    pub account: Account,
    pub session_id: String,
    pub message: UserMessage,
    /// The id the reply will have (PostgreSQL records it with the turn in flight).
    pub reply_id: String,
    pub idempotency_key: Option<String>,
    /// For a streamed send: the 202 response to remember under the idempotency key.
    pub accepted_response: Option<Recorded>,
    pub max_context_tokens: u64,
    pub period_start_ms: i64,
    pub now_ms: i64,
}

/// Why a turn was refused before anything was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnRefusal {
    SessionNotFound,
    /// `tokens` or `sessions`.
    Quota(&'static str),
    ContextOverflow {
        current: u64,
        max: u64,
    },
}

/// A turn that may proceed, or the response remembered under its idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnStarted {
    Replay(Recorded),
    /// The user message is stored; `history` includes it.
    Ready {
        history: Vec<HistoryEntry>,
        context_tokens: u64,
    },
}
