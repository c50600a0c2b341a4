//! Plans: an account's tier and the limits it sets (docs/design.md, "Usage"). The rules live in
//! `convo-core`; re-exported here so the service's modules keep their paths.

pub use convo_core::plans::{PlanLimits, Tier};
