//! Whole-binary tests: `convo` in a pseudo-terminal with a temporary HOME, read through vt100.

#[path = "pty/accounts.rs"]
mod accounts;
#[path = "service/backends.rs"]
#[allow(dead_code)]
mod backends;
#[path = "pty/delete.rs"]
mod delete;
#[path = "pty/devices.rs"]
mod devices;
#[path = "pty/editor.rs"]
mod editor;
#[path = "pty/fork.rs"]
mod fork;
#[path = "pty/harness.rs"]
mod harness;
#[path = "pty/queue.rs"]
mod queue;
#[path = "pty/search.rs"]
mod search;
#[path = "pty/session.rs"]
mod session;
#[path = "pty/stop.rs"]
mod stop;
#[path = "pty/targets.rs"]
mod targets;
