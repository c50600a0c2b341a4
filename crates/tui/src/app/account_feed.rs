//! What the account stream (`GET /v1/stream`, through `workers::usage_feed`) tells the app:
//! the usage gauges take its `hello` and `usage` events; its sessions go where everything the
//! service says about sessions goes, [`App::on_service_sessions`] (the `hello` as the whole
//! list, each event as one session); and a message stored from another device in the open
//! session makes the transcript read the stored history, which `App::adopt_history` appends.

use super::{App, Command};
use crate::event::ServiceChange;
use convo_client::api::account_stream::{AccountEvent, SessionChange};

impl App {
    pub(super) fn on_account(&mut self, event: AccountEvent, out: &mut Vec<Command>) {
        match event {
            AccountEvent::Hello { sessions, usage } => {
                self.on_usage(usage);
                let asked_at = self.now;
                self.on_service_sessions(ServiceChange::All { sessions, asked_at }, out);
            }
            AccountEvent::Usage { usage } => self.on_usage(usage),
            AccountEvent::SessionCreated { session } => {
                self.on_service_sessions(ServiceChange::Upsert(session), out);
            }
            AccountEvent::SessionUpdated { session, change } => {
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
                        session_id: session.session_id.clone(),
                    });
                }
                self.on_service_sessions(ServiceChange::Upsert(session), out);
            }
            AccountEvent::SessionDeleted { session_id } => {
                self.on_service_sessions(ServiceChange::Deleted(session_id), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};
    use ratatui::layout::Rect;

    use super::*;
    use crate::app::{Settings, StoreOp};
    use crate::event::{AppEvent, Endpoint, SessionSummary};
    use crate::keys::KeyBindings;
    use convo_client::api::types::Usage;
    use convo_client::api::{Message, Role};
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

    fn service(id: &str, count: u64) -> ServiceSession {
        ServiceSession {
            session_id: id.into(),
            created_at: "2026-11-22T11:00:00.000Z".into(),
            last_activity_at: "2026-11-22T11:30:00.000Z".into(),
            message_count: count,
            tokens: 40,
            title: Some("from the laptop".into()),
            forked_from: None,
        }
    }

    /// Connected, with A known and open, its (empty) transcript loaded.
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
        app.update(AppEvent::TranscriptLoaded {
            session_id: A.into(),
            messages: Vec::new(),
            draft: None,
            rendered: None,
        });
        app
    }

    fn merges(out: &[Command]) -> Vec<ServiceChange> {
        out.iter()
            .filter_map(|c| match c {
                Command::Persist(StoreOp::MergeService(change)) => Some(change.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn hello_fills_the_gauges_and_is_the_services_whole_list() {
        let mut app = app();
        let out = app.update(AppEvent::Account(AccountEvent::Hello {
            sessions: vec![service(B, 2)],
            usage: usage(7),
        }));
        assert_eq!(app.usage().usage.as_ref().unwrap().requests.used, 7);
        assert!(matches!(
            &merges(&out)[..],
            [ServiceChange::All { sessions, .. }] if sessions[0].session_id == B
        ));
        app.update(AppEvent::Account(AccountEvent::Usage { usage: usage(9) }));
        assert_eq!(app.usage().usage.as_ref().unwrap().requests.used, 9);
        let out = app.update(AppEvent::Account(AccountEvent::SessionCreated {
            session: service(B, 1),
        }));
        assert!(matches!(&merges(&out)[..], [ServiceChange::Upsert(s)] if s.session_id == B));
        let out = app.update(AppEvent::Account(AccountEvent::SessionDeleted {
            session_id: B.into(),
        }));
        assert_eq!(merges(&out), vec![ServiceChange::Deleted(B.into())]);
    }

    #[test]
    fn a_message_stored_elsewhere_in_the_open_session_is_fetched_and_appended() {
        let mut app = app();
        let updated = |id: &str, count: u64, change| {
            AppEvent::Account(AccountEvent::SessionUpdated {
                session: service(id, count),
                change,
            })
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
        // Nothing more stored than shown: no fetch.
        assert_eq!(
            fetches(&app.update(updated(A, 2, SessionChange::Message))),
            0
        );
    }
}
