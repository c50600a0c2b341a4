//! A TCP proxy between a service and the tests' PostgreSQL that a test can **cut** (every open
//! connection closed with a reset, new ones refused: PostgreSQL restarting, a network cut) or
//! **hold** (no byte passes on any connection, new ones are accepted and held: a network
//! that swallows everything) or **hold the replies within transactions** (what the service sends
//! reaches the server; on each connection the answer to a transaction's `BEGIN` comes back and
//! nothing after it: a network that dies in the middle of a transaction) or **slow what the
//! service sends** (each read of its bytes reaches the server a set time later: a distant or
//! congested link), then **restore** (held connections go on; new ones pass).
//!
//! The service connects without TLS (`NoTls`: no `SSLRequest`), so the server's bytes are the
//! protocol's messages from the first byte on, which the proxy follows to find where a
//! `ReadyForQuery` says a connection is in a transaction.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::backends::{pg_server, pg_server_addr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pass,
    Cut,
    Hold,
    HoldInTransactions,
    /// Passing, what the service sends delayed by this much.
    SlowUp(Duration),
}

/// Which way a pump carries bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// From the service to the server.
    Up,
    /// From the server to the service.
    Down,
}

pub struct PgProxy {
    pub addr: SocketAddr,
    user: String,
    mode: watch::Sender<Mode>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl PgProxy {
    /// A proxy on 127.0.0.1:0 in front of the tests' PostgreSQL server.
    pub async fn start() -> PgProxy {
        let config: tokio_postgres::Config = pg_server().parse().expect("the server's URL");
        let upstream = pg_server_addr().await;
        let user = config.get_user().unwrap_or("postgres").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Pass);
        let conns = Arc::new(Mutex::new(Vec::<JoinHandle<()>>::new()));
        let accept = tokio::spawn({
            let mode = mode.subscribe();
            let conns = conns.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let task = tokio::spawn(relay(client, upstream, mode.clone()));
                    let mut conns = conns.lock().unwrap();
                    conns.retain(|t| !t.is_finished());
                    conns.push(task);
                }
            }
        });
        PgProxy {
            addr,
            user,
            mode,
            conns,
            accept,
        }
    }

    /// A URL of database `db` through the proxy.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{}@{}/{db}", self.user, self.addr)
    }

    /// Resets every open connection and refuses new ones until `restore`.
    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
        for task in self.conns.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// Stops every byte on every connection, and holds new ones, until `restore`.
    pub fn hold(&self) {
        self.mode.send_replace(Mode::Hold);
    }

    /// On every connection, stops the bytes from the server to the service after the next
    /// `ReadyForQuery` saying the connection is in a transaction (the answer to a `BEGIN`), until
    /// `restore`; what the service sends still reaches the server, and connections outside a
    /// transaction go on. A statement prepared before the `BEGIN` is answered, so the
    /// transaction's statements are sent whether or not the connection had them prepared.
    pub fn hold_replies_in_transactions(&self) {
        self.mode.send_replace(Mode::HoldInTransactions);
    }

    /// Delays each read of what the service sends by `delay` before it goes on to the server
    /// (the server's answers pass as they come), until `restore`.
    pub fn slow_uploads(&self, delay: Duration) {
        self.mode.send_replace(Mode::SlowUp(delay));
    }

    /// Passes bytes again: held connections go on, new ones are forwarded.
    pub fn restore(&self) {
        self.mode.send_replace(Mode::Pass);
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.conns.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Waits while the proxy holds every byte; false when it cuts.
async fn passing(mode: &mut watch::Receiver<Mode>) -> bool {
    wait_while(mode, |m| m == Mode::Hold).await
}

/// Waits while `held(mode)`; false when the proxy cuts.
async fn wait_while(mode: &mut watch::Receiver<Mode>, held: impl Fn(Mode) -> bool) -> bool {
    match mode.wait_for(|m| !held(*m)).await {
        Ok(m) => *m != Mode::Cut,
        Err(_) => false,
    }
}

/// Where a connection's server-to-service bytes are in the protocol's messages (a type byte,
/// then a big-endian length counting itself and the body).
#[derive(Default)]
struct Messages {
    /// The type byte and length of the message being read, while incomplete.
    header: Vec<u8>,
    /// Its type, once the header is complete.
    kind: u8,
    /// The bytes of its body not read yet.
    left: usize,
}

impl Messages {
    /// Follows `bytes`: the offset just past the first `ReadyForQuery` in them whose status
    /// is `T` (in a transaction).
    fn in_transaction_at(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut first = None;
        let mut i = 0;
        while i < bytes.len() {
            if self.left == 0 {
                self.header.push(bytes[i]);
                i += 1;
                if self.header.len() == 5 {
                    let len = u32::from_be_bytes(self.header[1..5].try_into().unwrap());
                    self.kind = self.header[0];
                    self.left = (len as usize).saturating_sub(4);
                    self.header.clear();
                }
                continue;
            }
            let take = self.left.min(bytes.len() - i);
            // `ReadyForQuery`'s body is its one status byte.
            if self.kind == b'Z' && self.left == 1 && bytes[i] == b'T' && first.is_none() {
                first = Some(i + 1);
            }
            self.left -= take;
            i += take;
        }
        first
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    // Closed with a reset, whoever ends it.
    let _ = client.set_zero_linger();
    if !passing(&mut mode).await {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_zero_linger();
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, mode.clone(), Way::Up);
    let down = pump(server_read, client_write, mode, Way::Down);
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    way: Way,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut messages = Messages::default();
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            // A cut ends the connection even while nothing is read.
            _ = mode.wait_for(|m| *m == Mode::Cut) => return,
        };
        let mut bytes = &buf[..n];
        if way == Way::Down
            && let Some(end) = messages.in_transaction_at(bytes)
            && *mode.borrow() == Mode::HoldInTransactions
        {
            // The answer to the `BEGIN` goes through; what follows waits for `restore`.
            if to.write_all(&bytes[..end]).await.is_err() {
                return;
            }
            bytes = &bytes[end..];
            if !wait_while(&mut mode, |m| m == Mode::HoldInTransactions).await {
                return;
            }
        }
        if !passing(&mut mode).await {
            return;
        }
        let slow = match *mode.borrow() {
            Mode::SlowUp(delay) if way == Way::Up => Some(delay),
            _ => None,
        };
        if let Some(delay) = slow {
            tokio::time::sleep(delay).await;
        }
        if to.write_all(bytes).await.is_err() {
            return;
        }
    }
}

/// Polls `check` every 50 ms until it is true; panics after `guard` (a hang guard only).
pub async fn eventually<F, Fut>(guard: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + guard;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {guard:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
