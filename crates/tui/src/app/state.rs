//! The plain state types `App` is made of: focus, views, connection, notices, settings and
//! the usage panel.

use chrono::{DateTime, Utc};
use convo_client::api::Usage;

use super::LimitReached;
use crate::event::Endpoint;

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
    /// Every account of the deployment, for an operator (F4; `tui::accounts_view`).
    Accounts,
    /// The sessions kept aside in the local store (`/kept`; `tui::kept_view`).
    Kept,
}

/// Connection to the service.
#[derive(Debug, Clone, PartialEq)]
pub enum Connection {
    Connecting,
    Connected(Endpoint),
    Failed(String),
}

/// Ordered by weight: a message joining two says the heavier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    pub reached: Option<LimitReached>,
}
