//! The kept view (`/kept`): the sessions of this server that the local store keeps aside,
//! because the server's database turned out new or its list lacks them without having
//! deleted them (`Store::kept_aside_sessions`, docs/client.md, "A cache per target"). They are
//! listed, read and exported to Markdown from here; nothing is sent from them, since the server
//! no longer has them.

use std::cell::Cell;

use chrono::{DateTime, Utc};
use convo_client::local_store::SessionRecord;
use crossterm::event::KeyEvent;

use crate::key_result::KeyResult;
use crate::keys::{KeyBindings, typed_char};
use crate::render::transcript::{Rendered, Transcript};

/// Work for the store thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptRequest {
    /// The kept sessions, answered with `KeptEvent::Listed`.
    List,
    /// One session's messages, answered with `KeptEvent::Read`.
    Read(String),
    /// One session erased from the store (`Store::erase_kept`), answered with
    /// `KeptEvent::Erased`.
    Erase(String),
}

/// What a key in the view asks for (`view/kept.rs` makes them commands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptAction {
    /// Work for the store thread.
    Store(KeptRequest),
    /// The session to a Markdown file, as `/export` writes one.
    Export(String),
}

/// The store thread's answers.
#[derive(Debug, Clone)]
pub enum KeptEvent {
    Listed(Result<Vec<KeptSession>, String>),
    /// A session's messages, laid out on the store thread (`app::render_stored`).
    Read {
        session_id: String,
        result: Result<Rendered, String>,
    },
    /// `Ok(false)`: it was no longer one of the kept sessions.
    Erased {
        session_id: String,
        result: Result<bool, String>,
    },
}

/// A session kept aside, as the list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptSession {
    pub id: String,
    pub title: Option<String>,
    /// Where it is kept: `… (earlier database, until …)`, `… (missing from the server since …)`.
    pub label: String,
    pub last_activity: DateTime<Utc>,
    pub tokens: u64,
}

impl KeptSession {
    pub fn of(record: SessionRecord, label: String) -> Self {
        KeptSession {
            id: record.id,
            title: record.title,
            label,
            last_activity: record.last_activity,
            tokens: record.tokens,
        }
    }
}

/// The list as the store answered.
#[derive(Debug, Clone, PartialEq)]
pub enum KeptList {
    Loading,
    Loaded(Vec<KeptSession>),
    Failed(String),
}

/// A session being read.
pub struct Reading {
    pub session: KeptSession,
    /// `None` until the store answers.
    pub transcript: Option<Result<Transcript, String>>,
    /// The first line shown.
    pub top: usize,
    /// The last top the screen allowed when it was last drawn (the transcript's height at
    /// the view's width): scrolling stops there.
    pub max_top: Cell<usize>,
}

/// Lines moved by a page key.
const PAGE: usize = 10;

/// The kept view's whole state.
pub struct KeptState {
    pub list: KeptList,
    /// Index into the list.
    pub cursor: usize,
    pub reading: Option<Reading>,
    /// The selected session is to be erased once the user confirms.
    pub confirm_erase: bool,
    /// What the last erase did: (done, what to say).
    pub note: Option<(bool, String)>,
}

impl Default for KeptState {
    fn default() -> Self {
        KeptState {
            list: KeptList::Loading,
            cursor: 0,
            reading: None,
            confirm_erase: false,
            note: None,
        }
    }
}

impl KeptState {
    /// The view is opened: the list is asked for again.
    pub fn open(&mut self) -> KeptRequest {
        *self = KeptState::default();
        KeptRequest::List
    }

    pub fn on_event(&mut self, event: KeptEvent) {
        match event {
            KeptEvent::Listed(result) => {
                self.list = match result {
                    Ok(sessions) => KeptList::Loaded(sessions),
                    Err(e) => KeptList::Failed(e),
                };
                self.cursor = 0;
            }
            KeptEvent::Read { session_id, result } => {
                if let Some(r) = self.reading.as_mut().filter(|r| r.session.id == session_id) {
                    r.transcript = Some(result.and_then(|rendered| {
                        rendered
                            .take()
                            .ok_or_else(|| "the transcript was handed over already".to_string())
                    }));
                }
            }
            KeptEvent::Erased { session_id, result } => {
                let title = self.title_of(&session_id);
                self.note = Some(match result {
                    Ok(true) => {
                        if let KeptList::Loaded(sessions) = &mut self.list {
                            sessions.retain(|s| s.id != session_id);
                            self.cursor = self.cursor.min(sessions.len().saturating_sub(1));
                        }
                        if self
                            .reading
                            .as_ref()
                            .is_some_and(|r| r.session.id == session_id)
                        {
                            self.reading = None;
                        }
                        (true, format!("erased “{title}” from this device"))
                    }
                    Ok(false) => (
                        false,
                        format!("“{title}” was not erased: it is no longer kept aside here"),
                    ),
                    Err(e) => (false, format!("“{title}” was not erased: {e}")),
                });
            }
        }
    }

    /// A kept session's title as the view says it.
    fn title_of(&self, session_id: &str) -> String {
        let listed = match &self.list {
            KeptList::Loaded(sessions) => sessions.iter().find(|s| s.id == session_id),
            _ => None,
        };
        listed
            .and_then(|s| s.title.clone())
            .unwrap_or_else(|| session_id.to_string())
    }

    /// The session under the cursor (or being read).
    pub fn selected(&self) -> Option<&KeptSession> {
        if let Some(r) = &self.reading {
            return Some(&r.session);
        }
        match &self.list {
            KeptList::Loaded(sessions) => sessions.get(self.cursor),
            _ => None,
        }
    }

    fn len(&self) -> usize {
        match &self.list {
            KeptList::Loaded(sessions) => sessions.len(),
            _ => 0,
        }
    }

    pub fn handle_key(
        &mut self,
        k: &KeyBindings,
        key: &KeyEvent,
        out: &mut Vec<KeptAction>,
    ) -> KeyResult {
        if k.stop_or_quit.matches(key) {
            return KeyResult::Quit;
        }
        if self.confirm_erase {
            // Only the answer counts while the question is asked.
            if k.confirm.matches(key) {
                if let Some(s) = self.selected() {
                    out.push(KeptAction::Store(KeptRequest::Erase(s.id.clone())));
                }
                self.confirm_erase = false;
            } else if k.cancel.matches(key) {
                self.confirm_erase = false;
            }
            return KeyResult::Consumed;
        }
        if k.delete_session.matches(key) {
            if self.selected().is_some() {
                self.confirm_erase = true;
                self.note = None;
            }
            return KeyResult::Consumed;
        }
        if typed_char(key) == Some('x') {
            if let Some(s) = self.selected() {
                out.push(KeptAction::Export(s.id.clone()));
            }
            return KeyResult::Consumed;
        }
        if let Some(r) = self.reading.as_mut() {
            let max = r.max_top.get();
            if k.back.matches(key) {
                self.reading = None;
            } else if k.move_up.matches(key) {
                r.top = r.top.min(max).saturating_sub(1);
            } else if k.move_down.matches(key) {
                r.top = (r.top + 1).min(max);
            } else if k.scroll_up.matches(key) {
                r.top = r.top.min(max).saturating_sub(PAGE);
            } else if k.scroll_down.matches(key) {
                r.top = (r.top + PAGE).min(max);
            } else if k.scroll_top.matches(key) {
                r.top = 0;
            } else if k.scroll_bottom.matches(key) {
                r.top = max;
            } else {
                return KeyResult::NotConsumed;
            }
            return KeyResult::Consumed;
        }
        if k.back.matches(key) {
            return KeyResult::Back;
        } else if k.move_up.matches(key) {
            self.cursor = self.cursor.saturating_sub(1);
        } else if k.move_down.matches(key) {
            if self.cursor + 1 < self.len() {
                self.cursor += 1;
            }
        } else if k.open_session.matches(key) {
            if let Some(session) = self.selected().cloned() {
                out.push(KeptAction::Store(KeptRequest::Read(session.id.clone())));
                self.reading = Some(Reading {
                    session,
                    transcript: None,
                    top: 0,
                    max_top: Cell::new(0),
                });
            }
        } else {
            return KeyResult::NotConsumed;
        }
        KeyResult::Consumed
    }

    /// The mouse wheel, while a session is read.
    pub fn scroll(&mut self, delta: isize) {
        if let Some(r) = self.reading.as_mut() {
            let max = r.max_top.get();
            r.top = r.top.min(max).saturating_add_signed(delta).min(max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode, KeyModifiers};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn kept(id: &str) -> KeptSession {
        KeptSession {
            id: id.into(),
            title: Some(format!("title of {id}")),
            label: "http://h #abcdef (earlier database, until 2026-11-27 21:17 UTC)".into(),
            last_activity: Utc::now(),
            tokens: 12,
        }
    }

    #[test]
    fn the_list_is_read_one_session_at_a_time_and_exported() {
        let k = KeyBindings::default();
        let mut s = KeptState::default();
        assert_eq!(s.open(), KeptRequest::List);
        s.on_event(KeptEvent::Listed(Ok(vec![kept("a@db1"), kept("b@db1")])));
        let mut out = Vec::new();
        assert_eq!(
            s.handle_key(&k, &key(KeyCode::Down), &mut out),
            KeyResult::Consumed
        );
        assert_eq!(
            s.handle_key(&k, &key(KeyCode::Down), &mut out),
            KeyResult::Consumed
        );
        assert_eq!(s.selected().unwrap().id, "b@db1", "stops at the last");
        s.handle_key(&k, &key(KeyCode::Enter), &mut out);
        assert_eq!(out, [KeptAction::Store(KeptRequest::Read("b@db1".into()))]);
        // An answer for another session is not this one's.
        let rendered = |text: &str| {
            let mut t = Transcript::new();
            t.push(crate::render::transcript::Entry::new(
                convo_client::api::Role::User,
                text,
                "you",
            ));
            Rendered::new(t)
        };
        s.on_event(KeptEvent::Read {
            session_id: "a@db1".into(),
            result: Ok(rendered("other")),
        });
        assert!(s.reading.as_ref().unwrap().transcript.is_none());
        s.on_event(KeptEvent::Read {
            session_id: "b@db1".into(),
            result: Ok(rendered("hello")),
        });
        assert!(matches!(
            s.reading.as_ref().unwrap().transcript,
            Some(Ok(_))
        ));
        // Scrolling stops where the drawn screen allowed.
        s.reading.as_ref().unwrap().max_top.set(3);
        for _ in 0..5 {
            s.handle_key(&k, &key(KeyCode::Down), &mut out);
        }
        assert_eq!(s.reading.as_ref().unwrap().top, 3);
        s.handle_key(&k, &key(KeyCode::Up), &mut out);
        assert_eq!(s.reading.as_ref().unwrap().top, 2);
        // `x` exports the session read.
        out.clear();
        s.handle_key(&k, &key(KeyCode::Char('x')), &mut out);
        assert_eq!(out, [KeptAction::Export("b@db1".into())]);
        // `d` asks first: `n` keeps it, `y` erases it.
        out.clear();
        s.handle_key(&k, &key(KeyCode::Char('d')), &mut out);
        assert!(s.confirm_erase && out.is_empty());
        s.handle_key(&k, &key(KeyCode::Char('n')), &mut out);
        assert!(!s.confirm_erase && out.is_empty());
        s.handle_key(&k, &key(KeyCode::Char('d')), &mut out);
        s.handle_key(&k, &key(KeyCode::Char('y')), &mut out);
        assert_eq!(out, [KeptAction::Store(KeptRequest::Erase("b@db1".into()))]);
        s.on_event(KeptEvent::Erased {
            session_id: "b@db1".into(),
            result: Ok(true),
        });
        assert!(s.reading.is_none(), "the session read is gone");
        assert_eq!(s.selected().unwrap().id, "a@db1");
        assert_eq!(
            s.note,
            Some((true, "erased “title of b@db1” from this device".into()))
        );
        // Esc out of the view.
        assert_eq!(
            s.handle_key(&k, &key(KeyCode::Esc), &mut out),
            KeyResult::Back
        );
    }
}
