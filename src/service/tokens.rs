//! o200k token counting (tiktoken-rs, offline). The BPE tables load on first use, which takes a
//! moment: `start` warms them on a blocking thread. Once they are loaded, a short text is counted
//! on the calling task (a few microseconds per hundred characters, less than the hand-off to a
//! blocking thread costs); a long one, or any before the tables are loaded, on a blocking thread.

use std::sync::atomic::{AtomicBool, Ordering};

use tiktoken_rs::CoreBPE;

/// Texts up to this many bytes are counted on the calling task once the tables are loaded
/// (the builtin engine's replies and most messages are shorter; a text of this size takes
/// well under a millisecond).
pub const INLINE_BYTES: usize = 4 * 1024;

/// Set once the tables are loaded, so that counting cannot stall an async worker on the load.
static LOADED: AtomicBool = AtomicBool::new(false);

fn bpe() -> &'static CoreBPE {
    let bpe = tiktoken_rs::o200k_base_singleton();
    LOADED.store(true, Ordering::Release);
    bpe
}

/// Loads the tables now (blocking).
pub fn warm() {
    let _ = bpe();
}

/// Number of o200k tokens of `text` (special-token text counts as ordinary text). Blocking.
pub fn count(text: &str) -> u64 {
    bpe().encode_ordinary(text).len() as u64
}

/// `count` without blocking an async worker for long: inline when the tables are loaded and
/// `text` is short, else on a blocking thread.
pub async fn count_async(text: &str) -> u64 {
    if text.len() <= INLINE_BYTES && LOADED.load(Ordering::Acquire) {
        return count(text);
    }
    let text = text.to_owned();
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

    #[tokio::test]
    async fn counting_inline_or_on_a_blocking_thread_agrees() {
        super::warm();
        let short = "Hello, world. ".repeat(10);
        let long = "Hello, world. ".repeat(2_000);
        assert!(long.len() > super::INLINE_BYTES);
        assert_eq!(super::count_async(&short).await, super::count(&short));
        assert_eq!(super::count_async(&long).await, super::count(&long));
    }
}
