//! Which service and account a client talks to: its *target*. The local store files every
//! session under one (`local_store`), the metrics buckets too, and the TUI and the one-shot
//! commands both name theirs here, so that a session of one server is never shown, sent to
//! or deleted on another.
//!
//! - the service embedded in the TUI (its database in the data dir): `embedded`;
//! - any other server: `remote:` and a hash of the base URL and the API key, so that two keys
//!   or two deployments are two targets and the key itself is never written down. Its label,
//!   as lists show it, is the base URL and the start of that hash. In memory it also holds
//!   the key, by which the store finds one server reached at two addresses (its database and
//!   key the same) and keeps one set of sessions for both (`local_store/targets.rs`).

use crate::api::ClientOptions;
use crate::config::Config;

/// The id of the embedded service's target.
pub const EMBEDDED: &str = "embedded";

/// What separates a remote target's base URL from the start of its id in its label.
const LABEL_MARK: &str = " #";

/// One target: its id (what the store keeps) and its label (what lists show).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TargetId {
    id: String,
    label: String,
    /// Its API key, kept in memory only (never written down nor shown by `Debug`), to tell
    /// whether another target is this key at another address ([`TargetId::same_key_as`]);
    /// `None` for the embedded service, a keyless server and a target read back from the
    /// store.
    key: Option<std::sync::Arc<str>>,
}

impl std::fmt::Debug for TargetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetId")
            .field("id", &self.id)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl TargetId {
    /// The service the TUI embeds when no base URL is configured.
    pub fn embedded() -> TargetId {
        TargetId {
            id: EMBEDDED.to_string(),
            label: EMBEDDED.to_string(),
            key: None,
        }
    }

    /// The server and account of these options: [`ClientOptions::account`] (a hash of the
    /// base URL and the key), labelled with the base URL and the hash's first six digits.
    pub fn remote(options: &ClientOptions) -> TargetId {
        let id = options.account();
        let hash = id.strip_prefix("remote:").unwrap_or(&id);
        TargetId {
            label: format!(
                "{}{LABEL_MARK}{}",
                options.base_url.as_str().trim_end_matches('/'),
                &hash[..6.min(hash.len())]
            ),
            id,
            key: options.api_key.as_deref().map(std::sync::Arc::from),
        }
    }

    /// The target of a configuration: the configured server with its key, else the embedded
    /// service (what the TUI starts when no base URL is set).
    pub fn of_config(config: &Config) -> Result<TargetId, crate::api::ApiError> {
        match config.connection.base_url {
            None => Ok(TargetId::embedded()),
            Some(_) => ClientOptions::from_config(config).map(|o| TargetId::remote(&o)),
        }
    }

    /// A target known only by its id and label (read back from the store).
    pub fn known(id: &str, label: &str) -> TargetId {
        TargetId {
            id: id.to_string(),
            label: label.to_string(),
            key: None,
        }
    }

    /// What the store keeps: `embedded` or `remote:<hex>`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What lists show: `embedded` or `http://host:port #1a2b3c`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether the remote target `other_id`, labelled `other_label` ([`TargetId::remote`]'s
    /// label: the base URL, then ` #` and the start of the id), is this target's API key at
    /// that base URL: its id is what this key there makes, a hash of the two, so a match is
    /// proof. False for a target without a key, and for a label of another form (the
    /// embedded service's, one where sessions are kept aside).
    pub fn same_key_as(&self, other_id: &str, other_label: &str) -> bool {
        let Some(key) = &self.key else {
            return false;
        };
        let Some((base_url, _)) = other_label.rsplit_once(LABEL_MARK) else {
            return false;
        };
        crate::api::client::account_at(base_url, Some(key)) == other_id
    }

    pub fn is_embedded(&self) -> bool {
        self.id == EMBEDDED
    }
}

impl std::fmt::Display for TargetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(url: &str, key: Option<&str>) -> ClientOptions {
        let mut o = ClientOptions::new(url.parse().unwrap());
        o.api_key = key.map(String::from);
        o
    }

    #[test]
    fn a_remote_target_is_the_url_and_the_key_never_the_key_itself() {
        let key = "service_live_abcdefghijklmnopqrst";
        let a = TargetId::remote(&options("http://127.0.0.1:8080/", Some(key)));
        assert_eq!(
            a,
            TargetId::remote(&options("http://127.0.0.1:8080", Some(key)))
        );
        assert_ne!(
            a,
            TargetId::remote(&options(
                "http://127.0.0.1:8080",
                Some("service_live_other")
            ))
        );
        assert_ne!(
            a,
            TargetId::remote(&options("http://127.0.0.1:9", Some(key)))
        );
        assert!(
            a.id().starts_with("remote:") && a.id().len() == 7 + 32,
            "{a:?}"
        );
        assert!(a.label().starts_with("http://127.0.0.1:8080 #"), "{a:?}");
        assert!(!a.id().contains("abcdefgh") && !a.label().contains("abcdefgh"));
        assert!(TargetId::embedded().is_embedded() && !a.is_embedded());
    }
}
