//! The plain state types `App` is made of: focus, views, overlays, connection, notices,
//! settings, the usage panel, and the items of the open transcript.

use super::*;

/// Whether a pane used an event or passes it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventState {
    Consumed,
    NotConsumed,
}

/// Which pane receives keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Sessions,
    Transcript,
    Composer,
}

/// The main view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Chat,
    /// Metrics charts over a date range (F2, `/metrics`; `tui::metrics`).
    Metrics,
    /// Wallet details (F3, `/wallet ID`; `tui::wallet`).
    Wallet,
}

/// A modal on top of the view; it takes every key while open.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help {
        scroll: u16,
    },
    ConfirmDelete {
        session_id: String,
        title: String,
        /// Opened by `/delete` typed in the composer: the command text stays there until
        /// the delete is confirmed, so that cancelling loses nothing typed.
        from_composer: bool,
    },
    ContextOverflow {
        current: u64,
        max: u64,
        draft: String,
    },
}

/// Connection to the service.
#[derive(Debug, Clone, PartialEq)]
pub enum Connection {
    Connecting,
    Connected(Endpoint),
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// A one-line message in the status bar until the next one (or Esc).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub level: Level,
    pub text: String,
}

/// State of the open session's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamState {
    Connecting,
    Open,
    Down(String),
    Unsupported,
}

/// Settings from `[ui]`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub usage_refresh_secs: u64,
    pub max_context_tokens: u64,
    pub mouse: bool,
    pub show_sessions: bool,
    /// `[notify]`: how a finished reply is announced.
    pub notify: convo_client::config::Notify,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            usage_refresh_secs: 10,
            max_context_tokens: 8192,
            mouse: true,
            show_sessions: true,
            notify: convo_client::config::Notify {
                mode: convo_client::config::NotifyMode::Bell,
                after_seconds: 30,
            },
        }
    }
}

/// The usage gauges' data: the last successful poll and the last error since.
#[derive(Debug, Clone, Default)]
pub struct UsagePanel {
    pub usage: Option<Usage>,
    pub fetched_at: Option<DateTime<Utc>>,
    /// Set when the last poll failed: the gauges are stale.
    pub error: Option<String>,
    /// A limit a `quota_exceeded` said is reached, until a poll says it is not.
    pub reached: Option<super::LimitReached>,
}

/// A code block of a message being chosen by number (`copy_code` on a message with several).
#[derive(Debug, Clone, PartialEq)]
pub struct CodeChoice {
    pub session_id: String,
    /// The message whose blocks are numbered.
    pub entry: EntryId,
    /// How many code blocks it has.
    pub count: usize,
    /// The digits typed so far (a number above 9 takes two).
    pub typed: String,
}

/// One message of the open transcript, beside its render entry.
#[derive(Debug, Clone)]
pub struct TranscriptItem {
    pub entry: EntryId,
    pub role: Role,
    pub tokens: u64,
    pub message_id: Option<String>,
    pub state: EntryState,
    pub created_at: DateTime<Utc>,
}

/// A message on its way: the composer text comes back if it fails.
#[derive(Debug, Clone)]
pub struct PendingSend {
    pub send_id: u64,
    pub text: String,
    pub role: Role,
    /// Index in `items` of the sent message and of the reply placeholder.
    pub user_item: usize,
    pub reply_item: usize,
    pub accepted: bool,
    /// Sent with `stream: true`: the text comes on the stream.
    pub streamed: bool,
    /// The reply completed on the stream before the POST answered.
    pub reply_done: bool,
    /// When the message was sent: how long its reply took decides whether a focused
    /// terminal is notified (`[notify] after_seconds`).
    pub started: std::time::Instant,
    /// The reply, followed: duplicates by `seq`, the loss and the settling against the
    /// stored history (the same follower `convo send --stream` drives).
    pub follower: ReplyFollower,
}
