//! TUI tests: snapshots of every pane, dialog and error state through `TestBackend`, and
//! the app driven with key events against the local service in-process.

#[path = "support/killable.rs"]
mod killable;
#[path = "tui/live.rs"]
mod live;
#[path = "tui/snapshots.rs"]
mod snapshots;
