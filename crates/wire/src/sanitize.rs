//! Make untrusted text safe to put on a terminal.
//!
//! What is removed or rewritten:
//! - escape sequences: CSI (`ESC [` / U+009B), OSC (`ESC ]` / U+009D), DCS (`ESC P` / U+0090),
//!   SOS (`ESC X` / U+0098), PM (`ESC ^` / U+009E), APC (`ESC _` / U+009F) and two-byte `ESC x`
//!   sequences. String sequences run to BEL, ST (`ESC \` or U+009C) or the end of the text, so an
//!   unterminated one swallows the rest; a CSI stops at its final byte or at the first character
//!   that cannot belong to it (that character is then kept);
//! - C0 controls except `\n`, DEL, and every C1 control (U+0080–U+009F);
//! - `\r` (so `\r\n` becomes `\n` and a lone `\r` disappears); a tab becomes spaces up to the next
//!   multiple of 4 characters on its line (the tab stop CommonMark uses, so markdown keeps its meaning);
//! - U+2028 / U+2029 (line / paragraph separator) become `\n`;
//! - bidi controls: U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C;
//! - invisible characters that can hide or spoof text: U+200B (zero-width space), U+2060–U+2064
//!   (word joiner, invisible operators), U+FEFF (BOM), U+00AD (soft hyphen), U+180E, U+FFF9–U+FFFB
//!   (interlinear annotation) and the tag characters U+E0000–U+E007F (used to smuggle hidden text).
//!
//! Kept on purpose: U+200D ZERO WIDTH JOINER (emoji sequences such as 👩‍💻 need it) and U+200C
//! ZERO WIDTH NON-JOINER (required by Persian and Indic orthography). Variation selectors stay too.
//!
//! The sanitiser is a state machine fed left to right, so sanitising a text in pieces with one
//! [`Sanitizer`] gives the same result as sanitising it whole; the transcript relies on that to
//! sanitise a streamed reply delta by delta.
use std::borrow::Cow;

const TAB_STOP: usize = 4;

/// Sanitise `text` for display. Borrows when nothing needs to change.
///
/// ```
/// use convo_wire::sanitize::sanitize;
/// assert_eq!(sanitize("plain"), "plain");
/// assert_eq!(sanitize("\x1b[31mred\x1b[0m\r\n"), "red\n");
/// assert_eq!(sanitize("a\u{202e}b"), "ab");
/// ```
pub fn sanitize(text: &str) -> Cow<'_, str> {
    sanitize_with(text, false)
}

/// [`sanitize`], except that tabs stay tabs: the text of a code block as written, for the
/// clipboard (a Makefile needs its tabs). Markdown parses it into the same blocks, since
/// CommonMark's tab stop is the one [`sanitize`] expands to.
///
/// ```
/// use convo_wire::sanitize::sanitize_keeping_tabs;
/// assert_eq!(sanitize_keeping_tabs("\tx\x1b[31m"), "\tx");
/// ```
pub fn sanitize_keeping_tabs(text: &str) -> Cow<'_, str> {
    sanitize_with(text, true)
}

fn sanitize_with(text: &str, keep_tabs: bool) -> Cow<'_, str> {
    let Some(first_bad) = text.char_indices().find(|&(_, c)| needs_attention(c)) else {
        return Cow::Borrowed(text);
    };
    let (clean, rest) = text.split_at(first_bad.0);
    let mut out = String::with_capacity(text.len());
    out.push_str(clean);
    let column = clean
        .rsplit('\n')
        .next()
        .map_or(0, |line| line.chars().count());
    let mut sanitizer = Sanitizer {
        state: State::Ground,
        column,
        keep_tabs,
    };
    sanitizer.feed(rest, &mut out);
    Cow::Owned(out)
}

/// Text for a plain terminal or a file, character by character: control characters other
/// than line breaks and tabs, and the bidi controls, are dropped; everything else stays as
/// written (tabs unexpanded, `\r` gone, nothing else rewritten). What the one-shot commands
/// print and what `convo export` writes. Borrows when nothing needs to change.
///
/// ```
/// use convo_wire::sanitize::strip_controls;
/// assert_eq!(strip_controls("a\tb\n"), "a\tb\n");
/// assert_eq!(strip_controls("a\u{1b}b\u{202e}c"), "abc");
/// ```
pub fn strip_controls(text: &str) -> Cow<'_, str> {
    let bad = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
    };
    if text.chars().any(bad) {
        Cow::Owned(text.chars().filter(|&c| !bad(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// [`sanitize`] into an owned `String`: for text from the server that a state keeps.
pub fn sanitize_owned(text: &str) -> String {
    sanitize(text).into_owned()
}

/// Sanitise raw bytes: invalid UTF-8 becomes U+FFFD, then as [`sanitize`].
pub fn sanitize_bytes(bytes: &[u8]) -> String {
    sanitize(&String::from_utf8_lossy(bytes)).into_owned()
}

/// Does `c` need the state machine (anything other than plain printable text or `\n`)?
fn needs_attention(c: char) -> bool {
    match c {
        '\n' => false,
        '\0'..='\x1f' | '\x7f'..='\u{9f}' => true,
        _ => is_invisible_format(c) || c == '\u{2028}' || c == '\u{2029}',
    }
}

/// Bidi controls and invisible format characters that are dropped.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{061c}'
            | '\u{200b}'
            | '\u{2060}'..='\u{2064}'
            | '\u{feff}'
            | '\u{00ad}'
            | '\u{180e}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    /// After ESC.
    Escape,
    /// After ESC and intermediate bytes (0x20–0x2F), waiting for the final byte.
    EscapeIntermediate,
    /// Inside a CSI sequence.
    Csi,
    /// Inside an OSC/DCS/SOS/PM/APC string.
    String,
    /// ESC seen inside a string: `\` ends it, anything else starts a new escape.
    StringEscape,
}

/// An incremental sanitiser: feed it text in pieces, in order.
#[derive(Clone, Debug)]
pub struct Sanitizer {
    state: State,
    /// Characters since the last `\n` in the output (for tab stops).
    column: usize,
    /// Tabs are kept rather than expanded ([`sanitize_keeping_tabs`]).
    keep_tabs: bool,
}

impl Default for Sanitizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Sanitizer {
    pub fn new() -> Self {
        Self {
            state: State::Ground,
            column: 0,
            keep_tabs: false,
        }
    }

    /// Sanitise `input`, appending the result to `out`.
    pub fn feed(&mut self, input: &str, out: &mut String) {
        for c in input.chars() {
            self.step(c, out);
        }
    }

    fn step(&mut self, c: char, out: &mut String) {
        match self.state {
            State::Ground => self.ground(c, out),
            State::Escape => match c {
                '[' => self.state = State::Csi,
                ']' | 'P' | 'X' | '^' | '_' => self.state = State::String,
                ' '..='/' => self.state = State::EscapeIntermediate,
                '0'..='~' => self.state = State::Ground,
                // ESC followed by something that cannot continue it: drop the ESC only.
                _ => {
                    self.state = State::Ground;
                    self.ground(c, out);
                }
            },
            State::EscapeIntermediate => match c {
                ' '..='/' => {}
                '0'..='~' => self.state = State::Ground,
                _ => {
                    self.state = State::Ground;
                    self.ground(c, out);
                }
            },
            State::Csi => match c {
                // parameter and intermediate bytes
                '0'..='?' | ' '..='/' => {}
                '@'..='~' => self.state = State::Ground,
                _ => {
                    self.state = State::Ground;
                    self.ground(c, out);
                }
            },
            State::String => match c {
                '\x07' | '\u{9c}' => self.state = State::Ground,
                '\x1b' => self.state = State::StringEscape,
                _ => {}
            },
            State::StringEscape => {
                if c == '\\' {
                    self.state = State::Ground;
                } else {
                    self.state = State::Escape;
                    self.step(c, out);
                }
            }
        }
    }

    fn ground(&mut self, c: char, out: &mut String) {
        match c {
            '\n' | '\u{2028}' | '\u{2029}' => {
                out.push('\n');
                self.column = 0;
            }
            '\t' if self.keep_tabs => {
                out.push('\t');
                self.column += TAB_STOP - self.column % TAB_STOP;
            }
            '\t' => {
                let spaces = TAB_STOP - self.column % TAB_STOP;
                out.extend(std::iter::repeat_n(' ', spaces));
                self.column += spaces;
            }
            '\x1b' => self.state = State::Escape,
            '\u{9b}' => self.state = State::Csi,
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => self.state = State::String,
            '\0'..='\x1f' | '\x7f'..='\u{9f}' => {}
            c if is_invisible_format(c) => {}
            c => {
                out.push(c);
                self.column += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(sanitize("hello\nworld ✓ 👩‍💻"), Cow::Borrowed(_)));
    }

    #[test]
    fn strips_sequences() {
        assert_eq!(sanitize("a\x1b[1;31mb\x1b[0mc"), "abc");
        assert_eq!(sanitize("a\x1b]0;title\x07b"), "ab");
        assert_eq!(
            sanitize("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b"),
            "alinkb"
        );
        assert_eq!(sanitize("a\x1bPq#0\x1b\\b"), "ab");
        assert_eq!(
            sanitize("a\x1b_apc\x1b\\b\x1b^pm\x1b\\c\x1bXsos\x1b\\d"),
            "abcd"
        );
        assert_eq!(sanitize("a\u{9b}31mb"), "ab");
        assert_eq!(sanitize("a\u{9d}0;t\u{9c}b"), "ab");
        assert_eq!(sanitize("a\x1b7b\x1b(Bc"), "abc");
    }

    #[test]
    fn unterminated_sequences_are_dropped() {
        assert_eq!(sanitize("ok\x1b]0;never ends"), "ok");
        assert_eq!(sanitize("ok\x1b[12"), "ok");
        assert_eq!(sanitize("ok\x1b"), "ok");
        // a CSI cut short by a character that cannot belong to it keeps that character
        assert_eq!(sanitize("a\x1b[1\nb"), "a\nb");
    }

    #[test]
    fn controls_tabs_and_newlines() {
        assert_eq!(sanitize("a\r\nb\rc"), "a\nbc");
        assert_eq!(sanitize("\tx"), "    x");
        assert_eq!(sanitize("ab\tx"), "ab  x");
        assert_eq!(sanitize("a\x00\x07\x08\x7f\u{85}b"), "ab");
        assert_eq!(sanitize("a\u{2028}b"), "a\nb");
    }

    #[test]
    fn bidi_and_invisible() {
        assert_eq!(sanitize("\u{202e}abc\u{202c}\u{2066}d\u{2069}"), "abcd");
        assert_eq!(sanitize("a\u{200b}b\u{feff}\u{e0041}"), "ab");
        assert_eq!(sanitize("👩\u{200d}💻"), "👩\u{200d}💻");
    }

    #[test]
    fn bytes_are_decoded_lossily() {
        assert_eq!(sanitize_bytes(b"a\xffb\x1b[0m"), "a\u{fffd}b");
    }

    #[test]
    fn piecewise_equals_whole() {
        let text = "a\tb\x1b]0;t\x07c\r\n\td\x1b[3";
        let mut s = Sanitizer::new();
        let mut out = String::new();
        for piece in ["a\t", "b\x1b]", "0;t", "\x07c\r", "\n\td\x1b", "[3"] {
            s.feed(piece, &mut out);
        }
        assert_eq!(out, sanitize(text));
    }
}
