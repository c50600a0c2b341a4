//! Tests of the operator views: snapshots of the metrics (F2) and wallet (F3) views through
//! `TestBackend` in every state.

#[path = "views/snapshots.rs"]
mod snapshots;
