//! The network side: connecting (or starting the embedded service), the session stream, and
//! the requests the app sends (POST a message, DELETE a session, fetch
//! a session's history), each reported back as an event.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use super::{Shared, Target, Workers};
use crate::embedded;
use crate::event::{AppEvent, Endpoint, EventSender, HistoryFetch, ServiceChange};
use convo_client::api::SendMessage;
use convo_client::api::client::Client;
use convo_client::api::error::ApiError;
use convo_client::api::stream::SessionStream;
use convo_client::local_store;

/// Histories read at once for the search across sessions (`Workers::read_for_search`).
const READS_AT_ONCE: usize = 4;

/// `GET /v1/sessions/{id}/messages`, as the app takes it.
async fn history_of(client: &Client, session_id: &str) -> HistoryFetch {
    match client.session_messages(session_id).await {
        Ok(Some(messages)) => HistoryFetch::Messages(messages),
        Ok(None) => HistoryFetch::Unsupported,
        Err(e) => HistoryFetch::Failed(e.to_string()),
    }
}

impl Workers {
    /// POSTs a message; the answer (or why not) comes back as `SendAccepted`/`SendFailed`.
    pub(super) fn send(
        &mut self,
        session_id: String,
        send_id: u64,
        body: SendMessage,
        idempotency_key: String,
    ) {
        let offline = AppEvent::SendFailed {
            session_id: session_id.clone(),
            send_id,
            failure: ApiError::Network("not connected".into()),
        };
        let failed = {
            let session_id = session_id.clone();
            move |why: String| AppEvent::SendFailed {
                session_id,
                send_id,
                failure: internal(why),
            }
        };
        self.spawn_request(Some(offline), failed, move |client| async move {
            let content = body.content.clone();
            let prompt_tokens =
                tokio::task::spawn_blocking(move || local_store::estimate_tokens(&content))
                    .await
                    .unwrap_or(0);
            match client
                .post_message(&session_id, &body, &idempotency_key)
                .await
            {
                Ok(reply) => AppEvent::SendAccepted {
                    session_id,
                    send_id,
                    reply: reply.message,
                    prompt_tokens,
                },
                Err(e) => AppEvent::SendFailed {
                    session_id,
                    send_id,
                    failure: at_arrival(e),
                },
            }
        });
    }

    /// Fetches a session's stored history (to settle a reply the stream lost).
    pub(super) fn fetch_history(&mut self, session_id: String, after: Option<std::time::Duration>) {
        let failed = {
            let session_id = session_id.clone();
            let asked = std::time::Instant::now();
            move |why: String| AppEvent::History {
                session_id,
                fetch: HistoryFetch::Failed(why),
                asked,
            }
        };
        self.spawn_request(None, failed, move |client| async move {
            if let Some(after) = after {
                tokio::time::sleep(after).await;
            }
            let asked = std::time::Instant::now();
            let fetch = history_of(&client, &session_id).await;
            AppEvent::History {
                session_id,
                fetch,
                asked,
            }
        });
    }

    /// The histories of sessions for the search across sessions, one request each, each
    /// answered with `ReadForSearch` (a failure too, so that the app counts every answer).
    /// A few at a time (`READS_AT_ONCE`), so that a long list neither opens a connection per
    /// session nor floods the server; each read ends with the client's request timeout.
    pub(super) fn read_for_search(&mut self, session_ids: Vec<String>) {
        let at_once = Arc::new(tokio::sync::Semaphore::new(READS_AT_ONCE));
        for session_id in session_ids {
            let at_once = at_once.clone();
            let failed = {
                let session_id = session_id.clone();
                move |why: String| AppEvent::ReadForSearch {
                    session_id,
                    fetch: HistoryFetch::Failed(why),
                }
            };
            let offline = AppEvent::ReadForSearch {
                session_id: session_id.clone(),
                fetch: HistoryFetch::Failed("not connected".into()),
            };
            self.spawn_request(Some(offline), failed, move |client| async move {
                // The semaphore is never closed: a permit always comes.
                let _permit = at_once.acquire_owned().await;
                let fetch = history_of(&client, &session_id).await;
                AppEvent::ReadForSearch { session_id, fetch }
            });
        }
    }

    /// `GET /v1/sessions`: the target's sessions, answered with `ServiceSessions` (nothing
    /// when the server has no list; a failure is logged, the store's list stays).
    pub(super) fn list_sessions(&mut self) {
        self.spawn_request(None, AppEvent::WorkerError, move |client| async move {
            let asked_at = Utc::now();
            match client.list_sessions().await {
                Ok(Some(list)) => AppEvent::ServiceSessions(ServiceChange::All {
                    sessions: list.sessions,
                    asked_at,
                    database_id: list.database_id,
                    deleted: list.deleted_session_ids,
                }),
                Ok(None) => AppEvent::ServiceSessionsUnsupported,
                Err(e) => AppEvent::ServiceSessionsFailed(e.to_string()),
            }
        });
    }

    /// `PATCH /v1/sessions/{id}` with the user's title; answered with `TitleSent` when the
    /// service took it. A failure is logged: the title stays pending in the store and is sent
    /// again at the next list.
    pub(super) fn send_title(&mut self, session_id: String, title: String) {
        self.spawn_request(None, AppEvent::WorkerError, move |client| async move {
            match client.set_title(&session_id, &title).await {
                Ok(Some(_)) => AppEvent::TitleSent { session_id, title },
                Ok(None) => AppEvent::ServiceSessionsUnsupported,
                Err(e) => AppEvent::ServiceSessionsFailed(format!("the title was not sent: {e}")),
            }
        });
    }

    /// DELETEs a session; the answer comes back as `Deleted`/`DeleteFailed`.
    pub(super) fn delete(&mut self, session_id: String) {
        let offline = AppEvent::DeleteFailed {
            session_id: session_id.clone(),
            failure: ApiError::Network("not connected".into()),
        };
        let failed = {
            let session_id = session_id.clone();
            move |why: String| AppEvent::DeleteFailed {
                session_id,
                failure: internal(why),
            }
        };
        self.spawn_request(Some(offline), failed, move |client| async move {
            match client.delete_session(&session_id).await {
                Ok(_) => AppEvent::Deleted { session_id },
                Err(e) => AppEvent::DeleteFailed {
                    session_id,
                    failure: at_arrival(e),
                },
            }
        });
    }

    pub(super) fn open_stream(&mut self, session_id: String) {
        // The session's stream already open, or retrying; one that ended for good (refused)
        // is opened again.
        if let Some((s, task)) = &self.stream
            && s.session_id() == session_id
            && !task.is_finished()
        {
            return;
        }
        // Dropping the handle closes the previous session's stream.
        if let Some((old, task)) = self.stream.take() {
            drop(old);
            task.abort();
        }
        let Some(client) = self.client() else { return };
        let (handle, mut rx) = SessionStream::connect(client.options().clone(), &session_id);
        let events = self.events.clone();
        let activity = self.activity.clone();
        let task = tokio::spawn(async move {
            while let Some(update) = rx.recv().await {
                // A reply streaming keeps a usage poll (without the account stream) at its pace.
                if matches!(update, convo_client::api::StreamUpdate::Event(_)) {
                    activity.send_replace(Some(tokio::time::Instant::now()));
                }
                if !events.send(AppEvent::Stream {
                    session_id: session_id.clone(),
                    update,
                }) {
                    break;
                }
            }
        });
        self.stream = Some((handle, task));
    }
}

/// A request that failed inside convo (a panic, a cancelled task): an `internal` error no
/// server sent (status 0).
fn internal(why: String) -> ApiError {
    ApiError::Service {
        status: 0,
        code: "internal".into(),
        message: why,
    }
}

/// A client error as the app gets it: a `quota_exceeded` that gave only `Retry-After` gets the
/// instant it points at as its `resetAt`, since a relative time means nothing later.
pub fn at_arrival(e: ApiError) -> ApiError {
    match e {
        ApiError::QuotaExceeded {
            limit,
            reset_at,
            retry_after,
            message,
        } => {
            let valid = reset_at
                .as_deref()
                .is_some_and(|r| chrono::DateTime::parse_from_rfc3339(r).is_ok());
            let reset_at = if valid {
                reset_at
            } else {
                retry_after
                    .and_then(|d| chrono::Duration::from_std(d).ok())
                    .map(|d| (Utc::now() + d).to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            };
            ApiError::QuotaExceeded {
                limit,
                reset_at,
                retry_after,
                message,
            }
        }
        other => other,
    }
}

pub(super) async fn connect(target: Target, shared: Arc<Shared>, events: EventSender) {
    let account = target.account();
    let result = match target {
        Target::Remote(options) => {
            let endpoint = Endpoint::Remote {
                base_url: options.base_url.to_string(),
            };
            Client::new(options)
                .map(|c| (c, endpoint))
                .map_err(|e| e.to_string())
        }
        Target::Embedded {
            data_dir,
            engine,
            pace_ms,
        } => match embedded::start(&data_dir, &engine, pace_ms, &shared.service).await {
            Ok(started) => {
                events.send(AppEvent::Engine(started.engine.clone()));
                tokio::spawn(follow_engine(started.engine, started.load, events.clone()));
                Ok((started.client, started.endpoint))
            }
            Err(e) => Err(e),
        },
    };
    match result {
        Ok((client, endpoint)) => {
            // The wallet view says how to get a token when there is none.
            events.send(AppEvent::Wallet(crate::wallet::WalletEvent::Token(
                crate::wallet::worker::token_status(&client),
            )));
            let _ = shared.client.set(client);
            let _ = shared.account.set(account);
            events.send(AppEvent::Connected(endpoint));
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot connect");
            events.send(AppEvent::ConnectFailed(e));
        }
    }
}

/// Reports the engine's load state as it changes (a model loading: its progress, at most
/// every 100 ms), until it is ready or failed.
async fn follow_engine(
    mut status: crate::event::EngineStatus,
    mut load: tokio::sync::watch::Receiver<convo_wire::engine::LoadState>,
    events: EventSender,
) {
    use convo_wire::engine::LoadState;
    while matches!(status.state, LoadState::Loading { .. }) {
        if load.changed().await.is_err() {
            return;
        }
        status.state = load.borrow_and_update().clone();
        if !events.send(AppEvent::Engine(status.clone())) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        status.state = load.borrow_and_update().clone();
    }
    events.send(AppEvent::Engine(status));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::event::describe_failure;

    fn quota(reset_at: Option<&str>, retry_after: Option<Duration>) -> ApiError {
        ApiError::QuotaExceeded {
            limit: Some("requests".into()),
            reset_at: reset_at.map(String::from),
            retry_after,
            message: "limit reached".into(),
        }
    }

    #[test]
    fn a_retry_after_alone_becomes_the_instant_it_points_at() {
        let before = Utc::now();
        let e = at_arrival(quota(None, Some(Duration::from_secs(3 * 3600 + 30))));
        let ApiError::QuotaExceeded {
            reset_at: Some(at), ..
        } = &e
        else {
            panic!("no reset time: {e:?}");
        };
        let at = chrono::DateTime::parse_from_rfc3339(at).unwrap();
        let ahead = at.with_timezone(&Utc) - before;
        assert!(ahead >= chrono::Duration::seconds(3 * 3600 - 1), "{ahead}");
        assert!(
            describe_failure(&e, before).contains("resets in 3h 0m"),
            "{}",
            describe_failure(&e, before)
        );
    }

    #[test]
    fn the_servers_reset_time_wins_and_a_bad_one_falls_back_to_retry_after() {
        let kept = at_arrival(quota(
            Some("2026-12-01T00:00:00Z"),
            Some(Duration::from_secs(60)),
        ));
        assert_eq!(
            kept,
            quota(Some("2026-12-01T00:00:00Z"), Some(Duration::from_secs(60)))
        );
        let fixed = at_arrival(quota(Some("soon"), Some(Duration::from_secs(60))));
        assert!(matches!(fixed, ApiError::QuotaExceeded { reset_at: Some(r), .. } if r != "soon"));
        let none = at_arrival(quota(None, None));
        assert_eq!(
            describe_failure(&none, Utc::now()),
            "quota exceeded (requests)"
        );
    }
}
