//! Limits on every connection: how long a request head and body may take, and how many
//! connections the replica and each client address may hold. The accept loop (`server.rs`)
//! takes a slot here for every connection it accepts and refuses one over a cap with 503
//! `too_many_connections`; the body limit and timeout are a layer of the router
//! (`router::read_body`). docs/service.md, "Connection limits", says what each one does.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The limits of `convo serve`'s connections (`--header-read-timeout`, `--body-read-timeout`,
/// `--max-connections`, `--max-connections-per-address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From the moment a connection waits for a request (when it opens, and after each answer
    /// on a kept-alive connection) until that request's head is whole; past it the connection
    /// is closed. So it is also the idle keep-alive timeout: hyper runs one timer for both.
    pub header_read_timeout: Duration,
    /// From the end of a request's head until its body is whole; past it the answer is 408
    /// `request_timeout` and the connection closes.
    pub body_read_timeout: Duration,
    /// Open connections (WebSockets included) of the replica; lowered at start to what the
    /// open-file limit leaves (`effective_max`).
    pub max_connections: usize,
    /// Open connections from one client address; 0: no cap of its own (behind a load
    /// balancer every connection comes from the balancer's address).
    pub max_connections_per_address: usize,
}

impl ConnectionLimits {
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
    pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 4_096;
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: Self::DEFAULT_BODY_READ_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: Self::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        }
    }
}

/// File descriptors kept for everything but client connections: the database (16 pooled, 2 batch
/// writers' and 2 relay connections on PostgreSQL; SQLite's files), logs, the model file,
/// refusals being written, the runtime's own.
pub const RESERVED_FILES: u64 = 256;

/// Refused connections lingering at once (each holds its descriptor for up to
/// `REFUSAL_LINGER`); past it, a refused connection is closed right after its answer is written.
const MAX_REFUSALS_LINGERING: usize = 64;

/// How long a refused connection is read (and discarded) after the answer, so that closing it
/// does not reset the connection before the client reads the 503.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Refusals are logged at most once per this long, with how many there were.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Raises the process's soft open-file limit to its hard limit, and returns the soft limit in
/// force afterwards (`None` when unlimited or unknown). Every connection is a descriptor: with
/// the usual soft limit of 1,024, a thousand idle clients would make `accept` fail.
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let raised = rustix::process::Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => tracing::info!(
                    from = limit.current,
                    to = limit.maximum,
                    "open-file limit raised"
                ),
                Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
            }
        }
        getrlimit(Resource::Nofile).current
    }
    #[cfg(not(unix))]
    None
}

/// The connection cap in force: `configured`, lowered so that connections and
/// `RESERVED_FILES` fit in the open-file limit (at least 1).
pub fn effective_max(configured: usize, open_file_limit: Option<u64>) -> usize {
    match open_file_limit {
        Some(files) => {
            let room = usize::try_from(files.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX);
            configured.min(room).max(1)
        }
        None => configured,
    }
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The replica holds `max_connections`.
    Replica(usize),
    /// The client's address holds `max_connections_per_address`.
    Address(usize),
}

impl Refusal {
    fn message(self) -> String {
        match self {
            Refusal::Replica(max) => format!(
                "this replica has {max} connections open, its limit (--max-connections); try again shortly"
            ),
            Refusal::Address(max) => format!(
                "your address has {max} connections open, the limit per client address (--max-connections-per-address); close some or try again shortly"
            ),
        }
    }

    /// The whole answer: 503 `too_many_connections` with the envelope, then the close.
    pub fn answer(self) -> Vec<u8> {
        let body = serde_json::to_string(&convo_wire::ErrorEnvelope {
            error: convo_wire::ErrorBody::new("too_many_connections", self.message()),
        })
        .unwrap_or_default();
        format!(
            "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }
}

/// The open connections, in all and per client address.
#[derive(Debug)]
pub struct ConnectionCounter {
    max: usize,
    max_per_address: usize,
    open: Mutex<Counts>,
    lingering: Arc<AtomicUsize>,
    /// Refusals not logged yet, and when the last log line was written.
    unlogged: Mutex<(usize, Option<Instant>)>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

impl ConnectionCounter {
    /// A counter for `max` connections in all (see `effective_max`) and `max_per_address`
    /// from one address (0: no cap per address).
    pub fn new(max: usize, max_per_address: usize) -> Arc<Self> {
        Arc::new(ConnectionCounter {
            max,
            max_per_address,
            open: Mutex::new(Counts::default()),
            lingering: Arc::new(AtomicUsize::new(0)),
            unlogged: Mutex::new((0, None)),
        })
    }

    /// A slot for a connection from `peer`, held until the connection is dropped, or why not.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<ConnectionSlot, Refusal> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.total >= self.max {
            return Err(Refusal::Replica(self.max));
        }
        let from_peer = open.by_address.entry(peer).or_default();
        if self.max_per_address > 0 && *from_peer >= self.max_per_address {
            return Err(Refusal::Address(self.max_per_address));
        }
        *from_peer += 1;
        open.total += 1;
        Ok(ConnectionSlot {
            counter: self.clone(),
            peer,
        })
    }

    /// Open connections now (in all).
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    /// Answers `stream` with `refusal` and closes it. The answer is written at once (a new
    /// connection's send buffer takes it whole); the connection then lingers in a task of its
    /// own, up to `MAX_REFUSALS_LINGERING` at a time, or is closed at once.
    pub fn refuse(&self, stream: TcpStream, peer: SocketAddr, refusal: Refusal) {
        self.log_refusal(peer, refusal);
        let answer = refusal.answer();
        let written = stream.try_write(&answer).unwrap_or(0);
        if self.lingering.fetch_add(1, Ordering::Relaxed) >= MAX_REFUSALS_LINGERING {
            self.lingering.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let lingering = self.lingering.clone();
        tokio::spawn(async move {
            linger(stream, &answer[written..]).await;
            lingering.fetch_sub(1, Ordering::Relaxed);
        });
    }

    /// One warning per `REFUSAL_LOG_INTERVAL` at most, counting the refusals since the last:
    /// a flood of connections must not become a flood of log lines.
    fn log_refusal(&self, peer: SocketAddr, refusal: Refusal) {
        let mut unlogged = self.unlogged.lock().unwrap_or_else(|p| p.into_inner());
        unlogged.0 += 1;
        let now = Instant::now();
        if unlogged
            .1
            .is_some_and(|last| now.duration_since(last) < REFUSAL_LOG_INTERVAL)
        {
            return;
        }
        tracing::warn!(
            refused = unlogged.0,
            last_peer = %peer,
            last = ?refusal,
            "connections refused: too many connections"
        );
        *unlogged = (0, Some(now));
    }
}

/// Writes the rest of the 503, ends the sending side, and reads what the client sent (for at
/// most `REFUSAL_LINGER`) so that the close does not reset the connection under its answer.
async fn linger(mut stream: TcpStream, rest: &[u8]) {
    use tokio::io::AsyncWriteExt;
    let linger = async {
        stream.write_all(rest).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, linger).await;
}

/// One connection counted against the caps; dropping it frees the place.
#[derive(Debug)]
pub struct ConnectionSlot {
    counter: Arc<ConnectionCounter>,
    peer: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.counter.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_address.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_address.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn the_caps_count_open_connections_in_all_and_per_address() {
        let counter = ConnectionCounter::new(3, 2);
        let a1 = counter.admit(ip(1)).unwrap();
        let _a2 = counter.admit(ip(1)).unwrap();
        assert_eq!(counter.admit(ip(1)).unwrap_err(), Refusal::Address(2));
        let _b1 = counter.admit(ip(2)).unwrap();
        assert_eq!(counter.admit(ip(3)).unwrap_err(), Refusal::Replica(3));
        assert_eq!(counter.open(), 3);
        drop(a1);
        assert_eq!(counter.open(), 2);
        let _a3 = counter.admit(ip(1)).unwrap();
        // 0: no cap per address.
        let unlimited = ConnectionCounter::new(10, 0);
        let _held: Vec<_> = (0..10).map(|_| unlimited.admit(ip(1)).unwrap()).collect();
        assert_eq!(unlimited.admit(ip(1)).unwrap_err(), Refusal::Replica(10));
    }

    #[test]
    fn the_cap_leaves_room_for_the_reserved_files() {
        assert_eq!(effective_max(16_384, Some(20_000)), 16_384);
        assert_eq!(effective_max(16_384, Some(1_024)), 1_024 - 256);
        assert_eq!(effective_max(16_384, Some(100)), 1);
        assert_eq!(effective_max(500, None), 500);
    }

    #[test]
    fn a_refusal_is_a_503_with_the_envelope() {
        let answer = String::from_utf8(Refusal::Address(7).answer()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "too_many_connections");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--max-connections-per-address")
        );
    }
}
