//! The TUI's app and workers as the tests start them: a 100×30 screen, the default keys and
//! settings, the store in a directory of the test's.

use std::path::Path;
use std::time::Duration;

use chrono::Utc;
use convo_tui::app::{App, Settings};
use convo_tui::keys::KeyBindings;
use convo_tui::runtime::Runtime;
use convo_tui::workers::{Target, UsagePacing, WorkerConfig};
use ratatui::layout::Rect;

/// The usage poll's timer out of the way: polls come from the app's kicks (after a send, `r`).
pub fn kicks_only() -> UsagePacing {
    UsagePacing::every(Duration::from_secs(3600))
}

/// Starts the app and workers on `target`, with the store `convo.db` in `dir`.
pub fn start(target: Target, dir: &Path, usage: UsagePacing) -> Runtime {
    let app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 100, 30),
        Utc::now(),
    );
    Runtime::start(
        app,
        WorkerConfig {
            target,
            store_file: dir.join("convo.db"),
            usage,
        },
    )
}

/// What `app` draws, as text: one line per row.
pub fn screen(app: &App) -> String {
    let (w, h) = (app.size().width, app.size().height);
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    t.draw(|f| convo_tui::view::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
        .collect()
}
