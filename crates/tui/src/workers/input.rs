//! The terminal input task: crossterm's event stream into `AppEvent`s.

use std::time::Duration;

use futures_util::StreamExt;

use super::super::event::{AppEvent, EventSender};

/// Forwards terminal events to the app until it quits (or the terminal keeps failing).
pub(super) async fn terminal_input(events: EventSender) {
    use crossterm::event::{Event, EventStream, KeyEventKind};
    // A read error is usually passing (an interrupted poll); giving up would leave the user
    // with no way to quit, so only a run of them ends the task.
    const MAX_ERRORS_IN_A_ROW: u32 = 20;
    let mut stream = EventStream::new();
    let mut errors = 0;
    while let Some(ev) = stream.next().await {
        tracing::trace!(?ev, "terminal event");
        let ev = match ev {
            Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => AppEvent::Key(k),
            Ok(Event::Mouse(m)) => AppEvent::Mouse(m),
            Ok(Event::Paste(p)) => AppEvent::Paste(p),
            Ok(Event::Resize(w, h)) => AppEvent::Resize(w, h),
            Ok(Event::FocusGained) => AppEvent::Focus(true),
            Ok(Event::FocusLost) => AppEvent::Focus(false),
            Ok(_) => continue,
            Err(e) => {
                errors += 1;
                tracing::warn!(error = %e, errors, "terminal input failed");
                if errors >= MAX_ERRORS_IN_A_ROW {
                    events.send(AppEvent::WorkerError(format!(
                        "the terminal stopped sending keys ({e})"
                    )));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        errors = 0;
        if !events.send(ev) {
            break;
        }
    }
}
