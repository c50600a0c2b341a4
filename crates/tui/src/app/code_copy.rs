//! Copying one code block of a reply (`copy_code`): with one block it is copied at once;
//! with several the transcript numbers them and a number chooses (OSC 52, as `copy_reply`).

use super::*;

impl App {
    /// The message `copy_reply` and `copy_code` act on: the selected one, else the last reply.
    pub(super) fn copy_target(&self) -> Option<usize> {
        let open = self.open.as_ref()?;
        open.selected
            .filter(|&i| i < open.items.len())
            .or_else(|| open.items.iter().rposition(|i| i.role == Role::Assistant))
    }

    /// `copy_code`: copies the message's only code block, or asks which one.
    pub(super) fn copy_code(&mut self, out: &mut Vec<Command>) {
        let Some((open, idx)) = self.open.as_ref().zip(self.copy_target()) else {
            self.notify(Level::Warn, "nothing to copy yet");
            return;
        };
        let entry = open.items[idx].entry;
        let blocks = open.transcript.code_blocks(entry);
        match blocks.len() {
            0 => self.notify(Level::Info, "this reply has no code blocks"),
            1 => self.copy_block(&blocks, 1, out),
            count => {
                self.code_choice = Some(CodeChoice {
                    session_id: open.id.clone(),
                    entry,
                    count,
                    typed: String::new(),
                });
                self.reveal_code_blocks(entry);
            }
        }
    }

    /// Scrolls so that a code block of `entry` is in view, if none is.
    fn reveal_code_blocks(&mut self, entry: EntryId) {
        let (w, h) = self.transcript_viewport();
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let top = open.effective_top(w, h);
        let shown = top..top + usize::from(h);
        let ranges = open.transcript.code_block_lines(w, entry);
        if ranges
            .iter()
            .any(|r| r.start < shown.end && shown.start < r.end)
        {
            return;
        }
        if let Some(first) = ranges.first() {
            open.follow = false;
            // With the line above it (the header or the text that leads to it).
            open.top = first.start.saturating_sub(1);
        }
    }

    /// The choice in progress, if it is of the open session.
    pub fn code_choice(&self) -> Option<&CodeChoice> {
        self.code_choice
            .as_ref()
            .filter(|c| self.open_id() == Some(c.session_id.as_str()))
    }

    /// What the status bar says while a code block is being chosen.
    pub(super) fn code_choice_prompt(&self) -> Option<String> {
        let c = self.code_choice()?;
        let cancel = self.keys.back.first_label();
        Some(if c.typed.is_empty() {
            format!("copy code block: 1–{}, {cancel} cancels", c.count)
        } else {
            format!(
                "copy code block {}…: 1–{}, {} copies {}, {cancel} cancels",
                c.typed,
                c.count,
                self.keys.confirm.first_label(),
                c.typed
            )
        })
    }

    /// A key while a code block is being chosen: a digit (or, past 9 blocks, two) chooses,
    /// `confirm` takes the number typed so far, Backspace takes a digit back, `back`
    /// cancels; the page keys scroll and keep the choice. Any other key ends the choice and
    /// does what it does. Returns whether the key was used here.
    pub(super) fn code_choice_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) -> bool {
        if self.code_choice().is_none() || self.focus != Focus::Transcript {
            self.code_choice = None;
            return false;
        }
        let Some(choice) = self.code_choice.as_mut() else {
            return false;
        };
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::Char(d) if plain && d.is_ascii_digit() => {
                choice.typed.push(d);
                let n: usize = choice.typed.parse().unwrap_or(0);
                if n == 0 || n > choice.count {
                    let text = format!("there is no code block {}", choice.typed);
                    choice.typed.clear();
                    self.notify(Level::Warn, text);
                } else if n * 10 > choice.count {
                    // No block's number goes on with these digits.
                    self.choose_block(n, out);
                }
            }
            KeyCode::Backspace if !choice.typed.is_empty() => {
                choice.typed.pop();
            }
            _ if self.keys.confirm.matches(key) && !choice.typed.is_empty() => {
                let n = choice.typed.parse().unwrap_or(0);
                self.choose_block(n, out);
            }
            _ if self.keys.back.matches(key) => {
                self.code_choice = None;
                self.notice = None;
            }
            _ if self.keys.scroll_up.matches(key) || self.keys.scroll_down.matches(key) => {
                return false;
            }
            _ => {
                self.code_choice = None;
                return false;
            }
        }
        true
    }

    /// Copies block `n` (from 1) of the entry being chosen from, and ends the choice.
    fn choose_block(&mut self, n: usize, out: &mut Vec<Command>) {
        let Some(choice) = self.code_choice.take() else {
            return;
        };
        let blocks = self
            .open
            .as_ref()
            .map(|o| o.transcript.code_blocks(choice.entry))
            .unwrap_or_default();
        self.copy_block(&blocks, n, out);
    }

    fn copy_block(&mut self, blocks: &[String], n: usize, out: &mut Vec<Command>) {
        let Some(code) = n.checked_sub(1).and_then(|i| blocks.get(i)) else {
            self.notify(Level::Warn, format!("there is no code block {n}"));
            return;
        };
        let lines = code.split('\n').count();
        out.push(Command::CopyToClipboard(code.clone()));
        self.notify(
            Level::Info,
            format!(
                "copied code block {n} ({})",
                convo_client::format::counted(lines as u64, "line")
            ),
        );
    }
}
