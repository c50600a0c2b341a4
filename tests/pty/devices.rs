//! Two devices on one service: two `convo` TUIs (two data dirs), each in its own
//! pseudo-terminal, against one `convo serve` (started in-process, SQLite), and against two
//! replicas of it on one PostgreSQL database (one TUI on each). What one device does — a new
//! session, a title, a message, an undo, a delete — shows on the other through the account stream,
//! with no request from the other.

use convo_service::{DbLocation, RunningService, ServiceConfig};

use super::backends::TestDb;
use super::harness::{Convo, Server, keys};

#[test]
fn what_one_device_does_shows_on_the_other() {
    let server = Server::start(0);
    two_devices(&server.service, &server.service);
    let Server {
        service, runtime, ..
    } = server;
    runtime.block_on(service.shutdown());
}

#[test]
fn what_one_device_does_shows_on_the_other_across_postgresql_replicas() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let db = runtime.block_on(TestDb::create());
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(db.url());
    let (a, b) = runtime.block_on(async {
        let addr = "127.0.0.1:0".parse().unwrap();
        let (a, b) = tokio::join!(
            convo_service::start(config.clone(), addr),
            convo_service::start(config, addr)
        );
        (a.unwrap(), b.unwrap())
    });
    two_devices(&a, &b);
    runtime.block_on(async {
        a.shutdown().await;
        b.shutdown().await;
    });
}

/// Device one on `one`, device two on `two` (the same service, or two replicas of it).
fn two_devices(one: &RunningService, two: &RunningService) {
    let (home_one, home_two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut one = Convo::start_remote(home_one.path(), 100, 30, one);
    let mut two = Convo::start_remote(home_two.path(), 100, 30, two);
    // Both connected, their new session open (its stream live), the usage shown.
    for convo in [&one, &two] {
        convo.wait_for("ready", |s| s.contains("● live") && s.contains("/50k"));
    }

    // A new session on one: listed on two, which stays where it was.
    one.type_text("lisbon trip");
    one.send(keys::ENTER);
    one.wait_text("you ·");
    let screen = two.wait_text("lisbon trip");
    assert!(
        !screen.contains("you ·"),
        "only the list changed on the other device: {screen}"
    );

    // Two opens it: its history, from the service.
    focus_sessions(&mut two);
    two.send(keys::UP);
    two.send(keys::ENTER);
    two.wait_for("the session opened with its history", |s| {
        s.contains("you ·") && s.contains("lisbon trip") && s.contains("assistant ·")
    });

    // A message on one reaches two's open transcript.
    one.type_text("book the hotel");
    one.send(keys::ENTER);
    two.wait_text("book the hotel");

    // A title given on one names the session on two.
    one.type_text("/title Lisbon in May");
    one.send(keys::ENTER);
    two.wait_text("Lisbon in May");

    // One undoes that message and its reply: two's open transcript drops them too.
    one.type_text("/undo");
    one.send(keys::ENTER);
    one.wait_text("undone: removed 2 messages");
    two.wait_for("the exchange gone on two as well", |s| {
        s.contains("undone on another device") && !s.contains("book the hotel")
    });

    // Two deletes it: one, which has it open, is told.
    focus_sessions(&mut two);
    two.send(b"d");
    two.wait_text("Delete session?");
    two.send(b"y");
    one.wait_text("was deleted on the server");

    assert!(one.quit());
    assert!(two.quit());
}

/// Tab until the sessions pane has the focus (its hints offer `d delete`).
fn focus_sessions(convo: &mut Convo) {
    for _ in 0..4 {
        convo.send(keys::TAB);
        // The hint line follows the focus: give the frame a moment before looking again.
        let asked = std::time::Instant::now();
        while asked.elapsed() < std::time::Duration::from_millis(500) {
            if last_line(&convo.screen()).contains("d delete") {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    convo.wait_for("the sessions pane focused", |s| {
        last_line(s).contains("d delete")
    });
}

fn last_line(screen: &str) -> &str {
    screen.trim_end().lines().last().unwrap_or("")
}
