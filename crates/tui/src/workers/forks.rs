//! Fork, undo and cancel requests (extensions of the service), each a watched task.
//! (`AppEvent::Forked`, `AppEvent::Undone`).

use super::Workers;
use crate::command::ForkPoint;
use crate::event::{AppEvent, CancelOutcome, ForkOutcome, UndoOutcome};
use convo_client::api::error::ApiError;

impl Workers {
    /// Finds the fork point in the source's history on the server, forks there, and fetches
    /// the new session's history (the copies' ids and times, for the local store).
    pub(super) fn fork(&mut self, source: String, new_session_id: String, at: ForkPoint) {
        let answer = {
            let (source, new_session_id) = (source.clone(), new_session_id.clone());
            move |outcome| AppEvent::Forked {
                source,
                new_session_id,
                outcome,
            }
        };
        let offline = answer.clone()(ForkOutcome::Failed(ApiError::Network(
            "not connected".into(),
        )));
        let failed = {
            let answer = answer.clone();
            move |why: String| answer(ForkOutcome::Failed(ApiError::Network(why)))
        };
        self.spawn_request(Some(offline), failed, move |client| async move {
            let history = match client.session_messages(&source).await {
                Ok(Some(history)) => history,
                Ok(None) => return answer(ForkOutcome::Unsupported),
                Err(e) => return answer(ForkOutcome::Failed(e)),
            };
            let Some(message_id) = at.resolve(&history).map(str::to_string) else {
                return answer(ForkOutcome::NotOnServer);
            };
            let summary = match client.fork(&source, &message_id, &new_session_id).await {
                Ok(Some(summary)) => summary,
                Ok(None) => return answer(ForkOutcome::Unsupported),
                Err(e) => return answer(ForkOutcome::Failed(e)),
            };
            // The copies as the server keeps them; without them, the source's up to the point.
            let messages = match client.session_messages(&summary.session_id).await {
                Ok(Some(messages)) => messages,
                _ => {
                    let end = history
                        .iter()
                        .position(|m| m.message_id == message_id)
                        .map_or(0, |i| i + 1);
                    history[..end].to_vec()
                }
            };
            answer(ForkOutcome::Forked {
                summary,
                messages,
                message_id,
            })
        });
    }

    /// Removes the session's last exchange on the server.
    pub(super) fn undo(&mut self, session_id: String) {
        let answer = {
            let session_id = session_id.clone();
            move |outcome| AppEvent::Undone {
                session_id,
                outcome,
            }
        };
        let offline = answer.clone()(UndoOutcome::Failed(ApiError::Network(
            "not connected".into(),
        )));
        let failed = {
            let answer = answer.clone();
            move |why: String| answer(UndoOutcome::Failed(ApiError::Network(why)))
        };
        self.spawn_request(Some(offline), failed, move |client| async move {
            answer(match client.undo(&session_id).await {
                Ok(Some(undone)) => UndoOutcome::Undone(undone.removed_message_ids),
                Ok(None) => UndoOutcome::Unsupported,
                Err(e) => UndoOutcome::Failed(e),
            })
        });
    }

    pub(super) fn cancel(&mut self, session_id: String, message_id: String) {
        let answer = {
            let (session_id, message_id) = (session_id.clone(), message_id.clone());
            move |outcome| AppEvent::CancelAnswered {
                session_id,
                message_id,
                outcome,
            }
        };
        let offline = answer.clone()(CancelOutcome::Failed(ApiError::Network(
            "not connected".into(),
        )));
        let failed = {
            let answer = answer.clone();
            move |why: String| answer(CancelOutcome::Failed(ApiError::Network(why)))
        };
        self.spawn_request(Some(offline), failed, move |client| async move {
            answer(match client.cancel(&session_id, &message_id).await {
                Ok(Some(_)) => CancelOutcome::Stopping,
                Ok(None) => CancelOutcome::Unsupported,
                Err(e) => CancelOutcome::Failed(e),
            })
        });
    }
}
