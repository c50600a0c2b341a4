//! Snapshots of the accounts view (F4): the table at 80×24, 120×40 and 200×60, 10,000
//! accounts scrolled to the end (only the rows on screen drawn), the filter being typed, one
//! account's details, no admin key on a remote server, and the alert of a crossing in the
//! status bar and on F4's label.

use convo_tui::accounts_view::{AccountsEvent, AccountsRequest, Availability};
use convo_tui::app::{App, Command, View};
use convo_tui::event::{AppEvent, Endpoint};
use crossterm::event::KeyCode;

use crate::fake_admin::{account, accounts};
use crate::fixture::{app, key};
use crate::snapshots::render;

fn ev(app: &mut App, e: AccountsEvent) -> Vec<Command> {
    app.update(AppEvent::Accounts(e))
}

/// The load a command list holds.
fn load_of(out: &[Command]) -> u64 {
    out.iter()
        .find_map(|c| match c {
            Command::Accounts(AccountsRequest::Load { seq, .. }) => Some(*seq),
            _ => None,
        })
        .expect("a load")
}

/// F4 opened on the embedded service with `n` accounts loaded.
fn loaded(w: u16, h: u16, n: u64) -> App {
    let mut app = app(w, h);
    ev(&mut app, AccountsEvent::FeedStarted { admin_key: true });
    ev(&mut app, AccountsEvent::Live(true));
    let out = app.update(key(KeyCode::F(4)));
    assert_eq!(app.view(), View::Accounts);
    let seq = load_of(&out);
    let mut rows = accounts(n);
    rows.sort_by(|a, b| b.share.total_cmp(&a.share));
    ev(
        &mut app,
        AccountsEvent::Loaded {
            seq,
            result: Ok((n, rows)),
        },
    );
    app
}

#[test]
fn accounts_80x24() {
    insta::assert_snapshot!(render(&loaded(80, 24, 40)));
}

#[test]
fn accounts_120x40() {
    insta::assert_snapshot!(render(&loaded(120, 40, 40)));
}

#[test]
fn accounts_200x60() {
    insta::assert_snapshot!(render(&loaded(200, 60, 40)));
}

#[test]
fn accounts_10000_at_the_end_80x24() {
    let mut app = loaded(80, 24, 10_000);
    app.update(key(KeyCode::End));
    app.update(key(KeyCode::Up));
    assert_eq!(app.accounts().selected, 9_998);
    insta::assert_snapshot!(render(&app));
}

#[test]
fn accounts_10000_paged_120x40() {
    let mut app = loaded(120, 40, 10_000);
    for _ in 0..3 {
        app.update(key(KeyCode::PageDown));
    }
    insta::assert_snapshot!(render(&app));
}

#[test]
fn accounts_filter_typed_80x24() {
    let mut app = loaded(80, 24, 40);
    app.update(key(KeyCode::Char('/')));
    app.update(key(KeyCode::Char('p')));
    let out = app.update(key(KeyCode::Char('r')));
    let seq = load_of(&out);
    let mut rows = accounts(40);
    rows.retain(|a| a.tier == "pro");
    let n = rows.len() as u64;
    ev(
        &mut app,
        AccountsEvent::Loaded {
            seq,
            result: Ok((n, rows)),
        },
    );
    insta::assert_snapshot!(render(&app));
}

#[test]
fn accounts_details_80x24() {
    let mut app = loaded(80, 24, 40);
    app.update(key(KeyCode::Down));
    let out = app.update(key(KeyCode::Enter));
    let (seq, id, days) = out
        .iter()
        .find_map(|c| match c {
            Command::Accounts(AccountsRequest::Details {
                seq,
                account_id,
                days,
            }) => Some((*seq, *account_id, days.clone())),
            _ => None,
        })
        .expect("Enter asks for the details");
    for (index, (start, end)) in days.iter().enumerate() {
        let day: u64 = start.format("%d").to_string().parse().unwrap();
        let m = serde_json::json!({
            "period": {"start": start.to_rfc3339(), "end": end.to_rfc3339(), "granularity": "day"},
            "sessions": {"total": day % 4, "active": 0, "averageDuration": 60.0},
            "messages": {"total": day * 3 + id, "averagePerSession": 2.0, "userMessages": day, "assistantMessages": day},
            "tokens": {"total": day * 250 + id, "prompt": day * 100, "completion": day * 150, "averagePerMessage": 10.0}
        });
        // The last day is still loading.
        if index + 1 < days.len() {
            ev(
                &mut app,
                AccountsEvent::Day {
                    seq,
                    index,
                    result: Ok(Box::new(serde_json::from_value(m).unwrap())),
                },
            );
        }
    }
    insta::assert_snapshot!(render(&app));
}

#[test]
fn accounts_no_admin_key_on_a_remote_server_80x24() {
    let mut app = app(80, 24);
    app.update(AppEvent::Connected(Endpoint::Remote {
        base_url: "https://convo.example".into(),
    }));
    ev(&mut app, AccountsEvent::FeedStarted { admin_key: false });
    let out = app.update(key(KeyCode::F(4)));
    assert!(out.iter().all(|c| !matches!(c, Command::Accounts(_))));
    assert_eq!(app.accounts().availability, Availability::NoAdminKey);
    insta::assert_snapshot!(render(&app));
}

#[test]
fn an_alert_on_crossing_80_then_100_percent_once_each_80x24() {
    let mut app = loaded(80, 24, 40);
    app.update(key(KeyCode::Esc));
    assert_eq!(app.view(), View::Chat);
    // Account 1 is at 7 requests of 100 (its nearest limit is below 80 %).
    let out = ev(&mut app, AccountsEvent::Changed(vec![account(1, 80)]));
    let rings = |out: &[Command]| {
        out.iter()
            .filter(|c| matches!(c, Command::Notify(_)))
            .count()
    };
    assert_eq!(rings(&out), 1);
    let warned = render(&app);
    // The same level again: no second alert.
    let out = ev(&mut app, AccountsEvent::Changed(vec![account(1, 90)]));
    assert_eq!(rings(&out), 0);
    let out = ev(&mut app, AccountsEvent::Changed(vec![account(1, 100)]));
    assert_eq!(rings(&out), 1);
    assert_eq!(app.accounts().unseen_alerts, 2);
    insta::assert_snapshot!("alert_80_percent_80x24", warned);
    insta::assert_snapshot!("alert_100_percent_80x24", render(&app));
    // F4 shows them: seen.
    app.update(key(KeyCode::F(4)));
    assert_eq!(app.accounts().unseen_alerts, 0);
}
