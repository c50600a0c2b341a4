//! o200k token counting (tiktoken-rs, offline). The BPE tables load on first use, which takes a
//! moment: `start` warms them on a blocking thread. Once they are loaded, a short text is counted
//! on the calling task (less than the hand-off to a blocking thread costs); a long one, or any
//! before the tables are loaded, on a blocking thread.
//!
//! Most of tiktoken's time goes into splitting the text into pieces with the o200k pattern
//! (`fancy_regex`, because of one look-ahead); each piece is then encoded on its own. For ASCII
//! text, `ascii_pieces` splits exactly as that pattern does, by hand, and the count of each piece
//! is remembered per thread (a pure function of the piece: the words of a language recur), so
//! only a piece not seen before goes through tiktoken. Other text goes through tiktoken whole.
//! Tests compare both ways on generated and real texts.

use std::cell::RefCell;
// foldhash, seeded at random per process: the keys are short pieces of users' text, the
// cache is bounded, and SipHash was 4 % of the workers' time under load.
use foldhash::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use tiktoken_rs::CoreBPE;

/// Texts up to this many bytes are counted on the calling task once the tables are loaded
/// (the builtin engine's replies and most messages are shorter).
pub const INLINE_BYTES: usize = 4 * 1024;

/// Pieces remembered per thread before the memory is cleared and filled anew.
const PIECE_CACHE_ENTRIES: usize = 16 * 1024;
/// Longer pieces are counted each time, not remembered.
const PIECE_CACHE_MAX_BYTES: usize = 32;

/// Set once the tables are loaded, so that counting cannot stall an async worker on the load.
static LOADED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static PIECES: RefCell<HashMap<Box<[u8]>, u32>> = RefCell::new(HashMap::default());
}

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
    if !text.is_ascii() {
        return tiktoken(text);
    }
    let bpe = bpe();
    PIECES.with_borrow_mut(|cache| {
        let mut total = 0u64;
        for piece in ascii_pieces(text.as_bytes()) {
            total += u64::from(piece_tokens(bpe, cache, piece));
        }
        total
    })
}

/// tiktoken on the whole text.
fn tiktoken(text: &str) -> u64 {
    bpe().encode_ordinary(text).len() as u64
}

fn piece_tokens(bpe: &CoreBPE, cache: &mut HashMap<Box<[u8]>, u32>, piece: &[u8]) -> u32 {
    // ASCII pieces of an ASCII text are valid UTF-8.
    let text = std::str::from_utf8(piece).unwrap_or_default();
    if piece.len() > PIECE_CACHE_MAX_BYTES {
        return bpe.encode_ordinary(text).len() as u32;
    }
    if let Some(&n) = cache.get(piece) {
        return n;
    }
    let n = bpe.encode_ordinary(text).len() as u32;
    if cache.len() >= PIECE_CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(piece.into(), n);
    n
}

/// Whitespace as the pattern's `\s` (Unicode White_Space) has it within ASCII.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

fn is_newline(b: u8) -> bool {
    b == b'\r' || b == b'\n'
}

/// Neither whitespace, a letter nor a digit: `[^\s\p{L}\p{N}]`.
fn is_other(b: u8) -> bool {
    !is_space(b) && !b.is_ascii_alphanumeric()
}

/// Length of the optional `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `k`.
fn contraction(t: &[u8], k: usize) -> usize {
    if t.get(k) != Some(&b'\'') {
        return 0;
    }
    let lower = |j: usize| t.get(j).map(u8::to_ascii_lowercase);
    match lower(k + 1) {
        Some(b's' | b't' | b'm' | b'd') => 2,
        Some(b'r' | b'v') if lower(k + 2) == Some(b'e') => 3,
        Some(b'l') if lower(k + 2) == Some(b'l') => 3,
        _ => 0,
    }
}

/// The end of the piece that starts at `i` (< `t.len()`), by the o200k pattern's alternatives in
/// their order, restricted to ASCII:
///
/// 1. `[^\r\n\p{L}\p{N}]?[\p{Lu}…]*[\p{Ll}…]+(?i:'s|…)?`  2. `[^\r\n\p{L}\p{N}]?[\p{Lu}…]+[\p{Ll}…]*(?i:'s|…)?`
/// 3. `\p{N}{1,3}`  4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`  5. `\s*[\r\n]+`  6. `\s+(?!\S)`  7. `\s+`
fn piece_end(t: &[u8], i: usize) -> usize {
    let n = t.len();
    let run = |mut k: usize, f: fn(u8) -> bool| {
        while k < n && f(t[k]) {
            k += 1;
        }
        k
    };
    // 1 and 2: a word, after at most one character that is no letter, digit or line break.
    let c = t[i];
    let p = if !c.is_ascii_alphanumeric() && !is_newline(c) {
        i + 1
    } else {
        i
    };
    let upper_end = run(p, |b| b.is_ascii_uppercase());
    let lower_end = run(upper_end, |b| b.is_ascii_lowercase());
    if lower_end > upper_end || upper_end > p {
        return lower_end + contraction(t, lower_end);
    }
    // 3: up to three digits.
    if c.is_ascii_digit() {
        return run(i, |b| b.is_ascii_digit()).min(i + 3);
    }
    // 4: punctuation and symbols, after at most one space, then line breaks and slashes.
    let start = if c == b' ' && i + 1 < n && is_other(t[i + 1]) {
        i + 1
    } else {
        i
    };
    if is_other(t[start]) {
        let end = run(start, is_other);
        return run(end, |b| is_newline(b) || b == b'/');
    }
    // 5 to 7: whitespace.
    let end = run(i, is_space);
    if let Some(last) = t[i..end].iter().rposition(|&b| is_newline(b)) {
        return i + last + 1;
    }
    if end < n && end - i >= 2 {
        // The last space goes with what follows it.
        end - 1
    } else {
        end
    }
}

/// The pieces of an ASCII text, as the o200k pattern splits it.
fn ascii_pieces(t: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= t.len() {
            return None;
        }
        let end = piece_end(t, i);
        let piece = &t[i..end];
        i = end;
        Some(piece)
    })
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
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn counts_o200k_tokens() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        assert!(count("<|endoftext|>") > 1);
    }

    /// The pieces are those of tiktoken's pattern: their tokens, encoded one by one, are the
    /// tokens of the whole text.
    fn assert_same(text: &str) {
        let bpe = bpe();
        let whole = bpe.encode_ordinary(text);
        let by_piece: Vec<_> = ascii_pieces(text.as_bytes())
            .flat_map(|p| bpe.encode_ordinary(std::str::from_utf8(p).unwrap()))
            .collect();
        assert_eq!(by_piece, whole, "{text:?}");
        assert_eq!(count(text), whole.len() as u64, "{text:?}");
        assert_eq!(count(text), tiktoken(text), "{text:?}");
    }

    #[test]
    fn ascii_texts_split_as_tiktoken_splits_them() {
        for text in [
            "Hello, world. I'm here; they'RE not, DON'T we'll O'Neil's 'll'",
            "  leading\n\n  trailing  \t\n",
            "a  b   c\t\td \r\n\r\n e\n \n f",
            "1234567 12 1.5e10 -42 3/4 //comment\n/**/ ==>\n\n/",
            "UPPERCASE MixedCase camelCaseWord ABCdef abcDEF I'M YOU'VE",
            "```rust\nfn main() {\n    let x = \"a\\\"b\";\n}\n```\n",
            "- **3** messages: 2 from you, 1 from me\n- *\"quoted\"* (4 words).",
            " ",
            "\n",
            "x",
            "   ",
            " \x0b\x0c\x00\x1f\x7f end",
        ] {
            assert_same(text);
        }
    }

    #[test]
    fn builtin_replies_split_as_tiktoken_splits_them() {
        use crate::api::Role;
        use crate::service::engine::{ReplyRequest, builtin};
        use crate::service::store::messages::HistoryEntry;
        let said = [
            "Hello from wrk: how do lifetimes work in Rust?",
            "write python code to count words",
            "show me some code \"quoted\" please",
            "hi!",
        ];
        let mut history = Vec::new();
        for text in said {
            history.push(HistoryEntry {
                role: Role::User,
                content: text.into(),
                tokens: 3,
            });
            let reply = builtin::compose(&ReplyRequest {
                session_id: "session_abcdefgh12345678".into(),
                history: history.clone(),
                context_tokens: 42,
                max_context_tokens: 8192,
                streamed: false,
            });
            assert_same(&reply);
            history.push(HistoryEntry {
                role: Role::Assistant,
                content: reply,
                tokens: 3,
            });
        }
    }

    #[test]
    fn other_texts_are_counted_by_tiktoken() {
        for text in ["héllo wörld", "日本語のテキスト", "emoji 🎉 and …"] {
            assert_eq!(count(text), tiktoken(text));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn generated_ascii_texts_split_as_tiktoken_splits_them(
            text in "[ \t\n\r\x0b\x0cAaZzBbMmSsTtDdLlEeRrVv0-9'/.,!?*`_\"(){}<>#-]{0,40}"
        ) {
            let bpe = bpe();
            prop_assert_eq!(count(&text), bpe.encode_ordinary(&text).len() as u64);
            let by_piece: Vec<_> = ascii_pieces(text.as_bytes())
                .flat_map(|p| bpe.encode_ordinary(std::str::from_utf8(p).unwrap()))
                .collect();
            prop_assert_eq!(by_piece, bpe.encode_ordinary(&text));
        }

        #[test]
        fn any_ascii_text_counts_as_tiktoken_counts_it(text in "[\x00-\x7f]{0,64}") {
            prop_assert_eq!(count(&text), bpe().encode_ordinary(&text).len() as u64);
        }
    }

    #[tokio::test]
    async fn counting_inline_or_on_a_blocking_thread_agrees() {
        warm();
        let short = "Hello, world. ".repeat(10);
        let long = "Hello, world. ".repeat(2_000);
        assert!(long.len() > INLINE_BYTES);
        assert_eq!(count_async(&short).await, count(&short));
        assert_eq!(count_async(&long).await, count(&long));
    }
}
