//! The service's rules as plain Rust: no I/O, no HTTP. The storage gathers facts inside its
//! transaction and asks this crate what they mean; the routes turn the answer into HTTP.
//!
//! - `plans`: an account's tier and the limits it sets;
//! - `turn`: the domain types both storage backends share (a turn to start, its fate, the
//!   history the engine sees);
//! - `admission`: the one order in which a turn is admitted (docs/service.md, "Order of
//!   checks");
//! - `sessions`: the rules of the session extensions (titles, undo, fork).

pub mod admission;
pub mod plans;
pub mod sessions;
pub mod turn;

pub use admission::{Admission, SessionFacts, TurnFacts, admit};
pub use plans::{PlanLimits, Tier};
pub use turn::{
    Account, HistoryEntry, Recorded, SessionStatus, TurnRefusal, TurnStart, TurnStarted,
    UserMessage,
};
