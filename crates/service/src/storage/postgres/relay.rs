//! Streaming across replicas: each replica sends what happens to its replies (begin, each
//! delta, done/error: `stream::Relayed`) to the others with PostgreSQL's `NOTIFY`, and applies
//! what the others send to its own hub, so a listener on any replica gets every reply of the
//! session, with the snapshot on a mid-reply connect as on one replica.
//!
//! One connection publishes, in order (`NOTIFY`s of one session arrive in the order sent), as
//! many events per notification as fit; a payload is at most `MAX_PAYLOAD` bytes (PostgreSQL
//! refuses 8,000 and more), so a longer batch is cut into numbered parts that the receivers
//! join again (parts of one sender are never interleaved: one connection sends them in turn).
//! Another connection `LISTEN`s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::stream::{Relayed, StreamHub};

/// The notification channel.
const CHANNEL: &str = "convo_stream";
/// Bytes of one notification's payload (PostgreSQL's limit is 8,000, header included).
pub const MAX_PAYLOAD: usize = 7_800;
/// Most events gathered into one batch.
const MAX_BATCH: usize = 256;

/// The relay's two tasks; dropped (aborted) with the service.
pub struct Relay {
    publisher: JoinHandle<()>,
    listener: JoinHandle<()>,
    /// Tells the publisher to send what is queued and stop.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Relay {
    /// Starts listening (before it returns, so nothing published after is missed) and
    /// publishing this hub's replies.
    pub async fn start(
        config: tokio_postgres::Config,
        hub: Arc<StreamHub>,
    ) -> Result<Relay, tokio_postgres::Error> {
        let me = crate::ids::random_alnum(12);
        let listener = listen(config.clone(), me.clone(), hub.clone()).await?;
        let (client, connection) = config.connect(NoTls).await?;
        tokio::spawn(connection);
        let (tx, rx) = mpsc::unbounded_channel();
        hub.relay_to(tx);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let publisher = tokio::spawn(publish(client, me, rx, stopped));
        Ok(Relay {
            publisher,
            listener,
            stop: Some(stop),
        })
    }

    /// Sends what is queued, then stops (at shutdown, after the last replies ended).
    pub async fn stop(mut self) {
        self.listener.abort();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.publisher).await;
        self.publisher.abort();
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

async fn publish(
    client: tokio_postgres::Client,
    me: String,
    mut rx: mpsc::UnboundedReceiver<Relayed>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let notify = format!("SELECT pg_notify('{CHANNEL}', $1)");
    let stmt = match client.prepare(&notify).await {
        Ok(stmt) => stmt,
        Err(e) => {
            tracing::error!(error = %e, "the stream relay cannot publish");
            return;
        }
    };
    let mut batch = Vec::new();
    let mut stopping = false;
    loop {
        if stopping {
            // Whatever is queued goes out, then the publisher ends.
            match rx.try_recv() {
                Ok(event) => batch.push(event),
                Err(_) => return,
            }
        } else {
            tokio::select! {
                event = rx.recv() => match event {
                    Some(event) => batch.push(event),
                    None => return,
                },
                _ = &mut stopped => {
                    stopping = true;
                    continue;
                }
            }
        }
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(event) => batch.push(event),
                Err(_) => break,
            }
        }
        for payload in payloads(&me, &batch) {
            if let Err(e) = client.execute(&stmt, &[&payload]).await {
                tracing::warn!(error = %e, "a stream event could not be sent to the other replicas");
            }
        }
        batch.clear();
    }
}

/// Joins the parts of each sender's payloads back into batches.
#[derive(Default)]
pub struct Joiner {
    partial: HashMap<String, String>,
}

impl Joiner {
    /// The events of a complete batch, once its last part arrived; `None` for our own
    /// payloads, earlier parts, or malformed ones.
    pub fn push(&mut self, me: &str, payload: &str) -> Option<Vec<Relayed>> {
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
            Ok(events) => Some(events),
            Err(e) => {
                tracing::warn!(error = %e, "an unreadable stream relay payload was dropped");
                None
            }
        }
    }
}

async fn listen(
    config: tokio_postgres::Config,
    me: String,
    hub: Arc<StreamHub>,
) -> Result<JoinHandle<()>, tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (tx, mut notifications) = mpsc::unbounded_channel();
    // The connection's messages must be polled for the client to work at all.
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n.payload().to_string()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(error = %e, "the stream relay's connection failed; other replicas' replies are no longer relayed here");
                    return;
                }
            }
        }
    });
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    Ok(tokio::spawn(async move {
        // The client must live as long as we listen.
        let _client = client;
        let _driver = AbortOnDrop(driver);
        let mut joiner = Joiner::default();
        while let Some(payload) = notifications.recv().await {
            if let Some(events) = joiner.push(&me, &payload) {
                for event in events {
                    hub.apply(event);
                }
            }
        }
    }))
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
            },
            Relayed::Delta {
                s: "session_a".into(),
                m: "msg_a".into(),
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
        assert_eq!(joined, Some(batch));
    }
}
