//! Limits the interface sets, each in one place: the service enforces them and the client
//! checks them before sending, so both say the same.

/// The most characters (Unicode scalar values) one message's `content` may have.
pub const MAX_CONTENT_CHARS: usize = 10_000;
