//! The contract of the chat's components — the composer, the sessions pane, the transcript
//! pane and the dialogs — as [`FullView`](crate::full_view::FullView) is the contract of a
//! full-screen view. Each owns its state privately; `App` holds them and routes to the one
//! that has the keys, in one place (`app/input.rs`), every key and paste through this trait;
//! the component changes itself and answers what it asks of the app (its `Outcome`: a send,
//! a session to open, a delete confirmed…), which `App` acts on. The status bar asks the one
//! with the keys for its hints.
//!
//! Drawing is not part of it: the chat's panes are drawn by `view/` from the components'
//! read-only methods, beside what `App` holds around them (the focus, the connection, the
//! session's title).

use crossterm::event::KeyEvent;

use crate::keys::KeyBindings;

/// A component of the chat.
pub trait ChatComponent {
    /// What the component needs of the app to take a key or a paste (the transcript's
    /// viewport, the screen's size, the open session's sent messages…).
    type Context<'a>;
    /// What a key or a paste asks of the app.
    type Outcome;

    /// A key while the component has the keys.
    fn key(&mut self, keys: &KeyBindings, key: &KeyEvent, cx: Self::Context<'_>) -> Self::Outcome;

    /// Pasted text while the component has the keys.
    fn paste(&mut self, text: &str, cx: Self::Context<'_>) -> Self::Outcome;

    /// Key hints for the status bar while the component has the keys, most important first
    /// (none: the component shows its own, as a dialog does).
    fn hints(&self, keys: &KeyBindings) -> Vec<(String, &'static str)> {
        let _ = keys;
        Vec::new()
    }
}
