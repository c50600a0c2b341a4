//! The reply follower: what one streamed reply is, as a pure state machine shared by
//! `convo send --stream` (`api::stream::send_streaming`) and the TUI (`App`).
//!
//! It does no I/O and knows no clock. Its driver feeds it what happens — the POST's answer,
//! the session stream's events, the stream lost and back, the stored history fetched after a
//! loss — and each call answers with a [`Step`]: what changed in the text and what to do next
//! ([`Next`]). [`ReplyFollower::status`] says what the reply is now.
//!
//! It owns the two rules both front ends must agree on:
//! - **duplicates by `seq`**: a delta whose `seq` was already folded in, or a snapshot folding
//!   fewer deltas than were seen, is dropped; a reply the stream lost picks up again only from
//!   a snapshot or the very next delta;
//! - **settling a lost reply against the stored history**: the reply is stored → done with the
//!   stored text; the turn is gone (neither message nor reply) → failed, not kept; the message
//!   is stored without the reply → still coming while the server can be generating it, but
//!   once the stream is back and the server said nothing of the reply (every reply in flight
//!   comes as a `snapshot` on connect) on two looks [`CONFIRM_AFTER`] apart, the turn is
//!   over (the server was killed and restarted) → failed, not kept.
//!
//! ```
//! use convo_client::follow::{Next, ReplyFollower, ReplyStatus};
//! use convo_wire::types::{Role, StreamEvent};
//! let mut f = ReplyFollower::new(Role::User, "hi");
//! f.reply_id_known("msg_1");
//! let delta = |seq, content: &str| StreamEvent::Delta {
//!     session_id: "s".into(), message_id: "msg_1".into(), seq, content: content.into(),
//! };
//! f.event(&delta(0, "Hel"));
//! f.event(&delta(0, "Hel")); // a duplicate: dropped
//! f.event(&delta(1, "lo"));
//! assert_eq!(f.text(), "Hello");
//! assert_eq!(f.stream_lost().next, Next::Nothing);
//! assert_eq!(f.status(), &ReplyStatus::Interrupted);
//! assert_eq!(f.stream_connected().next, Next::FetchHistory);
//! ```

use std::time::Duration;

use convo_wire::stream_errors::leaves_turn_open;
use convo_wire::types::{ErrorBody, Message, Role, StreamEvent};

/// How long after a first look at the history (the stream back, the message stored without
/// its reply, no snapshot of it) the history is looked at again before the turn is taken as
/// over. The server sends each reply in flight as a snapshot at once on connect, so a reply
/// still being generated shows within this time.
pub const CONFIRM_AFTER: Duration = Duration::from_secs(1);

/// What the reply is now.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyStatus {
    /// Being generated: `text()` is what arrived so far.
    Coming,
    /// Complete: the message exactly as the service stored it.
    Done(Message),
    /// The stream lost it mid-way; what arrived is `text()`. It comes back with a snapshot,
    /// a delta or `done`, or is settled by the stored history.
    Interrupted,
    /// It failed for good.
    Failed(ReplyFailure),
}

/// Why a reply failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyFailure {
    /// The stream's `error` event: the service rolled the turn back.
    Error(ErrorBody),
    /// Lost with the stream, and the service did not keep it. `message_kept`: the message it
    /// answered is stored on the service without a reply (the server was killed mid-reply and
    /// restarted); otherwise the turn was rolled back whole.
    NotKept { message_kept: bool },
}

impl ReplyFailure {
    /// Whether the message the reply answered has to be sent again: the turn ended without
    /// a reply the service keeps. An `error` event rolls the turn back, the message with it
    /// (docs/service.md), except when the session itself is gone (`session_not_found`: there
    /// is nothing to send it to); a reply not kept leaves the message unanswered either way.
    /// `convo send --stream` ends with the error; the TUI marks the message not sent and
    /// puts it back in the composer.
    pub fn resend_message(&self) -> bool {
        match self {
            ReplyFailure::Error(body) => body.code != "session_not_found",
            ReplyFailure::NotKept { .. } => true,
        }
    }

    /// Whether the service no longer holds the message the reply answered: the turn rolled
    /// back with it (an `error` event, but for `session_not_found`, where the session itself
    /// is gone; or neither stored after a loss). A message kept without its reply is the
    /// service's still. The TUI marks a dropped message not sent, on the device that sent it
    /// and on one that watched the reply.
    pub fn message_dropped(&self) -> bool {
        match self {
            ReplyFailure::Error(_) => self.resend_message(),
            ReplyFailure::NotKept { message_kept } => !message_kept,
        }
    }
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Nothing,
    /// Fetch the session's stored history now and feed it to [`ReplyFollower::history`].
    FetchHistory,
    /// Fetch it again after [`CONFIRM_AFTER`] (to tell a reply still coming from a turn that
    /// is over).
    FetchHistoryLater,
}

/// What one call changed in the reply's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing (also: the event was not about this reply, or was a duplicate).
    None,
    /// This piece was added at the end.
    Appended(String),
    /// The text is now `text()` as a whole (a snapshot, or the final reply).
    Replaced,
}

/// The answer to each call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub change: Change,
    pub next: Next,
}

impl Step {
    const NOTHING: Step = Step {
        change: Change::None,
        next: Next::Nothing,
    };

    fn changed(change: Change) -> Step {
        Step {
            change,
            next: Next::Nothing,
        }
    }

    fn next(next: Next) -> Step {
        Step {
            change: Change::None,
            next,
        }
    }
}

/// One streamed reply, followed. See the module's documentation.
#[derive(Debug, Clone)]
pub struct ReplyFollower {
    sent_role: Role,
    sent_text: String,
    /// The `Idempotency-Key` the message was sent with, when known: a `started` event
    /// naming another key (or none) is another send's reply.
    key: Option<String>,
    reply_id: Option<String>,
    /// Replies that `started` events showed to be other sends' while this one's id was not
    /// known: never taken as this reply.
    others: Vec<String>,
    text: String,
    /// The next delta `seq` expected; lower ones are duplicates.
    next_seq: u64,
    status: ReplyStatus,
    /// The stream is up (connected, and not lost since).
    connected: bool,
    /// Since the stream last connected, the server spoke of this reply.
    heard_since_connect: bool,
    /// The history showed the message without its reply once since the reconnect.
    looked_once: bool,
    /// The last `progress` event: prompt tokens read, of the total (`convo serve`'s extension).
    progress: Option<(u64, u64)>,
}

impl ReplyFollower {
    /// A reply to the message `sent_text` of `sent_role`, about to be sent over an open stream.
    pub fn new(sent_role: Role, sent_text: impl Into<String>) -> Self {
        ReplyFollower {
            sent_role,
            sent_text: sent_text.into(),
            key: None,
            reply_id: None,
            others: Vec::new(),
            text: String::new(),
            next_seq: 0,
            status: ReplyStatus::Coming,
            connected: true,
            heard_since_connect: false,
            looked_once: false,
            progress: None,
        }
    }

    /// The message was sent with this `Idempotency-Key`: the session's `started` events tell
    /// this reply from another send's (another device's, or a command's) before the POST's
    /// answer names it. Without it, the first reply of unknown id is taken as this one.
    pub fn sent_with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Another device's reply, followed from its first event on the session's stream: the
    /// message it answers is not known until read from the stored history
    /// ([`ReplyFollower::answers`]); until then the history cannot settle it.
    pub fn foreign(message_id: &str) -> Self {
        let mut follower = ReplyFollower::new(Role::User, "");
        follower.reply_id = Some(message_id.to_string());
        follower
    }

    /// The message the reply answers, as the stored history shows it (for a reply followed
    /// with [`ReplyFollower::foreign`]).
    pub fn answers(&mut self, role: Role, text: impl Into<String>) {
        self.sent_role = role;
        self.sent_text = text.into();
    }

    /// While the service reads the prompt and no text has come: tokens read and the total,
    /// from its `progress` events (servers without them send none).
    pub fn progress(&self) -> Option<(u64, u64)> {
        self.progress
            .filter(|_| self.text.is_empty() && self.status == ReplyStatus::Coming)
    }

    /// How the reply ended, once done, when the server says (`finishReason`).
    pub fn finish_reason(&self) -> Option<convo_wire::FinishReason> {
        match &self.status {
            ReplyStatus::Done(message) => message.finish_reason,
            _ => None,
        }
    }

    pub fn status(&self) -> &ReplyStatus {
        &self.status
    }

    /// The reply's text so far (the stored text once done).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The service's id of the reply, once known (from the POST's answer or the first event).
    pub fn reply_id(&self) -> Option<&str> {
        self.reply_id.as_deref()
    }

    /// Whether the reply is settled (done or failed).
    pub fn is_final(&self) -> bool {
        matches!(self.status, ReplyStatus::Done(_) | ReplyStatus::Failed(_))
    }

    /// The reply's id is known (e.g. the POST's answer named it).
    pub fn reply_id_known(&mut self, id: &str) {
        if self.reply_id.is_none() {
            self.reply_id = Some(id.to_string());
        }
    }

    /// The POST's answer: the reply's id, and when `complete` (a plain send, or a server that
    /// answered a `stream: true` POST whole) the reply itself.
    pub fn accepted(&mut self, reply: &Message, complete: bool) -> Step {
        self.reply_id_known(&reply.message_id);
        if self.is_final() {
            return Step::NOTHING;
        }
        if complete || !reply.content.is_empty() {
            return self.finish(reply.clone());
        }
        // The stream dropped before the server answered: only the history can say.
        if self.status == ReplyStatus::Interrupted && self.connected {
            return Step::next(Next::FetchHistory);
        }
        Step::NOTHING
    }

    /// Whether `message_id` is this reply's; while its id is not known yet (deltas can beat
    /// the POST's answer), an id is taken as this reply's unless a `started` event showed it
    /// to be another send's.
    pub fn claims(&mut self, message_id: &str) -> bool {
        match &self.reply_id {
            Some(id) => id == message_id,
            None if self.others.iter().any(|o| o == message_id) => false,
            None => {
                self.reply_id = Some(message_id.to_string());
                true
            }
        }
    }

    /// A `started` event: whether the reply it names is this one. With the key of this send
    /// known, only an event naming that key is; another key, or none (a send without one),
    /// is another send's reply, remembered as such. Without the key, the old rule: the first
    /// reply of unknown id is this one.
    fn started(&mut self, message_id: &str, key: Option<&str>) -> bool {
        if self.reply_id.is_some() {
            return self.claims(message_id);
        }
        match &self.key {
            Some(mine) if key != Some(mine.as_str()) => {
                // Enough for the replies of other sends one send can meet before its own.
                const REMEMBERED: usize = 16;
                if !self.others.iter().any(|o| o == message_id) {
                    if self.others.len() == REMEMBERED {
                        self.others.remove(0);
                    }
                    self.others.push(message_id.to_string());
                }
                false
            }
            _ => self.claims(message_id),
        }
    }

    /// Whether an event is about this reply (without adopting an unknown id).
    pub fn concerns(&self, event: &StreamEvent) -> bool {
        let id = match event {
            StreamEvent::Started { message_id, .. }
            | StreamEvent::Delta { message_id, .. }
            | StreamEvent::Snapshot { message_id, .. }
            | StreamEvent::Error { message_id, .. }
            | StreamEvent::Progress { message_id, .. } => message_id,
            StreamEvent::Done { message } => &message.message_id,
        };
        match self.reply_id.as_deref() {
            Some(mine) => mine == id,
            None => !self.others.iter().any(|o| o == id),
        }
    }

    /// An event of the session's stream. Events of other replies change nothing.
    pub fn event(&mut self, event: &StreamEvent) -> Step {
        if self.is_final() {
            return Step::NOTHING;
        }
        match event {
            StreamEvent::Started {
                message_id,
                idempotency_key,
                ..
            } => {
                if self.started(message_id, idempotency_key.as_deref()) {
                    self.heard_since_connect = true;
                }
                Step::NOTHING
            }
            StreamEvent::Delta {
                message_id,
                seq,
                content,
                ..
            } => {
                if !self.claims(message_id) {
                    return Step::NOTHING;
                }
                if *seq < self.next_seq {
                    return Step::NOTHING;
                }
                // A lost reply picks up again only where it left off.
                if self.status == ReplyStatus::Interrupted && *seq != self.next_seq {
                    return Step::NOTHING;
                }
                self.heard_since_connect = true;
                self.status = ReplyStatus::Coming;
                self.next_seq = seq + 1;
                self.text.push_str(content);
                Step::changed(Change::Appended(content.clone()))
            }
            StreamEvent::Snapshot {
                message_id,
                seq,
                content,
                ..
            } => {
                if !self.claims(message_id) {
                    return Step::NOTHING;
                }
                // A snapshot folding fewer deltas than were seen is stale.
                if *seq < self.next_seq {
                    return Step::NOTHING;
                }
                self.heard_since_connect = true;
                self.status = ReplyStatus::Coming;
                self.next_seq = *seq;
                self.text = content.clone();
                Step::changed(Change::Replaced)
            }
            StreamEvent::Done { message } => {
                if !self.claims(&message.message_id) {
                    return Step::NOTHING;
                }
                self.finish(message.clone())
            }
            StreamEvent::Progress {
                message_id,
                prompt_tokens,
                prompt_total,
                ..
            } => {
                if !self.claims(message_id) {
                    return Step::NOTHING;
                }
                self.heard_since_connect = true;
                self.progress = Some((*prompt_tokens, *prompt_total));
                Step::NOTHING
            }
            StreamEvent::Error {
                message_id, error, ..
            } => {
                if !self.claims(message_id) {
                    return Step::NOTHING;
                }
                if leaves_turn_open(&error.code) {
                    // The stream here cannot carry the reply for now (the replica lost its
                    // relay, or is stopping), but the server spoke of it: the reply goes on
                    // or ends elsewhere, and its snapshot, `done` or `error` follows here or
                    // after the reconnect; the stored history waits for it meanwhile.
                    self.heard_since_connect = true;
                    if self.status == ReplyStatus::Coming {
                        self.status = ReplyStatus::Interrupted;
                    }
                    return Step::NOTHING;
                }
                self.status = ReplyStatus::Failed(ReplyFailure::Error(error.clone()));
                Step::NOTHING
            }
        }
    }

    fn finish(&mut self, message: Message) -> Step {
        let change = if message.content == self.text {
            Change::None
        } else if let Some(rest) = message.content.strip_prefix(self.text.as_str()) {
            Change::Appended(rest.to_string())
        } else {
            Change::Replaced
        };
        self.text = message.content.clone();
        self.status = ReplyStatus::Done(message);
        Step::changed(change)
    }

    /// The stream dropped (it is reconnecting). A reply coming is interrupted.
    pub fn stream_lost(&mut self) -> Step {
        self.connected = false;
        self.heard_since_connect = false;
        self.looked_once = false;
        if self.status == ReplyStatus::Coming {
            self.status = ReplyStatus::Interrupted;
        }
        Step::NOTHING
    }

    /// Nothing of the reply came for so long that the driver stops waiting for the stream:
    /// a reply coming is treated as lost, for the stored history to settle.
    pub fn stalled(&mut self) {
        if self.status == ReplyStatus::Coming {
            self.status = ReplyStatus::Interrupted;
        }
    }

    /// The stream is open again. A reply lost with the old connection comes back as a
    /// snapshot if still being generated; the stored history says if it ended meanwhile.
    pub fn stream_connected(&mut self) -> Step {
        let was_down = !self.connected;
        self.connected = true;
        self.heard_since_connect = false;
        self.looked_once = false;
        if was_down && self.status == ReplyStatus::Interrupted && self.reply_id.is_some() {
            return Step::next(Next::FetchHistory);
        }
        Step::NOTHING
    }

    /// The session's stored history, fetched after a loss: settles an interrupted reply.
    pub fn history(&mut self, messages: &[Message]) -> Step {
        if self.status != ReplyStatus::Interrupted {
            return Step::NOTHING;
        }
        let Some(id) = self.reply_id.clone() else {
            return Step::NOTHING;
        };
        if let Some(reply) = messages.iter().find(|m| m.message_id == id) {
            return self.finish(reply.clone());
        }
        let message_kept = messages
            .last()
            .is_some_and(|m| m.role == self.sent_role && m.content == self.sent_text);
        if !message_kept {
            // Neither the message nor the reply: the service rolled the turn back.
            self.status = ReplyStatus::Failed(ReplyFailure::NotKept {
                message_kept: false,
            });
            return Step::NOTHING;
        }
        // The message without its reply: still being generated, unless the stream is back
        // and the server said nothing of it (no snapshot) on two looks.
        if !self.connected || self.heard_since_connect {
            return Step::NOTHING;
        }
        if !self.looked_once {
            self.looked_once = true;
            return Step::next(Next::FetchHistoryLater);
        }
        self.status = ReplyStatus::Failed(ReplyFailure::NotKept { message_kept: true });
        Step::NOTHING
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(id: &str, seq: u64, content: &str) -> StreamEvent {
        StreamEvent::Delta {
            session_id: "s".into(),
            message_id: id.into(),
            seq,
            content: content.into(),
        }
    }

    fn snapshot(id: &str, seq: u64, content: &str) -> StreamEvent {
        StreamEvent::Snapshot {
            session_id: "s".into(),
            message_id: id.into(),
            seq,
            content: content.into(),
        }
    }

    fn started(id: &str, key: Option<&str>) -> StreamEvent {
        StreamEvent::Started {
            session_id: "s".into(),
            message_id: id.into(),
            idempotency_key: key.map(Into::into),
        }
    }

    fn done_of(id: &str, content: &str) -> StreamEvent {
        StreamEvent::Done {
            message: message(id, Role::Assistant, content),
        }
    }

    /// Another device sends first and its reply starts while this send waits for the POST's
    /// answer (the service holds it until the session's turn ends): its events are not this
    /// reply's, whichever kind comes first, and this reply is taken up from its own `started`.
    #[test]
    fn a_reply_started_by_another_send_is_not_taken_for_this_one() {
        let mut f = ReplyFollower::new(Role::User, "mine").sent_with_key("key-mine");
        f.event(&started("theirs", Some("key-theirs")));
        assert_eq!(f.reply_id(), None);
        assert!(!f.concerns(&delta("theirs", 0, "x")));
        for event in [
            delta("theirs", 0, "Not "),
            snapshot("theirs", 1, "Not "),
            StreamEvent::Progress {
                session_id: "s".into(),
                message_id: "theirs".into(),
                prompt_tokens: 1,
                prompt_total: 2,
            },
            done_of("theirs", "Not yours"),
        ] {
            assert_eq!(f.event(&event), Step::NOTHING);
        }
        assert_eq!(f.text(), "");
        assert_eq!(f.status(), &ReplyStatus::Coming);
        // A send without a key (a script's curl) is another's too, with this key known.
        f.event(&started("keyless", None));
        assert!(!f.concerns(&delta("keyless", 0, "x")));
        f.event(&started("ours", Some("key-mine")));
        assert_eq!(f.reply_id(), Some("ours"));
        f.event(&delta("ours", 0, "Yes"));
        f.event(&done_of("ours", "Yes"));
        assert_eq!(f.text(), "Yes");
        assert!(matches!(f.status(), ReplyStatus::Done(m) if m.message_id == "ours"));
    }

    /// Without the key (or from a server that sends no `started`), the first reply of unknown
    /// id is taken as this one, as before.
    #[test]
    fn without_a_key_the_first_unknown_reply_is_taken() {
        let mut f = ReplyFollower::new(Role::User, "hi");
        f.event(&started("r", Some("whatever")));
        assert_eq!(f.reply_id(), Some("r"));
        let mut g = ReplyFollower::new(Role::User, "hi").sent_with_key("k");
        g.event(&delta("r", 0, "Hi"));
        assert_eq!(g.reply_id(), Some("r"));
        assert_eq!(g.text(), "Hi");
    }

    #[test]
    fn progress_shows_until_the_first_text_and_the_finish_reason_once_done() {
        let mut f = ReplyFollower::new(Role::User, "hi");
        f.reply_id_known("r");
        let progress = |read| StreamEvent::Progress {
            session_id: "s".into(),
            message_id: "r".into(),
            prompt_tokens: read,
            prompt_total: 1000,
        };
        assert_eq!(f.progress(), None);
        f.event(&progress(470));
        assert_eq!(f.progress(), Some((470, 1000)));
        // Another reply's progress is not this one's.
        f.event(&StreamEvent::Progress {
            session_id: "s".into(),
            message_id: "other".into(),
            prompt_tokens: 1,
            prompt_total: 2,
        });
        assert_eq!(f.progress(), Some((470, 1000)));
        f.event(&delta("r", 0, "Hel"));
        assert_eq!(f.progress(), None);
        let mut done = message("r", Role::Assistant, "Hel");
        done.finish_reason = Some(convo_wire::FinishReason::Stopped);
        f.event(&StreamEvent::Done { message: done });
        assert_eq!(f.finish_reason(), Some(convo_wire::FinishReason::Stopped));
    }

    fn message(id: &str, role: Role, content: &str) -> Message {
        Message {
            message_id: id.into(),
            session_id: "s".into(),
            role,
            content: content.into(),
            tokens: 3,
            created_at: "2026-01-01T00:00:00Z".into(),
            finish_reason: None,
        }
    }

    fn following() -> ReplyFollower {
        let mut f = ReplyFollower::new(Role::User, "hi");
        f.accepted(&message("r", Role::Assistant, ""), false);
        f
    }

    #[test]
    fn duplicate_deltas_are_dropped_by_seq() {
        let mut f = following();
        assert_eq!(
            f.event(&delta("r", 0, "a")).change,
            Change::Appended("a".into())
        );
        assert_eq!(f.event(&delta("r", 0, "a")).change, Change::None);
        f.event(&delta("r", 1, "b"));
        assert_eq!(f.event(&delta("r", 1, "b")).change, Change::None);
        assert_eq!(f.event(&delta("r", 0, "a")).change, Change::None);
        assert_eq!(f.text(), "ab");
        assert_eq!(f.status(), &ReplyStatus::Coming);
    }

    #[test]
    fn other_replies_change_nothing() {
        let mut f = following();
        assert_eq!(f.event(&delta("other", 0, "x")), Step::NOTHING);
        assert_eq!(f.text(), "");
    }

    #[test]
    fn deltas_before_the_post_answer_adopt_the_id() {
        let mut f = ReplyFollower::new(Role::User, "hi");
        f.event(&delta("r", 0, "a"));
        assert_eq!(f.reply_id(), Some("r"));
        f.accepted(&message("r", Role::Assistant, ""), false);
        assert_eq!(f.status(), &ReplyStatus::Coming);
    }

    #[test]
    fn reconnect_with_a_snapshot_resumes_without_repeating() {
        let mut f = following();
        f.event(&delta("r", 0, "a"));
        f.event(&delta("r", 1, "b"));
        f.stream_lost();
        assert_eq!(f.status(), &ReplyStatus::Interrupted);
        // A delta beyond the next one cannot resume a lost reply.
        assert_eq!(f.event(&delta("r", 3, "d")).change, Change::None);
        assert_eq!(f.stream_connected().next, Next::FetchHistory);
        // A stale snapshot is dropped; a current one replaces the text.
        assert_eq!(f.event(&snapshot("r", 1, "a")).change, Change::None);
        assert_eq!(f.event(&snapshot("r", 3, "abc")).change, Change::Replaced);
        assert_eq!(f.status(), &ReplyStatus::Coming);
        assert_eq!(f.event(&delta("r", 2, "c")).change, Change::None);
        f.event(&delta("r", 3, "d"));
        assert_eq!(f.text(), "abcd");
        // History still without the reply: the snapshot showed it is coming.
        assert_eq!(f.history(&[message("u", Role::User, "hi")]), Step::NOTHING);
        assert_eq!(f.status(), &ReplyStatus::Coming);
    }

    #[test]
    fn the_next_delta_resumes_a_lost_reply() {
        let mut f = following();
        f.event(&delta("r", 0, "a"));
        f.stream_lost();
        f.stream_connected();
        assert_eq!(
            f.event(&delta("r", 1, "b")).change,
            Change::Appended("b".into())
        );
        assert_eq!(f.status(), &ReplyStatus::Coming);
    }

    #[test]
    fn done_gives_the_stored_text() {
        let mut f = following();
        f.event(&delta("r", 0, "Hel"));
        let step = f.event(&StreamEvent::Done {
            message: message("r", Role::Assistant, "Hello"),
        });
        assert_eq!(step.change, Change::Appended("lo".into()));
        assert!(matches!(f.status(), ReplyStatus::Done(m) if m.content == "Hello"));
        // Nothing after the end.
        assert_eq!(f.event(&delta("r", 1, "x")), Step::NOTHING);
        assert_eq!(f.text(), "Hello");
    }

    #[test]
    fn a_complete_post_answer_is_done() {
        let mut f = ReplyFollower::new(Role::User, "hi");
        f.accepted(&message("r", Role::Assistant, "whole"), true);
        assert!(matches!(f.status(), ReplyStatus::Done(_)));
        assert_eq!(f.text(), "whole");
    }

    #[test]
    fn a_stream_only_error_interrupts_the_reply_until_it_comes_back() {
        for code in ["relay_unavailable", "replica_stopping"] {
            let mut f = following();
            f.event(&delta("r", 0, "Hel"));
            f.event(&StreamEvent::Error {
                session_id: "s".into(),
                message_id: "r".into(),
                error: ErrorBody::new(code, "the link is down"),
            });
            assert_eq!(f.status(), &ReplyStatus::Interrupted, "{code}");
            // The history shows the message still unanswered: the reply is coming elsewhere.
            let unanswered = [message("u", Role::User, "hi")];
            assert_eq!(f.history(&unanswered), Step::NOTHING, "{code}");
            assert_eq!(f.history(&unanswered), Step::NOTHING, "{code}");
            assert_eq!(f.status(), &ReplyStatus::Interrupted, "{code}");
            f.event(&snapshot("r", 3, "Hello, wor"));
            assert_eq!(f.status(), &ReplyStatus::Coming, "{code}");
            f.event(&StreamEvent::Done {
                message: message("r", Role::Assistant, "Hello, world"),
            });
            assert!(matches!(f.status(), ReplyStatus::Done(m) if m.content == "Hello, world"));
        }
    }

    #[test]
    fn an_error_event_fails_the_reply() {
        let mut f = following();
        f.event(&StreamEvent::Error {
            session_id: "s".into(),
            message_id: "r".into(),
            error: serde_json::from_value::<ErrorBody>(
                serde_json::json!({"code": "engine_error", "message": "boom"}),
            )
            .expect("an error body"),
        });
        assert!(matches!(
            f.status(),
            ReplyStatus::Failed(ReplyFailure::Error(e)) if e.code == "engine_error"
        ));
        let ReplyStatus::Failed(failure) = f.status() else {
            unreachable!()
        };
        assert!(failure.resend_message(), "the turn is rolled back");
    }

    #[test]
    fn which_failures_drop_the_message_with_the_turn() {
        let error = |code: &str| ReplyFailure::Error(ErrorBody::new(code, "x"));
        assert!(error("engine_failed").message_dropped());
        assert!(!error("session_not_found").message_dropped());
        assert!(
            ReplyFailure::NotKept {
                message_kept: false
            }
            .message_dropped()
        );
        assert!(!ReplyFailure::NotKept { message_kept: true }.message_dropped());
    }

    #[test]
    fn which_failures_leave_the_message_to_send_again() {
        let error = |code: &str| ReplyFailure::Error(ErrorBody::new(code, "why"));
        assert!(error("engine_failed").resend_message());
        assert!(error("internal").resend_message());
        assert!(
            !error("session_not_found").resend_message(),
            "a deleted session has nothing to send it to"
        );
        for message_kept in [true, false] {
            assert!(ReplyFailure::NotKept { message_kept }.resend_message());
        }
    }

    #[test]
    fn loss_then_history_with_the_reply_is_done() {
        let mut f = following();
        f.event(&delta("r", 0, "Hel"));
        f.stream_lost();
        f.stream_connected();
        let step = f.history(&[
            message("u", Role::User, "hi"),
            message("r", Role::Assistant, "Hello"),
        ]);
        assert_eq!(step.change, Change::Appended("lo".into()));
        assert!(matches!(f.status(), ReplyStatus::Done(m) if m.message_id == "r"));
    }

    #[test]
    fn loss_then_history_without_the_turn_is_not_kept() {
        let mut f = following();
        f.event(&delta("r", 0, "Hel"));
        f.stream_lost();
        f.stream_connected();
        f.history(&[]);
        assert_eq!(
            f.status(),
            &ReplyStatus::Failed(ReplyFailure::NotKept {
                message_kept: false
            })
        );
        assert_eq!(f.text(), "Hel");
    }

    #[test]
    fn message_kept_without_reply_after_a_restart_is_not_kept() {
        let mut f = following();
        f.event(&delta("r", 0, "Hel"));
        f.stream_lost();
        let kept = [message("u", Role::User, "hi")];
        // While the stream is down the reply may still be coming.
        assert_eq!(f.history(&kept), Step::NOTHING);
        assert_eq!(f.status(), &ReplyStatus::Interrupted);
        // Back, and no snapshot of it: look once more, then it is over.
        f.stream_connected();
        assert_eq!(f.history(&kept).next, Next::FetchHistoryLater);
        assert_eq!(f.status(), &ReplyStatus::Interrupted);
        assert_eq!(f.history(&kept), Step::NOTHING);
        assert_eq!(
            f.status(),
            &ReplyStatus::Failed(ReplyFailure::NotKept { message_kept: true })
        );
    }

    #[test]
    fn message_kept_and_a_snapshot_means_still_coming() {
        let mut f = following();
        f.stream_lost();
        f.stream_connected();
        let kept = [message("u", Role::User, "hi")];
        assert_eq!(f.history(&kept).next, Next::FetchHistoryLater);
        f.event(&snapshot("r", 0, ""));
        assert_eq!(f.history(&kept), Step::NOTHING);
        assert_eq!(f.status(), &ReplyStatus::Coming);
    }

    #[test]
    fn lost_before_the_post_answer_asks_the_history_once_accepted() {
        let mut f = ReplyFollower::new(Role::User, "hi");
        f.stream_lost();
        assert_eq!(f.status(), &ReplyStatus::Interrupted);
        // The id is not known: nothing to ask yet.
        assert_eq!(f.stream_connected(), Step::NOTHING);
        let step = f.accepted(&message("r", Role::Assistant, ""), false);
        assert_eq!(step.next, Next::FetchHistory);
    }
}
