//! TUI tests: snapshots of every pane, dialog and error state through `TestBackend`, and
//! the app driven with key events against the local service in-process.

#[path = "tui/accounts_live.rs"]
mod accounts_live;
/// The scripted servers of the client tests (only some of their helpers are used here).
#[allow(dead_code)]
#[path = "client/support.rs"]
mod client_support;
#[allow(dead_code)]
#[path = "client/fake_admin.rs"]
mod fake_admin;
#[path = "tui/idle_budget.rs"]
mod idle_budget;
#[path = "support/killable.rs"]
mod killable;
#[path = "tui/limit_lifted.rs"]
mod limit_lifted;
#[path = "tui/live.rs"]
mod live;
#[path = "tui/reply_outcome.rs"]
mod reply_outcome;
#[path = "tui/runtime.rs"]
mod runtime;
#[path = "tui/snapshots.rs"]
mod snapshots;
#[path = "tui/targets.rs"]
mod targets;
