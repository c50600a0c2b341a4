//! The per-session event hub behind `GET /v1/sessions/{id}/stream`: one broadcast channel per
//! session, plus the state of every reply in flight, so that a listener that connects (or falls
//! behind) mid-reply gets a `snapshot` and then the following deltas: nothing lost, nothing twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use tokio::sync::broadcast;

use crate::api::StreamEvent;

/// Events buffered per listener before it counts as lagging.
const CHANNEL_CAPACITY: usize = 1024;
/// Terminal events remembered per session, for listeners that lagged past them.
const RECENT_TERMINALS: usize = 32;

struct InFlight {
    message_id: String,
    /// Deltas published so far (= the next delta's seq).
    seq: u64,
    content: String,
}

struct SessionChannel {
    /// Made by the first listener: a reply nobody listens to costs no channel (a broadcast
    /// channel allocates all its `CHANNEL_CAPACITY` slots up front).
    tx: Option<broadcast::Sender<StreamEvent>>,
    in_flight: Vec<InFlight>,
    recent: VecDeque<StreamEvent>,
}

impl SessionChannel {
    fn new() -> Self {
        SessionChannel {
            tx: None,
            in_flight: Vec::new(),
            recent: VecDeque::new(),
        }
    }

    fn idle(&self) -> bool {
        self.in_flight.is_empty() && self.tx.as_ref().is_none_or(|tx| tx.receiver_count() == 0)
    }
}

/// What a new listener gets: snapshots of the replies in flight, and the receiver of every
/// event after them.
pub struct Subscription {
    pub snapshots: Vec<StreamEvent>,
    pub events: broadcast::Receiver<StreamEvent>,
}

#[derive(Default)]
pub struct StreamHub {
    sessions: Mutex<HashMap<String, SessionChannel>>,
}

impl StreamHub {
    fn with_sessions<T>(&self, f: impl FnOnce(&mut HashMap<String, SessionChannel>) -> T) -> T {
        let mut guard = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// A reply starts: listeners connecting from now on get a snapshot of it.
    pub fn begin(&self, session_id: &str, message_id: &str) {
        self.with_sessions(|s| {
            s.entry(session_id.to_string())
                .or_insert_with(SessionChannel::new)
                .in_flight
                .push(InFlight {
                    message_id: message_id.to_string(),
                    seq: 0,
                    content: String::new(),
                });
        });
    }

    /// Publishes the next piece of a reply; returns its seq.
    pub fn delta(&self, session_id: &str, message_id: &str, content: &str) -> u64 {
        self.with_sessions(|s| {
            // `begin` made the channel; a reply without one has nothing to publish to.
            let Some(channel) = s.get_mut(session_id) else {
                return 0;
            };
            let Some(flight) = channel
                .in_flight
                .iter_mut()
                .find(|f| f.message_id == message_id)
            else {
                return 0;
            };
            let seq = flight.seq;
            flight.seq += 1;
            flight.content.push_str(content);
            // No receivers is fine: the reply is generated whether or not anyone listens.
            if let Some(tx) = channel.tx.as_ref().filter(|tx| tx.receiver_count() > 0) {
                let _ = tx.send(StreamEvent::Delta {
                    session_id: session_id.to_string(),
                    message_id: message_id.to_string(),
                    seq,
                    content: content.to_string(),
                });
            }
            seq
        })
    }

    /// A reply ends with `event` (`done` or `error`).
    pub fn finish(&self, session_id: &str, message_id: &str, event: StreamEvent) {
        self.with_sessions(|s| {
            let Some(channel) = s.get_mut(session_id) else {
                return;
            };
            channel.in_flight.retain(|f| f.message_id != message_id);
            if let Some(tx) = &channel.tx {
                let _ = tx.send(event.clone());
            }
            channel.recent.push_back(event);
            if channel.recent.len() > RECENT_TERMINALS {
                channel.recent.pop_front();
            }
            if channel.idle() {
                s.remove(session_id);
            }
        });
    }

    /// Subscribes to a session: snapshots and the receiver are taken under one lock, so the
    /// first delta received for a reply carries exactly its snapshot's seq.
    pub fn subscribe(&self, session_id: &str) -> Subscription {
        self.with_sessions(|s| {
            let channel = s
                .entry(session_id.to_string())
                .or_insert_with(SessionChannel::new);
            let snapshots = channel
                .in_flight
                .iter()
                .map(|f| StreamEvent::Snapshot {
                    session_id: session_id.to_string(),
                    message_id: f.message_id.clone(),
                    seq: f.seq,
                    content: f.content.clone(),
                })
                .collect();
            Subscription {
                snapshots,
                events: channel
                    .tx
                    .get_or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0)
                    .subscribe(),
            }
        })
    }

    /// The `done`/`error` a reply ended with, if it ended recently.
    pub fn terminal_event(&self, session_id: &str, message_id: &str) -> Option<StreamEvent> {
        self.with_sessions(|s| {
            s.get(session_id)?
                .recent
                .iter()
                .find(|e| event_message_id(e) == message_id)
                .cloned()
        })
    }

    /// For a listener that lagged: a fresh receiver, and the events that replace what it missed:
    /// the `done`/`error` of replies in `open` that ended meanwhile, then snapshots of the
    /// replies in flight. `open` (replies the listener saw start but not end) is updated.
    pub fn resync(&self, session_id: &str, open: &mut HashSet<String>) -> Subscription {
        let fresh = self.subscribe(session_id);
        let in_flight: HashSet<&str> = fresh.snapshots.iter().map(event_message_id).collect();
        let mut ended: Vec<String> = open
            .iter()
            .filter(|id| !in_flight.contains(id.as_str()))
            .cloned()
            .collect();
        ended.sort();
        let mut events = Vec::new();
        for id in ended {
            open.remove(&id);
            if let Some(terminal) = self.terminal_event(session_id, &id) {
                events.push(terminal);
            }
        }
        for snapshot in &fresh.snapshots {
            open.insert(event_message_id(snapshot).to_string());
        }
        events.extend(fresh.snapshots);
        Subscription {
            snapshots: events,
            events: fresh.events,
        }
    }

    /// A listener left (after dropping its receiver): forget idle sessions.
    pub fn release(&self, session_id: &str) {
        self.with_sessions(|s| {
            if s.get(session_id).is_some_and(SessionChannel::idle) {
                s.remove(session_id);
            }
        });
    }

    /// True when the session has a listener now.
    pub fn has_listeners(&self, session_id: &str) -> bool {
        self.with_sessions(|s| {
            s.get(session_id)
                .and_then(|c| c.tx.as_ref())
                .is_some_and(|tx| tx.receiver_count() > 0)
        })
    }

    /// Number of sessions with listeners or replies in flight (for tests and logs).
    pub fn active_sessions(&self) -> usize {
        self.with_sessions(|s| s.len())
    }
}

/// The message id an event is about.
pub fn event_message_id(event: &StreamEvent) -> &str {
    match event {
        StreamEvent::Delta { message_id, .. }
        | StreamEvent::Error { message_id, .. }
        | StreamEvent::Snapshot { message_id, .. } => message_id,
        StreamEvent::Done { message } => &message.message_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_subscriber_gets_a_snapshot_then_the_rest() {
        let hub = StreamHub::default();
        hub.begin("s", "m");
        assert_eq!(hub.delta("s", "m", "Hello "), 0);
        assert_eq!(hub.delta("s", "m", "big "), 1);
        let mut sub = hub.subscribe("s");
        assert_eq!(
            sub.snapshots,
            vec![StreamEvent::Snapshot {
                session_id: "s".into(),
                message_id: "m".into(),
                seq: 2,
                content: "Hello big ".into()
            }]
        );
        assert_eq!(hub.delta("s", "m", "world"), 2);
        match sub.events.try_recv().unwrap() {
            StreamEvent::Delta { seq, content, .. } => {
                assert_eq!((seq, content.as_str()), (2, "world"))
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(sub.events.try_recv().is_err());
        drop(sub);
        hub.finish(
            "s",
            "m",
            StreamEvent::Error {
                session_id: "s".into(),
                message_id: "m".into(),
                error: crate::api::ErrorBody::new("engine_error", "x"),
            },
        );
        assert_eq!(hub.active_sessions(), 0);
    }

    #[test]
    fn a_lagging_listener_is_resynced_with_terminals_and_snapshots() {
        let hub = StreamHub::default();
        let mut sub = hub.subscribe("s");
        hub.begin("s", "ended");
        hub.begin("s", "running");
        for i in 0..CHANNEL_CAPACITY + 10 {
            hub.delta("s", "running", &format!("{i} "));
        }
        hub.delta("s", "ended", "x");
        let done = StreamEvent::Done {
            message: crate::api::Message {
                message_id: "ended".into(),
                session_id: "s".into(),
                role: crate::api::Role::Assistant,
                content: "x".into(),
                tokens: 1,
                created_at: "2026-11-22T00:00:00.000Z".into(),
            },
        };
        hub.finish("s", "ended", done.clone());
        assert!(matches!(
            sub.events.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(_))
        ));
        let mut open: HashSet<String> = ["ended".to_string(), "running".to_string()].into();
        let mut fresh = hub.resync("s", &mut open);
        assert_eq!(fresh.snapshots.len(), 2);
        assert_eq!(fresh.snapshots[0], done);
        match &fresh.snapshots[1] {
            StreamEvent::Snapshot {
                message_id,
                seq,
                content,
                ..
            } => {
                assert_eq!(message_id, "running");
                assert_eq!(*seq, CHANNEL_CAPACITY as u64 + 10);
                assert!(content.starts_with("0 1 2 "));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(open, ["running".to_string()].into());
        hub.delta("s", "running", "next");
        match fresh.events.try_recv().unwrap() {
            StreamEvent::Delta { seq, .. } => assert_eq!(seq, CHANNEL_CAPACITY as u64 + 10),
            other => panic!("unexpected {other:?}"),
        }
    }
}
