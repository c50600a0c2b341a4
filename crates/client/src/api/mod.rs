//! The client side of the wire: types, the HTTP client and the stream client. No ratatui here.

pub mod account_stream;
pub mod admin;
pub mod client;
pub mod error;
pub mod stream;
pub use convo_wire::types;

pub use account_stream::{AccountStream, AccountUpdate};
pub use admin::{
    AccountSort, AccountsQuery, AdminAccount, AdminAccounts, AdminEvent, AdminStream, AdminUpdate,
};
pub use client::{
    Client, ClientOptions, DEFAULT_MAX_BODY_BYTES, History, SendReply, Timeouts,
    new_idempotency_key,
};
pub use error::ApiError;
pub use stream::{SessionStream, StreamTiming, StreamUpdate, Update, send_streaming};
pub use types::*;
