//! Plans: an account's tier and the limits it sets (docs/design.md, "Usage").

/// Subscription tier of an account; decides its plan limits (docs/design.md, "Usage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tier {
    Free,
    #[default]
    Pro,
    Enterprise,
}

/// The plan limits of a tier, per billing period (sessions: at any time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanLimits {
    pub requests: u64,
    pub tokens: u64,
    pub sessions: u64,
}

impl Tier {
    /// Every tier, in the order of their plans.
    pub const ALL: [Tier; 3] = [Tier::Free, Tier::Pro, Tier::Enterprise];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Pro => "pro",
            Tier::Enterprise => "enterprise",
        }
    }

    pub fn limits(self) -> PlanLimits {
        match self {
            Tier::Free => PlanLimits {
                requests: 1_000,
                tokens: 200_000,
                sessions: 10,
            },
            Tier::Pro => PlanLimits {
                requests: 50_000,
                tokens: 10_000_000,
                sessions: 500,
            },
            Tier::Enterprise => PlanLimits {
                requests: 1_000_000,
                tokens: 500_000_000,
                sessions: 10_000,
            },
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "free" => Ok(Tier::Free),
            "pro" => Ok(Tier::Pro),
            "enterprise" => Ok(Tier::Enterprise),
            other => Err(format!(
                "unknown tier `{other}` (expected free, pro or enterprise)"
            )),
        }
    }
}
