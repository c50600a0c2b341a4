//! The operator's endpoints of `convo serve` (extensions; docs/service.md, "Operators"):
//! every account of a deployment with its usage against its plan, one account's metrics, and
//! a stream of accounts whose usage changed. They take the admin key (`--admin-key`), never an
//! API key; the interface's endpoints never take the admin key.

use serde::{Deserialize, Serialize};

use crate::types::{BillingPeriod, Quota, SessionQuota};

/// What every admin key starts with; API keys start with `service_live_`, so neither is ever
/// taken for the other.
pub const ADMIN_KEY_PREFIX: &str = "service_admin_";
/// Fewest `[A-Za-z0-9]` characters after the prefix.
pub const ADMIN_KEY_MIN_CHARS: usize = 32;

/// True when `key` is `service_admin_` followed by at least 32 of `[A-Za-z0-9]`.
pub fn is_valid_admin_key(key: &str) -> bool {
    key.strip_prefix(ADMIN_KEY_PREFIX).is_some_and(|rest| {
        rest.len() >= ADMIN_KEY_MIN_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// One account as an operator sees it: its plan, how it is reached (key hints only) and what
/// it used this billing period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminAccount {
    /// The account's id in the deployment (the same on every replica).
    pub account_id: u64,
    /// What operators call it: `key …abcd` from its first key (the keys' last 4 characters are
    /// all that is ever shown of them).
    pub name: String,
    /// The plan: `free`, `pro` or `enterprise`.
    pub tier: String,
    /// The last 4 characters of each of its API keys, oldest first.
    pub key_hints: Vec<String>,
    pub requests: Quota,
    pub tokens: Quota,
    pub sessions: SessionQuota,
    /// The largest of the three shares (used / limit, 1.0 = the limit reached; may exceed 1.0).
    pub share: f64,
    /// When its last message was stored (ISO 8601), if ever (requests are counted, not timed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_active_at: Option<String>,
}

/// How `GET /v1/admin/accounts` sorts (`?sort=`); every order is descending except `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountSort {
    #[default]
    Share,
    Requests,
    Tokens,
    Name,
}

impl AccountSort {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountSort::Share => "share",
            AccountSort::Requests => "requests",
            AccountSort::Tokens => "tokens",
            AccountSort::Name => "name",
        }
    }
}

/// `GET /v1/admin/accounts?sort=share&limit=100&offset=0&q=abcd`: one page of the accounts
/// that match `q` (a key hint, a tier or an account id), in the order asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminAccounts {
    pub billing_period: BillingPeriod,
    /// How many accounts match `q` (the page may hold fewer).
    pub total: u64,
    pub accounts: Vec<AdminAccount>,
}

/// One text frame of `GET /v1/admin/stream`. Clients ignore event types they do not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum AdminEvent {
    /// Sent first on every connection: the deployment's account count now. A client that was
    /// away fetches the list again.
    #[serde(rename = "hello")]
    Hello { total: u64 },
    /// An account's usage changed (coalesced: at most about one event per account a second);
    /// `account` is its state after the change.
    #[serde(rename = "account")]
    Account { account: AdminAccount },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_keys_are_validated() {
        let rest = "a1".repeat(16);
        assert!(is_valid_admin_key(&format!("service_admin_{rest}")));
        assert!(!is_valid_admin_key(&format!(
            "service_admin_{}",
            &rest[1..]
        )));
        assert!(!is_valid_admin_key(&format!("service_admin_{rest}-")));
        assert!(!is_valid_admin_key(&format!("service_live_{rest}")));
    }

    #[test]
    fn accounts_are_camel_case_and_events_tagged() {
        let account = AdminAccount {
            account_id: 7,
            name: "key …abcd".into(),
            tier: "pro".into(),
            key_hints: vec!["abcd".into()],
            requests: Quota {
                used: 40,
                limit: 50,
                percentage: 80.0,
            },
            tokens: Quota {
                used: 0,
                limit: 10,
                percentage: 0.0,
            },
            sessions: SessionQuota {
                active: 1,
                limit: 5,
                percentage: 20.0,
            },
            share: 0.8,
            last_active_at: None,
        };
        let json = serde_json::to_value(AdminEvent::Account {
            account: account.clone(),
        })
        .unwrap();
        assert_eq!(json["type"], "account");
        assert_eq!(json["account"]["accountId"], 7);
        assert_eq!(json["account"]["keyHints"][0], "abcd");
        assert!(json["account"].get("lastActiveAt").is_none());
        let back: AdminEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, AdminEvent::Account { account });
        assert_eq!(
            serde_json::to_string(&AccountSort::Requests).unwrap(),
            "\"requests\""
        );
    }
}
