//! The admission of a turn (`POST /v1/sessions/{id}/messages`), in the one order
//! docs/service.md states ("Order of checks"): session state (404) → idempotent replay →
//! token quota (429) → session quota for a new session (429) → context window (400
//! `context_overflow`) → store the user message.
//!
//! Both storage backends gather the facts inside their transaction (under whatever locks make
//! them exact), call `admit`, and do what it says. Nothing here reads or writes anything.

use crate::plans::PlanLimits;
use crate::turn::{Recorded, SessionStatus, TurnRefusal};

/// What the session id means to the account, with the one number each state needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionFacts {
    /// Never used: the turn would create it. `live_sessions`: the account's sessions now.
    New { live_sessions: u64 },
    /// Live: `stored_tokens` is the sum of its stored messages' tokens.
    Existing { stored_tokens: u64 },
    /// Deleted, or another account's.
    Gone,
}

impl SessionFacts {
    pub fn status(self) -> SessionStatus {
        match self {
            SessionFacts::New { .. } => SessionStatus::Unused,
            SessionFacts::Existing { .. } => SessionStatus::Live,
            SessionFacts::Gone => SessionStatus::Gone,
        }
    }
}

/// Everything the decision needs, gathered by the storage in the turn's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFacts {
    pub session: SessionFacts,
    /// The live response remembered under the request's `Idempotency-Key`, if any.
    pub replay: Option<Recorded>,
    /// Message tokens of the account in the billing period.
    pub tokens_used: u64,
    pub limits: PlanLimits,
    /// Tokens of the new message.
    pub message_tokens: u64,
    pub max_context_tokens: u64,
}

/// What the storage does with the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Store nothing; answer the refusal.
    Refused(TurnRefusal),
    /// Store nothing; answer the remembered response.
    Replay(Recorded),
    /// Create the session when `create_session`, then store the user message. The context will
    /// hold `context_tokens` (stored + new).
    Admitted {
        create_session: bool,
        context_tokens: u64,
    },
}

/// Decides a turn from its facts, in the documented order.
pub fn admit(facts: TurnFacts) -> Admission {
    let stored_tokens = match facts.session {
        SessionFacts::Gone => return Admission::Refused(TurnRefusal::SessionNotFound),
        SessionFacts::New { .. } => 0,
        SessionFacts::Existing { stored_tokens } => stored_tokens,
    };
    if let Some(recorded) = facts.replay {
        return Admission::Replay(recorded);
    }
    if facts.tokens_used >= facts.limits.tokens {
        return Admission::Refused(TurnRefusal::Quota("tokens"));
    }
    if let SessionFacts::New { live_sessions } = facts.session
        && live_sessions >= facts.limits.sessions
    {
        return Admission::Refused(TurnRefusal::Quota("sessions"));
    }
    let current = stored_tokens.saturating_add(facts.message_tokens);
    if current > facts.max_context_tokens {
        return Admission::Refused(TurnRefusal::ContextOverflow {
            current,
            max: facts.max_context_tokens,
        });
    }
    Admission::Admitted {
        create_session: matches!(facts.session, SessionFacts::New { .. }),
        context_tokens: current,
    }
}
