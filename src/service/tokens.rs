//! o200k token counting (tiktoken-rs, offline). The BPE tables load on first use, which takes a
//! moment: `start` warms them on a blocking thread, and callers count on blocking threads too.

use tiktoken_rs::CoreBPE;

fn bpe() -> &'static CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

/// Loads the tables now (blocking).
pub fn warm() {
    let _ = bpe();
}

/// Number of o200k tokens of `text` (special-token text counts as ordinary text). Blocking.
pub fn count(text: &str) -> u64 {
    bpe().encode_ordinary(text).len() as u64
}

/// `count` on a blocking thread.
pub async fn count_async(text: String) -> u64 {
    match tokio::task::spawn_blocking(move || count(&text)).await {
        Ok(n) => n,
        Err(e) => {
            // Only a panic inside tiktoken gets here; never undercount to zero silently.
            tracing::error!(error = %e, "token counting task failed");
            u64::MAX / 4
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_o200k_tokens() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert!(super::count("<|endoftext|>") > 1);
    }
}
