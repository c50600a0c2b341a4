//! Tests of the operator views: snapshots of the metrics (F2) and wallet (F3) views through
//! `TestBackend` in every state, and both views against the local service in-process.

#[path = "views/service.rs"]
mod service;
#[path = "views/snapshots.rs"]
mod snapshots;
