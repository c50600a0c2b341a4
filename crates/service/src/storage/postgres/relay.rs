//! Streaming across replicas: the replicas' hubs (`stream::StreamHub`) tell each other what
//! they watch and what happens to the replies others watch (`stream::Relayed`) with
//! PostgreSQL's `NOTIFY`, so a listener on any replica gets every reply of the session, with
//! the snapshot on a mid-reply connect as on one replica.
//!
//! One connection per replica both `LISTEN`s and publishes, in order (`NOTIFY`s of one
//! session arrive in the order sent), as many messages per notification as fit; a payload is
//! at most `MAX_PAYLOAD` bytes (PostgreSQL refuses 8,000 and more), so a longer batch is cut
//! into numbered parts that the receivers join again (parts of one sender are never
//! interleaved: one connection sends them in turn).
//!
//! **The relay heals.** When its connection fails (PostgreSQL restarts, the network cuts or
//! holds it: a probe every `PROBE_EVERY` must answer within `PROBE_TIMEOUT`), the hub is told
//! (`relay_lost`: listeners of replies generated elsewhere get a `relay_unavailable` error)
//! and the relay reconnects with backoff (`RETRY_FIRST` doubling to `RETRY_MAX`, each
//! attempt logged). Back, it says `Hello` and watches its listened sessions again, so the
//! others replay their replies in flight (a listener told of the loss gets a `snapshot`, then
//! the deltas), and settles from the database what it
//! missed: a followed reply that ended meanwhile gets its `done` (the stored reply) or
//! `error` (rolled back), and a reply that began and ended during the outage in a listened
//! session its `done`. A replica that hears another's `Hello` settles the replies of that
//! replica the same way (their ends could not be relayed while it was away), and at every
//! probe the replies followed here are settled too, so an end the relay could not carry is
//! found in the database within `PROBE_EVERY`.
//!
//! The account stream (`GET /v1/stream`) rides the same relay: a replica with a listener on
//! an account's stream watches it (`Relayed::AccountWatch`), and the changes made elsewhere
//! reach it as `AccountSession`/`AccountUsage` messages. Nothing of an account stream is
//! settled from the database after a heal: the hub tells each account listener to resync,
//! and it sends a fresh `hello` read from the database.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::error::StoreError;
use crate::stream::{Outgoing, Relayed, RemoteReply, StreamHub};
use crate::time;
use convo_wire::{ErrorBody, Message, Role, StreamEvent};

/// The notification channel.
const CHANNEL: &str = "convo_stream";
/// Bytes of one notification's payload (PostgreSQL's limit is 8,000, header included).
pub const MAX_PAYLOAD: usize = 7_800;
/// Most messages gathered into one batch.
const MAX_BATCH: usize = 256;
/// A connection attempt (TCP and PostgreSQL's start-up) that takes longer has failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the connection is probed, and how long the probe (or a publication) may take.
const PROBE_EVERY: Duration = Duration::from_secs(5);
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// The first pause between reconnection attempts, doubled up to `RETRY_MAX`.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// A reply stored with a start time this much before the relay was lost is looked at when
/// settling (replicas' clocks differ a little).
const CLOCK_SKEW_MS: i64 = 2_000;

/// The relay's task; stopped with the service.
pub struct Relay {
    task: JoinHandle<()>,
    /// Tells the task to send what is queued and stop.
    stop: Option<oneshot::Sender<()>>,
    connected: Arc<AtomicBool>,
    /// The round trip of the last probe, in microseconds (`/metrics`: the relay's lag).
    probe_micros: Arc<AtomicU64>,
}

impl Relay {
    /// Connects and starts listening (before it returns, so nothing published after is
    /// missed), then relays this hub's messages; `me` is this replica's id.
    pub async fn start(
        config: tokio_postgres::Config,
        me: String,
        hub: Arc<StreamHub>,
    ) -> Result<Relay, StoreError> {
        let link = Link::connect(&config).await.map_err(|e| match e {
            LinkError::Postgres(e) => StoreError::Postgres(e),
            LinkError::TimedOut => StoreError::Config(format!(
                "PostgreSQL did not answer the stream relay's connection within {CONNECT_TIMEOUT:?}"
            )),
        })?;
        let (tx, rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        let (stop, stopped) = oneshot::channel();
        let connected = Arc::new(AtomicBool::new(true));
        let probe_micros = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(
            Relaying {
                config,
                me,
                hub,
                rx,
                stopped,
                connected: connected.clone(),
                probe_micros: probe_micros.clone(),
            }
            .run(link),
        );
        Ok(Relay {
            task,
            stop: Some(stop),
            connected,
            probe_micros,
        })
    }

    /// How long the last probe of the relay's connection took to answer (every
    /// `PROBE_EVERY`; zero before the first): what a message waits on PostgreSQL's side.
    pub fn probe_seconds(&self) -> f64 {
        self.probe_micros.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Whether the relay's connection is up now (readiness).
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// Sends what is queued, then stops (at shutdown, after the last replies ended).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.task).await;
        self.task.abort();
    }
}

/// A batch as one or more payloads: `SENDER PART/PARTS JSON-PIECE`.
pub fn payloads(me: &str, batch: &[Relayed]) -> Vec<String> {
    let json = serde_json::to_string(batch).unwrap_or_else(|_| "[]".into());
    let room = MAX_PAYLOAD - me.len() - 24;
    let mut pieces = Vec::new();
    let mut rest = json.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(room);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    let n = pieces.len();
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| format!("{me} {}/{n} {piece}", i + 1))
        .collect()
}

/// Joins the parts of each sender's payloads back into batches.
#[derive(Default)]
pub struct Joiner {
    partial: HashMap<String, String>,
}

impl Joiner {
    /// The sender and messages of a complete batch, once its last part arrived; `None` for
    /// our own payloads, earlier parts, or malformed ones.
    pub fn push(&mut self, me: &str, payload: &str) -> Option<(String, Vec<Relayed>)> {
        let (sender, rest) = payload.split_once(' ')?;
        if sender == me {
            return None;
        }
        let (part, piece) = rest.split_once(' ')?;
        let (i, n) = part.split_once('/')?;
        let (i, n): (usize, usize) = (i.parse().ok()?, n.parse().ok()?);
        let buffer = self.partial.entry(sender.to_string()).or_default();
        if i == 1 {
            buffer.clear();
        }
        buffer.push_str(piece);
        if i < n {
            return None;
        }
        let json = self.partial.remove(sender)?;
        match serde_json::from_str(&json) {
            Ok(messages) => Some((sender.to_string(), messages)),
            Err(e) => {
                tracing::warn!(error = %e, "an unreadable stream relay payload was dropped");
                None
            }
        }
    }
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error(transparent)]
    Postgres(#[from] tokio_postgres::Error),
    #[error("no answer within {CONNECT_TIMEOUT:?}")]
    TimedOut,
}

/// One connection: `LISTEN`ing, and publishing.
struct Link {
    client: tokio_postgres::Client,
    notify: tokio_postgres::Statement,
    /// Payloads received; closed when the connection ends.
    notifications: mpsc::UnboundedReceiver<String>,
    _driver: AbortOnDrop,
}

impl Link {
    async fn connect(config: &tokio_postgres::Config) -> Result<Link, LinkError> {
        let connecting = async {
            let (client, mut connection) = config.connect(NoTls).await?;
            let (tx, notifications) = mpsc::unbounded_channel();
            // The connection's messages must be polled for the client to work at all.
            let driver = tokio::spawn(async move {
                let mut messages =
                    futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                while let Some(message) = messages.next().await {
                    match message {
                        Ok(AsyncMessage::Notification(n)) => {
                            if tx.send(n.payload().to_string()).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "the stream relay's connection failed");
                            return;
                        }
                    }
                }
            });
            let driver = AbortOnDrop(driver);
            client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
            let notify = client
                .prepare(&format!("SELECT pg_notify('{CHANNEL}', $1)"))
                .await?;
            Ok::<_, LinkError>(Link {
                client,
                notify,
                notifications,
                _driver: driver,
            })
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
            Ok(result) => result,
            Err(_) => Err(LinkError::TimedOut),
        }
    }

    /// Publishes a batch; an error or a hold past `PROBE_TIMEOUT` means the link is lost.
    async fn publish(&self, me: &str, batch: &[Relayed]) -> Result<(), String> {
        for payload in payloads(me, batch) {
            match tokio::time::timeout(
                PROBE_TIMEOUT,
                self.client.execute(&self.notify, &[&payload]),
            )
            .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(format!("publishing failed: {e}")),
                Err(_) => return Err("publishing timed out".into()),
            }
        }
        Ok(())
    }

    async fn probe(&self) -> Result<(), String> {
        match tokio::time::timeout(PROBE_TIMEOUT, self.client.simple_query("SELECT 1")).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("the probe failed: {e}")),
            Err(_) => Err("the probe timed out".into()),
        }
    }
}

struct Relaying {
    config: tokio_postgres::Config,
    me: String,
    hub: Arc<StreamHub>,
    rx: mpsc::UnboundedReceiver<Outgoing>,
    stopped: oneshot::Receiver<()>,
    connected: Arc<AtomicBool>,
    probe_micros: Arc<AtomicU64>,
}

/// Why `serve` returned.
enum Ended {
    Stopped,
    Lost(String),
}

impl Relaying {
    async fn run(mut self, first: Link) {
        let mut link = first;
        let mut lost_at = None;
        loop {
            self.connected.store(true, Ordering::SeqCst);
            let ended = match lost_at.take() {
                Some(since) => match self.resync(&link, since).await {
                    Ok(()) => self.serve(&mut link).await,
                    Err(e) => Ended::Lost(e),
                },
                None => self.serve(&mut link).await,
            };
            let reason = match ended {
                Ended::Stopped => return,
                Ended::Lost(reason) => reason,
            };
            self.connected.store(false, Ordering::SeqCst);
            drop(link);
            self.hub.relay_lost();
            lost_at = Some(time::now_ms());
            tracing::error!(%reason, "the stream relay lost its connection; other replicas' replies are not relayed here until it is back");
            link = match self.reconnect().await {
                Some(link) => link,
                None => return,
            };
        }
    }

    /// Attempts to connect with backoff, logging each, until connected (`None`: stopped
    /// meanwhile). What the hub publishes meanwhile is dropped: `resync` replaces it.
    async fn reconnect(&mut self) -> Option<Link> {
        let mut pause = RETRY_FIRST;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match Link::connect(&self.config).await {
                Ok(link) => {
                    tracing::info!(attempt, "the stream relay reconnected");
                    self.discard_queued();
                    return Some(link);
                }
                Err(e) => tracing::warn!(
                    attempt,
                    retry_in_ms = pause.as_millis() as u64,
                    error = %e,
                    "the stream relay cannot reconnect yet"
                ),
            }
            let wait = tokio::time::sleep(pause);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    _ = &mut wait => break,
                    _ = &mut self.stopped => return None,
                    queued = self.rx.recv() => {
                        queued.as_ref()?;
                    }
                }
            }
            pause = (pause * 2).min(RETRY_MAX);
        }
    }

    fn discard_queued(&mut self) {
        while self.rx.try_recv().is_ok() {}
    }

    /// After a reconnection: `Hello`, the watches again, and what was missed, from the
    /// database.
    async fn resync(&mut self, link: &Link, lost_at: i64) -> Result<(), String> {
        self.hub.relay_back();
        let listened = self.hub.listened_sessions();
        let followed = self.hub.remote_replies(None);
        let ends = settle(&link.client, &followed, &listened, lost_at - CLOCK_SKEW_MS)
            .await
            .map_err(|e| format!("settling after the reconnection failed: {e}"))?;
        self.hub.settle(ends);
        Ok(())
    }

    async fn serve(&mut self, link: &mut Link) -> Ended {
        let mut joiner = Joiner::default();
        let mut probe = tokio::time::interval(PROBE_EVERY);
        probe.tick().await;
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                _ = &mut self.stopped => {
                    // Whatever is queued goes out, then the relay ends.
                    while let Ok(out) = self.rx.try_recv() {
                        if let Outgoing::Publish(message) = out {
                            batch.push(message);
                        }
                    }
                    if !batch.is_empty() {
                        let _ = link.publish(&self.me, &batch).await;
                    }
                    return Ended::Stopped;
                }
                payload = link.notifications.recv() => {
                    let Some(payload) = payload else {
                        return Ended::Lost("the connection closed".into());
                    };
                    let Some((sender, messages)) = joiner.push(&self.me, &payload) else {
                        continue;
                    };
                    let mut hello = false;
                    for message in messages {
                        hello |= message == Relayed::Hello;
                        self.hub.apply(&sender, message);
                    }
                    if hello {
                        // What that replica's relay could not tell while it was away.
                        let followed = self.hub.remote_replies(Some(&sender));
                        match settle(&link.client, &followed, &[], i64::MAX).await {
                            Ok(ends) => self.hub.settle(ends),
                            Err(e) => return Ended::Lost(format!("settling failed: {e}")),
                        }
                    }
                }
                out = self.rx.recv() => {
                    let Some(out) = out else { return Ended::Stopped };
                    let mut flushes = Vec::new();
                    let mut next = Some(out);
                    while let Some(out) = next {
                        match out {
                            Outgoing::Publish(message) => batch.push(message),
                            Outgoing::Flush(done) => flushes.push(done),
                        }
                        next = if batch.len() < MAX_BATCH { self.rx.try_recv().ok() } else { None };
                    }
                    if !batch.is_empty() {
                        if let Err(e) = link.publish(&self.me, &batch).await {
                            return Ended::Lost(e);
                        }
                        batch.clear();
                    }
                    for done in flushes {
                        let _ = done.send(());
                    }
                }
                _ = probe.tick() => {
                    let started = std::time::Instant::now();
                    if let Err(e) = link.probe().await {
                        return Ended::Lost(e);
                    }
                    let micros = started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
                    self.probe_micros.store(micros, Ordering::Relaxed);
                    // A safety net: an end the relay could not carry (its owner's relay was
                    // away when it ended) is found in the database.
                    let followed = self.hub.remote_replies(None);
                    match settle(&link.client, &followed, &[], i64::MAX).await {
                        Ok(ends) => self.hub.settle(ends),
                        Err(e) => return Ended::Lost(format!("settling failed: {e}")),
                    }
                }
            }
        }
    }
}

/// The ends of `followed` replies that are no longer in flight (their stored reply, or an
/// error when the turn was rolled back), and the stored replies of `listened` sessions that
/// started at `since` or later, in the order they were stored.
async fn settle(
    client: &tokio_postgres::Client,
    followed: &[RemoteReply],
    listened: &[String],
    since: i64,
) -> Result<Vec<StreamEvent>, tokio_postgres::Error> {
    if followed.is_empty() && listened.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = followed.iter().map(|r| r.message_id.as_str()).collect();
    let followed_sessions: Vec<&str> = followed.iter().map(|r| r.session_id.as_str()).collect();
    let running: HashSet<String> = client
        .query(
            "SELECT reply_id FROM turns WHERE session_id = ANY($1) AND reply_id = ANY($2)",
            &[&followed_sessions, &ids],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    // Found through the sessions' index: a message id alone has no index, and a statement
    // matching on it read the whole table at every probe.
    let sessions: Vec<&str> = followed_sessions
        .iter()
        .copied()
        .chain(listened.iter().map(String::as_str))
        .collect();
    let stored = client
        .query(
            "SELECT id, session_id, content, tokens, created_at, finish_reason FROM messages
             WHERE role = 'assistant' AND session_id = ANY($1)
               AND (id = ANY($2) OR (session_id = ANY($3) AND created_at >= $4))
             ORDER BY pk",
            &[&sessions, &ids, &listened, &since],
        )
        .await?;
    let mut ends = Vec::new();
    let mut done = HashSet::new();
    for row in stored {
        let message = Message {
            message_id: row.get(0),
            session_id: row.get(1),
            role: Role::Assistant,
            content: row.get(2),
            tokens: row.get::<_, i64>(3).max(0) as u64,
            created_at: time::ms_to_rfc3339(row.get(4)),
            // An unreadable value is left out: the end of the reply is what matters here.
            finish_reason: row.get::<_, Option<String>>(5).and_then(|s| s.parse().ok()),
        };
        done.insert(message.message_id.clone());
        ends.push(StreamEvent::Done { message });
    }
    let failed: Vec<&RemoteReply> = followed
        .iter()
        .filter(|r| !running.contains(&r.message_id) && !done.contains(&r.message_id))
        .collect();
    if !failed.is_empty() {
        let sessions: Vec<&str> = failed.iter().map(|r| r.session_id.as_str()).collect();
        let deleted: HashSet<String> = client
            .query(
                "SELECT id FROM sessions WHERE id = ANY($1) AND deleted_at IS NOT NULL",
                &[&sessions],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for reply in failed {
            let error = if deleted.contains(&reply.session_id) {
                ErrorBody::new("session_not_found", "the session was deleted")
            } else {
                ErrorBody::new(
                    "engine_error",
                    "the reply failed and its turn was rolled back; send the message again",
                )
            };
            ends.push(StreamEvent::Error {
                session_id: reply.session_id.clone(),
                message_id: reply.message_id.clone(),
                error,
            });
        }
    }
    Ok(ends)
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_batches_are_cut_under_the_limit_and_joined_again() {
        let long = "é".repeat(20_000);
        let batch = vec![
            Relayed::Begin {
                s: "session_a".into(),
                m: "msg_a".into(),
                i: Some("key".into()),
            },
            Relayed::Delta {
                s: "session_a".into(),
                m: "msg_a".into(),
                q: 0,
                c: long.clone(),
            },
        ];
        let parts = payloads("sender", &batch);
        assert!(parts.len() >= 5, "{}", parts.len());
        assert!(parts.iter().all(|p| p.len() <= MAX_PAYLOAD));
        let mut joiner = Joiner::default();
        let mut joined = None;
        for p in &parts {
            assert!(
                joiner.push("sender", p).is_none(),
                "our own payloads are skipped"
            );
            joined = joiner.push("receiver", p).or(joined);
        }
        assert_eq!(joined, Some(("sender".to_string(), batch)));
    }
}
