//! The per-session event hub behind `GET /v1/sessions/{id}/stream`: one broadcast channel per
//! session, plus the state of every reply in flight, so that a listener that connects (or falls
//! behind) mid-reply gets a `snapshot` and then the following deltas: nothing lost, nothing twice.
//!
//! On PostgreSQL the hub also speaks with the other replicas' hubs through the stream relay
//! (`storage::postgres::relay`), in `Relayed` messages: a replica with a listener on a session
//! says so (`Watch`, and `Unwatch` when its last listener leaves); a replica publishes what
//! happens to its replies (begin, each delta, done/error) only for sessions that another
//! replica watches, and answers a `Watch` by replaying each of the session's replies in flight
//! (its begin and every delta so far), so the watcher sees it as if it had watched from the
//! start. Every message a hub publishes is queued under the hub's lock, so the others see a
//! reply's pieces in the order its state changed.
//!
//! The hub also carries the account stream (`GET /v1/stream`, `routes::account_stream`): one
//! broadcast channel per account with a listener here, of `AccountSignal`s. Across replicas
//! it works as for sessions: a replica with a listener on an account says so (`AccountWatch`,
//! `AccountUnwatch`), and a replica publishes what happened to an account's sessions
//! (`AccountSession`: a session's id and its change, never its state, which each listener
//! reads when it takes the signal: `account_events::event`) and its usage changes
//! (`AccountUsage`) only while another replica watches that account. After the relay was lost
//! and came back, every account listener here is told to resync (`Resync`: it sends a fresh
//! `hello`, since what changed meanwhile was not relayed).

mod admin;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, OnceLock};

use tokio::sync::{broadcast, mpsc, oneshot, watch};

use convo_wire::account_stream::{AccountEvent, SessionChange};
use convo_wire::{ErrorBody, StreamEvent};

pub use admin::AdminSignal;

/// Events buffered per listener before it counts as lagging.
const CHANNEL_CAPACITY: usize = 1024;
/// Terminal events remembered per session, for listeners that lagged past them.
const RECENT_TERMINALS: usize = 32;

use convo_wire::stream_errors::RELAY_UNAVAILABLE;

struct InFlight {
    message_id: String,
    /// The `Idempotency-Key` of the POST that started it, told in its `started` event.
    key: Option<String>,
    /// Deltas published so far (= the next delta's seq).
    seq: u64,
    content: String,
    /// `None`: generated here; else the replica generating it (relayed).
    owner: Option<String>,
    /// Relayed, and the relay was lost since its last news (the listeners were told).
    stale: bool,
    /// Generated here: where each delta ends in `content`, to replay them to a new watcher.
    pieces: Vec<usize>,
    /// The last prompt progress (read, total), while no text has come: a new listener gets it
    /// after the snapshot.
    progress: Option<(u64, u64)>,
    /// Generated here: the switch that asks its turn to stop (`cancel`).
    cancel: Option<watch::Sender<bool>>,
    /// Generated here, and its engine has finished (`generated`): a cancel comes too late.
    generated: bool,
}

impl InFlight {
    fn here(&self) -> bool {
        self.owner.is_none()
    }

    fn started(&self, session_id: &str) -> StreamEvent {
        StreamEvent::Started {
            session_id: session_id.to_string(),
            message_id: self.message_id.clone(),
            idempotency_key: self.key.clone(),
        }
    }

    fn snapshot(&self, session_id: &str) -> StreamEvent {
        StreamEvent::Snapshot {
            session_id: session_id.to_string(),
            message_id: self.message_id.clone(),
            seq: self.seq,
            content: self.content.clone(),
        }
    }

    fn progress_event(&self, session_id: &str) -> Option<StreamEvent> {
        let (read, total) = self.progress.filter(|_| self.content.is_empty())?;
        Some(StreamEvent::Progress {
            session_id: session_id.to_string(),
            message_id: self.message_id.clone(),
            prompt_tokens: read,
            prompt_total: total,
        })
    }
}

/// What `StreamHub::cancel` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// The reply runs here: its turn was asked to stop.
    Here,
    /// The reply runs on another replica that this one follows: the cancel was relayed.
    Relayed,
    /// The reply runs here and its engine has already finished: it is being stored, and
    /// ends as the engine ended it.
    Finished,
    /// This hub knows no such reply in flight.
    Unknown,
}

struct SessionChannel {
    /// Made by the first listener: a reply nobody listens to costs no channel (a broadcast
    /// channel allocates all its `CHANNEL_CAPACITY` slots up front).
    tx: Option<broadcast::Sender<StreamEvent>>,
    in_flight: Vec<InFlight>,
    recent: VecDeque<StreamEvent>,
    /// Other replicas with a listener on this session: this replica's replies of the session
    /// are relayed only while there is one.
    watchers: HashSet<String>,
    /// `announce` told the others of a listener about to subscribe (so `subscribe` need not).
    announced: bool,
}

impl SessionChannel {
    fn new() -> Self {
        SessionChannel {
            tx: None,
            in_flight: Vec::new(),
            recent: VecDeque::new(),
            watchers: HashSet::new(),
            announced: false,
        }
    }

    fn listened(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.receiver_count() > 0)
    }

    fn idle(&self) -> bool {
        self.in_flight.is_empty() && !self.listened() && self.watchers.is_empty()
    }

    /// The reply ended recently (its `done`/`error` was sent).
    fn ended(&self, message_id: &str) -> bool {
        self.recent
            .iter()
            .any(|e| event_message_id(e) == message_id)
    }

    fn flight(&mut self, message_id: &str) -> Option<&mut InFlight> {
        self.in_flight
            .iter_mut()
            .find(|f| f.message_id == message_id)
    }

    /// To the listeners here; none is fine (a reply is generated whether or not anyone listens).
    fn send(&self, event: StreamEvent) {
        if let Some(tx) = self.tx.as_ref().filter(|tx| tx.receiver_count() > 0) {
            let _ = tx.send(event);
        }
    }
}

/// What a new listener gets: the `started` event and a snapshot of each reply in flight, and
/// the receiver of every event after them.
pub struct Subscription {
    pub snapshots: Vec<StreamEvent>,
    pub events: broadcast::Receiver<StreamEvent>,
}

/// What the hubs of the replicas tell each other (`storage::postgres::relay` carries them;
/// the sender's replica id travels beside each batch).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Relayed {
    /// A reply of a watched session starts on the sender; `i` is the `Idempotency-Key` of
    /// the POST that started it (absent when it had none, and from older builds).
    Begin {
        s: String,
        m: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        i: Option<String>,
    },
    /// Its next piece, `q` its seq.
    Delta {
        s: String,
        m: String,
        q: u64,
        c: String,
    },
    /// Its prompt is being read: `r` of `t` tokens.
    Progress {
        s: String,
        m: String,
        r: u64,
        t: u64,
    },
    /// Someone asked to stop the reply (told to every replica; the one generating it stops it).
    Cancel { s: String, m: String },
    /// It ended with `e` (`done` or `error`).
    Finish {
        s: String,
        m: String,
        e: StreamEvent,
    },
    /// The sender has a listener on the session now.
    Watch { s: String },
    /// The sender's last listener on the session left.
    Unwatch { s: String },
    /// The sender's relay (re)connected: it knows nothing of what others watch.
    Hello,
    /// The sender has a listener on the account stream of account `a` now.
    AccountWatch { a: i64 },
    /// The sender's last listener on account `a`'s stream left.
    AccountUnwatch { a: i64 },
    /// Session `s` of account `a` changed (`c`); each listener reads its state.
    AccountSession { a: i64, s: String, c: Change },
    /// An event of account `a` as a replica of an older build reads and sends it (it sent
    /// this instead of `AccountSession`); told to the listeners as it is.
    AccountEvent { a: i64, e: AccountEvent },
    /// Account `a`'s usage changed (each listener reads it, at most a few times a second).
    AccountUsage { a: i64 },
    /// The sender has an admin stream listener now (it wants every `AccountUsage`).
    AdminWatch,
    /// The sender's last admin stream listener left.
    AdminUnwatch,
    /// A message of a newer build's that this one does not know: ignored, so that the rest of
    /// its batch is read.
    #[serde(other)]
    Unknown,
}

/// What happened to a session, as `account_events::tell` hands it to the hub and the relay
/// carries it to the other replicas (serialised compactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// It began (its first message, or a fork).
    Created,
    /// It changed: a message stored or removed, a title set, an exchange undone.
    Updated(SessionChange),
    /// It was deleted.
    Deleted,
}

/// What an account stream listener is told.
#[derive(Debug, Clone, PartialEq)]
pub enum AccountSignal {
    /// A session changed: send its event, its state read now (`account_events::event`).
    Session { session_id: String, change: Change },
    /// An event to send as it is (relayed by a replica of an older build).
    Event(Box<AccountEvent>),
    /// The account's usage changed: send a `usage` event (coalesced by the listener).
    Usage,
    /// What changed may not all have been told (the relay was lost): send a fresh `hello`.
    Resync,
}

/// The listeners of one account here, and the other replicas that listen to it.
struct AccountChannel {
    tx: broadcast::Sender<AccountSignal>,
    watchers: HashSet<String>,
}

impl AccountChannel {
    fn new() -> Self {
        AccountChannel {
            tx: broadcast::channel(ACCOUNT_CHANNEL_CAPACITY).0,
            watchers: HashSet::new(),
        }
    }

    fn listened(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    fn idle(&self) -> bool {
        !self.listened() && self.watchers.is_empty()
    }

    fn send(&self, signal: AccountSignal) {
        if self.listened() {
            let _ = self.tx.send(signal);
        }
    }
}

/// Account signals buffered per listener before it counts as lagging (it then resyncs).
const ACCOUNT_CHANNEL_CAPACITY: usize = 256;

/// What the hub hands the relay: a message to publish, or a request to be told once every
/// message queued before it was published.
// A flush is rare and small; boxing the message instead would allocate once per delta.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Outgoing {
    Publish(Relayed),
    Flush(oneshot::Sender<()>),
}

/// A reply generated on another replica, as this hub follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteReply {
    pub session_id: String,
    pub message_id: String,
}

#[derive(Default)]
pub struct StreamHub {
    sessions: Mutex<HashMap<String, SessionChannel>>,
    /// The account streams' channels, by account id (locked after `sessions` when both are).
    accounts: Mutex<HashMap<i64, AccountChannel>>,
    /// The admin stream's listeners (`stream/admin.rs`; locked after `accounts`).
    admin: Mutex<admin::AdminChannel>,
    /// Set on PostgreSQL: what this hub tells the other replicas.
    relay: OnceLock<mpsc::UnboundedSender<Outgoing>>,
}

fn error_event(session_id: &str, message_id: &str, code: &str, message: &str) -> StreamEvent {
    StreamEvent::Error {
        session_id: session_id.to_string(),
        message_id: message_id.to_string(),
        error: ErrorBody::new(code, message),
    }
}

const RELAY_UNAVAILABLE_MESSAGE: &str = "this replica lost its connection to the other replicas; \
    the reply goes on on the replica generating it: stay connected (its snapshot or its end \
    follows when the connection is back) or reconnect";

impl StreamHub {
    fn with_sessions<T>(&self, f: impl FnOnce(&mut HashMap<String, SessionChannel>) -> T) -> T {
        let mut guard = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    fn with_accounts<T>(&self, f: impl FnOnce(&mut HashMap<i64, AccountChannel>) -> T) -> T {
        let mut guard = self.accounts.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// A listener of account `account`'s stream: the receiver of its signals. The first one
    /// here is announced to the other replicas.
    pub fn subscribe_account(&self, account: i64) -> broadcast::Receiver<AccountSignal> {
        self.with_accounts(|map| {
            let channel = map.entry(account).or_insert_with(AccountChannel::new);
            if !channel.listened() {
                self.publish(Relayed::AccountWatch { a: account });
            }
            channel.tx.subscribe()
        })
    }

    /// An account listener left (after dropping its receiver).
    pub fn release_account(&self, account: i64) {
        self.with_accounts(|map| {
            let Some(channel) = map.get(&account) else {
                return;
            };
            if !channel.listened() {
                self.publish(Relayed::AccountUnwatch { a: account });
            }
            if channel.idle() {
                map.remove(&account);
            }
        });
    }

    /// True when someone listens to the account's stream, here or on another replica (else
    /// there is nothing to tell, and nothing to read for it).
    pub fn account_watched(&self, account: i64) -> bool {
        self.with_accounts(|map| map.get(&account).is_some_and(|c| !c.idle()))
    }

    /// A session of the account changed: told to its listeners here and on the replicas that
    /// watch it.
    pub fn session_changed(&self, account: i64, session_id: &str, change: Change) {
        self.with_accounts(|map| {
            let Some(channel) = map.get(&account) else {
                return;
            };
            if !channel.watchers.is_empty() {
                self.publish(Relayed::AccountSession {
                    a: account,
                    s: session_id.to_string(),
                    c: change,
                });
            }
            channel.send(AccountSignal::Session {
                session_id: session_id.to_string(),
                change,
            });
        });
    }

    /// The account's usage changed (a request was counted, a message stored or removed, a
    /// session made or deleted).
    pub fn usage_changed(&self, account: i64) {
        let relayed = self.with_accounts(|map| {
            let Some(channel) = map.get(&account) else {
                return false;
            };
            let relayed = !channel.watchers.is_empty();
            if relayed {
                self.publish(Relayed::AccountUsage { a: account });
            }
            channel.send(AccountSignal::Usage);
            relayed
        });
        self.admin_usage(account, relayed);
    }

    /// The account part of `apply`.
    fn apply_account(&self, sender: &str, message: Relayed) {
        self.with_accounts(|map| match message {
            Relayed::AccountWatch { a } => {
                map.entry(a)
                    .or_insert_with(AccountChannel::new)
                    .watchers
                    .insert(sender.to_string());
            }
            Relayed::AccountUnwatch { a } => {
                if let Some(channel) = map.get_mut(&a) {
                    channel.watchers.remove(sender);
                    if channel.idle() {
                        map.remove(&a);
                    }
                }
            }
            Relayed::AccountSession { a, s, c } => {
                if let Some(channel) = map.get(&a) {
                    channel.send(AccountSignal::Session {
                        session_id: s,
                        change: c,
                    });
                }
            }
            Relayed::AccountEvent { a, e } => {
                if let Some(channel) = map.get(&a) {
                    channel.send(AccountSignal::Event(Box::new(e)));
                }
            }
            Relayed::AccountUsage { a } => {
                if let Some(channel) = map.get(&a) {
                    channel.send(AccountSignal::Usage);
                }
                self.apply_admin(sender, &Relayed::AccountUsage { a });
            }
            Relayed::Hello => {
                // It forgot which accounts are listened to here: tell it again.
                for (a, channel) in map.iter_mut() {
                    channel.watchers.remove(sender);
                    if channel.listened() {
                        self.publish(Relayed::AccountWatch { a: *a });
                    }
                }
                map.retain(|_, c| !c.idle());
            }
            _ => {}
        });
    }

    /// From now on, this hub talks to the other replicas through `relay`.
    pub fn relay_to(&self, relay: mpsc::UnboundedSender<Outgoing>) {
        let _ = self.relay.set(relay);
    }

    /// Queues `message` for the other replicas (called under the sessions' lock, so that
    /// messages leave in the order the state changed).
    fn publish(&self, message: Relayed) {
        if let Some(relay) = self.relay.get() {
            let _ = relay.send(Outgoing::Publish(message));
        }
    }

    /// Resolves once everything queued for the other replicas so far was published (`None`
    /// on a single service, or when the relay is down and drops it).
    pub fn flushed(&self) -> Option<oneshot::Receiver<()>> {
        let relay = self.relay.get()?;
        let (tx, rx) = oneshot::channel();
        relay.send(Outgoing::Flush(tx)).ok()?;
        Some(rx)
    }

    /// A reply starts, sent with the idempotency key `key`: the listeners get its `started`
    /// event, and those connecting from now on a snapshot of it. The receiver turns true when
    /// someone asks to stop it (`cancel`, here or from another replica).
    pub fn begin(
        &self,
        session_id: &str,
        message_id: &str,
        key: Option<&str>,
    ) -> watch::Receiver<bool> {
        let (cancel, cancelled) = watch::channel(false);
        self.with_sessions(|s| {
            let channel = s
                .entry(session_id.to_string())
                .or_insert_with(SessionChannel::new);
            let flight = InFlight {
                message_id: message_id.to_string(),
                key: key.map(str::to_string),
                seq: 0,
                content: String::new(),
                owner: None,
                stale: false,
                pieces: Vec::new(),
                progress: None,
                cancel: Some(cancel),
                generated: false,
            };
            channel.send(flight.started(session_id));
            channel.in_flight.push(flight);
            if !channel.watchers.is_empty() {
                self.publish(Relayed::Begin {
                    s: session_id.to_string(),
                    m: message_id.to_string(),
                    i: key.map(str::to_string),
                });
            }
        });
        cancelled
    }

    /// The prompt of a reply of this replica is being read: `read` of `total` tokens (the turn
    /// calls this at most every ~250 ms).
    pub fn progress(&self, session_id: &str, message_id: &str, read: u64, total: u64) {
        self.with_sessions(|s| {
            let Some(channel) = s.get_mut(session_id) else {
                return;
            };
            let watched = !channel.watchers.is_empty();
            let Some(flight) = channel.flight(message_id) else {
                return;
            };
            flight.progress = Some((read, total));
            if let Some(event) = flight.progress_event(session_id) {
                channel.send(event);
                if watched {
                    self.publish(Relayed::Progress {
                        s: session_id.to_string(),
                        m: message_id.to_string(),
                        r: read,
                        t: total,
                    });
                }
            }
        })
    }

    /// Asks the reply `message_id` of `session_id` to stop: its turn, when it runs here; the
    /// replica generating it, when this one follows it (the relay carries the request).
    pub fn cancel(&self, session_id: &str, message_id: &str) -> Cancel {
        self.with_sessions(|s| {
            let Some(flight) = s.get_mut(session_id).and_then(|c| c.flight(message_id)) else {
                return Cancel::Unknown;
            };
            if flight.generated {
                return Cancel::Finished;
            }
            match &flight.cancel {
                Some(cancel) => {
                    let _ = cancel.send(true);
                    Cancel::Here
                }
                None => {
                    self.publish(Relayed::Cancel {
                        s: session_id.to_string(),
                        m: message_id.to_string(),
                    });
                    Cancel::Relayed
                }
            }
        })
    }

    /// The engine of the reply `message_id` of this replica has finished: from now on a
    /// cancel finds it ended (`Cancel::Finished`). Returns whether a cancel came first, which
    /// the turn still honours (its answer promised a `stopped` reply).
    pub fn generated(&self, session_id: &str, message_id: &str) -> bool {
        self.with_sessions(|s| {
            let Some(flight) = s.get_mut(session_id).and_then(|c| c.flight(message_id)) else {
                return false;
            };
            flight.generated = true;
            flight.cancel.as_ref().is_some_and(|c| *c.borrow())
        })
    }

    /// Tells every other replica to stop the reply, for a replica that does not follow it
    /// (the store said its turn runs elsewhere). False on a single service.
    pub fn cancel_elsewhere(&self, session_id: &str, message_id: &str) -> bool {
        if self.relay.get().is_none() {
            return false;
        }
        self.with_sessions(|_| {
            self.publish(Relayed::Cancel {
                s: session_id.to_string(),
                m: message_id.to_string(),
            })
        });
        true
    }

    /// Publishes the next piece of a reply; returns its seq.
    pub fn delta(&self, session_id: &str, message_id: &str, content: &str) -> u64 {
        self.with_sessions(|s| {
            // `begin` made the channel; a reply without one has nothing to publish to.
            let Some(channel) = s.get_mut(session_id) else {
                return 0;
            };
            let watched = !channel.watchers.is_empty();
            let Some(flight) = channel.flight(message_id) else {
                return 0;
            };
            let seq = flight.seq;
            flight.seq += 1;
            flight.content.push_str(content);
            flight.pieces.push(flight.content.len());
            channel.send(StreamEvent::Delta {
                session_id: session_id.to_string(),
                message_id: message_id.to_string(),
                seq,
                content: content.to_string(),
            });
            if watched {
                self.publish(Relayed::Delta {
                    s: session_id.to_string(),
                    m: message_id.to_string(),
                    q: seq,
                    c: content.to_string(),
                });
            }
            seq
        })
    }

    /// A reply of this replica ends with `event` (`done` or `error`).
    pub fn finish(&self, session_id: &str, message_id: &str, event: StreamEvent) {
        self.finish_with(session_id, message_id, event, false);
    }

    /// A reply of another replica that this one ended (the turn of a replica that stopped):
    /// told to every replica, whichever watches.
    pub fn finish_everywhere(&self, session_id: &str, message_id: &str, event: StreamEvent) {
        self.finish_with(session_id, message_id, event, true);
    }

    fn finish_with(&self, session_id: &str, message_id: &str, event: StreamEvent, all: bool) {
        self.with_sessions(|s| {
            let watched = s.get(session_id).is_some_and(|c| !c.watchers.is_empty());
            if all || watched {
                self.publish(Relayed::Finish {
                    s: session_id.to_string(),
                    m: message_id.to_string(),
                    e: event.clone(),
                });
            }
            end(s, session_id, message_id, event);
        });
    }

    /// What another replica told this one (`sender`: its replica id).
    pub fn apply(&self, sender: &str, message: Relayed) {
        if matches!(
            message,
            Relayed::AccountWatch { .. }
                | Relayed::AccountUnwatch { .. }
                | Relayed::AccountSession { .. }
                | Relayed::AccountEvent { .. }
                | Relayed::AccountUsage { .. }
        ) {
            return self.apply_account(sender, message);
        }
        if matches!(message, Relayed::AdminWatch | Relayed::AdminUnwatch) {
            return self.apply_admin(sender, &message);
        }
        if message == Relayed::Hello {
            // Every part forgets what the sender watched.
            self.apply_account(sender, Relayed::Hello);
            self.apply_admin(sender, &Relayed::Hello);
        }
        self.with_sessions(|map| match message {
            Relayed::Begin { s, m, i } => {
                if let Some(channel) = map.get_mut(&s).filter(|c| c.listened())
                    && channel.flight(&m).is_none()
                    && !channel.ended(&m)
                {
                    let flight = InFlight {
                        message_id: m,
                        key: i,
                        seq: 0,
                        content: String::new(),
                        owner: Some(sender.to_string()),
                        stale: false,
                        pieces: Vec::new(),
                        progress: None,
                        cancel: None,
                        generated: false,
                    };
                    channel.send(flight.started(&s));
                    channel.in_flight.push(flight);
                }
            }
            Relayed::Delta { s, m, q, c } => {
                let Some(channel) = map.get_mut(&s) else {
                    return;
                };
                let Some(flight) = channel.flight(&m).filter(|f| !f.here() && f.seq == q) else {
                    // Unknown, or not the next piece (one seen already; one after a gap comes
                    // again when the owner replays the reply).
                    return;
                };
                // Back after the relay was lost: the listeners told of it get the state first.
                let revived = std::mem::take(&mut flight.stale).then(|| flight.snapshot(&s));
                flight.seq += 1;
                flight.content.push_str(&c);
                if let Some(snapshot) = revived {
                    channel.send(snapshot);
                }
                channel.send(StreamEvent::Delta {
                    session_id: s,
                    message_id: m,
                    seq: q,
                    content: c,
                });
            }
            Relayed::Progress { s, m, r, t } => {
                let Some(channel) = map.get_mut(&s) else {
                    return;
                };
                let Some(flight) = channel.flight(&m).filter(|f| !f.here()) else {
                    return;
                };
                flight.progress = Some((r, t));
                if let Some(event) = flight.progress_event(&s) {
                    channel.send(event);
                }
            }
            Relayed::Cancel { s, m } => {
                if let Some(cancel) = map
                    .get_mut(&s)
                    .and_then(|c| c.flight(&m))
                    .and_then(|f| f.cancel.as_ref())
                {
                    let _ = cancel.send(true);
                }
            }
            Relayed::Finish { s, m, e } => end(map, &s, &m, e),
            Relayed::Watch { s } => {
                let channel = map.entry(s.clone()).or_insert_with(SessionChannel::new);
                channel.watchers.insert(sender.to_string());
                for flight in channel.in_flight.iter().filter(|f| f.here()) {
                    self.publish(Relayed::Begin {
                        s: s.clone(),
                        m: flight.message_id.clone(),
                        i: flight.key.clone(),
                    });
                    let mut start = 0;
                    for (q, &end) in flight.pieces.iter().enumerate() {
                        self.publish(Relayed::Delta {
                            s: s.clone(),
                            m: flight.message_id.clone(),
                            q: q as u64,
                            c: flight.content[start..end].to_string(),
                        });
                        start = end;
                    }
                    if let Some((r, t)) = flight.progress.filter(|_| flight.content.is_empty()) {
                        self.publish(Relayed::Progress {
                            s: s.clone(),
                            m: flight.message_id.clone(),
                            r,
                            t,
                        });
                    }
                }
            }
            Relayed::Unwatch { s } => {
                if let Some(channel) = map.get_mut(&s) {
                    channel.watchers.remove(sender);
                    if channel.idle() {
                        map.remove(&s);
                    }
                }
            }
            Relayed::Hello => {
                // It forgot who watches what: tell it again.
                for (s, channel) in map.iter_mut() {
                    channel.watchers.remove(sender);
                    if channel.listened() {
                        self.publish(Relayed::Watch { s: s.clone() });
                    }
                }
                map.retain(|_, c| !c.idle());
            }
            Relayed::AccountWatch { .. }
            | Relayed::AccountUnwatch { .. }
            | Relayed::AccountSession { .. }
            | Relayed::AccountEvent { .. }
            | Relayed::AccountUsage { .. }
            | Relayed::AdminWatch
            | Relayed::AdminUnwatch
            | Relayed::Unknown => {}
        });
    }

    /// Subscribes to a session: snapshots and the receiver are taken under one lock, so the
    /// first delta received for a reply carries exactly its snapshot's seq. A relayed reply
    /// whose news the relay lost comes with its `relay_unavailable` error after its snapshot.
    pub fn subscribe(&self, session_id: &str) -> Subscription {
        self.with_sessions(|s| {
            let channel = s
                .entry(session_id.to_string())
                .or_insert_with(SessionChannel::new);
            if !channel.listened() && !std::mem::take(&mut channel.announced) {
                self.publish(Relayed::Watch {
                    s: session_id.to_string(),
                });
            }
            let mut snapshots = Vec::new();
            for f in &channel.in_flight {
                snapshots.push(f.started(session_id));
                snapshots.push(f.snapshot(session_id));
                snapshots.extend(f.progress_event(session_id));
                if f.stale {
                    snapshots.push(error_event(
                        session_id,
                        &f.message_id,
                        RELAY_UNAVAILABLE,
                        RELAY_UNAVAILABLE_MESSAGE,
                    ));
                }
            }
            Subscription {
                snapshots,
                events: channel
                    .tx
                    .get_or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0)
                    .subscribe(),
            }
        })
    }

    /// Before a listener's handshake is answered: when this replica has no listener on the
    /// session yet, the other replicas are told (and this resolves once they were), so that
    /// a reply they start after the handshake is relayed from its first piece.
    pub async fn announce(&self, session_id: &str) {
        let told = self.with_sessions(|s| {
            self.relay.get()?;
            let channel = s
                .entry(session_id.to_string())
                .or_insert_with(SessionChannel::new);
            if channel.listened() {
                return None;
            }
            channel.announced = true;
            self.publish(Relayed::Watch {
                s: session_id.to_string(),
            });
            self.flushed()
        });
        if let Some(told) = told {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), told).await;
        }
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

    /// A listener left (after dropping its receiver): when it was the last one here, the
    /// other replicas stop relaying the session to this one, and idle sessions are forgotten.
    pub fn release(&self, session_id: &str) {
        self.with_sessions(|s| {
            let Some(channel) = s.get_mut(session_id) else {
                return;
            };
            if !channel.listened() {
                channel.in_flight.retain(InFlight::here);
                self.publish(Relayed::Unwatch {
                    s: session_id.to_string(),
                });
            }
            if channel.idle() {
                s.remove(session_id);
            }
        });
    }

    /// The replies in flight in a session, each with whether it is generated here.
    pub fn replies_in_flight(&self, session_id: &str) -> Vec<(String, bool)> {
        self.with_sessions(|s| {
            s.get(session_id).map_or_else(Vec::new, |c| {
                c.in_flight
                    .iter()
                    .map(|f| (f.message_id.clone(), f.here()))
                    .collect()
            })
        })
    }

    /// The relay lost its connection: nothing can be relayed either way until it is back.
    /// The listeners of replies generated elsewhere get a `relay_unavailable` error (once
    /// per reply); what other replicas watched is forgotten (they say it again on `Hello`).
    pub fn relay_lost(&self) {
        self.with_sessions(|map| {
            for (s, channel) in map.iter_mut() {
                channel.watchers.clear();
                if !channel.listened() {
                    channel.in_flight.retain(InFlight::here);
                    continue;
                }
                let mut told = Vec::new();
                for f in channel
                    .in_flight
                    .iter_mut()
                    .filter(|f| !f.here() && !f.stale)
                {
                    f.stale = true;
                    told.push(error_event(
                        s,
                        &f.message_id,
                        RELAY_UNAVAILABLE,
                        RELAY_UNAVAILABLE_MESSAGE,
                    ));
                }
                for event in told {
                    channel.send(event);
                }
            }
            map.retain(|_, c| !c.idle());
        });
        self.with_accounts(|map| {
            for channel in map.values_mut() {
                channel.watchers.clear();
            }
            map.retain(|_, c| !c.idle());
        });
        self.admin_relay(false);
    }

    /// The relay is back: it says `Hello`, then watches every session and account listened
    /// to here; the account listeners here resync (what changed meanwhile was not relayed).
    pub fn relay_back(&self) {
        self.with_sessions(|map| {
            self.publish(Relayed::Hello);
            for (s, channel) in map.iter() {
                if channel.listened() {
                    self.publish(Relayed::Watch { s: s.clone() });
                }
            }
        });
        self.with_accounts(|map| {
            for (a, channel) in map.iter() {
                if channel.listened() {
                    self.publish(Relayed::AccountWatch { a: *a });
                    channel.send(AccountSignal::Resync);
                }
            }
        });
        self.admin_relay(true);
    }

    /// Sessions with a listener here.
    pub fn listened_sessions(&self) -> Vec<String> {
        self.with_sessions(|map| {
            map.iter()
                .filter(|(_, c)| c.listened())
                .map(|(s, _)| s.clone())
                .collect()
        })
    }

    /// Replies generated elsewhere that listeners here follow (of `owner` only, if given).
    pub fn remote_replies(&self, owner: Option<&str>) -> Vec<RemoteReply> {
        self.with_sessions(|map| {
            let mut replies = Vec::new();
            for (s, channel) in map.iter() {
                for f in &channel.in_flight {
                    if f.owner.is_some() && (owner.is_none() || f.owner.as_deref() == owner) {
                        replies.push(RemoteReply {
                            session_id: s.clone(),
                            message_id: f.message_id.clone(),
                        });
                    }
                }
            }
            replies
        })
    }

    /// Ends of replies learnt from the database (after the relay was lost): each reaches the
    /// listeners unless it already did, or the reply is generated here (it ends by itself).
    pub fn settle(&self, ends: Vec<StreamEvent>) {
        self.with_sessions(|map| {
            for event in ends {
                let (s, m) = match &event {
                    StreamEvent::Done { message } => {
                        (message.session_id.clone(), message.message_id.clone())
                    }
                    StreamEvent::Error {
                        session_id,
                        message_id,
                        ..
                    } => (session_id.clone(), message_id.clone()),
                    _ => continue,
                };
                let Some(channel) = map.get_mut(&s) else {
                    continue;
                };
                if channel.flight(&m).is_some_and(|f| f.here()) {
                    continue;
                }
                end(map, &s, &m, event);
            }
        });
    }

    /// Forgets watchers that are not live replicas any more (their lease is gone), and idle
    /// sessions; one announced for a listener that never came is unwatched.
    pub fn keep_watchers(&self, live: &HashSet<String>) {
        self.with_accounts(|map| {
            for channel in map.values_mut() {
                channel.watchers.retain(|w| live.contains(w));
            }
            map.retain(|_, c| !c.idle());
        });
        self.keep_admin_watchers(live);
        self.with_sessions(|map| {
            for channel in map.values_mut() {
                channel.watchers.retain(|w| live.contains(w));
            }
            map.retain(|s, c| {
                if c.idle() && c.announced {
                    self.publish(Relayed::Unwatch { s: s.clone() });
                }
                !c.idle()
            });
        });
    }

    /// True when the session has a listener now.
    pub fn has_listeners(&self, session_id: &str) -> bool {
        self.with_sessions(|s| s.get(session_id).is_some_and(SessionChannel::listened))
    }

    /// WebSocket listeners here now: of session streams, of account streams, of the admin
    /// stream (`/metrics`).
    pub fn listeners(&self) -> (usize, usize, usize) {
        let sessions = self.with_sessions(|s| {
            s.values()
                .filter_map(|c| c.tx.as_ref())
                .map(|tx| tx.receiver_count())
                .sum()
        });
        let accounts = self.with_accounts(|a| a.values().map(|c| c.tx.receiver_count()).sum());
        (sessions, accounts, self.with_admin(|a| a.listeners()))
    }

    /// Number of sessions with listeners or replies in flight (for tests and logs).
    pub fn active_sessions(&self) -> usize {
        self.with_sessions(|s| s.len())
    }
}

/// A reply ends with `event`: its listeners get it once (a second end of the same reply, from
/// the relay and from the database, is dropped).
fn end(
    map: &mut HashMap<String, SessionChannel>,
    session_id: &str,
    message_id: &str,
    event: StreamEvent,
) {
    let Some(channel) = map.get_mut(session_id) else {
        return;
    };
    // A reply followed from another replica whose last pieces never reached this one (they
    // were sent while the relay was healing): its listeners get the whole text before the end,
    // so that what they rebuilt is what was stored.
    let catch_up = match &event {
        StreamEvent::Done { message } => channel
            .in_flight
            .iter()
            .find(|f| f.message_id == message_id && !f.here() && f.content != message.content)
            .map(|f| StreamEvent::Snapshot {
                session_id: session_id.to_string(),
                message_id: message_id.to_string(),
                seq: f.seq,
                content: message.content.clone(),
            }),
        _ => None,
    };
    let before = channel.in_flight.len();
    channel.in_flight.retain(|f| f.message_id != message_id);
    if channel.in_flight.len() == before && channel.ended(message_id) {
        return;
    }
    if let Some(snapshot) = catch_up {
        channel.send(snapshot);
    }
    channel.send(event.clone());
    channel.recent.push_back(event);
    if channel.recent.len() > RECENT_TERMINALS {
        channel.recent.pop_front();
    }
    if channel.idle() {
        map.remove(session_id);
    }
}

/// The message id an event is about.
pub fn event_message_id(event: &StreamEvent) -> &str {
    match event {
        StreamEvent::Started { message_id, .. }
        | StreamEvent::Delta { message_id, .. }
        | StreamEvent::Error { message_id, .. }
        | StreamEvent::Snapshot { message_id, .. }
        | StreamEvent::Progress { message_id, .. } => message_id,
        StreamEvent::Done { message } => &message.message_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reaches_listeners_and_late_subscribers_until_text_comes() {
        let hub = StreamHub::default();
        let _cancel = hub.begin("s", "m", None);
        let mut early = hub.subscribe("s");
        hub.progress("s", "m", 512, 1100);
        assert_eq!(
            early.events.try_recv().unwrap(),
            StreamEvent::Progress {
                session_id: "s".into(),
                message_id: "m".into(),
                prompt_tokens: 512,
                prompt_total: 1100
            }
        );
        let late = hub.subscribe("s");
        assert_eq!(late.snapshots.len(), 3);
        assert!(matches!(
            late.snapshots[2],
            StreamEvent::Progress {
                prompt_tokens: 512,
                ..
            }
        ));
        hub.delta("s", "m", "Hi");
        // Once text came, progress is over: a new listener gets the start and snapshot alone.
        assert_eq!(hub.subscribe("s").snapshots.len(), 2);
    }

    #[test]
    fn a_cancel_after_the_engine_finished_finds_the_reply_ended() {
        let hub = StreamHub::default();
        let cancelled = hub.begin("s", "m", None);
        assert!(!hub.generated("s", "m"), "no cancel came first");
        assert_eq!(hub.cancel("s", "m"), Cancel::Finished);
        assert!(!*cancelled.borrow(), "the turn is not asked to stop");

        // A cancel that came before the engine finished is still the turn's to honour.
        let _cancelled = hub.begin("s", "n", None);
        assert_eq!(hub.cancel("s", "n"), Cancel::Here);
        assert!(hub.generated("s", "n"));
        assert_eq!(hub.cancel("s", "n"), Cancel::Finished);
        assert!(!hub.generated("s", "unknown"));
    }

    #[test]
    fn a_cancel_reaches_the_turn_here_or_is_relayed_to_the_replica_generating_it() {
        let hub = StreamHub::default();
        let cancelled = hub.begin("s", "m", None);
        assert_eq!(hub.cancel("s", "other"), Cancel::Unknown);
        assert!(!*cancelled.borrow());
        assert_eq!(hub.cancel("s", "m"), Cancel::Here);
        assert!(*cancelled.borrow());
        assert!(
            !hub.cancel_elsewhere("s", "m"),
            "no relay on a single service"
        );

        // A replica following another's reply relays the cancel; the owner's turn gets it.
        let follower = StreamHub::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        follower.relay_to(tx);
        let _listener = follower.subscribe("s2");
        follower.apply(
            "owner",
            Relayed::Begin {
                s: "s2".into(),
                m: "r".into(),
                i: None,
            },
        );
        assert_eq!(follower.cancel("s2", "r"), Cancel::Relayed);
        let sent = published(&mut rx);
        assert!(sent.contains(&Relayed::Cancel {
            s: "s2".into(),
            m: "r".into()
        }));
        let owner = StreamHub::default();
        let owner_cancelled = owner.begin("s2", "r", None);
        owner.apply(
            "follower",
            Relayed::Cancel {
                s: "s2".into(),
                m: "r".into(),
            },
        );
        assert!(*owner_cancelled.borrow());
    }

    #[test]
    fn a_late_subscriber_gets_a_snapshot_then_the_rest() {
        let hub = StreamHub::default();
        hub.begin("s", "m", Some("key-1"));
        assert_eq!(hub.delta("s", "m", "Hello "), 0);
        assert_eq!(hub.delta("s", "m", "big "), 1);
        let mut sub = hub.subscribe("s");
        assert_eq!(
            sub.snapshots,
            vec![
                StreamEvent::Started {
                    session_id: "s".into(),
                    message_id: "m".into(),
                    idempotency_key: Some("key-1".into()),
                },
                StreamEvent::Snapshot {
                    session_id: "s".into(),
                    message_id: "m".into(),
                    seq: 2,
                    content: "Hello big ".into()
                }
            ]
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
                error: convo_wire::ErrorBody::new("engine_error", "x"),
            },
        );
        assert_eq!(hub.active_sessions(), 0);
    }

    /// Every reply a listener hears of begins with its `started`, naming the key of the POST
    /// that started it: at the turn's start here, and from another replica through the relay.
    #[test]
    fn a_reply_begins_with_its_started_event_here_and_relayed() {
        let hub = StreamHub::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        let mut sub = hub.subscribe("s");
        hub.apply("other", Relayed::Watch { s: "s".into() });
        published(&mut rx);
        hub.begin("s", "m", Some("key-1"));
        assert_eq!(
            sub.events.try_recv().unwrap(),
            StreamEvent::Started {
                session_id: "s".into(),
                message_id: "m".into(),
                idempotency_key: Some("key-1".into()),
            }
        );
        assert_eq!(
            published(&mut rx),
            vec![Relayed::Begin {
                s: "s".into(),
                m: "m".into(),
                i: Some("key-1".into()),
            }]
        );
        hub.apply(
            "other",
            Relayed::Begin {
                s: "s".into(),
                m: "theirs".into(),
                i: Some("key-2".into()),
            },
        );
        assert_eq!(
            sub.events.try_recv().unwrap(),
            StreamEvent::Started {
                session_id: "s".into(),
                message_id: "theirs".into(),
                idempotency_key: Some("key-2".into()),
            }
        );
        // A begin of an older build's replica (no key) still reads.
        let old: Relayed = serde_json::from_str(r#"{"k":"begin","s":"s","m":"old"}"#).unwrap();
        assert_eq!(
            old,
            Relayed::Begin {
                s: "s".into(),
                m: "old".into(),
                i: None,
            }
        );
    }

    #[test]
    fn a_lagging_listener_is_resynced_with_terminals_and_snapshots() {
        let hub = StreamHub::default();
        let mut sub = hub.subscribe("s");
        hub.begin("s", "ended", None);
        hub.begin("s", "running", None);
        for i in 0..CHANNEL_CAPACITY + 10 {
            hub.delta("s", "running", &format!("{i} "));
        }
        hub.delta("s", "ended", "x");
        let done = StreamEvent::Done {
            message: convo_wire::Message {
                message_id: "ended".into(),
                session_id: "s".into(),
                role: convo_wire::Role::Assistant,
                content: "x".into(),
                tokens: 1,
                created_at: "2026-11-22T00:00:00.000Z".into(),
                finish_reason: None,
            },
        };
        hub.finish("s", "ended", done.clone());
        assert!(matches!(
            sub.events.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(_))
        ));
        let mut open: HashSet<String> = ["ended".to_string(), "running".to_string()].into();
        let mut fresh = hub.resync("s", &mut open);
        assert_eq!(fresh.snapshots.len(), 3);
        assert_eq!(fresh.snapshots[0], done);
        assert!(matches!(
            &fresh.snapshots[1],
            StreamEvent::Started { message_id, .. } if message_id == "running"
        ));
        match &fresh.snapshots[2] {
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

    fn published(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Vec<Relayed> {
        let mut out = Vec::new();
        while let Ok(o) = rx.try_recv() {
            if let Outgoing::Publish(m) = o {
                out.push(m);
            }
        }
        out
    }

    fn done(session: &str, id: &str, content: &str) -> StreamEvent {
        StreamEvent::Done {
            message: convo_wire::Message {
                message_id: id.into(),
                session_id: session.into(),
                role: convo_wire::Role::Assistant,
                content: content.into(),
                tokens: 1,
                created_at: "2026-11-22T00:00:00.000Z".into(),
                finish_reason: None,
            },
        }
    }

    #[test]
    fn replies_are_relayed_only_while_another_replica_watches() {
        let hub = StreamHub::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        hub.begin("s", "m", None);
        hub.delta("s", "m", "one ");
        assert_eq!(published(&mut rx), vec![], "nobody watches");
        hub.apply("b", Relayed::Watch { s: "s".into() });
        // A new watcher gets the reply replayed from its start.
        assert_eq!(
            published(&mut rx),
            vec![
                Relayed::Begin {
                    s: "s".into(),
                    m: "m".into(),
                    i: None,
                },
                Relayed::Delta {
                    s: "s".into(),
                    m: "m".into(),
                    q: 0,
                    c: "one ".into()
                }
            ]
        );
        hub.delta("s", "m", "two");
        assert_eq!(
            published(&mut rx),
            vec![Relayed::Delta {
                s: "s".into(),
                m: "m".into(),
                q: 1,
                c: "two".into()
            }]
        );
        hub.apply("b", Relayed::Unwatch { s: "s".into() });
        hub.delta("s", "m", " three");
        hub.finish("s", "m", done("s", "m", "one two three"));
        assert_eq!(published(&mut rx), vec![], "nobody watches any more");
        assert_eq!(hub.active_sessions(), 0);
    }

    #[test]
    fn a_relayed_reply_lost_with_the_relay_gets_an_error_then_comes_back_once() {
        let hub = StreamHub::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        let mut sub = hub.subscribe("s");
        assert_eq!(published(&mut rx), vec![Relayed::Watch { s: "s".into() }]);
        hub.apply(
            "a",
            Relayed::Begin {
                s: "s".into(),
                m: "m".into(),
                i: None,
            },
        );
        hub.apply(
            "a",
            Relayed::Delta {
                s: "s".into(),
                m: "m".into(),
                q: 0,
                c: "one ".into(),
            },
        );
        assert!(matches!(
            sub.events.try_recv(),
            Ok(StreamEvent::Started { .. })
        ));
        assert!(matches!(
            sub.events.try_recv(),
            Ok(StreamEvent::Delta { seq: 0, .. })
        ));
        hub.relay_lost();
        match sub.events.try_recv() {
            Ok(StreamEvent::Error { error, .. }) => assert_eq!(error.code, RELAY_UNAVAILABLE),
            other => panic!("unexpected {other:?}"),
        }
        // A listener connecting meanwhile is told too.
        let late = hub.subscribe("s");
        assert!(matches!(
            &late.snapshots[..],
            [
                StreamEvent::Started { .. },
                StreamEvent::Snapshot { seq: 1, .. },
                StreamEvent::Error { .. }
            ]
        ));
        drop(late);
        hub.relay_back();
        assert_eq!(
            published(&mut rx),
            vec![Relayed::Hello, Relayed::Watch { s: "s".into() }]
        );
        assert_eq!(
            hub.remote_replies(Some("a")),
            vec![RemoteReply {
                session_id: "s".into(),
                message_id: "m".into()
            }]
        );
        // The owner replays it: pieces already seen change nothing; the first new one
        // revives it with a snapshot, then goes on.
        let delta = |q: u64, c: &str| Relayed::Delta {
            s: "s".into(),
            m: "m".into(),
            q,
            c: c.into(),
        };
        hub.apply(
            "a",
            Relayed::Begin {
                s: "s".into(),
                m: "m".into(),
                i: None,
            },
        );
        for (q, c) in ["one ", "two ", "three "].into_iter().enumerate() {
            hub.apply("a", delta(q as u64, c));
        }
        match sub.events.try_recv() {
            Ok(StreamEvent::Snapshot {
                seq: 1, content, ..
            }) => assert_eq!(content, "one "),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            sub.events.try_recv(),
            Ok(StreamEvent::Delta { seq: 1, .. })
        ));
        assert!(matches!(
            sub.events.try_recv(),
            Ok(StreamEvent::Delta { seq: 2, .. })
        ));
        assert!(sub.events.try_recv().is_err());
        // Its end, from the database and from the relay, reaches the listener once.
        hub.settle(vec![done("s", "m", "one two three four")]);
        hub.apply(
            "a",
            Relayed::Finish {
                s: "s".into(),
                m: "m".into(),
                e: done("s", "m", "one two three four"),
            },
        );
        // The last piece ("four") was never relayed: the whole text comes before the end.
        match sub.events.try_recv() {
            Ok(StreamEvent::Snapshot {
                seq: 3, content, ..
            }) => assert_eq!(content, "one two three four"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            sub.events.try_recv(),
            Ok(StreamEvent::Done { .. })
        ));
        assert!(sub.events.try_recv().is_err());
    }

    #[test]
    fn settling_leaves_replies_generated_here_to_end_by_themselves() {
        let hub = StreamHub::default();
        let mut sub = hub.subscribe("s");
        hub.begin("s", "mine", None);
        assert!(matches!(
            sub.events.try_recv(),
            Ok(StreamEvent::Started { .. })
        ));
        hub.settle(vec![done("s", "mine", "x")]);
        assert!(sub.events.try_recv().is_err());
        assert_eq!(hub.replies_in_flight("s"), vec![("mine".to_string(), true)]);
        hub.finish("s", "mine", done("s", "mine", "x"));
        assert!(matches!(
            sub.events.try_recv(),
            Ok(StreamEvent::Done { .. })
        ));
    }

    #[tokio::test]
    async fn a_listener_announced_but_never_subscribed_is_unwatched_by_the_next_sweep() {
        let hub = std::sync::Arc::new(StreamHub::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        let announcing = tokio::spawn({
            let hub = hub.clone();
            async move { hub.announce("s").await }
        });
        assert!(matches!(
            rx.recv().await,
            Some(Outgoing::Publish(Relayed::Watch { .. }))
        ));
        match rx.recv().await {
            Some(Outgoing::Flush(done)) => done.send(()).unwrap(),
            other => panic!("unexpected {other:?}"),
        }
        announcing.await.unwrap();
        // The handshake failed: no subscribe. The next sweep tells the others.
        hub.keep_watchers(&HashSet::new());
        assert_eq!(published(&mut rx), vec![Relayed::Unwatch { s: "s".into() }]);
        assert_eq!(hub.active_sessions(), 0);
        // A listener that did subscribe is not unwatched.
        let kept = hub.subscribe("t");
        hub.keep_watchers(&HashSet::new());
        assert_eq!(published(&mut rx), vec![Relayed::Watch { s: "t".into() }]);
        drop(kept);
    }

    fn changed(id: &str) -> AccountSignal {
        AccountSignal::Session {
            session_id: id.into(),
            change: Change::Updated(SessionChange::Title),
        }
    }

    fn relayed(account: i64, id: &str) -> Relayed {
        Relayed::AccountSession {
            a: account,
            s: id.into(),
            c: Change::Updated(SessionChange::Title),
        }
    }

    #[test]
    fn account_changes_reach_listeners_here_and_replicas_that_watch() {
        let title = Change::Updated(SessionChange::Title);
        let hub = StreamHub::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        assert!(!hub.account_watched(7));
        hub.session_changed(7, "s", title);
        hub.usage_changed(7);
        assert_eq!(published(&mut rx), vec![], "nobody listens anywhere");

        let mut listener = hub.subscribe_account(7);
        assert_eq!(published(&mut rx), vec![Relayed::AccountWatch { a: 7 }]);
        assert!(hub.account_watched(7));
        hub.session_changed(7, "s", title);
        hub.usage_changed(7);
        assert_eq!(listener.try_recv().unwrap(), changed("s"));
        assert_eq!(listener.try_recv().unwrap(), AccountSignal::Usage);
        assert_eq!(published(&mut rx), vec![], "no other replica watches");

        // Another replica watches: its changes reach the listener, ours reach it.
        hub.apply("b", Relayed::AccountWatch { a: 7 });
        hub.apply("b", relayed(7, "t"));
        assert_eq!(listener.try_recv().unwrap(), changed("t"));
        hub.session_changed(7, "u", title);
        let _ = listener.try_recv();
        assert_eq!(published(&mut rx), vec![relayed(7, "u")]);
        // A replica of an older build sends its events as it read them: told as they are.
        let deleted = AccountEvent::SessionDeleted {
            session_id: "w".into(),
        };
        hub.apply(
            "b",
            Relayed::AccountEvent {
                a: 7,
                e: deleted.clone(),
            },
        );
        assert_eq!(
            listener.try_recv().unwrap(),
            AccountSignal::Event(Box::new(deleted))
        );
        // Other accounts are nobody's business.
        hub.session_changed(8, "v", title);
        assert!(listener.try_recv().is_err());
        assert_eq!(published(&mut rx), vec![]);

        // The last listener here leaves: the others stop relaying to us; b still watches.
        drop(listener);
        hub.release_account(7);
        assert_eq!(published(&mut rx), vec![Relayed::AccountUnwatch { a: 7 }]);
        assert!(hub.account_watched(7));
        hub.apply("b", Relayed::AccountUnwatch { a: 7 });
        assert!(!hub.account_watched(7));
    }

    #[test]
    fn a_relayed_message_of_a_newer_build_is_skipped_and_the_rest_read() {
        let batch: Vec<Relayed> = serde_json::from_str(
            r#"[{"k":"account_moved","a":7,"to":"x"},{"k":"account_session","a":7,"s":"t","c":{"updated":"title"}},{"k":"hello"}]"#,
        )
        .unwrap();
        assert_eq!(
            batch,
            vec![Relayed::Unknown, relayed(7, "t"), Relayed::Hello]
        );
        let json = serde_json::to_string(&relayed(7, "t")).unwrap();
        assert_eq!(
            serde_json::from_str::<Relayed>(&json).unwrap(),
            relayed(7, "t")
        );
    }

    #[test]
    fn after_the_relay_heals_account_listeners_resync_and_watch_again() {
        let hub = StreamHub::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        let mut listener = hub.subscribe_account(7);
        hub.apply("b", Relayed::AccountWatch { a: 9 });
        let _ = published(&mut rx);
        hub.relay_lost();
        assert!(!hub.account_watched(9), "b says again what it watches");
        hub.relay_back();
        assert_eq!(
            published(&mut rx),
            vec![Relayed::Hello, Relayed::AccountWatch { a: 7 }]
        );
        assert_eq!(listener.try_recv().unwrap(), AccountSignal::Resync);
        // Another replica's relay came back: it is told again what is listened to here.
        hub.apply("c", Relayed::AccountWatch { a: 7 });
        hub.apply("c", Relayed::Hello);
        assert_eq!(published(&mut rx), vec![Relayed::AccountWatch { a: 7 }]);
        hub.keep_watchers(&HashSet::new());
        drop(listener);
        hub.release_account(7);
        assert!(!hub.account_watched(7));
    }
}
