//! The real binary in a pseudo-terminal on the embedded service: chat, then F2 charts it and
//! F3 shows a wallet.

use super::harness::{Convo, keys};

const F2: &[u8] = b"\x1bOQ";
const F3: &[u8] = b"\x1bOR";
const ESC: &[u8] = b"\x1b";
const RIGHT: &[u8] = b"\x1b[C";

#[test]
fn f2_charts_the_chat_and_f3_shows_a_wallet() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    convo.type_text("hello metrics");
    convo.send(keys::ENTER);
    convo.wait_for("a complete reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });

    // F2: the last 24 hours by hour, with the message and its reply counted.
    convo.send(F2);
    convo.wait_text("Metrics · last 24 hours by hour");
    let screen = convo.wait_text("Messages 2 total");
    assert!(screen.contains("Messages per hour"), "{screen}");
    assert!(screen.contains("1 user · 1 assistant"), "{screen}");
    convo.wait_text("25 queries");
    // By day: Tab to the granularity, → to day.
    convo.send(keys::TAB);
    convo.send(RIGHT);
    convo.wait_text("Metrics · last 24 hours by day");
    convo.wait_for("the daily totals", |s| {
        s.contains("Messages per day") && s.contains("Messages 2 total")
    });

    // Esc: back to the chat.
    convo.send(ESC);
    convo.wait_for("the chat", |s| {
        s.contains("hello metrics") && !s.contains("Metrics ·")
    });

    // F3: pick a wallet.
    convo.send(F3);
    convo.wait_text("Wallet id ›");
    convo.type_text("treasury");
    convo.send(keys::ENTER);
    let screen = convo.wait_text("Team treasury");
    let screen = if screen.contains("Token accounts (12)") {
        screen
    } else {
        convo.wait_text("Token accounts (12)")
    };
    assert!(screen.contains("8/100 low risk"), "{screen}");
    assert!(screen.contains("1,842.317 SOL"), "{screen}");

    assert!(convo.quit(), "convo exits 0");

    // Every file the client wrote (the stores, the key, the log, the recent wallets) is its
    // owner's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let data = home.path().join("data");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&data).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_file() {
                let name = entry.file_name().to_string_lossy().into_owned();
                assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
                seen.push(name);
            }
        }
        for name in [
            "convo.db",
            "service.db",
            "local-service.key",
            "recent-wallets.json",
        ] {
            assert!(
                seen.iter().any(|s| s == name),
                "{name} was written: {seen:?}"
            );
        }
    }
}
