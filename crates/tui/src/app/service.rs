//! The service as the source of truth where it can be: what the target's service says about
//! its sessions (`GET /v1/sessions` at connect, events of the account stream) merged into the
//! local store and the sessions pane, titles given here sent to it, and an opened session's
//! history completed from it (messages written on another device). Against a server without
//! these extensions nothing here happens: the store's list stays the list.

use chrono::{DateTime, Utc};
use convo_client::api::{Message, Role};
use convo_client::local_store::{Archived, missing_from};

use super::{App, Command, Level, StoreOp};
use crate::event::{HistoryFetch, ServiceChange, SessionSummary};
use crate::render::transcript::EntryState;

impl App {
    /// THE place where what the target's service says about its sessions comes in: the whole
    /// list (`ServiceChange::All`, fetched at connect) or one session created, changed or
    /// deleted (`ServiceChange::Upsert` / `ServiceChange::Deleted`, e.g. from the account
    /// stream `GET /v1/stream`). Reach it by sending `AppEvent::ServiceSessions(change)`.
    ///
    /// The store merges it (`Store::merge_service`: the rules of what is this target's, which
    /// titles win, what counts as deleted) and answers with `AppEvent::SessionsMerged`, which
    /// [`App::on_sessions_merged`] shows. A session of another server is never touched, and a
    /// deletion only removes a session of this target.
    pub fn on_service_sessions(&mut self, change: ServiceChange, out: &mut Vec<Command>) {
        out.push(Command::Persist(StoreOp::MergeService(change)));
    }

    /// The store merged what the service said: the pane shows the target's sessions as they
    /// are now (keeping the open session and one not sent yet, which the service cannot
    /// list), sessions the service deleted go (the open one with a notice), and titles given
    /// here that the service lacks are sent. The first time, the open session's history is
    /// asked for, to show what other devices added. When sessions were kept aside
    /// (`archived`: the service's database turned out new, or its list lacks sessions it did
    /// not delete), they left this target in the store: they leave the pane too (the open one
    /// for a new session, which takes what the composer holds), and a notice says where they
    /// are.
    pub(super) fn on_sessions_merged(
        &mut self,
        sessions: Vec<SessionSummary>,
        deleted: Vec<String>,
        titles_to_send: Vec<(String, String)>,
        archived: Option<Archived>,
        out: &mut Vec<Command>,
    ) {
        let first = self.service_lists != Some(true);
        self.service_lists = Some(true);
        for id in &deleted {
            if self.sessions_pane.is_deleting(id) {
                // Deleted from here: its own answer (`AppEvent::Deleted`) removes it and says
                // so; the list can name it first.
                continue;
            }
            if self.open_id() != Some(id.as_str()) {
                self.remove_session(id, out);
                continue;
            }
            let title = self.title_of(id);
            // What was being typed goes on in a new session: the deleted one cannot take it,
            // and it is not this device's to lose.
            let carried = self.composer_text();
            self.remove_session(id, out);
            // By another device, or by another `convo` on this one.
            let told = format!("{title} was deleted on the server by another client");
            if carried.trim().is_empty() {
                self.notify(Level::Warn, told);
            } else {
                self.new_session(carried, out);
                self.notify(
                    Level::Warn,
                    format!("{told}; what you were typing is in a new session"),
                );
            }
        }
        let open_moved = archived.is_some()
            && (self.open_id()).is_some_and(|id| !sessions.iter().any(|s| s.id == id));
        let keep: Vec<String> = self
            .sessions_pane
            .all()
            .iter()
            .filter(|s| (self.open_id() == Some(s.id.as_str()) && !open_moved) || s.nothing_sent())
            .map(|s| s.id.clone())
            .collect();
        self.sessions_pane.merge_listed(sessions, &keep);
        if let Some(archived) = archived {
            if open_moved {
                // What is being typed goes on in a new session of this server: the moved one
                // cannot be opened here any more.
                let carried = self.composer_text();
                self.composer.clear();
                self.new_session(carried, out);
            }
            let where_ = match archived.sessions {
                1 => "(/kept shows it)",
                _ => "(/kept shows them)",
            };
            self.notify(Level::Warn, archived.told_with(where_));
        }
        for (session_id, title) in titles_to_send {
            out.push(Command::SendTitle { session_id, title });
        }
        // (Not for a session nothing was sent to yet: the server has no history of it.)
        if first
            && let Some(open) = self.transcript.session()
            && open.loaded
            && !open.own_send_in_flight()
            && !self.is_unsent(&open.id)
        {
            out.push(Command::FetchHistory {
                session_id: open.id.clone(),
            });
        }
    }

    /// The user gave a session a title: a service that has titles gets it too.
    pub(super) fn send_title_to_service(&mut self, session_id: &str, out: &mut Vec<Command>) {
        let connected = matches!(self.connection, super::Connection::Connected(_));
        if !connected || self.service_lists == Some(false) {
            return;
        }
        if let Some(s) = self.sessions_pane.get(session_id).filter(|s| s.title_set) {
            out.push(Command::SendTitle {
                session_id: session_id.to_string(),
                title: s.title.clone(),
            });
        }
    }

    /// Whether the open session should ask the service for its history when its stored
    /// transcript is loaded: the service lists sessions, so it keeps their histories too.
    pub(super) fn history_from_service(&self) -> bool {
        self.service_lists == Some(true)
    }

    /// A history read for the search across sessions (`Command::ReadUnsearched`): its
    /// messages go to the store (`StoreOp::CatchUp`), and after the last answer the search is
    /// asked again (the store does both in order). A session that cannot be read stays
    /// unsearched, said once.
    pub(super) fn on_read_for_search(
        &mut self,
        session_id: String,
        fetch: HistoryFetch,
        out: &mut Vec<Command>,
    ) {
        match fetch {
            HistoryFetch::Messages(history) => out.push(Command::Persist(StoreOp::CatchUp {
                session_id,
                history,
            })),
            HistoryFetch::Unsupported => {}
            HistoryFetch::Failed(why) => self.notify(
                Level::Warn,
                format!("a session written on another device could not be read, so it is not searched: {why}"),
            ),
        }
        out.extend(self.transcript.hits_read_one());
    }

    /// The service's history of the open session holds messages after those shown (written
    /// on another device, or while convo was away): they are added and stored.
    pub(super) fn adopt_history(
        &mut self,
        session_id: &str,
        history: &[Message],
        asked: std::time::Instant,
        out: &mut Vec<Command>,
    ) {
        // Another device's reply that the history already holds whole: it is done.
        let ended = self.transcript.session_mut_if(session_id).and_then(|open| {
            let id = open.foreign.as_ref()?.message_id.clone();
            let reply = history.iter().find(|m| m.message_id == id)?;
            open.end_foreign(&id).map(|shown| (shown, reply.clone()))
        });
        if let Some((Some(_), reply)) = ended {
            self.finish_reply(session_id, reply, out);
        }
        self.append_from_history(session_id, history, out);
        // Another device's reply followed on the stream shows after what it answers; lost
        // with the stream, its follower reads what the history says of it. A read sent before
        // it began here says neither.
        let Some(open) = self
            .transcript
            .session_mut_if(session_id)
            .filter(|open| open.shows_after(asked))
        else {
            return;
        };
        let shown = open.show_foreign();
        let (end, later) = open.foreign_history(history);
        if later {
            out.push(Command::FetchHistoryLater {
                session_id: session_id.to_string(),
            });
        }
        if let Some(end) = end {
            self.foreign_ended(session_id, end, out);
        } else if shown {
            // Shown before its first text: its header says what it waits for, as ours does.
            self.on_reply_tick(out);
        }
    }

    fn append_from_history(
        &mut self,
        session_id: &str,
        history: &[Message],
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        if !open.loaded || open.own_send_in_flight() {
            return;
        }
        let shown: Vec<(Role, &str)> = open
            .kept_items()
            .map(|i| (open.items[i].role, open.content(i)))
            .collect();
        let Some(start) = missing_from(&shown, history) else {
            return;
        };
        for m in &history[start..] {
            let at = DateTime::parse_from_rfc3339(&m.created_at)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(self.now);
            let i = open.push(
                m.role,
                m.content.clone(),
                EntryState::Complete,
                m.tokens,
                Some(m.message_id.clone()),
                at,
            );
            open.set_finish(i, m.finish_reason);
            out.extend(open.stored(i).map(|message| {
                Command::Persist(StoreOp::AppendMessage {
                    session_id: session_id.to_string(),
                    message,
                })
            }));
        }
        open.follow = true;
        // What the transcript now holds (the listed count may already include what came in).
        let tokens = open.context_tokens();
        if let Some(s) = self.sessions_pane.get_mut(session_id) {
            s.tokens = tokens;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{Notice, Settings};
    use crate::event::{AppEvent, Endpoint, HistoryFetch};
    use crate::keys::KeyBindings;
    use chrono::TimeZone;
    use convo_client::api::StreamEvent;
    use convo_client::api::stream::StreamUpdate;
    use convo_client::config::NotifyMode;
    use convo_wire::FinishReason;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    const A: &str = "session_AAAAAAAAAAAAAAAA";
    const B: &str = "session_BBBBBBBBBBBBBBBB";
    const C: &str = "session_CCCCCCCCCCCCCCCC";

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
    }

    fn summary(id: &str, title: &str, mins_ago: i64, tokens: u64) -> SessionSummary {
        SessionSummary {
            id: id.into(),
            title: title.into(),
            title_set: false,
            last_activity: t0() - chrono::Duration::minutes(mins_ago),
            tokens,
            forked_from: None,
        }
    }

    /// A stored message of session A, as the service's history gives it.
    fn message(id: &str, role: Role, text: &str) -> Message {
        Message {
            message_id: id.into(),
            session_id: A.into(),
            role,
            content: text.into(),
            tokens: 4,
            created_at: "2026-11-22T11:00:00Z".into(),
            finish_reason: None,
        }
    }

    /// As [`app`], with A's session stream connected.
    fn streaming_app() -> App {
        let mut app = app();
        app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Connected,
        });
        app
    }

    /// The ids the sessions pane lists, in its order.
    fn pane_ids(app: &App) -> Vec<String> {
        app.sessions_pane()
            .all()
            .iter()
            .map(|s| s.id.clone())
            .collect()
    }

    /// Connected, A and B in the store, A open with nothing stored.
    fn app() -> App {
        let mut app = App::new(
            KeyBindings::default(),
            Settings::default(),
            ratatui::layout::Rect::new(0, 0, 80, 24),
            t0(),
        );
        app.update(AppEvent::Connected(Endpoint::Remote {
            base_url: "http://x".into(),
        }));
        app.update(AppEvent::StoreLoaded {
            sessions: vec![summary(A, "first", 1, 20), summary(B, "second", 5, 10)],
            last_open: Some(A.into()),
        });
        app.update(AppEvent::TranscriptLoaded {
            session_id: A.into(),
            messages: Vec::new(),
            draft: None,
            rendered: None,
        });
        app
    }

    #[test]
    fn the_services_list_goes_to_the_store_and_its_answer_to_the_pane() {
        let mut app = app();
        let cmds = app.update(AppEvent::ServiceSessions(ServiceChange::Deleted(B.into())));
        assert_eq!(
            cmds,
            [Command::Persist(StoreOp::MergeService(
                ServiceChange::Deleted(B.into())
            ))]
        );
        // The store says: A is gone from the server, C came from another device, and B's
        // title given here is to be sent.
        let cmds = app.update(AppEvent::SessionsMerged {
            sessions: vec![
                summary(B, "Mine", 5, 10),
                summary(C, "from the laptop", 0, 7),
            ],
            deleted: vec![A.into()],
            titles_to_send: vec![(B.into(), "Mine".into())],
            archived: None,
        });
        let ids = pane_ids(&app);
        assert_eq!(ids, [C, B]);
        assert_ne!(app.open_id(), Some(A));
        let notice = app.notice().unwrap();
        assert!(notice.text.contains("deleted on the server"), "{notice:?}");
        assert!(cmds.contains(&Command::SendTitle {
            session_id: B.into(),
            title: "Mine".into()
        }));
    }

    #[test]
    fn the_open_session_deleted_elsewhere_leaves_what_was_typed_in_a_new_session() {
        let mut app = app();
        crate::app::tests::type_text(&mut app, "my precious draft");
        app.update(AppEvent::SessionsMerged {
            sessions: vec![summary(B, "Mine", 5, 10)],
            deleted: vec![A.into()],
            titles_to_send: Vec::new(),
            archived: None,
        });
        let open = app.open_id().unwrap().to_string();
        assert!(open != A && open != B, "a new session: {open}");
        assert_eq!(app.composer_text(), "my precious draft");
        let notice = app.notice().unwrap();
        assert!(
            notice.text.ends_with(
                "deleted on the server by another client; what you were typing is in a new session"
            ),
            "{notice:?}"
        );
        // With nothing typed, the next session opens as before.
        let mut app = app_with_b_open_and_nothing_typed();
        app.update(AppEvent::SessionsMerged {
            sessions: vec![summary(A, "first", 5, 10)],
            deleted: vec![B.into()],
            titles_to_send: Vec::new(),
            archived: None,
        });
        assert_eq!(app.open_id(), Some(A));
    }

    /// The open session deleted from here: the service's list can name it deleted before the
    /// delete's own answer comes. It is not announced as deleted by another client; the
    /// answer removes it and says so.
    #[test]
    fn a_session_deleted_here_and_listed_deleted_first_is_not_said_deleted_elsewhere() {
        let mut app = app();
        app.sessions_pane.mark_deleting(A.into());
        app.update(AppEvent::SessionsMerged {
            sessions: vec![summary(B, "second", 5, 10)],
            deleted: vec![A.into()],
            titles_to_send: Vec::new(),
            archived: None,
        });
        assert!(
            app.notice()
                .is_none_or(|n| !n.text.contains("another client")),
            "{:?}",
            app.notice()
        );
        let cmds = app.update(AppEvent::Deleted {
            session_id: A.into(),
        });
        assert_ne!(app.open_id(), Some(A));
        assert!(!pane_ids(&app).contains(&A.to_string()));
        assert!(
            cmds.contains(&Command::Persist(StoreOp::DeleteSession(A.into()))),
            "{cmds:?}"
        );
        assert_eq!(app.notice().unwrap().text, "deleted “first”");
    }

    /// A session that is not the open one, deleted from here: the service's list leaves it out
    /// before the delete's answer comes. It stays in the pane until then, and the answer names
    /// it by its title.
    #[test]
    fn a_session_deleted_here_and_left_out_of_the_list_first_keeps_its_title() {
        let mut app = app_with_b_open_and_nothing_typed();
        app.sessions_pane.mark_deleting(A.into());
        for deleted in [Vec::new(), vec![A.to_string()]] {
            app.update(AppEvent::SessionsMerged {
                sessions: vec![summary(B, "second", 5, 10)],
                deleted,
                titles_to_send: Vec::new(),
                archived: None,
            });
            assert!(pane_ids(&app).contains(&A.to_string()));
            assert!(app.sessions_pane.is_deleting(A));
        }
        let cmds = app.update(AppEvent::Deleted {
            session_id: A.into(),
        });
        assert!(!pane_ids(&app).contains(&A.to_string()));
        assert!(
            cmds.contains(&Command::Persist(StoreOp::DeleteSession(A.into()))),
            "{cmds:?}"
        );
        assert_eq!(app.notice().unwrap().text, "deleted “first”");
        assert_eq!(app.open_id(), Some(B));
    }

    fn app_with_b_open_and_nothing_typed() -> App {
        let mut app = app();
        let mut cmds = Vec::new();
        app.open_session(B.to_string(), &mut cmds);
        assert_eq!(app.open_id(), Some(B));
        app
    }

    #[test]
    fn sessions_of_a_services_earlier_database_leave_the_pane_but_are_not_deleted() {
        let mut app = app();
        crate::app::tests::type_text(&mut app, "half a thought");
        // The store moved A and B aside: the service lists C only, from a new database.
        let cmds = app.update(AppEvent::SessionsMerged {
            sessions: vec![summary(C, "from the new one", 0, 7)],
            deleted: Vec::new(),
            titles_to_send: Vec::new(),
            archived: Some(Archived {
                sessions: 2,
                label: "http://h:1 #abcdef (earlier database, until 2026-11-27 21:17 UTC)".into(),
                why: convo_client::local_store::Aside::EarlierDatabase,
            }),
        });
        let open = app.open_id().unwrap().to_string();
        assert!(open != A && open != C, "a new session: {open}");
        let ids = pane_ids(&app);
        assert!(
            ids.iter().all(|id| id != A && id != B) && ids.iter().any(|id| id == C),
            "{ids:?}"
        );
        // Nothing is deleted in the store, and what was typed goes on in the new session.
        assert!(
            !cmds
                .iter()
                .any(|c| matches!(c, Command::Persist(StoreOp::DeleteSession(_)))),
            "{cmds:?}"
        );
        assert_eq!(app.composer_text(), "half a thought");
        let notice = app.notice().unwrap();
        assert!(
            notice
                .text
                .contains("the server's database is new: the 2 sessions kept"),
            "{notice:?}"
        );
        assert!(notice.text.ends_with("(/kept shows them)"), "{notice:?}");
    }

    #[test]
    fn a_session_not_sent_yet_stays_in_the_pane_though_the_service_cannot_list_it() {
        let mut app = app();
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('n'),
            KeyModifiers::CONTROL,
        )));
        let new = app.open_id().unwrap().to_string();
        assert!(new != A && new != B);
        app.update(AppEvent::SessionsMerged {
            sessions: vec![summary(A, "first", 1, 20)],
            deleted: Vec::new(),
            titles_to_send: Vec::new(),
            archived: None,
        });
        assert!(app.sessions_pane().get(&new).is_some());
        assert_eq!(app.open_id(), Some(new.as_str()));
        // B was not deleted by the list (the store decides that): only what it lists shows.
        assert!(app.sessions_pane().get(B).is_none());
    }

    #[test]
    fn the_open_sessions_history_comes_from_a_service_that_lists_sessions() {
        let mut app = app();
        let cmds = app.update(AppEvent::SessionsMerged {
            sessions: vec![summary(A, "first", 1, 20)],
            deleted: Vec::new(),
            titles_to_send: Vec::new(),
            archived: None,
        });
        assert!(cmds.contains(&Command::FetchHistory {
            session_id: A.into()
        }));
        let cmds = app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![
                message("msg_1", Role::User, "from the laptop"),
                message("msg_2", Role::Assistant, "an answer"),
            ]),
        });
        let open = app.session().unwrap();
        assert_eq!(open.items.len(), 2);
        assert_eq!(open.content(0), "from the laptop");
        let stored = cmds
            .iter()
            .filter(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { .. })))
            .count();
        assert_eq!(stored, 2);
        // The list's count is what the transcript holds, not that plus what came in.
        assert_eq!(app.sessions_pane().get(A).unwrap().tokens, 8);
        // Opening another session now asks the service for its history too.
        let mut out = Vec::new();
        app.open_session(B.into(), &mut out);
        let cmds = app.update(AppEvent::TranscriptLoaded {
            session_id: B.into(),
            messages: Vec::new(),
            draft: None,
            rendered: None,
        });
        assert!(cmds.contains(&Command::FetchHistory {
            session_id: B.into()
        }));
    }

    #[test]
    fn a_title_given_here_goes_to_a_service_with_titles_only() {
        let mut app = app();
        let titled = AppEvent::TitleChanged {
            session_id: A.into(),
            title: Some("Mine".into()),
            title_set: true,
        };
        let cmds = app.update(titled.clone());
        assert!(cmds.contains(&Command::SendTitle {
            session_id: A.into(),
            title: "Mine".into()
        }));
        // A cleared title is not sent; a server without titles gets none.
        let cmds = app.update(AppEvent::TitleChanged {
            session_id: A.into(),
            title: Some("first".into()),
            title_set: false,
        });
        assert!(!cmds.iter().any(|c| matches!(c, Command::SendTitle { .. })));
        app.update(AppEvent::ServiceSessionsUnsupported);
        let cmds = app.update(titled);
        assert!(!cmds.iter().any(|c| matches!(c, Command::SendTitle { .. })));
    }

    #[test]
    fn a_session_gone_notice_goes_with_ctrl_n() {
        let mut app = app();
        app.notice = Some(Notice {
            level: Level::Warn,
            text: super::super::reply::SESSION_GONE.into(),
        });
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('n'),
            KeyModifiers::CONTROL,
        )));
        assert_eq!(app.notice(), None);
    }

    /// Piece `seq` of reply `msg_r` of session A, which another device asked for.
    fn foreign_delta(seq: u64, content: &str) -> AppEvent {
        delta_of("msg_r", seq, content)
    }

    /// The `done` of reply `message_id` of session A, whole text `content`.
    fn done_of(message_id: &str, content: &str) -> AppEvent {
        AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Done {
                message: message(message_id, Role::Assistant, content),
            }),
        }
    }

    /// Piece `seq` of reply `message_id` of session A.
    fn delta_of(message_id: &str, seq: u64, content: &str) -> AppEvent {
        AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Delta {
                session_id: A.into(),
                message_id: message_id.into(),
                seq,
                content: content.into(),
            }),
        }
    }

    #[test]
    fn another_devices_reply_is_followed_live_and_stored_once() {
        let mut app = streaming_app();
        let delta = foreign_delta;
        // The first piece of a reply this device did not ask for: the message it answers
        // is read first.
        let older = std::time::Instant::now();
        let cmds = app.update(delta(0, "Hel"));
        assert!(cmds.contains(&Command::FetchHistory {
            session_id: A.into()
        }));
        assert!(app.session().unwrap().items.is_empty());
        // A read sent before (the session's opening read, still under way) comes back first,
        // without the message: the reply does not show before what it answers.
        app.update(AppEvent::History {
            asked: older,
            session_id: A.into(),
            fetch: HistoryFetch::Messages(Vec::new()),
        });
        assert!(app.session().unwrap().items.is_empty());
        let question = message("msg_q", Role::User, "from the laptop");
        app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![question.clone()]),
        });
        let open = app.session().unwrap();
        assert_eq!(open.items.len(), 2, "the question, then the reply so far");
        assert_eq!(open.content(0), "from the laptop");
        assert_eq!(open.content(1), "Hel");
        assert_eq!(open.items[1].state, EntryState::Streaming);
        // Later pieces go on live.
        app.update(delta(1, "lo"));
        assert_eq!(app.session().unwrap().content(1), "Hello");
        // Done: stored once, complete.
        let reply = message("msg_r", Role::Assistant, "Hello");
        let cmds = app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Done {
                message: reply.clone(),
            }),
        });
        let stored = |cmds: &[Command]| {
            cmds.iter()
                .filter(|c| {
                    matches!(c, Command::Persist(StoreOp::AppendMessage { message, .. })
                        if message.message_id.as_deref() == Some("msg_r"))
                })
                .count()
        };
        assert_eq!(stored(&cmds), 1);
        assert_eq!(app.session().unwrap().items[1].state, EntryState::Complete);
        // The history read after it adds nothing twice.
        let cmds = app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![question, reply]),
        });
        assert_eq!(stored(&cmds), 0);
        assert_eq!(app.session().unwrap().items.len(), 2);
    }

    /// Another device's reply `msg_r` to `msg_q` ("from the laptop"), followed here: "Hel" so far.
    fn following_another_devices_reply() -> App {
        let mut app = streaming_app();
        app.update(foreign_delta(0, "Hel"));
        app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![message("msg_q", Role::User, "from the laptop")]),
        });
        assert_eq!(app.session().unwrap().items[1].state, EntryState::Streaming);
        app
    }

    fn foreign_error(code: &str) -> AppEvent {
        AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Error {
                session_id: A.into(),
                message_id: "msg_r".into(),
                error: convo_client::api::ErrorBody::new(code, "the service is shutting down"),
            }),
        }
    }

    fn marked_not_sent(cmds: &[Command]) -> Vec<String> {
        cmds.iter()
            .filter_map(|c| match c {
                Command::Persist(StoreOp::MarkUnsent { message, .. }) => {
                    Some(message.content.clone())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn another_devices_reply_a_stopping_replica_leaves_open_is_interrupted_not_failed() {
        for code in [
            convo_wire::stream_errors::REPLICA_STOPPING,
            convo_wire::stream_errors::RELAY_UNAVAILABLE,
        ] {
            let mut app = following_another_devices_reply();
            let cmds = app.update(foreign_error(code));
            let open = app.session().unwrap();
            assert_eq!(open.items[1].state, EntryState::Interrupted, "{code}");
            assert_eq!(open.items[0].state, EntryState::Complete, "{code}");
            assert!(marked_not_sent(&cmds).is_empty(), "{code}");
            // It goes on elsewhere: its snapshot after the reconnect picks it up, its `done`
            // ends it as usual.
            app.update(AppEvent::Stream {
                session_id: A.into(),
                update: StreamUpdate::Event(StreamEvent::Snapshot {
                    session_id: A.into(),
                    message_id: "msg_r".into(),
                    seq: 3,
                    content: "Hello the".into(),
                }),
            });
            let open = app.session().unwrap();
            assert_eq!(open.items[1].state, EntryState::Streaming, "{code}");
            assert_eq!(open.content(1), "Hello the", "{code}");
            app.update(foreign_done("Hello there", None));
            let open = app.session().unwrap();
            assert_eq!(open.items[1].state, EntryState::Complete, "{code}");
            assert_eq!(open.content(1), "Hello there", "{code}");
        }
    }

    #[test]
    fn another_devices_reply_that_fails_takes_the_message_it_answered_but_not_to_this_composer() {
        let mut app = following_another_devices_reply();
        let cmds = app.update(foreign_error("engine_failed"));
        let open = app.session().unwrap();
        assert!(
            matches!(&open.items[1].state, EntryState::Failed(why) if why == "the service is shutting down"),
            "{:?}",
            open.items[1].state
        );
        // The service rolled the turn back: the question is no longer its.
        assert_eq!(open.items[0].state, EntryState::Failed("not sent".into()));
        assert_eq!(marked_not_sent(&cmds), vec!["from the laptop".to_string()]);
        assert!(
            app.composer_text().is_empty(),
            "it was sent from the laptop"
        );
        // Neither counts in the context any more (the store recounts the list's tokens).
        assert_eq!(open.context_tokens(), 0);
        assert_eq!(
            app.notice().map(|n| n.text.as_str()),
            Some(super::super::settle::NOT_KEPT_ELSEWHERE)
        );
    }

    #[test]
    fn another_devices_reply_lost_with_the_stream_is_settled_by_the_stored_history() {
        let lost_and_back = |app: &mut App| {
            app.update(AppEvent::Stream {
                session_id: A.into(),
                update: StreamUpdate::Disconnected {
                    error: convo_client::api::ApiError::Network("connection reset".into()),
                    retry_in: Some(std::time::Duration::from_secs(1)),
                },
            });
            assert_eq!(
                app.session().unwrap().items[1].state,
                EntryState::Interrupted
            );
            let cmds = app.update(AppEvent::Stream {
                session_id: A.into(),
                update: StreamUpdate::Connected,
            });
            assert!(
                cmds.contains(&Command::FetchHistory {
                    session_id: A.into()
                }),
                "{cmds:?}"
            );
        };
        let history = |app: &mut App, messages: Vec<Message>| {
            app.update(AppEvent::History {
                asked: std::time::Instant::now(),
                session_id: A.into(),
                fetch: HistoryFetch::Messages(messages),
            })
        };
        let question = message("msg_q", Role::User, "from the laptop");

        // It ended meanwhile: the history holds it whole.
        let mut app = following_another_devices_reply();
        lost_and_back(&mut app);
        history(
            &mut app,
            vec![question.clone(), message("msg_r", Role::Assistant, "Hello")],
        );
        let open = app.session().unwrap();
        assert_eq!(open.items[1].state, EntryState::Complete);
        assert_eq!(open.content(1), "Hello");

        // The server restarted and rolled the turn back: neither is kept.
        let mut app = following_another_devices_reply();
        lost_and_back(&mut app);
        let cmds = history(&mut app, Vec::new());
        let open = app.session().unwrap();
        assert_eq!(open.items[1].state, EntryState::Failed("not kept".into()));
        assert_eq!(open.items[0].state, EntryState::Failed("not sent".into()));
        assert_eq!(marked_not_sent(&cmds), vec!["from the laptop".to_string()]);
        assert!(app.composer_text().is_empty());

        // The server was killed and kept the question alone: looked at twice, then the reply
        // is not kept and the question stays.
        let mut app = following_another_devices_reply();
        lost_and_back(&mut app);
        let cmds = history(&mut app, vec![question.clone()]);
        assert!(
            cmds.contains(&Command::FetchHistoryLater {
                session_id: A.into()
            }),
            "{cmds:?}"
        );
        assert_eq!(
            app.session().unwrap().items[1].state,
            EntryState::Interrupted
        );
        let cmds = history(&mut app, vec![question]);
        let open = app.session().unwrap();
        assert_eq!(open.items[1].state, EntryState::Failed("not kept".into()));
        assert_eq!(open.items[0].state, EntryState::Complete);
        assert!(marked_not_sent(&cmds).is_empty());
    }

    #[test]
    fn a_message_sent_while_another_devices_reply_comes_waits_for_it() {
        let mut app = following_another_devices_reply();
        crate::app::tests::type_text(&mut app, "mine");
        let cmds = app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Enter,
            KeyModifiers::NONE,
        )));
        assert!(
            !cmds.iter().any(|c| matches!(c, Command::Send { .. })),
            "nothing is sent while the other reply comes: {cmds:?}"
        );
        assert!(app.is_queued());
        // The other reply goes on showing, then ends: the text is sent after it.
        app.update(foreign_delta(1, "lo"));
        assert_eq!(app.session().unwrap().content(1), "Hello");
        let cmds = app.update(foreign_done("Hello", None));
        assert!(
            cmds.iter()
                .any(|c| matches!(c, Command::Send { body, .. } if body.content == "mine")),
            "{cmds:?}"
        );
        let open = app.session().unwrap();
        assert_eq!(
            open.items.len(),
            4,
            "the question, its reply, mine, my reply"
        );
        assert_eq!(open.content(2), "mine");
    }

    /// A `started` event of session A's stream.
    fn started(message_id: &str, key: &str) -> AppEvent {
        AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Started {
                session_id: A.into(),
                message_id: message_id.into(),
                idempotency_key: Some(key.into()),
            }),
        }
    }

    /// Runs `event`, noting in `stored` the messages it has the local store append, in the
    /// order the store keeps them (a message appended again moves to the end).
    fn store_order(app: &mut App, event: AppEvent, stored: &mut Vec<String>) {
        for c in app.update(event) {
            if let Command::Persist(StoreOp::AppendMessage { message, .. }) = c {
                stored.retain(|m| *m != message.content);
                stored.push(message.content);
            }
        }
    }

    /// Enter, and the send it made: its id and `Idempotency-Key`.
    fn sent(app: &mut App, text: &str) -> (u64, String) {
        crate::app::tests::type_text(app, text);
        let cmds = app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Enter,
            KeyModifiers::NONE,
        )));
        cmds.into_iter()
            .find_map(|c| match c {
                Command::Send {
                    send_id,
                    idempotency_key,
                    ..
                } => Some((send_id, idempotency_key)),
                _ => None,
            })
            .expect("a send")
    }

    /// Another device's message reached the service just before this one (its reply began
    /// while this send waited for its answer, before any of its events arrived here): its
    /// reply is not taken for this send's (the `started` event names another key), it shows
    /// after the message it answers, and this send's message and reply come after both, as
    /// the service stores them. Whichever comes first brings this send back: its own
    /// `started`, or the POST's answer.
    #[test]
    fn a_reply_another_device_started_first_is_not_taken_for_this_sends() {
        // When this send's POST is answered: after its own `started`, before it (after the
        // other reply's `done`), or before the other reply's `done` (two connections).
        for answer in ["after its start", "before its start", "before their done"] {
            let mut app = streaming_app();
            let (send_id, key) = sent(&mut app, "mine");
            assert_eq!(app.session().unwrap().items.len(), 2);
            let cmds = app.update(started("msg_r", "the-laptops-key"));
            assert!(cmds.contains(&Command::FetchHistory {
                session_id: A.into()
            }));
            let open = app.session().unwrap();
            assert!(open.items.is_empty(), "mine steps back behind it");
            assert!(open.held.is_some());
            assert_eq!(
                app.notice().map(|n| n.text.as_str()),
                Some(super::super::reply::HELD_BEHIND)
            );
            // What is stored, in order (the local store keeps messages as appended).
            let mut stored: Vec<String> = Vec::new();
            let mut step = |app: &mut App, event: AppEvent| store_order(app, event, &mut stored);
            step(
                &mut app,
                AppEvent::History {
                    asked: std::time::Instant::now(),
                    session_id: A.into(),
                    fetch: HistoryFetch::Messages(vec![message(
                        "msg_q",
                        Role::User,
                        "from the laptop",
                    )]),
                },
            );
            step(&mut app, foreign_delta(0, "Hel"));
            step(&mut app, foreign_delta(1, "lo"));
            let accepted = AppEvent::SendAccepted {
                session_id: A.into(),
                send_id,
                reply: message("msg_mine", Role::Assistant, ""),
                prompt_tokens: 2,
            };
            if answer == "before their done" {
                step(&mut app, accepted.clone());
                assert!(app.session().unwrap().held.is_some(), "after their reply");
            }
            step(&mut app, foreign_done("Hello", None));
            let open = app.session().unwrap();
            assert_eq!(open.content(0), "from the laptop");
            assert_eq!(open.content(1), "Hello");
            assert_eq!(open.items[1].state, EntryState::Complete);
            assert_eq!(open.items[1].message_id.as_deref(), Some("msg_r"));
            match answer {
                "before its start" => {
                    step(&mut app, accepted);
                    step(&mut app, started("msg_mine", &key));
                }
                "after its start" => {
                    step(&mut app, started("msg_mine", &key));
                    assert_eq!(
                        app.session().unwrap().items[3].message_id.as_deref(),
                        Some("msg_mine")
                    );
                    step(&mut app, accepted);
                }
                _ => step(&mut app, started("msg_mine", &key)),
            }
            step(&mut app, delta_of("msg_mine", 0, "Yes"));
            step(&mut app, done_of("msg_mine", "Yes"));
            let open = app.session().unwrap();
            let shown: Vec<&str> = (0..open.items.len()).map(|i| open.content(i)).collect();
            assert_eq!(
                shown,
                ["from the laptop", "Hello", "mine", "Yes"],
                "{answer}"
            );
            assert_eq!(open.items[3].state, EntryState::Complete);
            assert!(open.pending.is_none() && open.held.is_none());
            assert_eq!(
                stored,
                ["from the laptop", "Hello", "mine", "Yes"],
                "stored in the service's order ({answer})"
            );
        }
    }

    /// The other reply's `done` and this send's answer both come before the history read
    /// that shows the other device's message (asked for at its `started`; a reply quicker
    /// than a local GET): this send still comes back after the other exchange, which shows
    /// and is stored where the service keeps it. A read sent before that `started` (the
    /// session's opening read, still under way), without the other exchange, and coming back
    /// first, is not taken for it.
    #[test]
    fn a_held_send_answered_before_the_other_exchange_is_read_comes_after_it() {
        for older_read_first in [false, true] {
            let mut app = streaming_app();
            let (send_id, key) = sent(&mut app, "mine");
            let older = std::time::Instant::now();
            app.update(started("msg_r", "the-laptops-key"));
            assert!(app.session().unwrap().held.is_some());
            let mut stored: Vec<String> = Vec::new();
            let mut step = |app: &mut App, event: AppEvent| store_order(app, event, &mut stored);
            step(&mut app, foreign_delta(0, "Hel"));
            step(&mut app, foreign_delta(1, "lo"));
            step(&mut app, foreign_done("Hello", None));
            step(
                &mut app,
                AppEvent::SendAccepted {
                    session_id: A.into(),
                    send_id,
                    reply: message("msg_mine", Role::Assistant, ""),
                    prompt_tokens: 2,
                },
            );
            if older_read_first {
                step(
                    &mut app,
                    AppEvent::History {
                        session_id: A.into(),
                        fetch: HistoryFetch::Messages(Vec::new()),
                        asked: older,
                    },
                );
            }
            assert!(
                app.session().unwrap().held.is_some(),
                "held until the other exchange is read (older read first: {older_read_first})"
            );
            step(
                &mut app,
                AppEvent::History {
                    session_id: A.into(),
                    fetch: HistoryFetch::Messages(vec![
                        message("msg_q", Role::User, "from the laptop"),
                        message("msg_r", Role::Assistant, "Hello"),
                    ]),
                    asked: std::time::Instant::now(),
                },
            );
            step(&mut app, started("msg_mine", &key));
            step(&mut app, delta_of("msg_mine", 0, "Yes"));
            step(&mut app, done_of("msg_mine", "Yes"));
            let open = app.session().unwrap();
            let shown: Vec<&str> = (0..open.items.len()).map(|i| open.content(i)).collect();
            assert_eq!(shown, ["from the laptop", "Hello", "mine", "Yes"]);
            assert!(open.pending.is_none() && open.held.is_none());
            assert_eq!(stored, ["from the laptop", "Hello", "mine", "Yes"]);
        }
    }

    /// The history read that a held send waits for fails: the send comes back all the same.
    #[test]
    fn a_held_send_comes_back_when_the_other_exchange_cannot_be_read() {
        let mut app = streaming_app();
        let (send_id, _) = sent(&mut app, "mine");
        app.update(started("msg_r", "the-laptops-key"));
        app.update(foreign_done("Hello", None));
        app.update(AppEvent::SendAccepted {
            session_id: A.into(),
            send_id,
            reply: message("msg_mine", Role::Assistant, ""),
            prompt_tokens: 2,
        });
        assert!(app.session().unwrap().held.is_some());
        app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Failed("connection reset".into()),
        });
        let open = app.session().unwrap();
        assert!(open.held.is_none());
        assert_eq!(open.pending.as_ref().map(|p| p.send_id), Some(send_id));
    }

    /// A held send whose POST fails comes back to fail as any send does: its text returns
    /// to the composer.
    #[test]
    fn a_held_send_that_fails_gives_its_text_back() {
        let mut app = streaming_app();
        let (send_id, _) = sent(&mut app, "mine");
        app.update(started("msg_r", "the-laptops-key"));
        app.update(AppEvent::SendFailed {
            session_id: A.into(),
            send_id,
            failure: convo_client::api::ApiError::Network("connection reset".into()),
        });
        let open = app.session().unwrap();
        assert!(open.held.is_none() && open.pending.is_none());
        assert!(open.items.is_empty());
        assert_eq!(app.composer_text(), "mine");
    }

    /// The failure of another send (a late answer of one settled already) leaves the pending
    /// send as it is.
    #[test]
    fn a_failure_of_another_send_leaves_the_pending_one() {
        let mut app = streaming_app();
        let (send_id, _) = sent(&mut app, "mine");
        app.update(AppEvent::SendFailed {
            session_id: A.into(),
            send_id: send_id + 100,
            failure: convo_client::api::ApiError::Network("connection reset".into()),
        });
        let open = app.session().unwrap();
        assert_eq!(open.pending.as_ref().map(|p| p.send_id), Some(send_id));
        assert_eq!(open.items.len(), 2);
    }

    #[test]
    fn ctrl_c_stops_another_devices_reply_shown_here_and_a_second_quits() {
        let mut app = streaming_app();
        let ctrl_c = || AppEvent::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        app.update(foreign_delta(0, "On and on"));
        app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![message("msg_q", Role::User, "from the laptop")]),
        });
        assert_eq!(app.session().unwrap().items[1].state, EntryState::Streaming);
        let cmds = app.update(ctrl_c());
        assert!(
            cmds.contains(&Command::CancelReply {
                session_id: A.into(),
                message_id: "msg_r".into(),
            }),
            "{cmds:?}"
        );
        assert!(!cmds.contains(&Command::Quit), "{cmds:?}");
        assert_eq!(
            app.notice().map(|n| n.text.as_str()),
            Some("stopping the reply…")
        );
        // Asked once: the next Ctrl-C is the quit key again.
        let cmds = app.update(ctrl_c());
        assert!(cmds.contains(&Command::Quit), "{cmds:?}");
    }

    /// The `done` of another device's reply, as the service sends it.
    fn foreign_done(content: &str, finish_reason: Option<FinishReason>) -> AppEvent {
        AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Done {
                message: Message {
                    finish_reason,
                    ..message("msg_r", Role::Assistant, content)
                },
            }),
        }
    }

    fn announced(cmds: &[Command]) -> bool {
        cmds.iter().any(|c| matches!(c, Command::Notify(_)))
    }

    #[test]
    fn another_devices_reply_stopped_here_is_not_announced_as_finished() {
        for stop_here in [false, true] {
            let mut app = streaming_app();
            app.settings.notify.mode = NotifyMode::Bell;
            app.update(AppEvent::Focus(false));
            app.update(foreign_delta(0, "On and on"));
            app.update(AppEvent::History {
                asked: std::time::Instant::now(),
                session_id: A.into(),
                fetch: HistoryFetch::Messages(vec![message(
                    "msg_q",
                    Role::User,
                    "from the laptop",
                )]),
            });
            if stop_here {
                let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
                app.update(AppEvent::Key(ctrl_c));
            }
            let cmds = app.update(foreign_done("On and on", Some(FinishReason::Stopped)));
            // Stopped by another device (or by the service), it is news here; stopped here,
            // it is not.
            assert_eq!(
                announced(&cmds),
                !stop_here,
                "stop here: {stop_here}, {cmds:?}"
            );
            assert_eq!(app.session().unwrap().items[1].state, EntryState::Complete);
        }
    }

    #[test]
    fn another_devices_reply_the_history_holds_whole_is_not_shown_twice() {
        let mut app = streaming_app();
        let question = message("msg_q", Role::User, "from the laptop");
        app.update(foreign_delta(0, "Hel"));
        app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![question.clone()]),
        });
        // The reply is stored before its `done` reaches this device: the history has it.
        let reply = message("msg_r", Role::Assistant, "Hello");
        app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![question, reply.clone()]),
        });
        let open = app.session().unwrap();
        assert_eq!(open.items.len(), 2);
        assert_eq!(open.content(1), "Hello");
        assert_eq!(open.items[1].state, EntryState::Complete);
        // Its `done` then changes nothing.
        let cmds = app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Done { message: reply }),
        });
        assert!(
            !cmds
                .iter()
                .any(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { .. })))
        );
        assert_eq!(app.session().unwrap().items.len(), 2);
    }
}
