//! Stopping a reply and quitting with Ctrl-C: the stop asks the service to stop the reply
//! (`Command::CancelReply`, once the reply's id is known) where the server can, and otherwise
//! stops watching it (the service finishes it and it is shown whole when stored; a send not
//! answered yet waits for its answer in `OpenSession::stopped`); a reply waiting for its first
//! text (this device's, or another's followed here) shows the service's progress or the time
//! waited; right after a reply ended, a first Ctrl-C on the idle composer only says how to
//! quit, and a second within a second quits.

use std::time::{Duration, Instant};

use super::{App, Command, Level, StoreOp};
use crate::event::CancelOutcome;
use crate::render::transcript::EntryState;
use crate::transcript_pane::reply_marks::waiting_note;

/// A Ctrl-C this soon after a reply ended asks for a second one.
pub(super) const QUIT_GUARD: Duration = Duration::from_secs(2);
/// The second Ctrl-C must come this soon after the first.
pub(super) const QUIT_AGAIN_WITHIN: Duration = Duration::from_secs(1);
/// What the status bar says between a stop asked of the service and the reply's end.
const STOPPING: &str = "stopping the reply…";
/// What the first of the two says.
pub(super) const PRESS_AGAIN: &str = "press Ctrl-C again to quit";
/// How often the time waited is shown again.
const TICK: Duration = Duration::from_secs(1);

/// The Ctrl-C guard's memory.
#[derive(Debug, Default)]
pub(super) struct QuitGuard {
    /// When the last reply of this run ended (done, failed or stopped).
    pub reply_ended: Option<Instant>,
    /// When a guarded Ctrl-C asked for a second one.
    pub armed: Option<Instant>,
    /// The server turned out to have no cancel endpoint.
    pub cancel_missing: bool,
}

impl QuitGuard {
    /// Whether a Ctrl-C on the idle composer at `now` quits; if not, it arms the guard.
    pub fn quits(&mut self, now: Instant) -> bool {
        if self
            .armed
            .take()
            .is_some_and(|at| now.duration_since(at) <= QUIT_AGAIN_WITHIN)
        {
            return true;
        }
        let guarded = self
            .reply_ended
            .is_some_and(|at| now.duration_since(at) <= QUIT_GUARD);
        if guarded {
            self.armed = Some(now);
        }
        !guarded
    }
}

impl App {
    /// Ctrl-C (the stop-or-quit key): stops the reply in flight, this device's or one
    /// another device started that shows here, else quits, asking for a second press right
    /// after a reply ended.
    pub(super) fn stop_or_quit(&mut self, out: &mut Vec<Command>) {
        if self.session().is_some_and(|o| o.is_streaming()) {
            self.stop_stream(out);
        } else if let Some(cancel) = self.cancel_foreign() {
            out.push(cancel);
            self.notify(Level::Info, STOPPING);
        } else if self.quit_guard.quits(Instant::now()) {
            self.quit(out);
        } else {
            self.notify(Level::Info, PRESS_AGAIN);
        }
    }

    /// The stop of a reply another device started, shown streaming in the open session: asked
    /// of the service once (its `done`, marked stopped, follows on the stream); `None` when
    /// there is none, it was asked already (a second Ctrl-C goes on to quit), or the server
    /// cannot stop replies.
    fn cancel_foreign(&mut self) -> Option<Command> {
        if self.quit_guard.cancel_missing {
            return None;
        }
        let open = self.transcript.session_mut()?;
        let foreign = open
            .foreign
            .as_mut()
            .filter(|f| f.item.is_some() && !f.cancel_sent)?;
        foreign.cancel_sent = true;
        Some(Command::CancelReply {
            session_id: open.id.clone(),
            message_id: foreign.message_id.clone(),
        })
    }

    /// A reply ended here (stored, failed or stopped): a Ctrl-C right after asks again.
    pub(super) fn reply_ended(&mut self) {
        self.quit_guard.reply_ended = Some(Instant::now());
        // "stopping…" no longer holds once the reply ended, however it ended.
        if self.notice.as_ref().is_some_and(|n| n.text == STOPPING) {
            self.notice = None;
        }
    }

    /// Stops the reply in flight: asks the service to stop it where the server may have the
    /// cancel (at once when the reply's id is known, else as soon as it is); otherwise (or on
    /// a second stop) stops watching it.
    pub(super) fn stop_stream(&mut self, out: &mut Vec<Command>) {
        // What waited for the reply is not sent after a stop: Enter sends it.
        self.unqueue();
        let cancel_missing = self.quit_guard.cancel_missing;
        let Some(p) = self
            .transcript
            .session_mut()
            .and_then(|o| o.pending.as_mut())
        else {
            return;
        };
        if cancel_missing || p.stop_asked {
            return self.stop_watching(out);
        }
        p.stop_asked = true;
        self.notify(Level::Info, STOPPING);
        self.send_asked_stop(out);
    }

    /// A stop the user asked for goes to the service once the reply's id is known: from the
    /// stream's `started`, its first text or the send's answer, whichever comes first (run
    /// after every event).
    pub(super) fn send_asked_stop(&mut self, out: &mut Vec<Command>) {
        let Some(open) = self.transcript.session_mut() else {
            return;
        };
        let Some(p) = (open.pending.as_mut()).filter(|p| p.stop_asked && !p.cancel_sent) else {
            return;
        };
        let Some(message_id) = open.items[p.reply_item].message_id.clone() else {
            return;
        };
        p.cancel_sent = true;
        out.push(Command::CancelReply {
            session_id: open.id.clone(),
            message_id,
        });
    }

    /// The stop that stops watching (servers that cannot stop a reply, a second stop): the
    /// reply shows as interrupted here, and the service finishes it (shown whole when it is
    /// stored).
    fn stop_watching(&mut self, out: &mut Vec<Command>) {
        let Some(open) = self.transcript.session_mut() else {
            return;
        };
        let Some(p) = open.pending.take() else { return };
        open.set_state(p.reply_item, EntryState::Interrupted);
        open.set_note(p.reply_item, None);
        if !p.accepted {
            // The service's answer to the send is still to come: it stores the message.
            open.stopped = Some(p);
        } else if let Some(message) = open.stored(p.reply_item) {
            out.push(Command::Persist(StoreOp::AppendMessage {
                session_id: open.id.clone(),
                message,
            }));
        }
        // "a reply is still coming" no longer holds.
        self.composer.set_send_error(None);
        self.reply_ended();
        self.notify(
            Level::Info,
            "stopped; the service finishes the reply, and it is shown whole when it is stored",
        );
    }

    /// The service's answer to a stop.
    pub(super) fn on_cancel_answered(
        &mut self,
        session_id: String,
        message_id: String,
        outcome: CancelOutcome,
        out: &mut Vec<Command>,
    ) {
        let still_pending = self.transcript.session().is_some_and(|o| {
            o.id == session_id
                && o.pending.as_ref().is_some_and(|p| {
                    o.items[p.reply_item].message_id.as_deref() == Some(message_id.as_str())
                })
        });
        match outcome {
            // Its `done` (marked stopped) follows on the stream.
            CancelOutcome::Stopping => {}
            CancelOutcome::Unsupported => {
                self.quit_guard.cancel_missing = true;
                if still_pending {
                    self.stop_watching(out);
                }
            }
            // It ended meanwhile: its `done` or `error` says how.
            CancelOutcome::Failed(e)
                if matches!(e.code(), "reply_finished" | "message_not_found") => {}
            CancelOutcome::Failed(e) => {
                if still_pending {
                    self.stop_watching(out);
                }
                self.notify(
                    Level::Warn,
                    format!("the service could not stop the reply: {e}"),
                );
            }
        }
    }

    /// Shows what the reply waiting for its first text is doing (progress, time waited) and,
    /// while it waits, asks for the next tick.
    pub(super) fn on_reply_tick(&mut self, out: &mut Vec<Command>) {
        if self.show_waiting() {
            out.push(Command::ReplyTick { after: TICK });
        }
    }

    /// Updates the header of each reply waiting for its first text (this device's, and
    /// another device's followed here since it began: `ForeignReply::began`); false when none
    /// waits.
    pub(super) fn show_waiting(&mut self) -> bool {
        let Some(open) = self.transcript.session_mut() else {
            return false;
        };
        let mine = open
            .pending
            .as_ref()
            .map(|p| (p.reply_item, p.follower.progress(), p.started));
        let theirs = open
            .foreign
            .as_ref()
            .and_then(|f| Some((f.item?, f.follower.progress(), f.began)));
        let mut waits = false;
        for (idx, progress, since) in mine.into_iter().chain(theirs) {
            if open.items[idx].state != EntryState::Streaming || !open.content(idx).is_empty() {
                continue;
            }
            waits = true;
            // Nothing to say yet (no progress, under `SHOW_ELAPSED_AFTER`): the header stays.
            if let Some(note) = waiting_note(progress, since.elapsed()) {
                open.set_note(idx, Some(note));
            }
        }
        waits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ctrl_c_right_after_a_reply_asks_for_a_second_within_a_second() {
        let start = Instant::now();
        let mut g = QuitGuard::default();
        // No reply ended: quits at once.
        assert!(g.quits(start));
        g.reply_ended = Some(start);
        let first = start + Duration::from_millis(500);
        assert!(!g.quits(first));
        assert!(g.quits(first + Duration::from_millis(400)));
        // Too slow a second press arms the guard again instead.
        g.reply_ended = Some(start);
        assert!(!g.quits(first));
        assert!(!g.quits(first + Duration::from_millis(1200)));
        // Long after the reply, one press quits.
        let mut g = QuitGuard {
            reply_ended: Some(start),
            ..QuitGuard::default()
        };
        assert!(g.quits(start + Duration::from_secs(5)));
    }
}
