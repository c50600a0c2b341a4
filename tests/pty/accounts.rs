//! F4 in the real binary on the embedded service (a fresh HOME and data dir): the gauges say
//! whose plan they measure, F4 shows the local account's row with the admin stream live, a
//! message sent from the chat moves the account's request count in F4 (pushed by the admin
//! stream: F4 fetches the list only when it first opens), and Esc goes back to the chat.

use super::harness::{Convo, keys};

/// The embedded service's gauges' label (docs/tui.md, "Accounts (F4)").
const LABEL: &str = "embedded service · pro plan of the local account";

/// The requests used that the details of an account show (`requests ███ 0%  3 / 50,000`).
fn requests_used(screen: &str) -> Option<u64> {
    let line = screen
        .lines()
        .find(|l| l.trim_start().starts_with("requests") && l.contains("/ 50,000"))?;
    let before = line.split(" / 50,000").next()?;
    before
        .split_whitespace()
        .last()?
        .replace(',', "")
        .parse()
        .ok()
}

/// From the chat: F4, then Enter on the first (the only) row; the requests its details show.
fn open_details(convo: &mut Convo, row: &str) -> u64 {
    convo.send(keys::F4);
    convo.wait_for("the local account's row, live", |s| {
        s.contains("Accounts (F4) · 1 account ·") && s.contains(" · live") && s.contains(row)
    });
    convo.send(keys::ENTER);
    let screen = convo.wait_for("the account's details", |s| requests_used(s).is_some());
    requests_used(&screen).unwrap()
}

/// From the details: Esc back to the table, Esc back to the chat.
fn back_to_chat(convo: &mut Convo) {
    convo.send(keys::ESC);
    convo.wait_for("the table", |s| {
        s.contains("Accounts (F4)") && requests_used(s).is_none()
    });
    convo.send(keys::ESC);
    convo.wait_for("the chat", |s| {
        !s.contains("Accounts (F4)") && s.contains(LABEL)
    });
}

#[test]
fn f4_on_the_embedded_service_shows_the_local_account_and_follows_it() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_for("the gauges' label and the embedded service", |s| {
        s.contains(LABEL) && s.contains("● builtin (no model)")
    });
    // The local account is named by its key's last 4 characters.
    let key = std::fs::read_to_string(home.path().join("data/local-service.key")).unwrap();
    let key = key.trim();
    let row = format!("key …{}", &key[key.len() - 4..]);

    let before = open_details(&mut convo, &row);
    let screen = convo.screen();
    assert!(screen.contains("pro"), "{screen}");
    back_to_chat(&mut convo);

    convo.type_text("count this one");
    convo.send(keys::ENTER);
    convo.wait_for("a complete reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });

    // Back in F4 the send is counted: the admin stream updated the row in place.
    convo.send(keys::F4);
    convo.wait_text(&row);
    convo.send(keys::ENTER);
    let screen = convo.wait_for("the request count moved", |s| {
        requests_used(s).is_some_and(|n| n > before)
    });
    assert!(screen.contains(&row), "{screen}");
    back_to_chat(&mut convo);
    assert!(convo.quit(), "convo exits 0");
}

#[test]
fn the_requests_of_the_details_are_read_from_their_line() {
    let screen = "key …AbCd · pro\n\nrequests ███░░  0%  1,234 / 50,000\ntokens …";
    assert_eq!(requests_used(screen), Some(1234));
    assert_eq!(requests_used("requests ███ 0%"), None);
}
