//! Nothing lost (issue 6, item 2), whole binary: `convo` on its embedded service is killed
//! with SIGKILL while a reply streams; both databases are intact, and the next start shows
//! every completed exchange and keeps working.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::{Convo, keys};

/// The pid of the `convo` started with HOME=`home` (read from /proc: the harness keeps its
/// child to itself).
fn pid_of_convo(home: &Path) -> u32 {
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_convo")).unwrap();
    let wanted = format!("HOME={}", home.display());
    let start = Instant::now();
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let is_convo = std::fs::read_link(entry.path().join("exe")).is_ok_and(|e| e == exe);
            let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            if is_convo && env.split(|&b| b == 0).any(|v| v == wanted.as_bytes()) {
                return pid;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no convo process"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

/// The builtin engine's reply to `text`, complete, is on screen.
fn replied(screen: &str, text: &str) -> bool {
    screen.contains(&format!("You said: \"{text}\"")) && !screen.contains("streaming…")
}

#[test]
#[cfg(target_os = "linux")]
fn kill_9_mid_reply_loses_no_completed_exchange() {
    let home = tempfile::tempdir().unwrap();
    {
        let mut convo = Convo::start(home.path(), 100, 40);
        convo.wait_text("● builtin (no model)");
        for i in 1..=2 {
            convo.type_text(&format!("exchange number {i}"));
            convo.send(keys::ENTER);
            let text = format!("exchange number {i}");
            convo.wait_for(&format!("reply {i}"), |s| replied(s, &text));
        }
        convo.type_text("and now a long story please");
        convo.send(keys::ENTER);
        convo.wait_text("streaming…");
        let pid = pid_of_convo(home.path());
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        assert!(!convo.wait_exit(), "killed, not exited");
    }
    let data = home.path().join("data");
    assert_eq!(integrity(&data.join("convo.db")), "ok");
    assert_eq!(integrity(&data.join("service.db")), "ok");
    let store = convo_client::local_store::Store::open(&data.join("convo.db")).unwrap();
    let sessions = store.list_sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    let transcript = store.transcript(&sessions[0].id).unwrap();
    let complete: Vec<_> = transcript
        .iter()
        .filter(|m| m.status == convo_client::local_store::MessageStatus::Complete)
        .map(|m| (m.role, m.content.lines().next().unwrap_or("").to_string()))
        .collect();
    assert!(complete.len() >= 4, "{complete:#?}");
    assert_eq!(complete[0].1, "exchange number 1");
    assert_eq!(complete[2].1, "exchange number 2");
    assert_eq!(complete[1].0, convo_client::api::Role::Assistant);
    assert_eq!(complete[3].0, convo_client::api::Role::Assistant);
    drop(store);

    let mut convo = Convo::start(home.path(), 100, 40);
    convo.wait_for("the stored exchanges", |s| replied(s, "exchange number 2"));
    // The local store shows them before the embedded service answers.
    convo.wait_text("● builtin (no model)");
    // The service that was killed comes back with the same key and history: sending works.
    convo.type_text("still here?");
    convo.send(keys::ENTER);
    convo.wait_for("a reply after the restart", |s| replied(s, "still here?"));
    assert!(convo.quit());
}
