//! The clock task.

use std::time::Duration;

use chrono::Utc;

use super::super::event::{AppEvent, EventSender};

/// The wall clock for relative times; minute resolution is what the panes show.
pub(super) async fn clock(events: EventSender) {
    let mut tick = tokio::time::interval(Duration::from_secs(15));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !events.send(AppEvent::Clock(Utc::now())) {
            return;
        }
    }
}
