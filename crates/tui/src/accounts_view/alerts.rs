//! Crossing detection for the operator's alerts: each watched account's three limits
//! (requests, tokens, sessions) have a level — below 80 %, at least 80 % (warn), at least
//! 100 % (reached) — and an alert is raised once when a level rises, not on every update. An
//! account's first known state is its baseline (no alert); a level that falls (a new billing
//! period) is remembered, so that the next rise alerts again.

use std::collections::HashMap;

use convo_client::api::AdminAccount;

/// From this share of a limit an account is shown in the warning colour and alerts.
pub const WARN_SHARE: f64 = 0.8;
/// From this share the limit is reached.
pub const REACHED_SHARE: f64 = 1.0;

/// How close to a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShareLevel {
    Below,
    Warn,
    Reached,
}

impl ShareLevel {
    /// The level of a share (used / limit; 1.0 = the limit).
    pub fn of(share: f64) -> ShareLevel {
        if share >= REACHED_SHARE {
            ShareLevel::Reached
        } else if share >= WARN_SHARE {
            ShareLevel::Warn
        } else {
            ShareLevel::Below
        }
    }

    /// The threshold's words: `80 %` or `100 %`.
    pub fn threshold(self) -> &'static str {
        match self {
            ShareLevel::Below => "0 %",
            ShareLevel::Warn => "80 %",
            ShareLevel::Reached => "100 %",
        }
    }
}

/// One of an account's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    Requests,
    Tokens,
    Sessions,
}

impl Limit {
    pub const ALL: [Limit; 3] = [Limit::Requests, Limit::Tokens, Limit::Sessions];

    pub fn name(self) -> &'static str {
        match self {
            Limit::Requests => "requests",
            Limit::Tokens => "tokens",
            Limit::Sessions => "sessions",
        }
    }

    /// The account's share of this limit (0 when the limit is 0: nothing is allowed, nothing
    /// is used of it).
    pub fn share(self, account: &AdminAccount) -> f64 {
        let (used, limit) = match self {
            Limit::Requests => (account.requests.used, account.requests.limit),
            Limit::Tokens => (account.tokens.used, account.tokens.limit),
            Limit::Sessions => (account.sessions.active, account.sessions.limit),
        };
        if limit == 0 {
            0.0
        } else {
            used as f64 / limit as f64
        }
    }
}

/// A level that rose: what the status bar says and `[notify]` rings for.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    pub account_id: u64,
    pub name: String,
    pub limit: Limit,
    pub level: ShareLevel,
}

impl Crossing {
    /// One line for the status bar and the notification.
    pub fn describe(&self) -> String {
        let verb = match self.level {
            ShareLevel::Reached => "reached",
            _ => "passed",
        };
        format!(
            "account {} {verb} {} of its {} limit",
            self.name,
            self.level.threshold(),
            self.limit.name()
        )
    }
}

/// The last level seen of every watched account's limits.
#[derive(Debug, Clone, Default)]
pub struct Alerts {
    levels: HashMap<(u64, Limit), ShareLevel>,
}

impl Alerts {
    /// Notes an account's state; the levels that rose since it was last seen.
    pub fn observe(&mut self, account: &AdminAccount) -> Vec<Crossing> {
        let mut out = Vec::new();
        for limit in Limit::ALL {
            let level = ShareLevel::of(limit.share(account));
            let before = self.levels.insert((account.account_id, limit), level);
            if let Some(before) = before
                && level > before
            {
                out.push(Crossing {
                    account_id: account.account_id,
                    name: account.name.clone(),
                    limit,
                    level,
                });
            }
        }
        out
    }

    /// How many accounts are watched.
    pub fn watched(&self) -> usize {
        self.levels.len() / Limit::ALL.len()
    }
}

#[cfg(test)]
pub use tests::account as test_account;

#[cfg(test)]
mod tests {
    use super::*;
    use convo_client::api::{Quota, SessionQuota};

    pub fn account(id: u64, requests: u64, tokens: u64) -> AdminAccount {
        AdminAccount {
            account_id: id,
            name: format!("key …{id:04}"),
            tier: "free".into(),
            key_hints: vec![format!("{id:04}")],
            requests: Quota {
                used: requests,
                limit: 100,
                percentage: requests as f64,
            },
            tokens: Quota {
                used: tokens,
                limit: 1000,
                percentage: tokens as f64 / 10.0,
            },
            sessions: SessionQuota {
                active: 0,
                limit: 5,
                percentage: 0.0,
            },
            share: (requests as f64 / 100.0).max(tokens as f64 / 1000.0),
            last_active_at: None,
        }
    }

    #[test]
    fn levels_change_at_80_and_100_percent() {
        assert_eq!(ShareLevel::of(0.799), ShareLevel::Below);
        assert_eq!(ShareLevel::of(0.8), ShareLevel::Warn);
        assert_eq!(ShareLevel::of(1.0), ShareLevel::Reached);
        assert_eq!(ShareLevel::of(3.0), ShareLevel::Reached);
    }

    #[test]
    fn a_crossing_alerts_once_and_again_only_after_falling_back() {
        let mut alerts = Alerts::default();
        // The first sight is the baseline, even above a threshold.
        assert!(alerts.observe(&account(1, 90, 0)).is_empty());
        assert!(alerts.observe(&account(2, 10, 0)).is_empty());
        // 10 → 79: nothing; 79 → 80: one alert; 80 → 95: none (still warn).
        assert!(alerts.observe(&account(2, 79, 0)).is_empty());
        let crossed = alerts.observe(&account(2, 80, 0));
        assert_eq!(crossed.len(), 1);
        assert_eq!(crossed[0].limit, Limit::Requests);
        assert_eq!(crossed[0].level, ShareLevel::Warn);
        assert_eq!(
            crossed[0].describe(),
            "account key …0002 passed 80 % of its requests limit"
        );
        assert!(alerts.observe(&account(2, 95, 0)).is_empty());
        // 95 → 100: reached, once.
        let crossed = alerts.observe(&account(2, 100, 0));
        assert_eq!(crossed[0].level, ShareLevel::Reached);
        assert!(alerts.observe(&account(2, 101, 0)).is_empty());
        // A new period: back to 0, then up again alerts again.
        assert!(alerts.observe(&account(2, 0, 0)).is_empty());
        assert_eq!(alerts.observe(&account(2, 100, 0)).len(), 1);
        // Two limits crossing at once are two alerts.
        let both = alerts.observe(&account(1, 100, 900));
        assert_eq!(both.len(), 2);
        assert_eq!(alerts.watched(), 2);
    }

    #[test]
    fn a_zero_limit_is_never_crossed() {
        let mut a = account(3, 0, 0);
        a.requests.limit = 0;
        assert_eq!(Limit::Requests.share(&a), 0.0);
    }
}
