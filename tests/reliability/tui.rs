//! The TUI's app and workers driven without a terminal (as `tests/tui/live.rs` does), here
//! pointed at any address (a fault proxy) and with its store in a directory the test keeps.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use convo_client::api::client::ClientOptions;
use convo_tui::app::{App, Settings};
use convo_tui::event::AppEvent;
use convo_tui::keys::KeyBindings;
use convo_tui::runtime::Runtime;
use convo_tui::view;
use convo_tui::workers::{Target, WorkerConfig};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;

/// Only a guard against a hang; nothing depends on how fast things are.
pub const GUARD: Duration = Duration::from_secs(90);

pub struct Tui {
    pub rt: Runtime,
    pub store_file: PathBuf,
}

/// Client options for `base` with `key`, no retries unless a test asks.
pub fn options(base: url::Url, key: &str) -> ClientOptions {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut options = ClientOptions::new(base);
    options.api_key = Some(key.to_string());
    options.max_retries = 0;
    options
}

impl Tui {
    /// Starts the app against `options` with its store in `dir`. Returns at once.
    pub fn start(options: ClientOptions, dir: &Path) -> Tui {
        let app = App::new(
            KeyBindings::default(),
            Settings::default(),
            Rect::new(0, 0, 100, 30),
            Utc::now(),
        );
        let store_file = dir.join("convo.db");
        let rt = Runtime::start(
            app,
            WorkerConfig {
                target: Target::Remote(options),
                store_file: store_file.clone(),
                // Polls come from kicks (after a send, `r`); the timer stays out of the way.
                usage: convo_tui::workers::UsagePacing::every(Duration::from_secs(3600)),
            },
        );
        Tui { rt, store_file }
    }

    pub async fn until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        if let Err(e) = self.rt.run_until(what, GUARD, done).await {
            panic!("{e}; screen:\n{}", self.screen());
        }
    }

    pub fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) {
        self.rt
            .handle(AppEvent::Key(KeyEvent::new(code, modifiers)));
    }

    pub fn press(&mut self, code: KeyCode) {
        self.key(code, KeyModifiers::NONE);
    }

    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.press(KeyCode::Char(c));
        }
    }

    pub fn app(&self) -> &App {
        &self.rt.app
    }

    /// The symbol of every cell of a frame drawn now.
    pub fn cells(&self) -> Vec<String> {
        let app = &self.rt.app;
        let mut t = Terminal::new(TestBackend::new(app.size().width, app.size().height)).unwrap();
        t.draw(|f| view::draw(f, app)).unwrap();
        t.backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol().to_string())
            .collect()
    }

    pub fn screen(&self) -> String {
        let app = &self.rt.app;
        let mut t = Terminal::new(TestBackend::new(app.size().width, app.size().height)).unwrap();
        t.draw(|f| view::draw(f, app)).unwrap();
        let buf = t.backend().buffer();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
    }
}
