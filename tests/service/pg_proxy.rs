//! A TCP proxy between a service and the tests' PostgreSQL that a test can **cut** (every open
//! connection closed with a reset, new ones refused: PostgreSQL restarting, a network cut) or
//! **hold** (no byte passes on any connection, new ones are accepted and held: a network
//! that swallows everything) or **hold the replies** (what the service sends reaches the server,
//! nothing comes back: a network that dies after a request went through), then **restore**
//! (held connections go on; new ones pass).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::backends::pg_server;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pass,
    Cut,
    Hold,
    HoldReplies,
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
        let host = match &config.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(host) => host.clone(),
            #[cfg(unix)]
            other => panic!("the tests' PostgreSQL is not on TCP: {other:?}"),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let upstream: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .expect("the server's address")
            .next()
            .expect("an address");
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

    /// Stops every byte from the server to the service (new connections are held whole), until
    /// `restore`; what the service sends still reaches the server.
    pub fn hold_replies(&self) {
        self.mode.send_replace(Mode::HoldReplies);
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

/// Waits while the proxy holds bytes going `way`; false when it cuts.
async fn passing(mode: &mut watch::Receiver<Mode>, way: Way) -> bool {
    let held = |m: &Mode| *m == Mode::Hold || (*m == Mode::HoldReplies && way == Way::Down);
    match mode.wait_for(|m| !held(m)).await {
        Ok(m) => *m != Mode::Cut,
        Err(_) => false,
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    // Closed with a reset, whoever ends it.
    let _ = client.set_zero_linger();
    if !passing(&mut mode, Way::Down).await {
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
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            // A cut ends the connection even while nothing is read.
            _ = mode.wait_for(|m| *m == Mode::Cut) => return,
        };
        if !passing(&mut mode, way).await {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
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
