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

/// A fresh message id: `msg_` + 24 alphanumerics.
pub fn new_message_id() -> String {
    format!("msg_{}", random_alnum(24))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_documented_shape() {
        let key = generate_api_key();
        assert!(crate::service::config::is_valid_api_key(&key));
        assert_eq!(key.len(), "service_live_".len() + 32);
        let id = new_message_id();
        assert!(id.starts_with("msg_") && id.len() == 28);
        assert_ne!(new_message_id(), new_message_id());
    }
}
