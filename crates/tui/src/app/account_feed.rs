//! What the account stream (`GET /v1/stream`, through `workers::usage_feed`) tells the app:
//! the usage gauges take its `hello` and `usage` events; its session events go into the
//! sessions pane and the local store ([`App::merge_service_sessions`]); and the open
//! transcript follows a message stored from another device when no session stream follows it.

use chrono::{DateTime, Utc};

use super::{App, Command, NEW_SESSION_TITLE, StoreOp, StreamState};
use crate::event::SessionSummary;
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
                // A message stored from elsewhere: with no session stream following the open
                // session, the transcript catches up from the stored history.
                if change == SessionChange::Message
                    && let Some(open) = self.transcript.session()
                    && open.id == session.session_id
                    && open.stream != StreamState::Open
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
    fn a_message_stored_elsewhere_in_the_open_session_is_read_when_no_stream_follows() {
        let mut app = app();
        let updated = |id: &str, change| {
            AppEvent::Account(AccountEvent::SessionUpdated {
                session: service(id, None),
                change,
            })
        };
        let fetches = |out: &[Command]| {
            out.iter()
                .filter(|c| matches!(c, Command::FetchHistory { session_id } if session_id == A))
                .count()
        };
        assert_eq!(fetches(&app.update(updated(A, SessionChange::Message))), 1);
        assert_eq!(fetches(&app.update(updated(A, SessionChange::Title))), 0);
        assert_eq!(fetches(&app.update(updated(B, SessionChange::Message))), 0);
        // With the session's stream open, the stream brings the reply itself.
        app.update(AppEvent::Stream {
            session_id: A.into(),
            update: convo_client::api::StreamUpdate::Connected,
        });
        assert_eq!(fetches(&app.update(updated(A, SessionChange::Message))), 0);
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
