//! Nothing lost (issue 6, item 2): the local store survives `kill -9` during heavy writes,
//! and drafts reach the disk.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use chrono::Utc;
use convo_client::api::{Role, new_session_id};
use convo_client::local_store::{MessageStatus, Store, StoredMessage};
use convo_service::{RunningService, ServiceConfig};
use convo_tui::app::StreamState;
use crossterm::event::{KeyCode, KeyModifiers};
use rand::Rng;

use super::tui::{Tui, options};

/// The helper process's environment: the store to hammer.
const HAMMER_ENV: &str = "CONVO_RELIABILITY_HAMMER_STORE";

/// A message that proves itself whole: `#N:LEN:` then LEN characters derived from N.
fn payload(n: u64, len: usize) -> String {
    let mut s = format!("#{n}:{len}:");
    let mut x = n
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for _ in 0..len {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Mostly ASCII with some multi-byte characters, as chat text has.
        let c = match (x >> 59) as u8 {
            0 => 'é',
            1 => '→',
            2 => '\n',
            _ => (b'a' + ((x >> 33) % 26) as u8) as char,
        };
        s.push(c);
    }
    s
}

/// The N of a whole message, or None if it is not exactly what `payload(N, LEN)` wrote.
fn verify(content: &str) -> Option<u64> {
    let rest = content.strip_prefix('#')?;
    let (n, rest) = rest.split_once(':')?;
    let (len, _) = rest.split_once(':')?;
    let (n, len): (u64, usize) = (n.parse().ok()?, len.parse().ok()?);
    (payload(n, len) == content).then_some(n)
}

/// Not a test: the process that `the_store_survives_kill_9_during_heavy_writes` starts and
/// kills. It writes to the store as fast as it can and prints a line after each commit.
#[test]
#[ignore = "helper process of the_store_survives_kill_9_during_heavy_writes"]
fn store_hammer_child() {
    let Ok(path) = std::env::var(HAMMER_ENV) else {
        return;
    };
    let store = Store::open(Path::new(&path)).expect("the store opens");
    let mut rng = rand::rng();
    let base: u64 = rng.random_range(1..1_000_000) * 1_000_000;
    let mut session = new_session_id();
    for i in 0u64.. {
        let n = base + i;
        if i % 8 == 0 {
            session = new_session_id();
            store.upsert_session(&session, Utc::now()).unwrap();
        }
        // Small and large messages: large ones span many pages of the WAL.
        let len = if i % 5 == 0 {
            rng.random_range(50_000..300_000)
        } else {
            rng.random_range(10..2_000)
        };
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let mut m = StoredMessage::user(Role::User, "");
        m.role = role;
        m.content = payload(n, len);
        m.tokens = len as u64 / 4;
        let row = store.append_message(&session, &m).unwrap();
        println!("COMMITTED {session} {n}");
        if i % 7 == 3 {
            let mut updated = m.clone();
            updated.content = payload(n, len / 2 + 1);
            updated.status = MessageStatus::Interrupted;
            store.update_message(row, &updated).unwrap();
            println!("COMMITTED {session} {n}");
        }
        store
            .save_draft(&session, &payload(n, rng.random_range(0..500)))
            .unwrap();
        if i % 29 == 28 {
            store.mark_deleted(&session).unwrap();
            println!("DELETED {session}");
            session = new_session_id();
            store.upsert_session(&session, Utc::now()).unwrap();
        }
    }
}

#[test]
fn the_store_survives_kill_9_during_heavy_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("convo.db");
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    // Session -> message numbers reported committed; deleted sessions.
    let mut committed: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    for round in 0..6 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "reliability::durability::store_hammer_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HAMMER_ENV, &path)
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the helper starts");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        // The helper's stderr: why it stopped, if it did (e.g. "database or disk is full").
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        // Killed after a random number of commits, i.e. at a random point of its writes.
        let kill_after = rng.random_range(3..60);
        let mut seen = 0;
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("COMMITTED"), Some(s), Some(n)) => {
                    committed
                        .entry(s.to_string())
                        .or_default()
                        .insert(n.parse().unwrap());
                    seen += 1;
                }
                (Some("DELETED"), Some(s), None) => {
                    deleted.insert(s.to_string());
                }
                _ => continue,
            }
            if seen >= kill_after {
                break;
            }
        }
        if seen < kill_after {
            let _ = child.wait();
            let log = stderr.join().unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            panic!(
                "round {round}: the helper stopped early (a full disk makes its writes fail); its stderr ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        child.kill().expect("SIGKILL");
        let status = child.wait().unwrap();
        drop(stderr);
        assert!(!status.success(), "round {round}: it was killed");

        // Reopens, recovers its WAL, and is intact.
        let conn = rusqlite::Connection::open(&path).unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok", "round {round}");
        drop(conn);
        Store::open(&path).expect("the store reopens");
    }
    let store = Store::open(&path).unwrap();
    let mut messages = 0;
    for (session, numbers) in &committed {
        if deleted.contains(session) {
            assert!(store.transcript(session).unwrap().is_empty());
            continue;
        }
        let transcript = store.transcript(session).unwrap();
        let present: BTreeSet<u64> = transcript
            .iter()
            .map(|m| {
                verify(&m.content).unwrap_or_else(|| {
                    let head: String = m.content.chars().take(40).collect();
                    panic!(
                        "a torn message in {session} ({} characters, status {:?}): {head:?}…",
                        m.content.chars().count(),
                        m.status
                    )
                })
            })
            .collect();
        assert!(
            numbers.is_subset(&present),
            "every committed message survives in {session}: {numbers:?} ⊄ {present:?}"
        );
        messages += present.len();
        if let Some(draft) = store.draft(session).unwrap() {
            assert!(verify(&draft).is_some(), "a whole draft");
        }
    }
    assert!(messages > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_is_on_disk_after_quit_and_comes_back_on_the_next_start() {
    let svc: RunningService =
        convo_service::start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base: url::Url = svc.base_url().parse().unwrap();
    let mut tui = Tui::start(options(base.clone(), &svc.api_key), dir.path());
    tui.until("ready", |app| {
        app.store_ready() && app.session().is_some_and(|o| o.stream == StreamState::Open)
    })
    .await;
    let sid = tui.app().open_id().unwrap().to_string();
    tui.type_text("half a thought, unsent");
    tui.key(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(tui.app().has_quit());
    let Tui { rt, store_file } = tui;
    rt.shutdown().await;
    let store = Store::open(&store_file).unwrap();
    assert_eq!(
        store.draft(&sid).unwrap().as_deref(),
        Some("half a thought, unsent")
    );
    drop(store);

    let mut again = Tui::start(options(base, &svc.api_key), dir.path());
    again
        .until("the draft back in the composer", |app| {
            app.open_id() == Some(sid.as_str()) && app.composer_text() == "half a thought, unsent"
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_is_written_to_the_store_while_typing() {
    let svc: RunningService =
        convo_service::start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(
        options(svc.base_url().parse().unwrap(), &svc.api_key),
        dir.path(),
    );
    tui.until("ready", |app| app.store_ready() && app.session().is_some())
        .await;
    let sid = tui.app().open_id().unwrap().to_string();
    tui.type_text("typed, then the power goes");
    let store = Store::open(&tui.store_file).unwrap();
    // No quit and no switch: the debounced save alone must bring it to the disk.
    let wait = async {
        loop {
            tokio::select! {
                ev = tui.rt.next() => if let Some(ev) = ev { tui.rt.handle(ev) },
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            }
            if store.draft(&sid).unwrap().as_deref() == Some("typed, then the power goes") {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), wait)
        .await
        .expect("the draft reaches the store while the app runs");
}
