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
    /// store: each unknown session is added, a known one gets the service's activity, tokens
    /// and (unless the user titled it here) title. Sessions the service does not list stay.
    pub(super) fn merge_service_sessions(
        &mut self,
        sessions: &[ServiceSession],
        out: &mut Vec<Command>,
    ) {
        let open = self.open_id().map(str::to_string);
        for s in sessions {
            let last_activity = DateTime::parse_from_rfc3339(&s.last_activity_at)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(self.now);
            let summary = match self.sessions_pane.get_mut(&s.session_id) {
                Some(known) => {
                    if last_activity > known.last_activity {
                        known.last_activity = last_activity;
                    }
                    known.tokens = known.tokens.max(s.tokens);
                    if !known.title_set
                        && let Some(title) = &s.title
                    {
                        known.title = title.clone();
                    }
                    known.clone()
                }
                None => {
                    let summary = SessionSummary {
                        id: s.session_id.clone(),
                        title: s
                            .title
                            .clone()
                            .unwrap_or_else(|| NEW_SESSION_TITLE.to_string()),
                        title_set: false,
                        last_activity,
                        tokens: s.tokens,
                    };
                    self.sessions_pane.load({
                        let mut all = self.sessions_pane.all().to_vec();
                        all.push(summary.clone());
                        all
                    });
                    summary
                }
            };
            out.push(Command::Persist(StoreOp::UpsertSession(summary)));
        }
        // The cursor stays on the open session.
        if let Some(open) = open {
            self.sessions_pane.point_at_or_top(&open);
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
