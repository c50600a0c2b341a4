//! Tasks whose end the app must hear about: a request runs on a task watched by a second
//! one, so that a panic (or an abort while the app runs) still ends in an event.

use std::future::Future;

use tokio::task::JoinHandle;

use super::Workers;
use crate::event::{AppEvent, EventSender};
use convo_client::api::client::Client;

impl Workers {
    /// Runs `request` against the connected service on a watched task and sends the event it
    /// ends with. Not connected yet: sends `offline` (if any) at once instead. If the task
    /// panics, or is cancelled while the app runs: sends `failed(why)`.
    pub(super) fn spawn_request<R, Fut, F>(
        &mut self,
        offline: Option<AppEvent>,
        failed: F,
        request: R,
    ) where
        R: FnOnce(Client) -> Fut,
        Fut: Future<Output = AppEvent> + Send + 'static,
        F: FnOnce(String) -> AppEvent + Send + 'static,
    {
        let Some(client) = self.client().cloned() else {
            if let Some(ev) = offline {
                self.events.send(ev);
            }
            return;
        };
        let events = self.events.clone();
        self.tasks.retain(|t| !t.is_finished());
        let work = request(client);
        self.tasks
            .push(spawn_reporting(self.events.clone(), failed, async move {
                events.send(work.await);
            }));
    }
}

/// Spawns `work` and a watcher that reports `failed(why)` when it panics or is aborted.
/// The returned handle is the watcher's; aborting it aborts the work too.
pub fn spawn_reporting<W, F>(events: EventSender, failed: F, work: W) -> JoinHandle<()>
where
    W: std::future::Future<Output = ()> + Send + 'static,
    F: FnOnce(String) -> AppEvent + Send + 'static,
{
    let task = tokio::spawn(work);
    tokio::spawn(async move {
        // Aborting the watcher drops this guard, which aborts the work with it.
        let abort = task.abort_handle();
        let _guard = AbortOnDrop(abort);
        if let Err(e) = task.await {
            let why = if e.is_panic() {
                let panic = e.into_panic();
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                tracing::error!(panic = %text, "a worker task panicked");
                format!("the request failed inside convo (a bug: {text})")
            } else {
                "the request was cancelled".to_string()
            };
            events.send(failed(why));
        }
    })
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
