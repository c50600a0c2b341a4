//! Tests of the operator views: snapshots of the metrics (F2) and wallet (F3) views through
//! `TestBackend` in every state, and both views against the local service in-process.

#[path = "views/accounts.rs"]
mod accounts;
#[allow(dead_code)]
#[path = "client/fake_admin.rs"]
mod fake_admin;
#[path = "views/service.rs"]
mod service;
#[path = "views/snapshots.rs"]
mod snapshots;
// The pty harness of the TUI tests, reused; not every helper is needed here.
#[path = "views/app.rs"]
mod app;
#[path = "views/cli.rs"]
mod cli;
#[path = "views/fixture.rs"]
mod fixture;
#[allow(dead_code)]
#[path = "pty/harness.rs"]
mod harness;
#[path = "views/pty.rs"]
mod pty;
