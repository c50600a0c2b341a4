//! The contract of a full-screen view (the metrics view on F2, the wallet view on F3, and any
//! view added later): it takes keys, pastes and wheel scrolls, says its key hints and help,
//! and draws itself above the status bar. `App` keeps one state per view and, while a view is
//! shown, hands it every input through this trait in one place (`App::active_view`).
//!
//! A view's worker answers are typed per view (`MetricsEvent`, `WalletEvent`), so each view's
//! state takes them with its own `on_event`; everything else goes through [`FullView`].

use chrono::{DateTime, Utc};
use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::command::Command;
use crate::keys::KeyBindings;

pub use super::key_result::KeyResult;

/// A section of the help overlay: its title, then (keys, what they do).
pub type HelpSection = (String, Vec<(String, String)>);

/// A full-screen view's state.
pub trait FullView {
    /// A key while the view is shown, at `now`; work for the view's worker goes to `out`.
    fn key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<Command>,
    ) -> KeyResult;

    /// Pasted text, for the view's input (if it has one).
    fn paste(&mut self, text: &str);

    /// The mouse wheel: `delta` rows down (negative: up).
    fn scroll(&mut self, delta: isize);

    /// Key hints for the status bar, most important first.
    fn hints(&self, keys: &KeyBindings) -> Vec<(String, &'static str)>;

    /// The view's section of the help overlay (the same whichever view is shown).
    fn help(keys: &KeyBindings) -> HelpSection
    where
        Self: Sized;

    /// Draws the view into `area` (the screen above the status bar).
    fn render(&self, keys: &KeyBindings, area: Rect, buf: &mut Buffer);
}
