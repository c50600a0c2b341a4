//! What `App::update` asks of the outside world: each [`Command`] goes to the worker that
//! owns that kind of I/O (`tui::workers`), which reports back with an `AppEvent`.

use super::event::{SessionSummary, StoredMessage};
use super::metrics::MetricsRequest;
use super::wallet::WalletRequest;
use crate::api::SendMessage;

/// Something for a worker to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Read a session's transcript and draft from the store, and lay it out for a
    /// transcript pane `width` columns wide (off the UI task).
    LoadTranscript {
        session_id: String,
        width: u16,
        rows: u16,
    },
    /// Keep this session's stream open (and close any other).
    OpenStream { session_id: String },
    /// Fetch the session's stored history (to settle a reply the stream lost).
    FetchHistory { session_id: String },
    /// Ready o200k token counting off the UI task (the first edit of the composer), so
    /// that the first send does not wait for it.
    WarmTokenCounter,
    /// POST a message.
    Send {
        session_id: String,
        send_id: u64,
        body: SendMessage,
        idempotency_key: String,
    },
    /// DELETE a session.
    Delete { session_id: String },
    /// Poll usage now.
    RefreshUsage,
    /// Write to the local store.
    Persist(StoreOp),
    /// Put text on the terminal's clipboard (OSC 52).
    CopyToClipboard(String),
    /// Work for the metrics view's worker (`tui::metrics::worker::MetricsWorker`).
    Metrics(MetricsRequest),
    /// Work for the wallet view's worker (`tui::wallet::worker::WalletWorker`).
    Wallet(WalletRequest),
    /// Search the messages of every session in the local store (off the UI task); the
    /// answer comes back as `AppEvent::SessionHits` with the same `seq`.
    SearchSessions {
        seq: u64,
        text: String,
        limit: usize,
    },
    /// Leave: restore the terminal and exit.
    Quit,
}

/// A write to the local store.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreOp {
    UpsertSession(SessionSummary),
    AppendMessage {
        session_id: String,
        message: StoredMessage,
    },
    /// Save now (quit, switch, send): supersedes an edit still waiting.
    SaveDraft {
        session_id: String,
        text: String,
    },
    /// The composer changed: the store worker saves it once the edits pause
    /// (`workers::DRAFT_SAVE_DELAY`), so that a crash loses at most that much typing.
    DraftEdited {
        session_id: String,
        text: String,
    },
    SetLastOpen(String),
    DeleteSession(String),
    /// A message stored as sent that the service turned out not to keep: marked failed.
    MarkUnsent {
        session_id: String,
        message: StoredMessage,
    },
}
