//! API keys: which strings are keys (`service_live_` and at least 16 of `[A-Za-z0-9]`), and the
//! only forms in which a key is ever shown, logged or stored in the clear.

const PREFIX: &str = "service_live_";

/// True when `key` is `service_live_` followed by at least 16 of `[A-Za-z0-9]`.
pub fn is_valid_api_key(key: &str) -> bool {
    key.strip_prefix(PREFIX)
        .is_some_and(|rest| rest.len() >= 16 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The key's last four characters: the hint kept beside its hash, so an operator can tell
/// keys apart without the secret.
pub fn key_hint(key: &str) -> String {
    let n = key.chars().count();
    key.chars().skip(n.saturating_sub(4)).collect()
}

/// `service_live_…abcd`: a key as shown or logged. The last four characters appear only
/// when they are a small part of the secret (at least 12 characters after the prefix);
/// otherwise nothing of it does.
pub fn redact_key(key: &str) -> String {
    let (prefix, rest) = match key.strip_prefix(PREFIX) {
        Some(rest) => (PREFIX, rest),
        None => ("", key),
    };
    if rest.chars().count() >= 12 {
        format!("{prefix}…{}", key_hint(rest))
    } else {
        format!("{prefix}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated() {
        assert!(is_valid_api_key("service_live_abcdefgh12345678"));
        assert!(!is_valid_api_key("service_live_abcdefgh1234567"));
        assert!(!is_valid_api_key("service_live_abcdefgh1234567-"));
        assert!(!is_valid_api_key("service_test_abcdefgh12345678"));
    }

    #[test]
    fn keys_are_redacted() {
        assert_eq!(
            redact_key("service_live_abcdefgh12345678"),
            "service_live_…5678"
        );
        assert_eq!(redact_key("service_live_short"), "service_live_…");
        assert_eq!(redact_key("sk-abcdefghijklmnop"), "…mnop");
        assert_eq!(redact_key("eyJhbGciOiJIUzI1NiJ9.x.sig9"), "…sig9");
        assert_eq!(redact_key("abc"), "…");
        assert_eq!(redact_key(""), "…");
    }

    #[test]
    fn the_hint_is_the_last_four_characters() {
        assert_eq!(key_hint("service_live_abcdefgh12345678"), "5678");
        assert_eq!(key_hint("ab"), "ab");
        assert_eq!(key_hint("xxxxé€ü…"), "é€ü…");
    }

    proptest::proptest! {
        #[test]
        fn redaction_shows_at_most_the_prefix_and_four_characters(rest in "[A-Za-z0-9]{0,64}") {
            let key = format!("service_live_{rest}");
            let shown = redact_key(&key);
            proptest::prop_assert!(shown.starts_with("service_live_…"));
            let tail = shown.trim_start_matches("service_live_…");
            proptest::prop_assert!(tail.chars().count() <= 4);
            proptest::prop_assert!(rest.ends_with(tail));
            if rest.len() < 12 {
                proptest::prop_assert!(tail.is_empty());
            }
        }
    }
}
