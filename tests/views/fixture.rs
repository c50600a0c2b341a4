//! The app both view test files start from: connected to an embedded service, with an empty
//! store, at a fixed time.

use chrono::{DateTime, TimeZone, Utc};
use convo_tui::app::{App, Settings};
use convo_tui::event::{AppEvent, Endpoint};
use convo_tui::keys::KeyBindings;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;

/// The fixed "now" of the view tests.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, 34, 0).unwrap()
}

pub fn key(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// A connected app on a `w`×`h` screen with no sessions.
pub fn app(w: u16, h: u16) -> App {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, w, h),
        t0(),
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:40000".into(),
    }));
    app.update(AppEvent::StoreLoaded {
        sessions: vec![],
        last_open: None,
    });
    app
}
