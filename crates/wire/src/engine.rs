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

/// The local engine's sampling settings: their defaults and their rules, which `convo serve`'s
/// flags and the client's `[engine]` section both apply.
pub mod sampling {
    /// How random the next token is (0: always the most likely one).
    pub const DEFAULT_TEMPERATURE: f32 = 0.6;
    /// Nucleus sampling: the next token is drawn from the likeliest ones that together hold
    /// this much of the probability.
    pub const DEFAULT_TOP_P: f32 = 0.95;

    /// A temperature: finite, 0 or more.
    pub fn check_temperature(t: f32) -> Result<f32, String> {
        if t.is_finite() && t >= 0.0 {
            Ok(t)
        } else {
            Err(format!("the temperature must be 0 or more, not {t}"))
        }
    }

    /// A top-p: more than 0, at most 1.
    pub fn check_top_p(p: f32) -> Result<f32, String> {
        if p > 0.0 && p <= 1.0 {
            Ok(p)
        } else {
            Err(format!("top-p must be more than 0 and at most 1, not {p}"))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_rules_take_the_sensible_values_only() {
            assert_eq!(check_temperature(0.0), Ok(0.0));
            assert_eq!(check_temperature(DEFAULT_TEMPERATURE), Ok(0.6));
            for bad in [-0.1, f32::NAN, f32::INFINITY] {
                assert!(check_temperature(bad).unwrap_err().contains("0 or more"));
            }
            assert_eq!(check_top_p(1.0), Ok(1.0));
            assert_eq!(check_top_p(DEFAULT_TOP_P), Ok(0.95));
            for bad in [0.0, -1.0, 1.5, f32::NAN] {
                assert!(check_top_p(bad).unwrap_err().contains("at most 1"));
            }
        }
    }
}
