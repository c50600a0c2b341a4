//! The client of the Conversational Session Service, for every front end (the TUI and the
//! one-shot subcommands): the HTTP client and the session's WebSocket (`api`), the layered
//! configuration (`config`), the local store of sessions, transcripts, drafts and metrics
//! buckets (`local_store`), per-bucket metrics (`series`), which server and account a session belongs to
//! (`target`), export, and the text rules every
//! front end shares (`sanitize`, `format`). No terminal code.
#![forbid(unsafe_code)]

pub mod api;
pub mod config;
pub mod export;
pub mod follow;
pub mod format;
pub mod local_store;
pub mod private_file;
pub use convo_wire::sanitize;
pub mod series;
pub mod target;
