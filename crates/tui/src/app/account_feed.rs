//! What the account stream (`GET /v1/stream`, through `workers::usage_feed`) tells the app:
//! the usage gauges take its `hello` and `usage` events; its session events go to the one
//! place where the service's sessions come in ([`App::on_service_sessions`], which has the
//! local store merge them); and a message stored from another device in the open session
//! makes the transcript read the stored history, which `App::adopt_history` appends (the App
//! follows only its own replies on the session stream).

use super::{App, Command, Level, StoreOp};
use crate::event::ServiceChange;
use convo_client::api::account_stream::{AccountEvent, SessionChange};

impl App {
    pub(super) fn on_account(&mut self, event: AccountEvent, out: &mut Vec<Command>) {
        match event {
            AccountEvent::Hello {
                sessions,
                usage,
                database_id,
                deleted_session_ids,
            } => {
                self.on_usage(usage, out);
                // The stream reconnected: what was stored in the open session while it was
                // down (a message sent elsewhere, a turn a restarted server kept) is read. (At
                // the first list, `App::on_sessions_merged` reads the open session's history.)
                if self.service_lists == Some(true) {
                    for s in &sessions {
                        self.catch_up_open(&s.session_id, s.message_count, out);
                    }
                }
                // The service's whole list as of now: what it lacks and this target had is gone.
                let asked_at = self.now;
                let all = ServiceChange::All {
                    sessions,
                    asked_at,
                    database_id,
                    deleted: deleted_session_ids,
                };
                self.on_service_sessions(all, out);
            }
            AccountEvent::Usage { usage } => self.on_usage(usage, out),
            AccountEvent::SessionCreated { session } => {
                self.on_service_sessions(ServiceChange::Upsert(session), out);
            }
            AccountEvent::SessionUpdated { session, change } => {
                // Another device undid an exchange (this device's own undo is settled by its
                // answer): the store, and the open session, follow.
                if change == SessionChange::Undo && !self.undoing.contains(&session.session_id) {
                    self.undone_elsewhere(&session.session_id, session.message_count, out);
                }
                if change == SessionChange::Message {
                    self.catch_up_open(&session.session_id, session.message_count, out);
                }
                self.on_service_sessions(ServiceChange::Upsert(session), out);
            }
            AccountEvent::SessionDeleted { session_id } => {
                // Our own DELETE: its answer removes it.
                if !self.sessions_pane.is_deleting(&session_id) {
                    self.on_service_sessions(ServiceChange::Deleted(session_id), out);
                }
            }
        }
    }
}

impl App {
    /// The service holds `messages` messages of `session_id`. When that is the open session and
    /// the service holds more than it shows as kept (a message stored from elsewhere, or while
    /// the stream was down), with no send of ours in flight and no other device's reply
    /// followed (their own events settle them, and a follower's looks at the history are
    /// timed), the transcript reads the stored history, which `App::adopt_history` appends.
    fn catch_up_open(&mut self, session_id: &str, messages: u64, out: &mut Vec<Command>) {
        let behind = self.transcript.session().is_some_and(|open| {
            open.id == session_id
                && open.loaded
                && !open.own_send_in_flight()
                && open.foreign.is_none()
                && messages as usize > open.kept_items().count()
        });
        if behind {
            out.push(Command::FetchHistory {
                session_id: session_id.to_string(),
            });
        }
    }

    /// Another device undid `session_id`'s last exchange; the service holds `messages`
    /// messages now. The store removes the exchange if it holds more; an open session showing
    /// more, with no send of its own in flight, is read again from the store after it.
    fn undone_elsewhere(&mut self, session_id: &str, messages: u64, out: &mut Vec<Command>) {
        out.push(Command::Persist(StoreOp::UndoneElsewhere {
            session_id: session_id.to_string(),
            messages,
        }));
        let shown_more = self.transcript.session().is_some_and(|open| {
            open.id == session_id
                && open.pending.is_none()
                && open.kept_items().count() as u64 > messages
        });
        if shown_more {
            self.reload_open_session(session_id, out);
            self.notify(
                Level::Info,
                "the last exchange was undone on another device",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use ratatui::layout::Rect;

    use super::*;
    use crate::app::{Settings, StoreOp};
    use crate::event::SessionSummary;
    use crate::event::{AppEvent, Endpoint};
    use crate::keys::KeyBindings;
    use chrono::{DateTime, Utc};
    use convo_client::api::types::Usage;
    use convo_wire::sessions::SessionSummary as ServiceSession;

    const A: &str = "session_AAAAAAAAAAAAAAAA";
    const B: &str = "session_BBBBBBBBBBBBBBBB";

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
    }

    fn usage(requests: u64) -> Usage {
        serde_json::from_value(serde_json::json!({
            "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
            "requests": {"used": requests, "limit": 1000, "percentage": 0.5},
            "tokens": {"used": 5, "limit": 200000, "percentage": 0.0},
            "sessions": {"active": 1, "limit": 10, "percentage": 10.0},
            "tier": "free",
        }))
        .unwrap()
    }

    fn service(id: &str, title: Option<&str>) -> ServiceSession {
        ServiceSession {
            session_id: id.into(),
            created_at: "2026-11-22T11:00:00.000Z".into(),
            last_activity_at: "2026-11-22T11:30:00.000Z".into(),
            message_count: 2,
            tokens: 40,
            title: title.map(String::from),
            forked_from: None,
        }
    }

    /// Session A as this device's store and the service's list have it.
    fn mine() -> SessionSummary {
        SessionSummary {
            id: A.into(),
            title: "mine".into(),
            title_set: true,
            last_activity: t0(),
            tokens: 10,
            forked_from: None,
        }
    }

    /// Connected, with A known and open (its session stream not open yet).
    fn app() -> App {
        let mut app = App::new(
            KeyBindings::default(),
            Settings::default(),
            Rect::new(0, 0, 80, 24),
            t0(),
        );
        app.update(AppEvent::Connected(Endpoint::Embedded {
            addr: "127.0.0.1:1".into(),
        }));
        app.update(AppEvent::StoreLoaded {
            sessions: vec![mine()],
            last_open: Some(A.into()),
        });
        app
    }

    /// The store merges what the service said (`StoreOp::MergeService`); `Store::merge_service`
    /// and `App::on_sessions_merged` have their own tests.
    fn merges(out: &[Command]) -> Vec<&ServiceChange> {
        out.iter()
            .filter_map(|c| match c {
                Command::Persist(StoreOp::MergeService(change)) => Some(change),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn hello_fills_the_gauges_and_hands_the_whole_list_to_the_store() {
        let mut app = app();
        let out = app.update(AppEvent::Account(AccountEvent::Hello {
            sessions: vec![
                service(A, Some("theirs")),
                service(B, Some("from the laptop")),
            ],
            usage: usage(7),
            database_id: Some("db_one".into()),
            deleted_session_ids: Some(vec!["session_GONEGONEGONEGONE".into()]),
        }));
        assert_eq!(app.usage().usage.as_ref().unwrap().requests.used, 7);
        match merges(&out).as_slice() {
            [
                ServiceChange::All {
                    sessions,
                    asked_at,
                    database_id,
                    deleted,
                },
            ] => {
                assert_eq!(sessions.len(), 2);
                assert_eq!(*asked_at, t0());
                assert_eq!(database_id.as_deref(), Some("db_one"));
                assert_eq!(
                    deleted.as_deref(),
                    Some(&["session_GONEGONEGONEGONE".to_string()][..])
                );
            }
            other => panic!("expected the whole list, got {other:?}"),
        }
        app.update(AppEvent::Account(AccountEvent::Usage { usage: usage(9) }));
        assert_eq!(app.usage().usage.as_ref().unwrap().requests.used, 9);
    }

    #[test]
    fn a_message_stored_elsewhere_in_the_open_session_is_fetched_and_appended() {
        let mut app = app();
        app.update(AppEvent::TranscriptLoaded {
            session_id: A.into(),
            messages: Vec::new(),
            draft: None,
            rendered: None,
        });
        let updated = |id: &str, count: u64, change| {
            let mut session = service(id, None);
            session.message_count = count;
            AppEvent::Account(AccountEvent::SessionUpdated { session, change })
        };
        let fetches = |out: &[Command]| {
            out.iter()
                .filter(|c| matches!(c, Command::FetchHistory { session_id } if session_id == A))
                .count()
        };
        assert_eq!(
            fetches(&app.update(updated(A, 2, SessionChange::Message))),
            1
        );
        assert_eq!(fetches(&app.update(updated(A, 2, SessionChange::Title))), 0);
        assert_eq!(
            fetches(&app.update(updated(B, 2, SessionChange::Message))),
            0
        );
        // The history read: both messages of the other device come in, and are stored.
        let message = |id: &str, role, content: &str| convo_client::api::Message {
            message_id: id.into(),
            session_id: A.into(),
            role,
            content: content.into(),
            tokens: 3,
            created_at: "2026-11-22T11:59:00.000Z".into(),
            finish_reason: None,
        };
        let history = vec![
            message("msg_1", convo_client::api::Role::User, "from the laptop"),
            message("msg_2", convo_client::api::Role::Assistant, "hello laptop"),
        ];
        let out = app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: crate::event::HistoryFetch::Messages(history),
        });
        let open = app.session().unwrap();
        assert_eq!(open.items.len(), 2);
        assert_eq!(open.content(1), "hello laptop");
        let appended = out
            .iter()
            .filter(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { .. })))
            .count();
        assert_eq!(appended, 2);
        // Nothing more stored than shown: no fetch.
        assert_eq!(
            fetches(&app.update(updated(A, 2, SessionChange::Message))),
            0
        );
    }

    fn fetches_of(out: &[Command], id: &str) -> usize {
        out.iter()
            .filter(|c| matches!(c, Command::FetchHistory { session_id } if session_id == id))
            .count()
    }

    /// A open with two messages the service holds and one it did not keep (marked failed).
    fn app_with_one_not_kept() -> App {
        use convo_client::api::Role;
        use convo_client::local_store::{MessageStatus, StoredMessage};
        let mut app = app();
        let mut lost = StoredMessage::user(Role::User, "lost in a restart");
        lost.status = MessageStatus::Failed;
        app.update(AppEvent::TranscriptLoaded {
            session_id: A.into(),
            messages: vec![
                StoredMessage::user(Role::User, "one"),
                StoredMessage::user(Role::Assistant, "reply one"),
                lost,
            ],
            draft: None,
            rendered: None,
        });
        app
    }

    #[test]
    fn a_message_not_kept_here_does_not_hide_one_stored_elsewhere() {
        let mut app = app_with_one_not_kept();
        // The context counts what the service holds: not the message marked failed.
        let open = app.session().unwrap();
        let kept = open.items[0].tokens + open.items[1].tokens;
        assert!(open.items[2].tokens > 0);
        assert_eq!(open.context_tokens(), kept);
        let updated = |count: u64| {
            let mut session = service(A, None);
            session.message_count = count;
            AppEvent::Account(AccountEvent::SessionUpdated {
                session,
                change: SessionChange::Message,
            })
        };
        // Three shown, two of them kept: the service's third is one this device lacks.
        assert_eq!(fetches_of(&app.update(updated(3)), A), 1);
        assert_eq!(fetches_of(&app.update(updated(2)), A), 0);
    }

    #[test]
    fn a_reconnected_account_stream_reads_the_open_session_when_the_service_holds_more() {
        let mut app = app_with_one_not_kept();
        let hello = |count: u64| {
            let mut open = service(A, None);
            open.message_count = count;
            let mut other = service(B, None);
            other.message_count = 9;
            AppEvent::Account(AccountEvent::Hello {
                sessions: vec![open, other],
                usage: usage(1),
                database_id: None,
                deleted_session_ids: None,
            })
        };
        // The first hello: the list it brings, once merged, has the open session's history
        // read (`on_sessions_merged`); the hello itself asks nothing more.
        assert_eq!(fetches_of(&app.update(hello(3)), A), 0);
        app.update(AppEvent::SessionsMerged {
            sessions: vec![mine()],
            deleted: Vec::new(),
            titles_to_send: Vec::new(),
            archived: None,
        });
        // A hello after a reconnect: stored while the stream was down (a server killed
        // mid-reply keeps the message).
        let out = app.update(hello(3));
        assert_eq!(fetches_of(&out, A), 1);
        assert_eq!(fetches_of(&out, B), 0, "only the open session is read");
        assert_eq!(fetches_of(&app.update(hello(2)), A), 0, "nothing missed");
    }

    #[test]
    fn an_undo_elsewhere_takes_the_exchange_from_the_store_and_the_open_session() {
        use convo_client::api::Role;
        use convo_client::local_store::StoredMessage;
        let mut app = app();
        app.update(AppEvent::TranscriptLoaded {
            session_id: A.into(),
            messages: vec![
                StoredMessage::user(Role::User, "one"),
                StoredMessage::user(Role::Assistant, "reply one"),
                StoredMessage::user(Role::User, "two"),
                StoredMessage::user(Role::Assistant, "reply two"),
            ],
            draft: None,
            rendered: None,
        });
        let undone = |id: &str, count: u64| {
            let mut session = service(id, None);
            session.message_count = count;
            AppEvent::Account(AccountEvent::SessionUpdated {
                session,
                change: SessionChange::Undo,
            })
        };
        let removals = |out: &[Command]| -> Vec<(String, u64)> {
            out.iter()
                .filter_map(|c| match c {
                    Command::Persist(StoreOp::UndoneElsewhere {
                        session_id,
                        messages,
                    }) => Some((session_id.clone(), *messages)),
                    _ => None,
                })
                .collect()
        };
        // This device's own undo, not answered yet: its answer settles it, not the news.
        app.undoing.push(A.into());
        assert_eq!(removals(&app.update(undone(A, 2))), vec![]);
        app.undoing.clear();
        // Another device's: the store is asked, the open session read again, and said.
        let out = app.update(undone(A, 2));
        assert_eq!(removals(&out), vec![(A.to_string(), 2)]);
        assert!(
            out.iter().any(
                |c| matches!(c, Command::LoadTranscript { session_id, .. } if session_id == A)
            ),
            "{out:?}"
        );
        assert_eq!(
            app.notice().map(|n| n.text.as_str()),
            Some("the last exchange was undone on another device")
        );
        // A session not open: the store only.
        let out = app.update(undone(B, 0));
        assert_eq!(removals(&out), vec![(B.to_string(), 0)]);
    }

    #[test]
    fn session_events_go_to_the_store_one_by_one() {
        let mut app = app();
        let out = app.update(AppEvent::Account(AccountEvent::SessionCreated {
            session: service(B, Some("new")),
        }));
        assert!(matches!(merges(&out).as_slice(), [ServiceChange::Upsert(s)] if s.session_id == B));
        let out = app.update(AppEvent::Account(AccountEvent::SessionDeleted {
            session_id: B.into(),
        }));
        assert!(matches!(merges(&out).as_slice(), [ServiceChange::Deleted(id)] if id == B));
        assert_eq!(app.open_id(), Some(A), "the open session stays open");
    }
}
