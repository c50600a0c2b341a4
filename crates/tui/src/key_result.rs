//! What a key did to a full-screen view: a leaf, so that the view states can say it without
//! depending on the app or on [`super::full_view`].

/// What a key did to a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyResult {
    Consumed,
    /// The view has no use for the key; the app may (help, the other view's key).
    NotConsumed,
    /// Leave the view (Esc).
    Back,
    /// Quit the app.
    Quit,
}
