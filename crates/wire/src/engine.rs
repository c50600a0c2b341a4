//! What the embedded service tells its TUI about the engine that answers.

use serde::{Deserialize, Serialize};

/// Whether an engine can answer yet (a local model takes a moment to load).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadState {
    /// Loading; `fraction` runs from 0 to 1.
    Loading {
        fraction: f32,
    },
    Ready,
    /// It never will: every reply fails with this.
    Failed(String),
}
