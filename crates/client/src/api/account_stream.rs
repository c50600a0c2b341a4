//! The account stream client: a task holding `GET /v1/stream` (an extension of `convo serve`;
//! docs/service.md, "The account stream") open, yielding its events, pinging and reconnecting
//! with capped backoff like the session stream (`super::stream`). Each (re)connection starts
//! with a `hello` holding the account's sessions and usage, so nothing missed while away needs
//! another request. Event types this client does not know are skipped; a frame that is not an
//! event is logged and skipped. Against a server without the endpoint (404, 405 or not a
//! WebSocket) the task says `Unsupported` and ends.
//!
//! ```no_run
//! # async fn demo(options: convo_client::api::ClientOptions) {
//! use convo_client::api::account_stream::{AccountStream, AccountUpdate};
//! let (_handle, mut updates) = AccountStream::connect(options);
//! while let Some(update) = updates.recv().await {
//!     match update {
//!         AccountUpdate::Event(event) => println!("{event:?}"),
//!         AccountUpdate::Unsupported => break, // poll instead
//!         other => println!("{other:?}"),
//!     }
//! }
//! # }
//! ```

use tokio::sync::mpsc;

use super::client::ClientOptions;
use super::stream::{Frame, StreamTiming, TaskHandle, Update, spawn_task};
pub use convo_wire::account_stream::{AccountEvent, SessionChange};

/// What the account stream task tells its owner.
pub type AccountUpdate = Update<AccountEvent>;

/// The event types of `GET /v1/stream` this client knows.
const KNOWN_TYPES: &[&str] = &[
    "hello",
    "session.created",
    "session.updated",
    "session.deleted",
    "usage",
];

impl Frame for AccountEvent {
    fn parse(text: &str) -> Option<Self> {
        let error = match serde_json::from_str(text) {
            Ok(event) => return Some(event),
            Err(e) => e,
        };
        let kind = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from));
        match kind {
            Some(kind) if !KNOWN_TYPES.contains(&kind.as_str()) => {
                tracing::debug!(
                    kind,
                    "skipping an account stream event of a type not known here"
                );
            }
            _ => tracing::warn!(%error, "skipping a bad frame of the account stream"),
        }
        None
    }
}

/// Handle of the account stream task. Dropping it closes the stream.
#[derive(Debug)]
pub struct AccountStream {
    task: TaskHandle,
}

impl AccountStream {
    /// Opens the account stream in a background task with default timings. Must be called
    /// within a tokio runtime.
    pub fn connect(options: ClientOptions) -> (AccountStream, mpsc::Receiver<AccountUpdate>) {
        Self::connect_with(options, StreamTiming::default())
    }

    pub fn connect_with(
        options: ClientOptions,
        timing: StreamTiming,
    ) -> (AccountStream, mpsc::Receiver<AccountUpdate>) {
        let (task, rx) = spawn_task(options, vec!["v1".into(), "stream".into()], timing);
        (AccountStream { task }, rx)
    }

    /// Waiting to reconnect, the stream tries again now (`TaskHandle::retry_now`).
    pub fn retry_now(&self) {
        self.task.retry_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_types_and_bad_frames_are_skipped_and_known_ones_read() {
        assert_eq!(
            AccountEvent::parse(
                r#"{"type":"session.deleted","sessionId":"session_abcdefgh12345678"}"#
            ),
            Some(AccountEvent::SessionDeleted {
                session_id: "session_abcdefgh12345678".into()
            })
        );
        assert_eq!(
            AccountEvent::parse(r#"{"type":"session.moved","to":1}"#),
            None
        );
        assert_eq!(AccountEvent::parse(r#"{"type":"usage"}"#), None);
        assert_eq!(AccountEvent::parse("not json"), None);
    }
}
