//! Properties of the sanitiser.
use std::borrow::Cow;

use convo_client::sanitize::{Sanitizer, sanitize, sanitize_bytes};
use proptest::prelude::*;

fn forbidden(c: char) -> bool {
    matches!(c,
        '\0'..='\x09' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
        | '\u{200b}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{00ad}' | '\u{2028}' | '\u{2029}'
        | '\u{e0000}'..='\u{e007f}')
}

/// Text with plenty of escape sequences, controls and bidi characters mixed in.
fn hostile() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => any::<String>(),
            3 => "[ -~]{0,12}",
            2 => prop::sample::select(vec![
                "\x1b", "\x1b[", "\x1b[1;31m", "\x1b]", "\x1b]0;title\x07", "\x1b]8;;http://x\x1b\\",
                "\x1bP", "\x1b_", "\x1b^", "\x1bX", "\x1b\\", "\u{9b}", "\u{9d}", "\u{9c}", "\u{90}",
                "\x07", "\t", "\r", "\r\n", "\n", "\u{202e}", "\u{2066}", "\u{200f}", "\u{200b}",
                "\u{200d}", "\u{feff}", "\u{2028}", "\u{e0041}", "\x7f", "\x00",
            ])
            .prop_map(str::to_owned),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(512)))]

    #[test]
    fn output_holds_nothing_dangerous(text in hostile()) {
        let out = sanitize(&text);
        prop_assert!(!out.chars().any(forbidden), "{out:?}");
    }

    #[test]
    fn is_idempotent(text in hostile()) {
        let once = sanitize(&text).into_owned();
        let twice = sanitize(&once);
        prop_assert!(matches!(twice, Cow::Borrowed(_)));
        prop_assert_eq!(twice.as_ref(), once.as_str());
    }

    #[test]
    fn clean_input_is_unchanged_and_borrowed(
        text in any::<String>().prop_map(|s| s.chars().filter(|&c| !forbidden(c)).collect::<String>())
    ) {
        let out = sanitize(&text);
        prop_assert!(matches!(out, Cow::Borrowed(_)));
        prop_assert_eq!(out.as_ref(), text.as_str());
    }

    #[test]
    fn piecewise_equals_whole(text in hostile(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| bounds[c.index(bounds.len())]).collect();
        cuts.sort_unstable();
        let mut sanitizer = Sanitizer::new();
        let mut out = String::new();
        let mut start = 0;
        for cut in cuts.into_iter().chain([text.len()]) {
            sanitizer.feed(&text[start..cut], &mut out);
            start = cut;
        }
        prop_assert_eq!(out, sanitize(&text));
    }

    #[test]
    fn bytes_are_safe(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let out = sanitize_bytes(&bytes);
        prop_assert!(!out.chars().any(forbidden));
    }
}

#[test]
fn keeps_joiners_for_emoji_and_scripts() {
    assert_eq!(
        sanitize("👩\u{200d}💻 می\u{200c}خواهم"),
        "👩\u{200d}💻 می\u{200c}خواهم"
    );
}

#[test]
fn a_hyperlink_escape_shows_only_its_text() {
    assert_eq!(
        sanitize("see \x1b]8;;https://evil.example\x1b\\docs\x1b]8;;\x1b\\ now"),
        "see docs now"
    );
}
