//! Sent messages back in the composer: `Up` in an empty composer brings the last message sent
//! in this session, `Up` again older ones and `Down` newer ones, like a shell's history; the
//! text is a new draft to edit and send. `/retry` sends the last user message again (the
//! interface has no edit or regenerate: it is a new turn).

use super::*;

/// Where the composer is in the session's sent messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    /// 0 is the newest message.
    pub index: usize,
    /// What the composer was given: once edited, the arrows move in the text again.
    pub text: String,
}

/// Nothing to resend.
pub const NOTHING_TO_RETRY: &str = "nothing to retry: no message was sent in this session yet";

impl App {
    /// The open session's messages from this side (user and system), newest first, as the
    /// composer would take them: a system message as `/system …`, a user message that starts
    /// with `/` escaped as `//…` so it is not read as a command.
    pub fn sent_messages(&self) -> Vec<String> {
        let Some(open) = &self.open else {
            return Vec::new();
        };
        (0..open.items.len())
            .rev()
            .filter_map(|i| {
                let text = open.content(i);
                match open.items[i].role {
                    _ if text.trim().is_empty() => None,
                    Role::System => Some(format!("/system {text}")),
                    Role::User if text.starts_with('/') => Some(format!("/{text}")),
                    Role::User => Some(text.to_string()),
                    Role::Assistant => None,
                }
            })
            .collect()
    }

    /// Whether the composer shows a recalled message as it was given.
    fn recalled_unchanged(&self) -> bool {
        self.recall
            .as_ref()
            .is_some_and(|r| r.text == self.composer_text())
    }

    /// `recall_previous` / `recall_next` in the composer. They act when the composer is empty
    /// (older only) or holds a recalled message unedited with the cursor on its first (older)
    /// or last (newer) line; otherwise the arrows move in the text.
    pub(super) fn recall_key(&mut self, key: &KeyEvent) -> bool {
        let row = self.composer.cursor().0;
        let last_row = self.composer.lines().len().saturating_sub(1);
        if self.keys.recall_previous.matches(key) {
            let index = match self.recall.as_ref() {
                Some(r) if self.recalled_unchanged() && row == 0 => r.index + 1,
                _ if self.composer_chars() == 0 => 0,
                _ => return false,
            };
            let sent = self.sent_messages();
            match sent.get(index) {
                Some(text) => self.put_recalled(index, text.clone()),
                None if sent.is_empty() => {
                    self.notify(Level::Info, "no message sent in this session yet");
                }
                None => self.notify(Level::Info, "that was the first message of this session"),
            }
            return true;
        }
        if self.keys.recall_next.matches(key) && self.recalled_unchanged() && row == last_row {
            match self.recall.as_ref().map(|r| r.index) {
                Some(0) | None => {
                    // Past the newest: back to an empty composer, as a shell does.
                    self.recall = None;
                    self.composer = new_composer(&self.keys);
                }
                Some(i) => {
                    let text = self.sent_messages().get(i - 1).cloned().unwrap_or_default();
                    self.put_recalled(i - 1, text);
                }
            }
            return true;
        }
        false
    }

    fn put_recalled(&mut self, index: usize, text: String) {
        self.composer = new_composer(&self.keys);
        self.composer.insert_str(&text);
        self.recall = Some(Recall { index, text });
        self.send_error = None;
    }

    /// `/retry`: the last user message of the session, sent again as a new turn.
    pub(super) fn retry(&mut self, out: &mut Vec<Command>) {
        let last = self.open.as_ref().and_then(|open| {
            (0..open.items.len())
                .rev()
                .find(|&i| open.items[i].role == Role::User && !open.content(i).trim().is_empty())
                .map(|i| open.content(i).to_string())
        });
        match last {
            Some(text) => self.send(text, Role::User, out),
            None => self.notify(Level::Warn, NOTHING_TO_RETRY),
        }
    }
}
