//! The fuzz targets' logic on stable (issue 6, item 5): every file of the committed seed
//! corpus (`fuzz/corpus/TARGET/*`), and a few hundred arbitrary inputs per target, go
//! through the same functions the cargo-fuzz binaries call (`fuzz/targets.rs`).

use std::path::PathBuf;

use proptest::prelude::*;

#[path = "../../fuzz/targets.rs"]
mod targets;

/// The corpus files of `target`.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "a seed corpus for {target}");
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

fn run_corpus(target: &str, f: fn(&[u8])) {
    for (path, bytes) in corpus(target) {
        let outcome = std::panic::catch_unwind(|| f(&bytes));
        assert!(outcome.is_ok(), "{target} fails on {}", path.display());
    }
}

#[test]
fn the_markdown_corpus_renders_within_its_width_and_harmlessly() {
    run_corpus("markdown", targets::markdown);
}

#[test]
fn the_sanitize_corpus_comes_out_clean_idempotent_and_piecewise_equal() {
    run_corpus("sanitize", targets::sanitize_text);
}

#[test]
fn the_response_corpus_parses_without_panics_and_errors_stay_one_line() {
    run_corpus("response", targets::response);
}

#[test]
fn the_stream_event_corpus_round_trips() {
    run_corpus("stream_event", targets::stream_event);
}

/// Bytes that look a bit like what the targets read: markup, escapes, JSON punctuation.
fn noisy() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        any::<u8>().prop_map(|b| vec![b]),
        Just(b"\x1b[".to_vec()),
        Just(b"\x1b]".to_vec()),
        Just("\u{202e}".as_bytes().to_vec()),
        Just("\u{9b}".as_bytes().to_vec()),
        Just(b"```".to_vec()),
        Just(b"\n- ".to_vec()),
        Just(b"> ".to_vec()),
        Just(b"| a |".to_vec()),
        Just(b"**".to_vec()),
        Just("日本".as_bytes().to_vec()),
        Just(br#"{"type":"delta","sessionId":"s","messageId":"m","seq":"#.to_vec()),
        Just(br#"{"error":{"code":"x","message":"#.to_vec()),
        Just(b"\"}".to_vec()),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_markdown(bytes in noisy()) {
        targets::markdown(&bytes);
    }

    #[test]
    fn arbitrary_text_to_sanitize(bytes in noisy()) {
        targets::sanitize_text(&bytes);
    }

    #[test]
    fn arbitrary_responses(bytes in noisy()) {
        targets::response(&bytes);
    }

    #[test]
    fn arbitrary_stream_frames(bytes in noisy()) {
        targets::stream_event(&bytes);
    }
}
