//! The one event bus of the TUI. Terminal input and every network or storage worker report
//! here; `App::update` is the only consumer and the only place state changes.

use chrono::{DateTime, Utc};
use crossterm::event::{KeyEvent, MouseEvent};
use tokio::sync::mpsc;

use convo_client::api::stream::StreamUpdate;
use convo_client::api::{ApiError, Message, Usage};

/// Everything that can happen to the app.
#[derive(Debug, Clone)]
pub enum AppEvent {
    /// A key was pressed (releases are filtered out by the terminal worker).
    Key(KeyEvent),
    /// A mouse event: wheel scrolls, a left click selects.
    Mouse(MouseEvent),
    /// Text pasted in one piece (bracketed paste) goes to the composer as is.
    Paste(String),
    /// The terminal now has this many columns and rows.
    Resize(u16, u16),
    /// The terminal gained (true) or lost (false) focus (focus reporting).
    Focus(bool),
    /// A signal from outside (SIGTERM, SIGHUP, SIGINT, SIGQUIT): quit as `Ctrl-C` would.
    Signal(&'static str),
    /// The editor opened on the draft (`Command::EditInEditor`) has closed.
    EditorClosed(crate::editor::EditorOutcome),
    /// The wall clock, for relative times ("3m ago", time left in the billing period).
    Clock(DateTime<Utc>),
    /// The service is reachable at this endpoint; sending is possible from now on.
    Connected(Endpoint),
    /// Starting the embedded service or building the client failed; nothing can be sent.
    ConnectFailed(String),
    /// What answers in the embedded service, or its load state changed (a model loading).
    Engine(EngineStatus),
    /// The local store opened: the known sessions, most recent first, and the session that
    /// was open when the app last quit.
    StoreLoaded {
        sessions: Vec<SessionSummary>,
        last_open: Option<String>,
    },
    /// The transcript and unsent draft of a session, read from the store. `rendered` holds
    /// the messages already parsed for display (one entry per message, in order), built on
    /// the store's thread so that a long history does not stall the UI; without it the app
    /// builds them itself.
    TranscriptLoaded {
        session_id: String,
        messages: Vec<StoredMessage>,
        draft: Option<String>,
        rendered: Option<Rendered>,
    },
    /// The local store's answer to `Command::SearchSessions` number `seq`: the hits, and the
    /// sessions it could not search (`Store::unsearched_sessions`).
    SessionHits {
        seq: u64,
        result: Result<(Vec<convo_client::local_store::SearchHit>, Vec<String>), String>,
    },
    /// A session's history read for the search across sessions (`Command::ReadUnsearched`).
    ReadForSearch {
        session_id: String,
        fetch: HistoryFetch,
    },
    /// The server accepted a message. With streaming, `reply.content` is empty and the text
    /// follows on the stream; otherwise it is the whole reply. `prompt_tokens` is the local
    /// count of the sent message's tokens.
    SendAccepted {
        session_id: String,
        send_id: u64,
        reply: Message,
        prompt_tokens: u64,
    },
    /// A send failed; the text goes back to the composer.
    SendFailed {
        session_id: String,
        send_id: u64,
        failure: ApiError,
    },
    /// Something happened on the open session's stream.
    Stream {
        session_id: String,
        update: StreamUpdate,
    },
    /// The session's stored history, fetched after a stream outage to settle a reply that
    /// was cut off (`Command::FetchHistory`).
    History {
        session_id: String,
        fetch: HistoryFetch,
        /// When the read was sent (or, failed before it was, asked for): one sent before a
        /// turn's `started` was taken may not show that turn's exchange, and reads run at once,
        /// so they come back in any order (`held_send.rs`, `other_read_came`).
        asked: std::time::Instant,
    },
    /// The server deleted the session.
    Deleted { session_id: String },
    /// Deleting failed (`session_not_found` is a failure the app treats as success).
    DeleteFailed {
        session_id: String,
        failure: ApiError,
    },
    /// An event of the account stream (`GET /v1/stream`): usage, and sessions changed here or
    /// on another device.
    Account(convo_client::api::account_stream::AccountEvent),
    /// A usage poll succeeded.
    UsageFetched(Usage),
    /// A usage poll failed; the gauges keep their last values and get a stale mark.
    UsageFailed(ApiError),
    /// A worker could not do its job and the user should know (e.g. the store is unwritable).
    WorkerError(String),
    /// The store changed a session's title (`StoreOp::SetTitle`): the user's, or, cleared, the
    /// first message's (`None` while there is no message).
    TitleChanged {
        session_id: String,
        title: Option<String>,
        title_set: bool,
    },
    /// The store's count of a session's tokens after it changed them (an undo's removal).
    SessionTokens { session_id: String, tokens: u64 },
    /// `/export` wrote the file (`Command::Export`), or why it did not.
    Exported {
        session_id: String,
        result: Result<Exported, String>,
    },
    /// What the target's service says about its sessions: the whole list (`GET
    /// /v1/sessions` at connect or on `/refresh`) or one session created, changed or deleted
    /// (the account stream). `App::on_service_sessions` is the one place it is merged into
    /// the local store and the sessions pane.
    ServiceSessions(ServiceChange),
    /// The store merged a [`ServiceChange`]: the target's sessions as they are now, the ones
    /// it marked deleted (the service no longer has them), and the titles given here that the
    /// service does not have yet (session id, title), to send.
    SessionsMerged {
        sessions: Vec<SessionSummary>,
        deleted: Vec<String>,
        titles_to_send: Vec<(String, String)>,
        /// The service's database is new: this target's sessions moved to a target of their own.
        archived: Option<convo_client::local_store::Archived>,
    },
    /// The service took the session's title (`PATCH /v1/sessions/{id}`).
    TitleSent { session_id: String, title: String },
    /// The server has no session list or titles (the seed's interface): the local store
    /// stays the history of record.
    ServiceSessionsUnsupported,
    /// Asking the service for its sessions (or sending a title) failed; the store's list
    /// stays as it is.
    ServiceSessionsFailed(String),
    /// The answer to `Command::Fork`.
    Forked {
        source: String,
        new_session_id: String,
        outcome: ForkOutcome,
    },
    /// The answer to `Command::Undo`.
    Undone {
        session_id: String,
        outcome: UndoOutcome,
    },
    /// The answer to `Command::CancelReply`.
    CancelAnswered {
        session_id: String,
        message_id: String,
        outcome: CancelOutcome,
    },
    /// Asked for by `Command::ReplyTick`: time to show how long a reply has waited.
    ReplyTick,
    /// An answer for the metrics view (F2): one query of a load (`tui::metrics`).
    Metrics(crate::metrics::MetricsEvent),
    /// A report for the wallet view (F3): a fetched wallet, recent ids, token status
    /// (`tui::wallet`).
    Wallet(crate::wallet::WalletEvent),
    /// The store thread's answer for the kept view (`/kept`).
    Kept(crate::kept_view::KeptEvent),
    /// A report for the accounts view (F4) and its alerts: a load, a day of an account's
    /// details, the admin feed's changes (`tui::accounts_view`).
    Accounts(crate::accounts_view::AccountsEvent),
}

/// What the target's service said about its sessions ([`AppEvent::ServiceSessions`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceChange {
    /// The whole list, asked for at `asked_at` (a session with activity after it that the
    /// list lacks is not taken as deleted).
    All {
        sessions: Vec<convo_wire::sessions::SessionSummary>,
        asked_at: DateTime<Utc>,
        /// The id of the service's database, where it says it (`local_store::targets`).
        database_id: Option<convo_wire::sessions::DatabaseId>,
        /// The sessions the service says it deleted lately, where it says it.
        deleted: Option<Vec<String>>,
    },
    /// One session created or changed (its title, a new message).
    Upsert(convo_wire::sessions::SessionSummary),
    /// One session deleted (on this or another device).
    Deleted(String),
}

/// What forking a session came to.
#[derive(Debug, Clone)]
pub enum ForkOutcome {
    /// The new session as the server lists it, its copied history, and the source's message
    /// it was forked at.
    Forked {
        summary: convo_wire::sessions::SessionSummary,
        messages: Vec<Message>,
        message_id: String,
    },
    /// The server has no fork endpoint.
    Unsupported,
    /// The message is not in the server's history of the source (not stored yet, or gone).
    NotOnServer,
    Failed(ApiError),
}

/// What asking the service to stop a reply came to.
#[derive(Debug, Clone)]
pub enum CancelOutcome {
    /// The reply is stopping: its `done` (marked stopped, with the text so far) follows.
    Stopping,
    /// The server cannot stop replies (no cancel endpoint).
    Unsupported,
    Failed(ApiError),
}

/// What undoing a session's last exchange came to.
#[derive(Debug, Clone)]
pub enum UndoOutcome {
    /// The ids of the removed messages.
    Undone(Vec<String>),
    /// The server has no undo endpoint.
    Unsupported,
    Failed(ApiError),
}

/// A transcript written by `/export`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Where, as the user reads it (`./my-title.md`).
    pub path: String,
    pub messages: usize,
}

/// What fetching a session's stored history gave.
#[derive(Debug, Clone)]
pub enum HistoryFetch {
    /// The stored messages, oldest first (none for a session the server does not know).
    Messages(Vec<Message>),
    /// The server has no history endpoint (it is an extension of the local service).
    Unsupported,
    /// The request failed; the next reconnect tries again.
    Failed(String),
}

/// What answers in the embedded service, and whether it can yet.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineStatus {
    /// `local · SmolLM2-135M-Instruct`, `builtin`, `openai · llama3.2`.
    pub label: String,
    pub state: convo_wire::engine::LoadState,
    /// Shown in an empty transcript: how to get real replies (the builtin engine answers).
    pub hint: Option<String>,
}

/// Where the client is connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The service embedded in this process, started because no base URL is configured.
    Embedded { addr: String },
    /// A remote deployment at this base URL.
    Remote { base_url: String },
}

impl Endpoint {
    pub fn describe(&self) -> String {
        match self {
            Endpoint::Embedded { addr } => format!("local service {addr}"),
            Endpoint::Remote { base_url } => base_url.clone(),
        }
    }
}

/// Title of a session before its first message.
pub const NEW_SESSION_TITLE: &str = "New session";

/// A session as the sessions pane shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub title: String,
    /// The title is the user's (`/title`): messages sent later do not change it.
    pub title_set: bool,
    pub last_activity: DateTime<Utc>,
    pub tokens: u64,
    /// The session this one was forked from (which may be deleted), if it is a fork.
    pub forked_from: Option<String>,
}

impl SessionSummary {
    /// Whether nothing was sent to it yet (`convo_client::local_store::nothing_sent`: the
    /// shown title is the placeholder, not one of its own).
    pub fn nothing_sent(&self) -> bool {
        let own_title =
            (self.title_set || self.title != NEW_SESSION_TITLE).then_some(self.title.as_str());
        convo_client::local_store::nothing_sent(own_title, self.tokens, self.forked_from.as_deref())
    }
}

/// A message of a transcript as the store keeps it.
pub use convo_client::local_store::{MessageStatus, StoredMessage};

pub use crate::render::transcript::Rendered;

/// One line for the user about a failed request. A `quota_exceeded` names when the limit
/// resets: the server's `resetAt`, which the network worker fills in from `Retry-After` when
/// only that was sent (`workers::network::at_arrival`).
pub fn describe_failure(failure: &ApiError, now: DateTime<Utc>) -> String {
    match failure {
        ApiError::ContextOverflow { current, max, .. } => format!(
            "context window full: {current} of {max} tokens — start a new session (Ctrl-N) to go on"
        ),
        ApiError::SessionNotFound { .. } => "session not found: it was deleted".to_string(),
        ApiError::Unauthorized { message } => format!(
            "unauthorized: check your API key (CONVO_API_KEY or connection.api_key) — {message}"
        ),
        ApiError::QuotaExceeded {
            limit, reset_at, ..
        } => {
            let what = limit.as_deref().unwrap_or("plan");
            // Sessions count those that exist: deleting one frees a place at once.
            let now_too = if what == "sessions" {
                " — or delete a session (Tab, d) to start one now"
            } else {
                ""
            };
            match reset_at.as_deref().and_then(parse_time) {
                Some(at) => format!(
                    "quota exceeded ({what}): resets {} ({}){now_too}",
                    convo_client::format::time_until(now, at),
                    at.format("%Y-%m-%d %H:%M UTC")
                ),
                None => format!("quota exceeded ({what}){now_too}"),
            }
        }
        ApiError::InvalidRequest { message } => format!("rejected: {message}"),
        ApiError::Network(message) => format!("network error: {message}"),
        ApiError::StreamLost(message) => format!("reply lost: {message}"),
        ApiError::ReplyInProgress { .. } => {
            "a reply is being generated in this session; wait for it (or stop it) first".into()
        }
        ApiError::Service { code, message, .. } => format!("{code}: {message}"),
        ApiError::Protocol(message) => format!("protocol: {message}"),
        ApiError::Config(message) => format!("config: {message}"),
    }
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A cloneable sender that logs instead of panicking when the app has gone away.
#[derive(Debug, Clone)]
pub struct EventSender(mpsc::UnboundedSender<AppEvent>);

impl EventSender {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<AppEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EventSender(tx), rx)
    }

    /// Sends an event; returns false when the app has quit.
    pub fn send(&self, ev: AppEvent) -> bool {
        match self.0.send(ev) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("event after the app quit: {:?}", e.0);
                false
            }
        }
    }

    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn quota(limit: &str) -> ApiError {
        ApiError::QuotaExceeded {
            limit: Some(limit.into()),
            reset_at: Some("2026-12-01T00:00:00Z".into()),
            retry_after: None,
            message: "Quota exceeded".into(),
        }
    }

    #[test]
    fn a_session_is_unsent_by_the_stores_rule_with_the_placeholder_as_no_title() {
        let new = SessionSummary {
            id: "session_AAAAAAAAAAAAAAAA".into(),
            title: NEW_SESSION_TITLE.into(),
            title_set: false,
            last_activity: Utc::now(),
            tokens: 0,
            forked_from: None,
        };
        assert!(new.nothing_sent());
        // A title the user gave is one, whatever it says; tokens or a source mean something
        // was sent.
        let titled = SessionSummary {
            title_set: true,
            ..new.clone()
        };
        assert!(!titled.nothing_sent());
        assert!(
            !SessionSummary {
                tokens: 3,
                ..new.clone()
            }
            .nothing_sent()
        );
        assert!(
            !SessionSummary {
                forked_from: Some("session_BBBBBBBBBBBBBBBB".into()),
                ..new
            }
            .nothing_sent()
        );
    }

    #[test]
    fn the_session_limit_says_that_deleting_one_frees_a_place_now() {
        let now = Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap();
        let sessions = describe_failure(&quota("sessions"), now);
        assert!(sessions.contains("resets in 6d 12h"), "{sessions}");
        assert!(sessions.contains("delete a session"), "{sessions}");
        let requests = describe_failure(&quota("requests"), now);
        assert!(requests.contains("resets in 6d 12h"), "{requests}");
        assert!(!requests.contains("delete"), "{requests}");
    }
}
