//! The views driven through `App::update`: how they are reached, and the keys, pastes and
//! mouse events they take.

use convo_tui::app::{App, Command, View};
use convo_tui::event::AppEvent;
use convo_tui::metrics::{MetricsRequest, RangeChoice, RangePreset};
use convo_tui::wallet::{WalletRequest, WalletSection};
use crossterm::event::{KeyCode, KeyModifiers, MouseEvent, MouseEventKind};

use crate::fixture::key;

fn app() -> App {
    crate::fixture::app(80, 24)
}

fn type_line(app: &mut App, text: &str) -> Vec<Command> {
    for c in text.chars() {
        app.update(key(KeyCode::Char(c)));
    }
    app.update(key(KeyCode::Enter))
}

#[test]
fn slash_commands_open_the_views() {
    let mut app = app();
    let out = type_line(&mut app, "/metrics");
    assert_eq!(app.view(), View::Metrics);
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::Metrics(MetricsRequest::Load(_))))
    );
    assert!(
        app.composer_text().is_empty(),
        "the command is not left in the composer"
    );
    app.update(key(KeyCode::Esc));
    assert_eq!(app.view(), View::Chat);
    let out = type_line(&mut app, "/wallet   staker ");
    assert_eq!(app.view(), View::Wallet);
    assert!(out.contains(&Command::Wallet(WalletRequest::Fetch {
        fetch_id: 1,
        wallet_id: "staker".into()
    })));
    // `/wallet` alone opens the prompt.
    app.update(key(KeyCode::Esc));
    let out = type_line(&mut app, "/wallet");
    assert_eq!(app.view(), View::Wallet);
    assert!(!out.iter().any(|c| matches!(c, Command::Wallet(_))));
}

#[test]
fn f2_and_f3_switch_between_the_views() {
    let mut app = app();
    app.update(key(KeyCode::F(3)));
    assert_eq!(app.view(), View::Wallet);
    assert_eq!(app.wallet().section, WalletSection::Prompt);
    // The embedded service's wallets are offered.
    assert!(app.wallet().suggestions().contains(&"treasury"));
    app.update(key(KeyCode::F(2)));
    assert_eq!(app.view(), View::Metrics);
    app.update(key(KeyCode::F(3)));
    assert_eq!(app.view(), View::Wallet);
}

#[test]
fn pastes_go_to_the_view_inputs_not_the_composer() {
    let mut app = app();
    app.update(key(KeyCode::F(3)));
    app.update(AppEvent::Paste("collector\nsecond line".into()));
    assert_eq!(app.wallet().input.text(), "collector");
    assert!(app.composer_text().is_empty());
    app.metrics.requests_left = Some(1_000_000);
    app.update(key(KeyCode::F(2)));
    for _ in 0..4 {
        app.update(key(KeyCode::Right));
    }
    app.update(key(KeyCode::Enter));
    assert!(app.metrics.custom.editing);
    app.metrics.custom.text.clear();
    app.update(AppEvent::Paste("2026-11-01..2026-11-08".into()));
    assert_eq!(app.metrics.custom.error, None);
    let out = app.update(key(KeyCode::Enter));
    assert!(matches!(app.metrics.range, RangeChoice::Custom(_)));
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::Metrics(MetricsRequest::Load(_))))
    );
    assert!(app.composer_text().is_empty());
}

#[test]
fn keys_in_the_views_do_not_reach_the_chat() {
    let mut app = app();
    app.update(key(KeyCode::F(2)));
    // `2` picks a preset; it is not typed into the composer.
    app.update(key(KeyCode::Char('2')));
    assert_eq!(
        app.metrics.range,
        RangeChoice::Preset(RangePreset::Last7Days)
    );
    assert!(app.composer_text().is_empty());
    // The wheel moves the selected bucket.
    let before = app.metrics.cursor;
    app.update(AppEvent::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollUp,
        column: 10,
        row: 10,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(app.metrics.cursor, before - 1);
    // `q` quits from the view, as from any pane outside the composer.
    let out = app.update(key(KeyCode::Char('q')));
    assert!(out.contains(&Command::Quit));
    assert!(app.has_quit());
}
