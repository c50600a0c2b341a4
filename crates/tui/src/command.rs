//! What `App::update` asks of the outside world: each [`Command`] goes to the worker that
//! owns that kind of I/O (`tui::workers`), which reports back with an `AppEvent`.

use super::event::{SessionSummary, StoredMessage};
use super::metrics::MetricsRequest;
use super::wallet::WalletRequest;
use convo_client::api::SendMessage;

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
    /// Fetch it again in a moment (`follow::CONFIRM_AFTER`): the follower tells a reply still
    /// coming from a turn that is over.
    FetchHistoryLater { session_id: String },
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
    /// Read the complete metrics buckets the store keeps for the connected account (the
    /// store answers with `MetricsEvent::Known`).
    LoadKnownBuckets,
    /// Put text on the terminal's clipboard (OSC 52).
    CopyToClipboard(String),
    /// Write the session's transcript from the local store as Markdown (`/export [PATH]`):
    /// into PATH, or the current directory under a name from its title; never over a file.
    Export {
        session_id: String,
        path: Option<String>,
    },
    /// Work for the metrics view's worker (`tui::metrics::worker::MetricsWorker`).
    Metrics(MetricsRequest),
    /// Work for the wallet view's worker (`tui::wallet::worker::WalletWorker`).
    Wallet(WalletRequest),
    /// Work for the kept view (`tui::kept_view`), done by the store thread.
    Kept(crate::kept_view::KeptRequest),
    /// Work for the accounts view's worker (`tui::accounts_view::worker::AccountsWorker`).
    Accounts(crate::accounts_view::AccountsRequest),
    /// Search the messages of every session in the local store (off the UI task); the
    /// answer comes back as `AppEvent::SessionHits` with the same `seq`.
    SearchSessions {
        seq: u64,
        text: String,
        limit: usize,
    },
    /// Read the histories of sessions the store has no message of (written on another
    /// device), for the search across sessions: each answered with
    /// `AppEvent::ReadForSearch`.
    ReadUnsearched { session_ids: Vec<String> },
    /// Ask the service for the target's sessions (`GET /v1/sessions`): at connect and on
    /// `/refresh`, never on a timer. Answered with `AppEvent::ServiceSessions` (nothing when
    /// the server has no list).
    ListSessions,
    /// Send the user's title of a session to the service (`PATCH /v1/sessions/{id}`);
    /// answered with `AppEvent::TitleSent` when the service took it.
    SendTitle { session_id: String, title: String },
    /// Fork `source` at `at` into the new session `new_session_id` (`POST …/fork`, an
    /// extension); the answer comes back as `AppEvent::Forked`.
    Fork {
        source: String,
        new_session_id: String,
        at: ForkPoint,
    },
    /// Remove the session's last exchange on the server (`DELETE …/messages/last`, an
    /// extension); the answer comes back as `AppEvent::Undone`.
    Undo { session_id: String },
    /// Ask the service to stop the reply `message_id` (`POST …/messages/{id}/cancel`, an
    /// extension); the answer comes back as `AppEvent::CancelAnswered`.
    CancelReply {
        session_id: String,
        message_id: String,
    },
    /// Send `AppEvent::ReplyTick` after `after`: a reply waiting for its first text shows
    /// the time it has waited (the app asks again while it waits, so an idle TUI sleeps).
    ReplyTick { after: std::time::Duration },
    /// Leave: restore the terminal and exit.
    Quit,
    /// Hand the terminal to `$VISUAL`/`$EDITOR` on this draft (`tui::editor`); the loop that
    /// owns the terminal runs it and answers with `AppEvent::EditorClosed`.
    EditInEditor { draft: String },
    /// Ring the bell or show a desktop notification (`[notify]`), written by the loop that
    /// owns the terminal.
    Notify(super::notify::Notification),
}

/// A message of the open transcript to fork at (`Command::Fork`): how the network worker
/// finds it in the service's history (`transcript_pane::fork_point` makes and resolves it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkPoint {
    /// The service's id, when the transcript has it.
    pub message_id: Option<String>,
    pub role: convo_client::api::Role,
    pub content: String,
    /// How many earlier messages of the transcript (that reached the service) have the same
    /// role and text.
    pub occurrence: usize,
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
    /// Complete metrics buckets of `account`, kept so that no later run asks for them.
    KeepBuckets {
        account: String,
        buckets: Vec<convo_client::series::KnownBucket>,
    },
    /// A message stored as sent that the service turned out not to keep: marked failed.
    MarkUnsent {
        session_id: String,
        message: StoredMessage,
    },
    /// The user's title for the session (`/title TEXT`), or none (`/title`): the first
    /// message's again. The store answers with `AppEvent::TitleChanged`.
    SetTitle {
        session_id: String,
        title: Option<String>,
    },
    /// Merge what the service said about the target's sessions; the store answers with
    /// `AppEvent::SessionsMerged`.
    MergeService(super::event::ServiceChange),
    /// The service has the session's title: no longer to be sent.
    TitleSent {
        session_id: String,
        title: String,
    },
    /// The session is a fork of `source` at the source's message `message_id`.
    SetForkedFrom {
        session_id: String,
        source: String,
        message_id: String,
    },
    /// The service removed the session's last exchange: the store removes it too.
    RemoveLastExchange {
        session_id: String,
    },
    /// Another device undid the session's last exchange, and the service holds `messages`
    /// messages now: the store removes its last exchange if it holds more
    /// (`Store::undone_elsewhere`).
    UndoneElsewhere {
        session_id: String,
        messages: u64,
    },
    /// The session's history as the service has it, read for a search across sessions: the
    /// store appends the messages it lacks (`Store::catch_up`).
    CatchUp {
        session_id: String,
        history: Vec<convo_client::api::Message>,
    },
}
