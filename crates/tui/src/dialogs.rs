//! The chat's dialogs: the overlay on top of the view (the help, the delete confirmation,
//! the context overflow), which takes every key while open, and the choice of a code block
//! to copy by its number (`copy_code` on a message with several). It owns them privately:
//! `App` routes keys to [`Dialogs::key`] and [`Dialogs::code_choice_key`] and acts on what
//! they answer ([`DialogKey`], [`CodeKey`]); `view/dialog.rs`, `view/help.rs` and
//! `view/transcript.rs` draw them from the read-only methods.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;

use crate::component::ChatComponent;
use crate::keys::KeyBindings;
use crate::render::transcript::EntryId;

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

/// The dialogs' state.
#[derive(Debug, Default)]
pub struct Dialogs {
    overlay: Option<Overlay>,
    code_choice: Option<CodeChoice>,
}

/// What a key in the overlay asks of the app.
#[derive(Debug, Clone, PartialEq)]
pub enum DialogKey {
    /// The overlay used it (or closed).
    Consumed,
    /// Quit (Ctrl-C on the help).
    Quit,
    /// The delete was confirmed (the overlay closed).
    Delete {
        session_id: String,
        title: String,
        from_composer: bool,
    },
    /// Start a new session with this draft (the context overflow's way out).
    NewSession { draft: String },
}

/// What a key asks of the app while a code block is being chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum CodeKey {
    /// Not for the choice: the app handles it (the choice goes on if it scrolls, else it
    /// ended).
    NotConsumed,
    Consumed,
    /// Copy block `n` (from 1) of `entry` (the choice ended).
    Copy {
        entry: EntryId,
        n: usize,
    },
    /// No block has that number (the digits typed are cleared).
    NoSuchBlock(String),
    /// The choice was cancelled (its prompt goes from the status bar).
    Cancelled,
}

impl Dialogs {
    // ---- read ----------------------------------------------------------------------------

    /// The overlay shown, if any.
    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlay.as_ref()
    }

    pub fn is_open(&self) -> bool {
        self.overlay.is_some()
    }

    /// The code block choice in progress, if it is of the session `open_id`.
    pub fn code_choice(&self, open_id: Option<&str>) -> Option<&CodeChoice> {
        self.code_choice
            .as_ref()
            .filter(|c| open_id == Some(c.session_id.as_str()))
    }

    /// What the status bar says while a code block of session `open_id` is being chosen.
    pub fn code_choice_prompt(&self, keys: &KeyBindings, open_id: Option<&str>) -> Option<String> {
        let c = self.code_choice(open_id)?;
        let cancel = keys.back.first_label();
        Some(if c.typed.is_empty() {
            format!("copy code block: 1–{}, {cancel} cancels", c.count)
        } else {
            format!(
                "copy code block {}…: 1–{}, {} copies {}, {cancel} cancels",
                c.typed,
                c.count,
                keys.confirm.first_label(),
                c.typed
            )
        })
    }

    // ---- change --------------------------------------------------------------------------

    /// Shows `overlay` (over any other).
    pub fn open(&mut self, overlay: Overlay) {
        self.overlay = Some(overlay);
    }

    /// Shows the help from its top.
    pub fn help(&mut self) {
        self.open(Overlay::Help { scroll: 0 });
    }

    /// Starts choosing one of `choice.count` code blocks.
    pub fn choose_code(&mut self, choice: CodeChoice) {
        self.code_choice = Some(choice);
    }

    /// A key while the overlay is open (all of them are its own); `size` is the screen's.
    fn overlay_key(&mut self, k: &KeyBindings, key: &KeyEvent, size: Rect) -> DialogKey {
        let Some(overlay) = self.overlay.clone() else {
            return DialogKey::Consumed;
        };
        match overlay {
            Overlay::Help { scroll } => {
                let max = crate::help::max_scroll(k, size);
                let page = size.height.saturating_sub(4).max(1);
                let step = if k.scroll_down.matches(key) || k.scroll_up.matches(key) {
                    page
                } else {
                    1
                };
                if k.move_down.matches(key) || k.scroll_down.matches(key) {
                    self.overlay = Some(Overlay::Help {
                        scroll: scroll.saturating_add(step).min(max),
                    });
                } else if k.move_up.matches(key) || k.scroll_up.matches(key) {
                    self.overlay = Some(Overlay::Help {
                        scroll: scroll.saturating_sub(step),
                    });
                } else if k.stop_or_quit.matches(key) {
                    self.overlay = None;
                    return DialogKey::Quit;
                } else {
                    self.overlay = None;
                }
            }
            Overlay::ConfirmDelete {
                session_id,
                title,
                from_composer,
            } => {
                if k.confirm.matches(key) {
                    self.overlay = None;
                    return DialogKey::Delete {
                        session_id,
                        title,
                        from_composer,
                    };
                } else if k.cancel.matches(key) || k.stop_or_quit.matches(key) {
                    self.overlay = None;
                }
            }
            Overlay::ContextOverflow { draft, .. } => {
                if k.confirm.matches(key) || k.new_session.matches(key) {
                    self.overlay = None;
                    return DialogKey::NewSession { draft };
                } else if k.cancel.matches(key) || k.stop_or_quit.matches(key) {
                    self.overlay = None;
                }
            }
        }
        DialogKey::Consumed
    }

    /// A key while a code block may be being chosen, in the session `open_id`, with the
    /// transcript focused or not: a digit (or, past 9 blocks, two) chooses, `confirm` takes
    /// the number typed so far, Backspace takes a digit back, `back` cancels; the page keys
    /// scroll and keep the choice. Any other key (or a choice in another session or pane)
    /// ends the choice and is the app's.
    pub fn code_choice_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        open_id: Option<&str>,
        transcript_focused: bool,
    ) -> CodeKey {
        if self.code_choice(open_id).is_none() || !transcript_focused {
            self.code_choice = None;
            return CodeKey::NotConsumed;
        }
        let Some(choice) = self.code_choice.as_mut() else {
            return CodeKey::NotConsumed;
        };
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::Char(d) if plain && d.is_ascii_digit() => {
                choice.typed.push(d);
                let n: usize = choice.typed.parse().unwrap_or(0);
                if n == 0 || n > choice.count {
                    let typed = std::mem::take(&mut choice.typed);
                    return CodeKey::NoSuchBlock(typed);
                } else if n * 10 > choice.count {
                    // No block's number goes on with these digits.
                    return self.choose(n);
                }
            }
            KeyCode::Backspace if !choice.typed.is_empty() => {
                choice.typed.pop();
            }
            _ if keys.confirm.matches(key) && !choice.typed.is_empty() => {
                let n = choice.typed.parse().unwrap_or(0);
                return self.choose(n);
            }
            _ if keys.back.matches(key) => {
                self.code_choice = None;
                return CodeKey::Cancelled;
            }
            _ if keys.scroll_up.matches(key) || keys.scroll_down.matches(key) => {
                return CodeKey::NotConsumed;
            }
            _ => {
                self.code_choice = None;
                return CodeKey::NotConsumed;
            }
        }
        CodeKey::Consumed
    }

    /// Block `n` (from 1) of the entry being chosen from; the choice ends.
    fn choose(&mut self, n: usize) -> CodeKey {
        match self.code_choice.take() {
            Some(choice) => CodeKey::Copy {
                entry: choice.entry,
                n,
            },
            None => CodeKey::Consumed,
        }
    }
}

impl ChatComponent for Dialogs {
    /// The screen's size (the help scrolls by its pages).
    type Context<'a> = Rect;
    type Outcome = DialogKey;

    /// A key while the overlay is open: all of them are its own.
    fn key(&mut self, keys: &KeyBindings, key: &KeyEvent, size: Rect) -> DialogKey {
        self.overlay_key(keys, key, size)
    }

    /// A dialog takes no text: a paste while one is open goes nowhere.
    fn paste(&mut self, _text: &str, _size: Rect) -> DialogKey {
        DialogKey::Consumed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEvent;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    const SCREEN: Rect = Rect::new(0, 0, 80, 24);

    fn confirm_delete() -> Overlay {
        Overlay::ConfirmDelete {
            session_id: "session_a".into(),
            title: "Rust".into(),
            from_composer: true,
        }
    }

    #[test]
    fn a_dialog_answers_what_its_keys_ask_and_closes() {
        let keys = KeyBindings::default();
        let mut d = Dialogs::default();
        d.open(confirm_delete());
        assert_eq!(
            d.key(&keys, &press(KeyCode::Char('x')), SCREEN),
            DialogKey::Consumed
        );
        assert!(d.is_open(), "any other key leaves the question open");
        assert_eq!(d.paste("y", SCREEN), DialogKey::Consumed);
        assert!(d.is_open(), "a paste answers nothing");
        assert_eq!(
            d.key(&keys, &press(KeyCode::Enter), SCREEN),
            DialogKey::Delete {
                session_id: "session_a".into(),
                title: "Rust".into(),
                from_composer: true,
            }
        );
        assert!(d.overlay().is_none());
        d.open(confirm_delete());
        assert_eq!(
            d.key(&keys, &press(KeyCode::Esc), SCREEN),
            DialogKey::Consumed
        );
        assert!(!d.is_open());
        d.open(Overlay::ContextOverflow {
            current: 9000,
            max: 8192,
            draft: "long".into(),
        });
        assert_eq!(
            d.key(&keys, &press(KeyCode::Char('y')), SCREEN),
            DialogKey::NewSession {
                draft: "long".into()
            }
        );
        d.help();
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(d.key(&keys, &ctrl_c, SCREEN), DialogKey::Quit);
        assert!(!d.is_open());
    }

    #[test]
    fn a_code_block_is_chosen_by_its_number_in_its_own_session() {
        let keys = KeyBindings::default();
        let mut d = Dialogs::default();
        let choice = CodeChoice {
            session_id: "session_a".into(),
            entry: EntryId(3),
            count: 12,
            typed: String::new(),
        };
        d.choose_code(choice.clone());
        assert!(d.code_choice(Some("session_b")).is_none());
        let a = Some("session_a");
        assert_eq!(
            d.code_choice_prompt(&keys, a).as_deref(),
            Some("copy code block: 1–12, Esc cancels")
        );
        // 1 may go on to 10–12; 2 after it can only be 12.
        let digit = |c| press(KeyCode::Char(c));
        assert_eq!(
            d.code_choice_key(&keys, &digit('1'), a, true),
            CodeKey::Consumed
        );
        assert_eq!(
            d.code_choice_key(&keys, &digit('2'), a, true),
            CodeKey::Copy {
                entry: EntryId(3),
                n: 12
            }
        );
        assert!(d.code_choice(a).is_none(), "the choice ended");
        d.choose_code(choice.clone());
        assert_eq!(
            d.code_choice_key(&keys, &digit('0'), a, true),
            CodeKey::NoSuchBlock("0".into())
        );
        assert_eq!(
            d.code_choice_key(&keys, &digit('1'), a, true),
            CodeKey::Consumed
        );
        assert_eq!(
            d.code_choice_key(&keys, &press(KeyCode::Enter), a, true),
            CodeKey::Copy {
                entry: EntryId(3),
                n: 1
            }
        );
        d.choose_code(choice.clone());
        let page = press(KeyCode::PageDown);
        assert_eq!(
            d.code_choice_key(&keys, &page, a, true),
            CodeKey::NotConsumed
        );
        assert!(d.code_choice(a).is_some(), "paging keeps the choice");
        assert_eq!(
            d.code_choice_key(&keys, &press(KeyCode::Esc), a, true),
            CodeKey::Cancelled
        );
        d.choose_code(choice);
        assert_eq!(
            d.code_choice_key(&keys, &digit('1'), a, false),
            CodeKey::NotConsumed
        );
        assert!(
            d.code_choice(a).is_none(),
            "the transcript lost focus: the choice ended"
        );
    }
}
