//! Random identifiers: API keys, message ids, secrets.

use rand::Rng;

const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// `len` random characters from `[A-Za-z0-9]` (thread-local CSPRNG).
pub fn random_alnum(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())] as char)
        .collect()
}

/// A fresh API key: `service_live_` + 32 alphanumerics.
pub fn generate_api_key() -> String {
    format!("service_live_{}", random_alnum(32))
}

/// A fresh admin key (`--admin-key`): `service_admin_` + 40 alphanumerics.
pub fn generate_admin_key() -> String {
    format!(
        "{}{}",
        convo_wire::admin::ADMIN_KEY_PREFIX,
        random_alnum(convo_wire::admin::ADMIN_KEY_MIN_CHARS + 8)
    )
}

/// Digits of the time prefix, in ASCII order so that ids compare like their times.
const ORDERED_DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Characters of the time prefix: 62^8 milliseconds is about 6,900 years.
const TIME_PREFIX: usize = 8;

/// A fresh message id: `msg_` + 24 alphanumerics: 8 that encode the current time in
/// milliseconds (base 62, digits in ASCII order), then 16 random ones (95 bits). Ids made later
/// sort after earlier ones, so the B-tree indexes keyed by message id (`messages.id`,
/// `message_log`) grow at their right edge instead of at a random page per insert.
pub fn new_message_id() -> String {
    message_id_at(crate::time::now_ms())
}

fn message_id_at(ms: i64) -> String {
    let mut id = String::with_capacity(4 + 24);
    id.push_str("msg_");
    let mut prefix = [b'0'; TIME_PREFIX];
    let mut rest = ms.max(0) as u64;
    for digit in prefix.iter_mut().rev() {
        *digit = ORDERED_DIGITS[(rest % 62) as usize];
        rest /= 62;
    }
    id.extend(prefix.iter().map(|&b| b as char));
    id.push_str(&random_alnum(24 - TIME_PREFIX));
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_documented_shape() {
        let key = generate_api_key();
        assert!(crate::config::is_valid_api_key(&key));
        assert_eq!(key.len(), "service_live_".len() + 32);
        let id = new_message_id();
        assert!(id.starts_with("msg_") && id.len() == 28);
        assert_ne!(new_message_id(), new_message_id());
        assert!(id[4..].bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn message_ids_sort_by_time() {
        let times = [
            0,
            1,
            61,
            62,
            1_000,
            1_795_000_000_000,
            1_795_000_000_001,
            4_102_444_800_000,
        ];
        let ids: Vec<String> = times.iter().map(|&t| message_id_at(t)).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} < {}", pair[0], pair[1]);
        }
        assert!(ids.iter().all(|id| id.len() == 28));
        assert_eq!(&message_id_at(0)[4..12], "00000000");
    }
}
