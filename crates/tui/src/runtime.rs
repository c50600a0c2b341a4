//! The app and its workers joined by the event channel, without a terminal: the loop in
//! `tui::run` draws it, tests drive it with key events.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use super::app::{App, Command};
use super::event::{AppEvent, EventSender};
use super::workers::{WorkerConfig, Workers};

pub struct Runtime {
    pub app: App,
    pub workers: Workers,
    events: UnboundedReceiver<AppEvent>,
    sender: EventSender,
}

impl Runtime {
    /// Starts the workers; the app fills in as their events arrive.
    pub fn start(app: App, config: WorkerConfig) -> Runtime {
        let (sender, events) = EventSender::new();
        let workers = Workers::start(config, sender.clone());
        Runtime {
            app,
            workers,
            events,
            sender,
        }
    }

    /// A sender for more event sources (the terminal).
    pub fn sender(&self) -> EventSender {
        self.sender.clone()
    }

    /// Feeds one event to the app, at the wall clock's time, and hands its commands to the
    /// workers.
    pub fn handle(&mut self, event: AppEvent) {
        self.app.observe_clock(chrono::Utc::now());
        for command in self.app.update(event) {
            if command != Command::Quit {
                self.workers.dispatch(command);
            }
        }
    }

    /// Waits for the next event.
    pub async fn next(&mut self) -> Option<AppEvent> {
        self.events.recv().await
    }

    /// The next event if one is waiting.
    pub fn try_next(&mut self) -> Option<AppEvent> {
        self.events.try_recv().ok()
    }

    /// Handles events until `done(&app)` holds. The timeout only guards against a hang; it is
    /// not part of what is tested.
    pub async fn run_until(
        &mut self,
        what: &str,
        guard: Duration,
        done: impl Fn(&App) -> bool,
    ) -> Result<(), String> {
        let wait = async {
            while !done(&self.app) {
                match self.events.recv().await {
                    Some(ev) => self.handle(ev),
                    None => return Err(format!("event channel closed while waiting for {what}")),
                }
            }
            Ok(())
        };
        match tokio::time::timeout(guard, wait).await {
            Ok(r) => r,
            Err(_) => Err(format!("gave up waiting for {what}")),
        }
    }

    /// Writes what is queued to the store and closes it, closes the stream, stops the
    /// embedded service.
    pub async fn shutdown(self) {
        self.workers.shutdown().await;
    }
}
