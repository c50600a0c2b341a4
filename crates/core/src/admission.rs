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

/// Whether an account with `live_sessions` may not open another session (a first send, a
/// fork): its plan's session limit is reached.
pub fn session_limit_reached(live_sessions: u64, limits: crate::PlanLimits) -> bool {
    live_sessions >= limits.sessions
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
        && session_limit_reached(live_sessions, facts.limits)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plans::Tier;

    const MAX: u64 = 1000;

    fn recorded() -> Recorded {
        Recorded {
            status: 200,
            body: "{\"content\":\"first\"}".into(),
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum State {
        New,
        Existing,
        Deleted,
    }

    /// One row of the table: the facts, as yes/no.
    #[derive(Debug, Clone, Copy)]
    struct Case {
        state: State,
        replay: bool,
        tokens_reached: bool,
        sessions_reached: bool,
        overflow: bool,
    }

    impl Case {
        fn facts(self) -> TurnFacts {
            let limits = Tier::Free.limits();
            let (stored, message) = match (self.state, self.overflow) {
                // An existing session: 600 stored, the new message 400 fits exactly, 401
                // does not.
                (State::Existing, false) => (600, 400),
                (State::Existing, true) => (600, 401),
                // A new session: the message alone.
                (_, false) => (0, MAX),
                (_, true) => (0, MAX + 1),
            };
            let live_sessions = if self.sessions_reached {
                limits.sessions
            } else {
                limits.sessions - 1
            };
            TurnFacts {
                session: match self.state {
                    State::New => SessionFacts::New { live_sessions },
                    // A live session is not held by the session quota: the account's count
                    // is not one of its facts.
                    State::Existing => SessionFacts::Existing {
                        stored_tokens: stored,
                    },
                    State::Deleted => SessionFacts::Gone,
                },
                replay: self.replay.then(recorded),
                tokens_used: if self.tokens_reached {
                    limits.tokens
                } else {
                    limits.tokens - 1
                },
                limits,
                message_tokens: message,
                max_context_tokens: MAX,
            }
        }

        /// The documented order, read as "the first check that fails answers".
        fn expected(self) -> Admission {
            let checks: [(bool, Admission); 5] = [
                (
                    self.state == State::Deleted,
                    Admission::Refused(TurnRefusal::SessionNotFound),
                ),
                (self.replay, Admission::Replay(recorded())),
                (
                    self.tokens_reached,
                    Admission::Refused(TurnRefusal::Quota("tokens")),
                ),
                (
                    self.state == State::New && self.sessions_reached,
                    Admission::Refused(TurnRefusal::Quota("sessions")),
                ),
                (
                    self.overflow,
                    Admission::Refused(TurnRefusal::ContextOverflow {
                        current: MAX + 1,
                        max: MAX,
                    }),
                ),
            ];
            checks
                .into_iter()
                .find_map(|(fails, answer)| fails.then_some(answer))
                .unwrap_or(Admission::Admitted {
                    create_session: self.state == State::New,
                    context_tokens: MAX,
                })
        }
    }

    fn every_case() -> Vec<Case> {
        let mut cases = Vec::new();
        for state in [State::New, State::Existing, State::Deleted] {
            for bits in 0..16u8 {
                cases.push(Case {
                    state,
                    replay: bits & 1 != 0,
                    tokens_reached: bits & 2 != 0,
                    sessions_reached: bits & 4 != 0,
                    overflow: bits & 8 != 0,
                });
            }
        }
        cases
    }

    #[test]
    fn every_combination_is_decided_in_the_documented_order() {
        let cases = every_case();
        assert_eq!(cases.len(), 48);
        for case in cases {
            assert_eq!(admit(case.facts()), case.expected(), "{case:?}");
        }
    }

    /// The rows the two stores used to answer differently, spelled out.
    #[test]
    fn at_the_session_limit_a_first_message_that_overflows_is_a_session_quota_refusal() {
        let case = Case {
            state: State::New,
            replay: false,
            tokens_reached: false,
            sessions_reached: true,
            overflow: true,
        };
        assert_eq!(
            admit(case.facts()),
            Admission::Refused(TurnRefusal::Quota("sessions"))
        );
        let both_quotas = Case {
            tokens_reached: true,
            ..case
        };
        assert_eq!(
            admit(both_quotas.facts()),
            Admission::Refused(TurnRefusal::Quota("tokens"))
        );
    }

    #[test]
    fn the_context_counts_stored_tokens_plus_the_new_message_and_may_be_filled_exactly() {
        let facts = |stored_tokens, message_tokens| TurnFacts {
            session: SessionFacts::Existing { stored_tokens },
            replay: None,
            tokens_used: 0,
            limits: Tier::Pro.limits(),
            message_tokens,
            max_context_tokens: 8192,
        };
        assert_eq!(
            admit(facts(8000, 192)),
            Admission::Admitted {
                create_session: false,
                context_tokens: 8192
            }
        );
        assert_eq!(
            admit(facts(8000, 193)),
            Admission::Refused(TurnRefusal::ContextOverflow {
                current: 8193,
                max: 8192
            })
        );
        assert_eq!(
            admit(facts(u64::MAX, 1)),
            Admission::Refused(TurnRefusal::ContextOverflow {
                current: u64::MAX,
                max: 8192
            })
        );
    }
}
