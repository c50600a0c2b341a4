//! The client side of the wire: types, the HTTP client and the stream client. No ratatui here.

pub mod types;

pub use types::*;
