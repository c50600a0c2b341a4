//! The composer's state: the text being written, the role and metadata the next message goes
//! with, a sent message recalled into it (`Up`), and what the store last had of the draft.
//! `App` routes the composer's keys to [`Composer::key`] and acts on what it answers (a send,
//! an edit, a scroll, a notice); `view/composer.rs` draws it from the read-only methods. Why
//! the last send failed stays with `App`, which sends.

use std::cell::Cell;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::{TextArea, WrapMode};
use serde_json::Value;

use crate::component::ChatComponent;
use crate::keys::KeyBindings;
use convo_client::api::Role;

mod wrap;

pub use wrap::{Row, Screen, width_at};

/// The open session's sent messages, newest first, as the composer takes them (asked only
/// when `Up` or `Down` recalls one).
pub type Sent<'a> = &'a dyn Fn() -> Vec<String>;

/// What ends a note on the composer besides the next send or edit: the state that made a
/// send fail, once it is over. The text stays, and Enter sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lapse {
    /// Nothing else (a refusal that stays true: too long, a limit, a bad key).
    Edited,
    /// The service answering for the first time (a send while connecting).
    Connected,
    /// The service answering again (a send that could not reach it).
    LinkUp,
    /// The reply that was coming ending (a send while it came).
    ReplyEnded,
    /// Never by itself: the note of a send queued behind the reply that is coming, which the
    /// app takes back when it sends it or drops it (`app/queue.rs`); an edit or Esc ends it.
    Queued,
}

/// The composer.
pub struct Composer {
    text: TextArea<'static>,
    /// The placeholder naming the keys as bound, for every new text area.
    placeholder: String,
    role: Role,
    metadata: Option<Value>,
    /// The sent message the composer shows (`Up` in an empty composer), if any.
    recall: Option<Recall>,
    /// The open session's draft as last handed to the store; an edit that changes the
    /// composer away from it is sent as `StoreOp::DraftEdited`.
    draft_in_store: String,
    /// `Command::WarmTokenCounter` was given (once, at the first edit of the composer).
    token_counter_asked: bool,
    /// Why the last send failed, shown on the composer's border until the next send or edit,
    /// or until what made it true is over.
    send_error: Option<(String, Lapse)>,
    /// The first screen row drawn when the draft is taller than the composer (kept from
    /// frame to frame: it moves only to keep the cursor in view).
    scroll_top: Cell<usize>,
}

/// Where the composer is in the session's sent messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    /// 0 is the newest message.
    pub index: usize,
    /// What the composer was given: once edited, the arrows move in the text again.
    pub text: String,
}

/// What a key in the composer asks of the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComposerKey {
    /// The composer used it.
    Consumed,
    /// The composer's text changed (typed, undone, recalled): the last send's error is over.
    Edited,
    /// The composer leaves it to the app (its own bindings on Ctrl-n/p/r/c).
    NotConsumed,
    /// Send what the composer holds (a message or a slash command).
    Submit,
    /// Home or End in an empty draft: the transcript's (an empty draft has no line to move in).
    ScrollTranscript,
    /// Nothing to recall: say this.
    Notice(&'static str),
}

impl Composer {
    /// An empty composer whose placeholder names the keys as bound.
    pub fn new(keys: &KeyBindings) -> Self {
        let placeholder = format!(
            "Message · {} sends · {} new line · /help",
            keys.send.first_label(),
            keys.newline.first_label()
        );
        Composer {
            text: new_text_area(&placeholder),
            placeholder,
            role: Role::User,
            metadata: None,
            recall: None,
            draft_in_store: String::new(),
            token_counter_asked: false,
            send_error: None,
            scroll_top: Cell::new(0),
        }
    }

    // ---- read ----------------------------------------------------------------------------

    /// The text area, to draw (and for its cursor and placeholder).
    pub fn text_area(&self) -> &TextArea<'static> {
        &self.text
    }

    /// The draft on screen at `width` columns: its rows, word-wrapped
    /// (`composer_pane/wrap.rs`), and where the cursor is drawn.
    pub fn screen(&self, width: usize) -> Screen {
        let cursor = self.text.cursor();
        wrap::screen(self.lines(), width, cursor.0, cursor.1)
    }

    /// How many rows the draft takes at `width` columns.
    pub fn rows(&self, width: usize) -> usize {
        self.screen(width).rows.len()
    }

    /// The first row to draw in a composer `height` rows high with the cursor on screen row
    /// `cursor_row`: the one drawn last time, moved only as far as brings the cursor in view.
    pub fn scroll_top(&self, cursor_row: usize, height: usize) -> usize {
        let prev = self.scroll_top.get();
        let top = if cursor_row < prev {
            cursor_row
        } else if prev + height.max(1) <= cursor_row {
            cursor_row + 1 - height.max(1)
        } else {
            prev
        };
        self.scroll_top.set(top);
        top
    }

    /// The text, lines joined with `\n`.
    pub fn text(&self) -> String {
        self.text.lines().join("\n")
    }

    /// The text's lines.
    pub fn lines(&self) -> &[String] {
        self.text.lines()
    }

    /// Characters in the text, a line break counting one.
    pub fn chars(&self) -> usize {
        self.lines()
            .iter()
            .map(|l| l.chars().count())
            .sum::<usize>()
            + self.lines().len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Why the last send failed, until the next send or edit, or its [`Lapse`].
    pub fn send_error(&self) -> Option<&str> {
        self.send_error.as_ref().map(|(why, _)| why.as_str())
    }

    /// Sets (or clears) why the last send failed; it stays until the next send or edit.
    pub fn set_send_error(&mut self, why: Option<String>) {
        self.send_error = why.map(|why| (why, Lapse::Edited));
    }

    /// Says why the last send failed until the next send or edit, or until `lapse`.
    pub fn set_send_note(&mut self, why: String, lapse: Lapse) {
        self.send_error = Some((why, lapse));
    }

    /// Whether the composer's note is one that lasts until `lapse`.
    pub fn noted(&self, lapse: Lapse) -> bool {
        self.send_error.as_ref().is_some_and(|(_, l)| *l == lapse)
    }

    /// `over` is no longer true: a note that lasts only while it is goes.
    pub fn lapse(&mut self, over: Lapse) {
        if self.noted(over) {
            self.send_error = None;
        }
    }

    /// The role the next message goes with.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The metadata the next message goes with (`/meta`).
    pub fn metadata(&self) -> Option<&Value> {
        self.metadata.as_ref()
    }

    // ---- change --------------------------------------------------------------------------

    /// Empties the text (and its undo history).
    pub fn clear(&mut self) {
        self.text = new_text_area(&self.placeholder);
    }

    /// Replaces the text (and its undo history), the cursor at its end.
    pub fn set_text(&mut self, text: &str) {
        self.clear();
        self.text.insert_str(text);
    }

    /// Inserts at the cursor (a paste, a draft carried over).
    pub fn insert_str(&mut self, text: &str) {
        self.text.insert_str(text);
    }

    /// Replaces the text as one edit that Ctrl-Z undoes (the editor's text).
    pub fn replace_undoably(&mut self, text: &str) {
        self.text.select_all();
        self.text.insert_str(text);
    }

    pub fn toggle_role(&mut self) {
        self.role = if self.role == Role::User {
            Role::System
        } else {
            Role::User
        };
    }

    /// Back to the user's role after a one-off system message.
    pub fn reset_role(&mut self) {
        self.role = Role::User;
    }

    pub fn set_metadata(&mut self, metadata: Option<Value>) {
        self.metadata = metadata;
    }

    /// The metadata, for the message about to be sent (it goes with one message).
    pub fn take_metadata(&mut self) -> Option<Value> {
        self.metadata.take()
    }

    /// Another session, another history: nothing recalled.
    pub fn forget_recall(&mut self) {
        self.recall = None;
    }

    /// The store has this draft now.
    pub fn stored(&mut self, text: String) {
        self.draft_in_store = text;
    }

    /// The text, if it changed since the store last had it (it has it now).
    pub fn unstored_edit(&mut self) -> Option<String> {
        let text = self.text();
        (text != self.draft_in_store).then(|| {
            self.draft_in_store = text.clone();
            text
        })
    }

    /// The text, until token counting was asked to get ready.
    pub fn text_before_first_edit(&self) -> Option<String> {
        (!self.token_counter_asked).then(|| self.text())
    }

    /// Whether this is the first change of the text (`before` from
    /// [`Self::text_before_first_edit`]): token counting is asked to get ready once.
    pub fn first_edit(&mut self, before: Option<String>) -> bool {
        let first = before.is_some_and(|b| b != self.text());
        self.token_counter_asked |= first;
        first
    }

    /// A key while the composer has focus. `sent` gives the open session's sent messages,
    /// newest first, as the composer would take them (for `Up` and `Down`).
    fn edit_key(&mut self, keys: &KeyBindings, key: KeyEvent, sent: Sent<'_>) -> ComposerKey {
        if keys.send.matches(&key) {
            return ComposerKey::Submit;
        } else if keys.newline.matches(&key) {
            self.text.insert_newline();
        } else if key.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(key.code, KeyCode::Char('n' | 'p' | 'r' | 'c'))
        {
            // Never let the textarea's emacs bindings shadow ours if they were rebound.
            return ComposerKey::NotConsumed;
        } else if key.modifiers == KeyModifiers::CONTROL && key.code == KeyCode::Char('u') {
            // Ctrl-U clears to the start of the line, as in shells and in the wallet prompt
            // (the textarea would undo); Ctrl-Z undoes.
            self.text.delete_line_by_head();
            return ComposerKey::Edited;
        } else if let Some(done) = self.recall_key(keys, &key, sent) {
            // A sent message came back (or went) in the composer.
            return done;
        } else if key.modifiers == KeyModifiers::CONTROL && key.code == KeyCode::Char('z') {
            self.text.undo();
            return ComposerKey::Edited;
        } else if self.chars() == 0
            && !matches!(key.code, KeyCode::Char(_))
            && (keys.scroll_top.matches(&key) || keys.scroll_bottom.matches(&key))
        {
            // An empty draft has no line to move in: Home and End scroll the transcript, so
            // the hint "End follows" is true from here too.
            return ComposerKey::ScrollTranscript;
        } else {
            self.text.input(key);
            return ComposerKey::Edited;
        }
        ComposerKey::Consumed
    }

    /// Whether the composer shows a recalled message as it was given.
    fn recalled_unchanged(&self) -> bool {
        self.recall.as_ref().is_some_and(|r| r.text == self.text())
    }

    /// `recall_previous` / `recall_next`. They act when the composer is empty (older only) or
    /// holds a recalled message unedited with the cursor on its first (older) or last (newer)
    /// line; otherwise (`None`) the arrows move in the text.
    fn recall_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        sent: Sent<'_>,
    ) -> Option<ComposerKey> {
        let row = self.text.cursor().0;
        let last_row = self.lines().len().saturating_sub(1);
        if keys.recall_previous.matches(key) {
            let index = match self.recall.as_ref() {
                Some(r) if self.recalled_unchanged() && row == 0 => r.index + 1,
                _ if self.chars() == 0 => 0,
                _ => return None,
            };
            let sent = sent();
            return Some(match sent.get(index) {
                Some(text) => {
                    self.put_recalled(index, text.clone());
                    ComposerKey::Edited
                }
                None if sent.is_empty() => {
                    ComposerKey::Notice("no message sent in this session yet")
                }
                None => ComposerKey::Notice("that was the first message of this session"),
            });
        }
        if keys.recall_next.matches(key) && self.recalled_unchanged() && row == last_row {
            return Some(match self.recall.as_ref().map(|r| r.index) {
                Some(0) | None => {
                    // Past the newest: back to an empty composer, as a shell does.
                    self.recall = None;
                    self.clear();
                    ComposerKey::Consumed
                }
                Some(i) => {
                    let text = sent().get(i - 1).cloned().unwrap_or_default();
                    self.put_recalled(i - 1, text);
                    ComposerKey::Edited
                }
            });
        }
        None
    }

    fn put_recalled(&mut self, index: usize, text: String) {
        self.set_text(&text);
        self.recall = Some(Recall { index, text });
    }
}

impl ChatComponent for Composer {
    /// The open session's sent messages, for `Up` and `Down`.
    type Context<'a> = Sent<'a>;
    type Outcome = ComposerKey;

    fn key(&mut self, keys: &KeyBindings, key: &KeyEvent, sent: Sent<'_>) -> ComposerKey {
        self.edit_key(keys, *key, sent)
    }

    /// Pasted text goes in at the cursor, its line breaks as the composer's.
    fn paste(&mut self, text: &str, _sent: Sent<'_>) -> ComposerKey {
        self.insert_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
        ComposerKey::Consumed
    }

    fn hints(&self, k: &KeyBindings) -> Vec<(String, &'static str)> {
        vec![
            (k.help.typing_label(), "help"),
            (k.send.first_label(), "send"),
            (k.new_session.first_label(), "new"),
            (k.stop_or_quit.first_label(), "quit"),
            (k.focus_next.first_label(), "panes"),
        ]
    }
}

fn new_text_area(placeholder: &str) -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_wrap_mode(WrapMode::WordOrGlyph);
    t.set_placeholder_text(placeholder.to_string());
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
}
