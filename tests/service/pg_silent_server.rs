//! A replica gives up a connection whose server went silent (`SILENT_SERVER`,
//! `crates/service/src/storage/postgres/mod.rs`): once a replica has written turns in batches
//! (its two batch writers' connections made) and its stream relay is connected, every socket
//! of this process to the tests' server carries the replica's TCP keepalives (after 10 s of
//! silence, every 5 s, 3 probes) and `TCP_USER_TIMEOUT` (25 s). What the kernel then does with
//! a server that stops answering is not shown here: the machines have neither a firewall nor
//! `netem` to drop packets, and the suite's `PgProxy` holds bytes while its own kernel still
//! acknowledges them. Under `cargo nextest` each test is a process of its own, so the sockets
//! found are this replica's (and, for a moment, the test database's own connection, waited out).

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use convo_service::storage::postgres::SILENT_SERVER;
use convo_service::{DbLocation, ServiceConfig};

use super::backends::{TestDb, pg_server_addr};
use super::common::{session, start_with};

/// The keepalive and user-timeout settings of a socket.
#[derive(Debug, PartialEq, Eq)]
struct Silence {
    keepalive: bool,
    idle: Duration,
    interval: Duration,
    retries: u32,
    user_timeout: Option<Duration>,
}

/// The settings of each socket of this process connected to `server`.
fn sockets_to(server: SocketAddr) -> Vec<Silence> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let entry = entry.expect("an fd");
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue; // closed meanwhile
        };
        if !target.to_string_lossy().starts_with("socket:") {
            continue;
        }
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        // SAFETY: the descriptor is only read from (getsockopt, getpeername) while borrowed; one
        // closed meanwhile makes those calls fail (or name another socket, filtered out by its
        // peer), which is all that can go wrong in a test.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let peer = socket.peer_addr().ok().and_then(|a| a.as_socket());
        if peer != Some(server) {
            continue;
        }
        let read = || -> std::io::Result<Silence> {
            Ok(Silence {
                keepalive: socket.keepalive()?,
                idle: socket.tcp_keepalive_time()?,
                interval: socket.tcp_keepalive_interval()?,
                retries: socket.tcp_keepalive_retries()?,
                user_timeout: socket.tcp_user_timeout()?,
            })
        };
        if let Ok(silence) = read() {
            found.push(silence);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_of_a_replica_gives_a_silent_server_up() {
    let server = pg_server_addr().await;
    let db = TestDb::create().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(db.url());
    let svc = start_with(config).await;
    // Sends at once, so that both batch writers write batches on their own connections.
    let sessions: Vec<String> = (0..24).map(|_| session()).collect();
    for _ in 0..3 {
        futures_util::future::join_all(sessions.iter().map(|s| svc.send_text(s, "hello"))).await;
    }

    let expected = Silence {
        keepalive: true,
        idle: Duration::from_secs(10),
        interval: Duration::from_secs(5),
        retries: 3,
        user_timeout: Some(SILENT_SERVER),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let found = loop {
        let found = sockets_to(server);
        if found.iter().all(|s| *s == expected) || tokio::time::Instant::now() > deadline {
            break found;
        }
        // The test database's own connection, dropped after its creation, closes meanwhile.
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The shared pool's, the two batch writers' and the relay's.
    assert!(
        found.len() >= 4,
        "a replica that wrote batches holds at least 4 connections: {found:?}"
    );
    for s in &found {
        assert_eq!(s, &expected, "every connection: {found:?}");
    }
}
