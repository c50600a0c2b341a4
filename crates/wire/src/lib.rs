//! The Conversational Session Service's interface as plain data, shared by the client, the
//! TUI and the local service: the wire types (`types`), the limits the interface sets
//! (`limits`), the rules for API keys (`api_key`) and the exit codes every subcommand maps
//! its outcome onto (`exit`). No I/O: nothing here reads a file, a socket or the clock.
#![forbid(unsafe_code)]

pub mod account_stream;
pub mod admin;
pub mod api_key;
pub mod engine;
pub mod exit;
pub mod limits;
pub mod sanitize;
pub mod sessions;
pub mod stream_errors;
pub mod title;
pub mod types;

pub use types::*;
