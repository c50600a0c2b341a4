//! What the account stream (`GET /v1/stream`, through `workers::usage_feed`) tells the app:
//! the usage gauges take its `hello` and `usage` events; its session events go into the
//! sessions pane and the local store ([`App::merge_service_sessions`]); and the open
//! transcript follows a message stored from another device when no session stream follows it.

use chrono::{DateTime, Utc};

use super::{App, Command, NEW_SESSION_TITLE, StoreOp};
use crate::event::SessionSummary;
use crate::render::transcript::EntryState;
use convo_client::api::Message;
use convo_client::api::account_stream::{AccountEvent, SessionChange};
use convo_wire::sessions::SessionSummary as ServiceSession;

impl App {
    pub(super) fn on_account(&mut self, event: AccountEvent, out: &mut Vec<Command>) {
        match event {
            AccountEvent::Hello { sessions, usage } => {
                self.on_usage(usage);
                self.merge_service_sessions(&sessions, out);
            }
            AccountEvent::Usage { usage } => self.on_usage(usage),
            AccountEvent::SessionCreated { session } => {
                self.merge_service_sessions(std::slice::from_ref(&session), out);
            }
            AccountEvent::SessionUpdated { session, change } => {
                self.merge_service_sessions(std::slice::from_ref(&session), out);
                // A message stored from elsewhere in the open session (the service holds
                // more than the transcript, and no send of ours is in flight, whose own
                // events settle it): the transcript catches up from the stored history.
                if change == SessionChange::Message
                    && let Some(open) = self.transcript.session()
                    && open.id == session.session_id
                    && open.loaded
                    && open.pending.is_none()
                    && open.cut_off.is_none()
                    && session.message_count as usize > open.items.len()
                {
                    out.push(Command::FetchHistory {
                        session_id: session.session_id,
                    });
                }
            }
            AccountEvent::SessionDeleted { session_id } => {
                self.service_session_deleted(&session_id, out);
            }
        }
    }

    /// The one place the account stream's sessions enter the sessions pane and the local
    /// store: a session not known here is added (with the service's activity time); a known
    /// one takes the service's title unless the user titled it here. The order and activity of
    /// known sessions stay as this device has them (its clock and the service's are not
    /// compared), and sessions the service does not list stay.
    pub(super) fn merge_service_sessions(
        &mut self,
        sessions: &[ServiceSession],
        out: &mut Vec<Command>,
    ) {
        let mut added = Vec::new();
        for s in sessions {
            if let Some(known) = self.sessions_pane.get_mut(&s.session_id) {
                if !known.title_set
                    && let Some(title) = &s.title
                {
                    known.title = title.clone();
                }
                continue;
            }
            let summary = SessionSummary {
                id: s.session_id.clone(),
                title: s
                    .title
                    .clone()
                    .unwrap_or_else(|| NEW_SESSION_TITLE.to_string()),
                title_set: false,
                last_activity: DateTime::parse_from_rfc3339(&s.last_activity_at)
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(self.now),
                tokens: s.tokens,
            };
            out.push(Command::Persist(StoreOp::UpsertSession(summary.clone())));
            added.push(summary);
        }
        if added.is_empty() {
            return;
        }
        // The cursor stays on the session it was on (else the open one).
        let keep = self
            .sessions_pane
            .selected()
            .map(|s| s.id.clone())
            .or_else(|| self.open_id().map(str::to_string));
        let mut all = self.sessions_pane.all().to_vec();
        all.extend(added);
        self.sessions_pane.load(all);
        if let Some(keep) = keep {
            self.sessions_pane.point_at_or_top(&keep);
        }
    }

    /// After the stored history of the open session was read (with no send in flight): the
    /// messages stored after the last one the transcript has (all of them, for an empty
    /// transcript) were sent from another device; they are appended, and written to the
    /// local store.
    pub(super) fn catch_up_from_history(
        &mut self,
        session_id: &str,
        history: &[Message],
        out: &mut Vec<Command>,
    ) {
        let now = self.now;
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        if !open.loaded || open.pending.is_some() || open.cut_off.is_some() {
            return;
        }
        let start = match open.items.last() {
            None => 0,
            Some(last) => {
                let Some(at) = last
                    .message_id
                    .as_deref()
                    .and_then(|id| history.iter().position(|m| m.message_id == id))
                else {
                    // The transcript ends with something the service has not stored (or
                    // whose id is not known here): nothing to line up with.
                    return;
                };
                at + 1
            }
        };
        let mut gained = 0u64;
        for m in &history[start..] {
            let at = DateTime::parse_from_rfc3339(&m.created_at)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(now);
            let i = open.push(
                m.role,
                m.content.clone(),
                EntryState::Complete,
                m.tokens,
                Some(m.message_id.clone()),
                at,
            );
            gained += m.tokens;
            out.extend(open.stored(i).map(|message| {
                Command::Persist(StoreOp::AppendMessage {
                    session_id: session_id.to_string(),
                    message,
                })
            }));
        }
        if gained > 0
            && let Some(s) = self.sessions_pane.get_mut(session_id)
        {
            s.tokens += gained;
            out.push(Command::Persist(StoreOp::UpsertSession(s.clone())));
        }
    }

    /// A session deleted on the service (here or from another device).
    pub(super) fn service_session_deleted(&mut self, session_id: &str, out: &mut Vec<Command>) {
        if self.sessions_pane.is_deleting(session_id) {
            // Our own DELETE: its answer removes it.
            return;
        }
        self.remove_session(session_id, out);
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use ratatui::layout::Rect;

    use super::*;
    use crate::app::Settings;
    use crate::event::{AppEvent, Endpoint};
    use crate::keys::KeyBindings;
    use convo_client::api::Role;
    use convo_client::api::types::Usage;

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
            sessions: vec![SessionSummary {
                id: A.into(),
                title: "mine".into(),
                title_set: true,
                last_activity: t0(),
                tokens: 10,
            }],
            last_open: Some(A.into()),
        });
        app
    }

    #[test]
    fn hello_fills_the_gauges_and_adds_sessions_made_elsewhere() {
        let mut app = app();
        let out = app.update(AppEvent::Account(AccountEvent::Hello {
            sessions: vec![
                service(A, Some("theirs")),
                service(B, Some("from the laptop")),
            ],
            usage: usage(7),
        }));
        assert_eq!(app.usage().usage.as_ref().unwrap().requests.used, 7);
        let all = app.sessions_pane().all();
        assert_eq!(all.len(), 2);
        assert_eq!(
            app.sessions_pane().get(A).unwrap().title,
            "mine",
            "the user's title stays"
        );
        assert_eq!(app.sessions_pane().get(B).unwrap().title, "from the laptop");
        assert!(
            out.iter()
                .any(|c| matches!(c, Command::Persist(StoreOp::UpsertSession(s)) if s.id == B))
        );
        assert!(
            !out.iter()
                .any(|c| matches!(c, Command::Persist(StoreOp::UpsertSession(s)) if s.id == A)),
            "a known session is not written again"
        );
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
            fetches(&app.update(updated(A, 1, SessionChange::Message))),
            1
        );
        assert_eq!(fetches(&app.update(updated(A, 1, SessionChange::Title))), 0);
        assert_eq!(
            fetches(&app.update(updated(B, 1, SessionChange::Message))),
            0
        );
        // The history read: both messages of the other device come in, and are stored.
        let message = |id: &str, role, content: &str| Message {
            message_id: id.into(),
            session_id: A.into(),
            role,
            content: content.into(),
            tokens: 3,
            created_at: "2026-11-22T11:59:00.000Z".into(),
        };
        let history = vec![
            message("msg_1", Role::User, "from the laptop"),
            message("msg_2", Role::Assistant, "hello laptop"),
        ];
        let out = app.update(AppEvent::History {
            session_id: A.into(),
            fetch: crate::event::HistoryFetch::Messages(history.clone()),
        });
        let open = app.session().unwrap();
        assert_eq!(open.items.len(), 2);
        assert_eq!(open.content(1), "hello laptop");
        let appended = out
            .iter()
            .filter(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { .. })))
            .count();
        assert_eq!(appended, 2);
        // Nothing more stored than shown: no fetch; the same history again adds nothing.
        assert_eq!(
            fetches(&app.update(updated(A, 2, SessionChange::Message))),
            0
        );
        app.update(AppEvent::History {
            session_id: A.into(),
            fetch: crate::event::HistoryFetch::Messages(history),
        });
        assert_eq!(app.session().unwrap().items.len(), 2);
    }

    #[test]
    fn a_session_deleted_elsewhere_leaves_the_list() {
        let mut app = app();
        app.update(AppEvent::Account(AccountEvent::SessionCreated {
            session: service(B, Some("doomed")),
        }));
        assert!(app.sessions_pane().get(B).is_some());
        let out = app.update(AppEvent::Account(AccountEvent::SessionDeleted {
            session_id: B.into(),
        }));
        assert!(app.sessions_pane().get(B).is_none());
        assert!(
            out.iter()
                .any(|c| matches!(c, Command::Persist(StoreOp::DeleteSession(id)) if id == B))
        );
        assert_eq!(app.open_id(), Some(A), "the open session stays open");
    }
}
