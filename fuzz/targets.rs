//! The logic of each fuzz target, shared by the cargo-fuzz binaries (`fuzz_targets/*.rs`)
//! and by the stable test that runs the committed corpus (`tests/reliability/corpus.rs`).
//! Each function takes arbitrary bytes and panics only when an invariant is broken.

use convo_client::api::{ApiError, ErrorEnvelope, Message, Metrics, StreamEvent, Usage, Wallet};
use convo_client::sanitize::{Sanitizer, sanitize, sanitize_bytes};
use convo_tui::render::markdown::{Document, render_markdown};
use unicode_width::UnicodeWidthStr;

/// Characters that must never reach a terminal from server text.
pub fn forbidden(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// Markdown from a server, rendered at a width taken from the first byte: never wider than
/// the width, nothing forbidden in any span, and the height agrees with the lines.
pub fn markdown(data: &[u8]) {
    let Some((&w, rest)) = data.split_first() else {
        return;
    };
    let width = u16::from(w % 120) + 1;
    let text = String::from_utf8_lossy(rest);
    let lines = render_markdown(&text, width);
    for line in &lines {
        let shown: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        // A two-column character cannot fit a line of one or two columns beside a prefix;
        // the terminal buffer leaves it out. From three columns on, everything fits.
        let wide_in_a_sliver = width <= 2
            && shown
                .chars()
                .any(|c| unicode_width::UnicodeWidthChar::width(c) == Some(2));
        assert!(
            shown.width() <= usize::from(width) || wide_in_a_sliver,
            "a line of {} columns at width {width}: {shown:?}",
            shown.width()
        );
        assert!(
            !shown.chars().any(forbidden),
            "a forbidden character in {shown:?}"
        );
    }
    let doc = Document::parse(&text);
    assert_eq!(doc.height(width), lines.len(), "height and lines agree");
}

/// Text from a server: nothing forbidden survives, sanitising twice changes nothing, and
/// feeding it in pieces (as stream deltas arrive) gives the same text as all at once.
pub fn sanitize_text(data: &[u8]) {
    let whole = sanitize_bytes(data);
    assert!(!whole.chars().any(forbidden), "{whole:?}");
    assert_eq!(sanitize(&whole), whole.as_str(), "idempotent");
    let text = String::from_utf8_lossy(data);
    let cut = data.first().map_or(0, |&b| usize::from(b)) % (text.len() + 1);
    let cut = (0..=cut)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let mut pieces = String::new();
    let mut s = Sanitizer::new();
    s.feed(&text[..cut], &mut pieces);
    s.feed(&text[cut..], &mut pieces);
    assert_eq!(pieces, whole, "piecewise equals whole");
}

/// A response body from a server: parsing never panics, and an error envelope becomes a
/// typed error whose message is one line.
pub fn response(data: &[u8]) {
    let _ = serde_json::from_slice::<Message>(data);
    let _ = serde_json::from_slice::<Usage>(data);
    let _ = serde_json::from_slice::<Metrics>(data);
    let _ = serde_json::from_slice::<Wallet>(data);
    if let Ok(envelope) = serde_json::from_slice::<ErrorEnvelope>(data) {
        let status = data.first().map_or(400, |&b| 400 + u16::from(b % 200));
        let error = ApiError::from_body(status, envelope.error, None);
        let shown = error.to_string();
        assert!(!shown.contains('\n'), "one line: {shown:?}");
        let _ = error.code();
    }
}

/// A stream frame from a server: parsing never panics, and what parses serialises and
/// parses back to the same event.
pub fn stream_event(data: &[u8]) {
    if let Ok(event) = serde_json::from_slice::<StreamEvent>(data) {
        let again = serde_json::to_string(&event).expect("an event serialises");
        let back: StreamEvent = serde_json::from_str(&again).expect("and parses back");
        assert_eq!(back, event);
    }
}
