//! o200k token counting, offline, as tiktoken counts it (`encode_ordinary`: special-token text
//! counts as ordinary text).
//!
//! The tables are tiktoken-rs's, written by `build.rs` into the binary in a compact form (about
//! 4 MB, read where they lie; tiktoken's own `CoreBPE` built 45 MB of hash maps on the heap, which
//! the TUI paid at the first key typed). Counting is tiktoken's: split the text into pieces by
//! the o200k pattern, then count each piece's tokens by byte-pair merging (`piece_count`, the
//! same merges in the same order as tiktoken's `byte_pair_encode`).
//!
//! The pattern needs `fancy_regex` (one look-ahead), which was most of tiktoken's time. For
//! ASCII text, `ascii_pieces` splits exactly as that pattern does, by hand, and the count of each
//! piece is remembered per thread (a pure function of the piece: the words of a language recur),
//! so only a piece not seen before is merged. Other text is split by the pattern. Tests compare
//! every way with tiktoken-rs itself (a dev-dependency), on generated and real texts.

use std::cell::RefCell;
use std::collections::BinaryHeap;
use std::sync::LazyLock;
// foldhash, seeded at random per process: the keys are short pieces of users' text, the
// cache is bounded, and SipHash was 4 % of the workers' time under load.
use foldhash::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Texts up to this many bytes are counted on the calling task once the pattern is compiled
/// (the builtin engine's replies and most messages are shorter).
pub const INLINE_BYTES: usize = 4 * 1024;

/// Pieces remembered per thread before the memory is cleared and filled anew.
const PIECE_CACHE_ENTRIES: usize = 16 * 1024;
/// Longer pieces are counted each time, not remembered.
const PIECE_CACHE_MAX_BYTES: usize = 32;
/// Pieces this long or longer are merged with a heap, as tiktoken does (the plain way is
/// quadratic in the piece's length).
const LARGE_PIECE_BYTES: usize = 100;

/// Set once the pattern is compiled, so that counting cannot stall an async worker on it.
static LOADED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static PIECES: RefCell<HashMap<Box<[u8]>, u32>> = RefCell::new(HashMap::default());
}

/// The o200k pre-tokenization pattern, as tiktoken-rs's `O200K_BASE_PAT_STR` (a test checks
/// that they are the same).
const O200K_PATTERN: &str = concat!(
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"\p{N}{1,3}"#,
    "|",
    r#" ?[^\s\p{L}\p{N}]+[\r\n/]*"#,
    "|",
    r#"\s*[\r\n]+"#,
    "|",
    r#"\s+(?!\S)"#,
    "|",
    r#"\s+"#
);

fn pattern() -> &'static fancy_regex::Regex {
    static PATTERN: LazyLock<fancy_regex::Regex> = LazyLock::new(|| {
        fancy_regex::Regex::new(O200K_PATTERN).expect("the o200k pattern compiles")
    });
    let re = &*PATTERN;
    LOADED.store(true, Ordering::Release);
    re
}

/// Compiles the pattern now (blocking; a few milliseconds).
pub fn warm() {
    let _ = pattern();
}

/// The tables of `build.rs`.
static TOKEN_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_bytes.bin"));
static TOKEN_OFFSETS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_offsets.bin"));
static TOKEN_SLOTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_slots.bin"));

type Rank = u32;

include!("token_hash.rs");

fn le_u32(table: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(table[i * 4..i * 4 + 4].try_into().expect("four bytes"))
}

/// The bytes of the ordinary token `rank`.
fn token_bytes(rank: Rank) -> &'static [u8] {
    let i = rank as usize;
    &TOKEN_BYTES[le_u32(TOKEN_OFFSETS, i) as usize..le_u32(TOKEN_OFFSETS, i + 1) as usize]
}

/// The rank of the ordinary token whose bytes are `bytes`, if there is one.
fn rank(bytes: &[u8]) -> Option<Rank> {
    let mask = TOKEN_SLOTS.len() / 4 - 1;
    let mut i = fnv1a(bytes) as usize & mask;
    loop {
        match le_u32(TOKEN_SLOTS, i) {
            0 => return None,
            slot if token_bytes(slot - 1) == bytes => return Some(slot - 1),
            _ => i = (i + 1) & mask,
        }
    }
}

/// Number of o200k tokens of `text` (special-token text counts as ordinary text). Blocking
/// (briefly) the first time non-ASCII text is counted, while the pattern compiles.
pub fn count(text: &str) -> u64 {
    PIECES.with_borrow_mut(|cache| {
        let mut total = 0u64;
        if text.is_ascii() {
            for piece in ascii_pieces(text.as_bytes()) {
                total += u64::from(cached_count(cache, piece));
            }
        } else {
            for piece in pattern().find_iter(text) {
                // Matching fails only past fancy_regex's backtrack limit, which the pattern's
                // one look-ahead does not reach; if it ever did, every byte of the text counts
                // as a token (every token is at least a byte: never an undercount).
                match piece {
                    Ok(m) => total += u64::from(cached_count(cache, m.as_str().as_bytes())),
                    Err(_) => return text.len() as u64,
                }
            }
        }
        total
    })
}

fn cached_count(cache: &mut HashMap<Box<[u8]>, u32>, piece: &[u8]) -> u32 {
    if piece.len() > PIECE_CACHE_MAX_BYTES {
        return piece_count(piece);
    }
    if let Some(&n) = cache.get(piece) {
        return n;
    }
    let n = piece_count(piece);
    if cache.len() >= PIECE_CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(piece.into(), n);
    n
}

/// The tokens of one piece: one when the piece is a token, else as many as byte-pair merging
/// leaves (tiktoken's `byte_pair_encode`: the lowest-ranked adjacent pair merges first, the
/// leftmost of equal ranks).
fn piece_count(piece: &[u8]) -> u32 {
    match piece.len() {
        0 => 0,
        1 => 1,
        _ if rank(piece).is_some() => 1,
        n if n < LARGE_PIECE_BYTES => merged_parts(piece),
        _ => merged_parts_large(piece),
    }
}

/// tiktoken's `_byte_pair_merge`: the parts as (start, rank of merging it with the next).
fn merged_parts(piece: &[u8]) -> u32 {
    let mut parts: Vec<(usize, Rank)> = Vec::with_capacity(piece.len() + 1);
    let mut min = (Rank::MAX, usize::MAX);
    for i in 0..piece.len() - 1 {
        let r = rank(&piece[i..i + 2]).unwrap_or(Rank::MAX);
        if r < min.0 {
            min = (r, i);
        }
        parts.push((i, r));
    }
    parts.push((piece.len() - 1, Rank::MAX));
    parts.push((piece.len(), Rank::MAX));
    // The rank of merging part i with the next once part i + 1 is gone (hence i + 3).
    let pair_rank = |parts: &[(usize, Rank)], i: usize| {
        if i + 3 < parts.len() {
            rank(&piece[parts[i].0..parts[i + 3].0]).unwrap_or(Rank::MAX)
        } else {
            Rank::MAX
        }
    };
    while min.0 != Rank::MAX {
        let i = min.1;
        if i > 0 {
            parts[i - 1].1 = pair_rank(&parts, i - 1);
        }
        parts[i].1 = pair_rank(&parts, i);
        parts.remove(i + 1);
        min = (Rank::MAX, usize::MAX);
        for (i, &(_, r)) in parts[..parts.len() - 1].iter().enumerate() {
            if r < min.0 {
                min = (r, i);
            }
        }
    }
    (parts.len() - 1) as u32
}

/// A possible merge of the part at `start` with the next, lowest rank first, then leftmost.
#[derive(PartialEq, Eq)]
struct Merge {
    start: usize,
    rank: Rank,
}

impl Ord for Merge {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.start.cmp(&self.start))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// tiktoken's `_byte_pair_merge_large`: the same merges, found with a heap; each merge joins
/// two parts, so the count is the bytes less the merges.
fn merged_parts_large(piece: &[u8]) -> u32 {
    let n = piece.len();
    // For the part starting at i: where it ends, where the part before it starts, and the rank
    // of merging it with the next (`Rank::MAX`: none, or no longer valid).
    let mut end: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut next_rank = vec![Rank::MAX; n];
    let mut heap = BinaryHeap::with_capacity(n);
    for i in 0..n - 1 {
        if let Some(r) = rank(&piece[i..i + 2]) {
            next_rank[i] = r;
            heap.push(Merge { start: i, rank: r });
        }
    }
    let mut parts = n;
    while let Some(Merge {
        start: left,
        rank: r,
    }) = heap.pop()
    {
        if r != next_rank[left] {
            continue;
        }
        let right = end[left];
        let right_end = end[right];
        end[left] = right_end;
        next_rank[right] = Rank::MAX;
        parts -= 1;
        if right_end < n {
            prev[right_end] = left;
        }
        for start in [Some(left), (left > 0).then(|| prev[left])]
            .into_iter()
            .flatten()
        {
            let stop = end[start];
            next_rank[start] = Rank::MAX;
            if stop < n
                && let Some(r) = rank(&piece[start..end[stop]])
            {
                next_rank[start] = r;
                heap.push(Merge { start, rank: r });
            }
        }
    }
    parts as u32
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

    fn bpe() -> &'static tiktoken_rs::CoreBPE {
        tiktoken_rs::o200k_base_singleton()
    }

    /// tiktoken on the whole text.
    fn tiktoken(text: &str) -> u64 {
        bpe().encode_ordinary(text).len() as u64
    }

    #[test]
    fn the_pattern_is_tiktokens() {
        assert_eq!(O200K_PATTERN, tiktoken_rs::O200K_BASE_PAT_STR);
    }

    #[test]
    fn the_tables_hold_every_ordinary_token_at_its_rank() {
        let bpe = bpe();
        let tokens = TOKEN_OFFSETS.len() / 4 - 1;
        assert!(tokens > 199_000);
        for r in 0..tokens as Rank {
            let bytes = token_bytes(r);
            assert_eq!(bpe.decode_bytes(&[r]).unwrap(), bytes, "rank {r}");
            assert_eq!(rank(bytes), Some(r), "rank {r}");
        }
        // Special tokens are text like any other.
        assert_eq!(rank(b"<|endoftext|>"), None);
        assert_eq!(rank(b""), None);
    }

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
    fn other_texts_count_as_tiktoken_counts_them() {
        for text in [
            "héllo wörld",
            "日本語のテキスト",
            "emoji 🎉 and … and 👩‍👩‍👧",
            "Привет, мир! Как дела? l'été dernier j'ai vu 12345 chats.\n\n  fn main() {}",
            "ÀÉÎÕÜ àéîõü DŽ ǅ ǆ ﬁ ß ẞ Ω ω \u{0301}\u{0301} ١٢٣٤ ⅷ ²³",
            "\u{a0}\u{2003}\u{3000} \u{2028}\u{2029}\u{85} x",
            "<|endoftext|> <|endofprompt|> ✓",
        ] {
            assert_eq!(count(text), tiktoken(text), "{text:?}");
        }
    }

    #[test]
    fn long_pieces_merge_as_tiktoken_merges_them() {
        // Runs of one kind of character are one piece; past 100 bytes tiktoken merges them with
        // a heap, and so do we.
        for (unit, times) in [
            ("=", 99),
            ("=", 100),
            ("=-", 150),
            (" ", 300),
            ("\n", 257),
            ("a", 1000),
            ("abc", 400),
            ("Zq", 333),
            ("é", 120),
            ("🎉", 64),
            ("*_*", 71),
            ("0", 1000),
        ] {
            let text = unit.repeat(times);
            assert_eq!(count(&text), tiktoken(&text), "{unit:?} × {times}");
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

        #[test]
        fn any_text_counts_as_tiktoken_counts_it(text in "\\PC{0,48}") {
            prop_assert_eq!(count(&text), bpe().encode_ordinary(&text).len() as u64);
        }

        #[test]
        fn any_long_word_counts_as_tiktoken_counts_it(text in "[a-zA-Z]{90,260}|[!-/:-@]{90,260}|[àéa-z]{60,160}") {
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
