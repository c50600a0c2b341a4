//! Input: keys (global, per pane, overlays) and the mouse.

use super::*;

impl App {
    // ---- keys ------------------------------------------------------------------------------

    pub(super) fn on_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) {
        if self.overlay.is_some() {
            self.overlay_key(key, out);
            return;
        }
        if self.view_key(&key, out) {
            return;
        }
        if self.session_search.is_some() {
            self.hits_key(key, out);
            return;
        }
        if self.search.is_some() {
            self.search_key(key, out);
            return;
        }
        if self.code_choice_key(&key, out) {
            return;
        }
        if self.global_key(&key, out) == EventState::Consumed {
            return;
        }
        let state = match self.focus {
            Focus::Composer => self.composer_key(key, out),
            Focus::Sessions => self.sessions_key(key, out),
            Focus::Transcript => self.transcript_key(key, out),
        };
        if state == EventState::NotConsumed && self.focus != Focus::Composer {
            self.pane_common_key(&key, out);
        }
    }

    /// Keys that work in every pane. Plain characters are left to the composer when it has
    /// focus, so typing `q` or `?` types them.
    pub(super) fn global_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) -> EventState {
        let k = &self.keys;
        let typing = self.focus == Focus::Composer
            || (self.focus == Focus::Sessions && self.sessions_pane.is_filtering());
        let is_text = matches!(key.code, KeyCode::Char(_))
            && !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        if typing && is_text {
            return EventState::NotConsumed;
        }
        if k.stop_or_quit.matches(key) {
            if self.open.as_ref().is_some_and(|o| o.is_streaming()) {
                self.stop_stream(out);
            } else {
                self.quit(out);
            }
        } else if k.new_session.matches(key) {
            self.new_session(String::new(), out);
        } else if k.toggle_role.matches(key) {
            self.composer.toggle_role();
        } else if k.focus_next.matches(key) {
            self.sessions_pane.stop_filtering();
            self.focus = match self.focus {
                Focus::Sessions => Focus::Transcript,
                Focus::Transcript => Focus::Composer,
                Focus::Composer if self.settings.show_sessions => Focus::Sessions,
                Focus::Composer => Focus::Transcript,
            };
        } else if k.focus_prev.matches(key) {
            self.sessions_pane.stop_filtering();
            self.focus = match self.focus {
                Focus::Sessions => Focus::Composer,
                Focus::Composer => Focus::Transcript,
                Focus::Transcript if self.settings.show_sessions => Focus::Sessions,
                Focus::Transcript => Focus::Composer,
            };
        } else if k.scroll_up.matches(key) {
            self.scroll_by(-(self.page() as isize));
        } else if k.scroll_down.matches(key) {
            self.scroll_by(self.page() as isize);
        } else if k.help.matches(key) {
            self.overlay = Some(Overlay::Help { scroll: 0 });
        } else if k.search.matches(key) {
            self.open_search();
        } else if k.metrics_view.matches(key) {
            self.open_metrics(out);
        } else if k.wallet_view.matches(key) {
            self.open_wallet(None, out);
        } else if k.edit_in_editor.matches(key) {
            self.open_editor(out);
        } else if k.back.matches(key) && !self.sessions_pane.is_filtering() {
            // Esc: stop following a stream, else clear the notice or a send error.
            let (w, h) = self.transcript_viewport();
            if let Some(open) = self.open.as_mut().filter(|o| o.follow && o.is_streaming()) {
                open.top = open.effective_top(w, h);
                open.follow = false;
                let hint = format!("stopped following; {} to follow again", self.follow_hint());
                self.notify(Level::Info, hint);
            } else if self.notice.is_some() || self.composer.send_error().is_some() {
                self.notice = None;
                self.composer.set_send_error(None);
            } else if self.focus != Focus::Composer {
                self.focus = Focus::Composer;
            } else {
                return EventState::NotConsumed;
            }
        } else {
            return EventState::NotConsumed;
        }
        EventState::Consumed
    }

    /// Keys shared by the sessions and transcript panes when they did not use them.
    pub(super) fn pane_common_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) {
        if self.keys.quit.matches(key) {
            self.quit(out);
        } else if self.keys.refresh.matches(key) {
            out.push(Command::RefreshUsage);
        } else if self.keys.scroll_top.matches(key) {
            if let Some(o) = self.open.as_mut() {
                o.follow = false;
                o.top = 0;
            }
        } else if self.keys.scroll_bottom.matches(key)
            && let Some(o) = self.open.as_mut()
        {
            o.follow = true;
        }
    }

    pub(super) fn composer_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        let open = self.open.as_ref();
        match self.composer.key(&self.keys, key, || sent_messages(open)) {
            ComposerKey::Consumed => {}
            ComposerKey::Edited => self.composer.set_send_error(None),
            ComposerKey::NotConsumed => return EventState::NotConsumed,
            ComposerKey::Submit => self.submit(out),
            ComposerKey::ScrollTranscript => self.pane_common_key(&key, out),
            ComposerKey::Notice(text) => self.notify(Level::Info, text),
        }
        EventState::Consumed
    }

    pub(super) fn sessions_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        match self.sessions_pane.key(&self.keys, &key) {
            SessionsKey::Consumed => {}
            SessionsKey::NotConsumed => return EventState::NotConsumed,
            SessionsKey::OpenSelected => self.open_selected(out),
            SessionsKey::OpenSelectedFromFilter => {
                self.open_selected(out);
                // The filter found it: the whole list is back, the cursor on it.
                let open = self.open_id().map(str::to_string).unwrap_or_default();
                self.sessions_pane.clear_filter();
                self.sessions_pane.point_at_or_top(&open);
            }
            SessionsKey::NoMatch(filter) => self.notify(
                Level::Info,
                format!("no session matches “{filter}”: Backspace edits, Esc clears"),
            ),
            SessionsKey::ConfirmDelete { session_id, title } => {
                self.overlay = Some(Overlay::ConfirmDelete {
                    session_id,
                    title,
                    from_composer: false,
                });
            }
            SessionsKey::SearchSessions => self.open_session_search(String::new(), out),
        }
        EventState::Consumed
    }

    pub(super) fn transcript_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        let k = &self.keys;
        let Some(open) = self.open.as_mut() else {
            return EventState::NotConsumed;
        };
        let n = open.items.len();
        if k.move_up.matches(&key) {
            open.selected = Some(match open.selected {
                Some(i) => i.saturating_sub(1),
                None => n.saturating_sub(1),
            });
            self.reveal_selected();
        } else if k.move_down.matches(&key) {
            open.selected = match open.selected {
                Some(i) if i + 1 < n => Some(i + 1),
                Some(i) => Some(i),
                None => None,
            };
            self.reveal_selected();
        } else if k.copy_code.matches(&key) {
            self.copy_code(out);
        } else if k.copy_reply.matches(&key) {
            match self.copy_target() {
                Some(idx) => {
                    let content = self
                        .open
                        .as_ref()
                        .map_or("", |o| o.content(idx))
                        .to_string();
                    let n = content.chars().count();
                    out.push(Command::CopyToClipboard(content));
                    self.notify(
                        Level::Info,
                        format!("copied {n} characters to the clipboard"),
                    );
                }
                None => self.notify(Level::Warn, "nothing to copy yet"),
            }
        } else {
            return EventState::NotConsumed;
        }
        EventState::Consumed
    }

    pub(super) fn overlay_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) {
        let Some(overlay) = self.overlay.clone() else {
            return;
        };
        let k = &self.keys;
        match overlay {
            Overlay::Help { scroll } => {
                let max = crate::help::max_scroll(&self.keys, self.size);
                let page = self.size.height.saturating_sub(4).max(1);
                let step = if k.scroll_down.matches(&key) || k.scroll_up.matches(&key) {
                    page
                } else {
                    1
                };
                if k.move_down.matches(&key) || k.scroll_down.matches(&key) {
                    self.overlay = Some(Overlay::Help {
                        scroll: scroll.saturating_add(step).min(max),
                    });
                } else if k.move_up.matches(&key) || k.scroll_up.matches(&key) {
                    self.overlay = Some(Overlay::Help {
                        scroll: scroll.saturating_sub(step),
                    });
                } else if k.stop_or_quit.matches(&key) {
                    self.overlay = None;
                    self.quit(out);
                } else {
                    self.overlay = None;
                }
            }
            Overlay::ConfirmDelete {
                session_id,
                title,
                from_composer,
            } => {
                if k.confirm.matches(&key) {
                    self.overlay = None;
                    if from_composer {
                        // The `/delete` command is done with.
                        self.composer.clear();
                    }
                    if self.is_unsent(&session_id) {
                        // Never sent: only this client knows it, so there is nothing to ask
                        // the server.
                        self.notify(
                            Level::Info,
                            format!("deleted “{title}” (it had no messages)"),
                        );
                        self.remove_session(&session_id, out);
                        return;
                    }
                    self.sessions_pane.mark_deleting(session_id.clone());
                    self.notify(Level::Info, format!("deleting “{title}”…"));
                    out.push(Command::Delete { session_id });
                } else if k.cancel.matches(&key) || k.stop_or_quit.matches(&key) {
                    self.overlay = None;
                }
            }
            Overlay::ContextOverflow { draft, .. } => {
                if k.confirm.matches(&key) || k.new_session.matches(&key) {
                    self.overlay = None;
                    self.new_session(draft, out);
                } else if k.cancel.matches(&key) || k.stop_or_quit.matches(&key) {
                    self.overlay = None;
                }
            }
        }
    }

    // ---- mouse -----------------------------------------------------------------------------

    pub(super) fn on_mouse(&mut self, m: MouseEvent, out: &mut Vec<Command>) {
        // The wheel scrolls a full-screen view's tables.
        if self.overlay.is_none()
            && let Some(view) = self.active_view_mut()
        {
            let delta = match m.kind {
                MouseEventKind::ScrollUp => -1,
                MouseEventKind::ScrollDown => 1,
                _ => 0,
            };
            view.scroll(delta);
        }
        if self.overlay.is_some() || self.view != View::Chat {
            return;
        }
        let layout = self.layout();
        let pos = Position::new(m.column, m.row);
        match m.kind {
            MouseEventKind::ScrollUp => self.scroll_by(-3),
            MouseEventKind::ScrollDown => self.scroll_by(3),
            MouseEventKind::Down(MouseButton::Left) => {
                if let Some(list) = layout.session_list.filter(|r| r.contains(pos)) {
                    self.focus = Focus::Sessions;
                    let row = (pos.y - list.y) as usize / layout::SESSION_ROW_HEIGHT;
                    if self.sessions_pane.click(row, list.height) {
                        self.open_selected(out);
                    }
                } else if layout.transcript_inner.contains(pos) {
                    self.focus = Focus::Transcript;
                    let inner = layout.transcript_inner;
                    if let Some(open) = self.open.as_mut() {
                        let top = open.effective_top(inner.width, inner.height);
                        let line = top + (pos.y - inner.y) as usize;
                        if let Some(entry) = open.transcript.entry_at_line(inner.width, line) {
                            open.selected = open.items.iter().position(|i| i.entry == entry);
                        }
                    }
                } else if layout.composer.contains(pos) {
                    self.focus = Focus::Composer;
                }
            }
            _ => {}
        }
    }
}
