//! Styled text and the two ways it is fitted to a width: word wrapping (prose, table cells) and
//! hard breaking with a marker (code, HTML blocks).
//!
//! Hand-written because the wrapping crates (textwrap) work on plain strings, while here
//! style runs must survive the wrap and the line count must be computable without building
//! the lines. One algorithm serves both: it reports byte ranges through a callback, and the
//! caller either counts the breaks or builds spans. Widths are measured per grapheme with
//! ratatui's own [`CellWidth`], so what is counted is what the buffer draws.
use ratatui::buffer::CellWidth;
use ratatui::style::Style;
use ratatui::text::Span;
use unicode_segmentation::UnicodeSegmentation;

/// Appended to a code or HTML line broken at the width.
pub const BREAK_MARKER: &str = "↩";

/// Text with style runs. Runs cover the text exactly, in order; `end` is a byte offset.
#[derive(Clone, Debug, Default, PartialEq, Hash)]
pub struct Styled {
    pub text: String,
    pub runs: Vec<Run>,
}

#[derive(Clone, Copy, Debug, PartialEq, Hash)]
pub struct Run {
    pub end: usize,
    pub style: Style,
}

impl Styled {
    pub fn plain(text: String, style: Style) -> Self {
        let runs = if text.is_empty() {
            Vec::new()
        } else {
            vec![Run {
                end: text.len(),
                style,
            }]
        };
        Self { text, runs }
    }

    pub fn push(&mut self, s: &str, style: Style) {
        if s.is_empty() {
            return;
        }
        self.text.push_str(s);
        let end = self.text.len();
        match self.runs.last_mut() {
            Some(run) if run.style == style => run.end = end,
            _ => self.runs.push(Run { end, style }),
        }
    }

    pub fn width(&self) -> usize {
        str_width(&self.text)
    }

    /// Append `other.text[start..end]` with its styles.
    pub fn push_range(&mut self, other: &Styled, start: usize, end: usize) {
        let mut pos = start;
        let mut i = other.runs.partition_point(|run| run.end <= start);
        while pos < end && i < other.runs.len() {
            let run = other.runs[i];
            let stop = run.end.min(end);
            self.push(&other.text[pos..stop], run.style);
            pos = stop;
            i += 1;
        }
    }

    /// Append the spans covering `text[start..end]` to `out`.
    pub fn spans_into(&self, start: usize, end: usize, out: &mut Vec<Span<'static>>) {
        if start >= end {
            return;
        }
        let mut pos = start;
        let mut i = self.runs.partition_point(|run| run.end <= start);
        while pos < end && i < self.runs.len() {
            let run = self.runs[i];
            let stop = run.end.min(end);
            if stop > pos {
                out.push(Span::styled(self.text[pos..stop].to_owned(), run.style));
            }
            pos = stop;
            i += 1;
        }
    }
}

/// Display width of one grapheme, as the buffer draws it.
pub fn grapheme_width(g: &str) -> usize {
    if g.contains(char::is_control) {
        0
    } else {
        usize::from(g.cell_width())
    }
}

/// Printable ASCII only: one column per byte, every byte a grapheme.
fn is_plain_ascii(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// Display width of a string (sum of its graphemes).
pub fn str_width(s: &str) -> usize {
    if is_plain_ascii(s) {
        s.len()
    } else {
        s.graphemes(true).map(grapheme_width).sum()
    }
}

/// Output of [`wrap_words`]: a byte range to put on the current line, or a line break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrapEvent {
    Piece(usize, usize),
    Break,
}

/// Greedy word wrap of `text` into lines of `first` columns (the first line) and `rest`
/// columns (the others). Words break at spaces; `\n` is a hard break; spaces at a wrap point
/// vanish; a word longer than a line is split between graphemes. Always at least one line:
/// the number of lines is one plus the number of [`WrapEvent::Break`]s.
pub fn wrap_words(text: &str, first: usize, rest: usize, mut emit: impl FnMut(WrapEvent)) {
    let bytes = text.as_bytes();
    let len = bytes.len();
    let rest = rest.max(1);
    let mut avail = first.max(1);
    let mut line_width = 0usize;
    let mut line_empty = true;
    // spaces seen since the last word on this line: (start, end)
    let mut pending: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < len {
        match bytes[i] {
            b'\n' => {
                emit(WrapEvent::Break);
                avail = rest;
                line_width = 0;
                line_empty = true;
                pending = None;
                i += 1;
            }
            b' ' => {
                let start = i;
                while i < len && bytes[i] == b' ' {
                    i += 1;
                }
                if !line_empty {
                    pending = Some((start, i));
                }
            }
            _ => {
                let start = i;
                while i < len && bytes[i] != b' ' && bytes[i] != b'\n' {
                    i += 1;
                }
                let word = &text[start..i];
                let width = str_width(word);
                let space = pending.map_or(0, |(s, e)| e - s);
                if !line_empty && line_width + space + width <= avail {
                    if let Some((s, e)) = pending {
                        emit(WrapEvent::Piece(s, e));
                    }
                    emit(WrapEvent::Piece(start, i));
                    line_width += space + width;
                } else if width <= avail {
                    if !line_empty {
                        emit(WrapEvent::Break);
                        avail = rest;
                    }
                    emit(WrapEvent::Piece(start, i));
                    line_width = width;
                    line_empty = false;
                } else {
                    if !line_empty {
                        emit(WrapEvent::Break);
                        avail = rest;
                    }
                    if is_plain_ascii(word) {
                        // one column per byte: cut by length
                        let mut pos = start;
                        loop {
                            let take = avail.min(i - pos);
                            emit(WrapEvent::Piece(pos, pos + take));
                            pos += take;
                            if pos == i {
                                line_width = take;
                                break;
                            }
                            emit(WrapEvent::Break);
                            avail = rest;
                        }
                        line_empty = false;
                        pending = None;
                        continue;
                    }
                    let mut seg_start = start;
                    let mut seg_width = 0;
                    for (offset, g) in word.grapheme_indices(true) {
                        let gw = grapheme_width(g);
                        if seg_width > 0 && seg_width + gw > avail {
                            emit(WrapEvent::Piece(seg_start, start + offset));
                            emit(WrapEvent::Break);
                            avail = rest;
                            seg_start = start + offset;
                            seg_width = 0;
                        }
                        seg_width += gw;
                    }
                    emit(WrapEvent::Piece(seg_start, i));
                    line_width = seg_width;
                    line_empty = false;
                }
                pending = None;
            }
        }
    }
}

/// Number of lines [`wrap_words`] produces.
pub fn count_wrapped(text: &str, first: usize, rest: usize) -> usize {
    let mut lines = 1;
    wrap_words(text, first, rest, |event| {
        if event == WrapEvent::Break {
            lines += 1;
        }
    });
    lines
}

/// Word widths of a text, measured once, so that its line count at any width is a pass over
/// a few integers per word instead of over its bytes and graphemes (a resize recounts every
/// entry of the transcript).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measure {
    tokens: Vec<Token>,
}

/// A word with the spaces before it, or a hard break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Token {
    /// Spaces before the word; [`Token::BREAK`] for a `\n`.
    space: u32,
    /// Width of the word; the top bit marks a word whose graphemes are not all one column
    /// wide (where it splits depends on each grapheme, so counting it needs the text).
    width: u32,
}

impl Token {
    const BREAK: u32 = u32::MAX;
    const WIDE: u32 = 1 << 31;
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n)
        .unwrap_or(u32::MAX - 1)
        .min(Token::WIDE - 1)
}

impl Measure {
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut tokens = Vec::new();
        let mut space = 0usize;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => {
                    tokens.push(Token {
                        space: Token::BREAK,
                        width: 0,
                    });
                    space = 0;
                    i += 1;
                }
                b' ' => {
                    space += 1;
                    i += 1;
                }
                _ => {
                    let start = i;
                    while i < bytes.len() && bytes[i] != b' ' && bytes[i] != b'\n' {
                        i += 1;
                    }
                    let word = &text[start..i];
                    let width = match uniform_width(word) {
                        Some(w) => saturate(w),
                        None => saturate(str_width(word)) | Token::WIDE,
                    };
                    tokens.push(Token {
                        space: saturate(space),
                        width,
                    });
                    space = 0;
                }
            }
        }
        Self { tokens }
    }

    /// True when [`Measure::count_without_text`] is exact: every word splits by its width.
    pub fn is_text_free(&self) -> bool {
        self.tokens
            .iter()
            .all(|t| t.space == Token::BREAK || t.width & Token::WIDE == 0)
    }

    /// [`Measure::count`] for a measure that [`Measure::is_text_free`].
    pub fn count_without_text(&self, first: usize, rest: usize) -> usize {
        self.count_with(None, first, rest)
    }

    /// True when the text has no words (empty, or only spaces).
    pub fn is_empty(&self) -> bool {
        self.tokens.iter().all(|t| t.space == Token::BREAK)
    }

    /// The width of the widest word.
    pub fn longest_word(&self) -> usize {
        self.tokens
            .iter()
            .filter(|t| t.space != Token::BREAK)
            .map(|t| (t.width & !Token::WIDE) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Drop spare capacity (the measure is kept for the life of its entry).
    pub fn shrink_to_fit(&mut self) {
        self.tokens.shrink_to_fit();
    }

    /// The number of lines [`wrap_words`] makes of `text` (the text this was measured from).
    pub fn count(&self, text: &str, first: usize, rest: usize) -> usize {
        self.count_with(Some(text), first, rest)
    }

    fn count_with(&self, text: Option<&str>, first: usize, rest: usize) -> usize {
        let rest = rest.max(1);
        let mut avail = first.max(1);
        let mut lines = 1;
        let mut line_width = 0usize;
        let mut line_empty = true;
        for token in &self.tokens {
            if token.space == Token::BREAK {
                lines += 1;
                avail = rest;
                line_width = 0;
                line_empty = true;
                continue;
            }
            let width = (token.width & !Token::WIDE) as usize;
            let space = if line_empty { 0 } else { token.space as usize };
            if !line_empty && line_width + space + width <= avail {
                line_width += space + width;
            } else if width <= avail {
                if !line_empty {
                    lines += 1;
                    avail = rest;
                }
                line_width = width;
                line_empty = false;
            } else {
                if let Some(text) = text.filter(|_| token.width & Token::WIDE != 0) {
                    // where such a word splits depends on each grapheme
                    return count_wrapped(text, first, rest);
                }
                if !line_empty {
                    lines += 1;
                    avail = rest;
                }
                let mut remaining = width;
                while remaining > avail {
                    remaining -= avail;
                    lines += 1;
                    avail = rest;
                }
                line_width = remaining;
                line_empty = false;
            }
        }
        lines
    }
}

/// Columns of a segment that is not the last, and whether the marker follows it: a line of
/// one column has no room for the marker beside a character.
fn break_cap(avail: usize) -> (usize, bool) {
    let marker = str_width(BREAK_MARKER);
    if avail > marker {
        (avail - marker, true)
    } else {
        (avail, false)
    }
}

/// Break `text` (one line, no `\n`) into segments of at most `avail` columns. Every segment
/// but the last leaves room for [`BREAK_MARKER`] and reports `true`, unless the line is too
/// narrow for the marker beside a character. At least one segment.
pub fn hard_break(text: &str, avail: usize, mut emit: impl FnMut(usize, usize, bool)) {
    let avail = avail.max(1);
    let total = str_width(text);
    if total <= avail {
        emit(0, text.len(), false);
        return;
    }
    let (cap, marker) = break_cap(avail);
    if is_plain_ascii(text) {
        let mut pos = 0;
        while text.len() - pos > avail {
            emit(pos, pos + cap, marker);
            pos += cap;
        }
        emit(pos, text.len(), false);
        return;
    }
    let mut remaining = total;
    let mut seg_start = 0;
    let mut seg_width = 0;
    for (offset, g) in text.grapheme_indices(true) {
        let gw = grapheme_width(g);
        if seg_width > 0 && seg_width + gw > cap {
            // a wide grapheme alone may leave no room for the marker
            emit(seg_start, offset, marker && seg_width <= cap);
            remaining -= seg_width;
            seg_start = offset;
            seg_width = 0;
            if remaining <= avail {
                break;
            }
        }
        seg_width += gw;
    }
    emit(seg_start, text.len(), false);
}

/// The width of `s` when each of its graphemes is one column wide (then it splits like ASCII:
/// by count), else `None`.
pub fn uniform_width(s: &str) -> Option<usize> {
    if is_plain_ascii(s) {
        return Some(s.len());
    }
    let mut n = 0;
    for g in s.graphemes(true) {
        if grapheme_width(g) != 1 {
            return None;
        }
        n += 1;
    }
    Some(n)
}

/// [`count_hard_broken`] of a line of `width` columns whose graphemes are all one column wide.
pub fn count_hard_broken_uniform(width: usize, avail: usize) -> usize {
    let avail = avail.max(1);
    if width <= avail {
        return 1;
    }
    let (cap, _) = break_cap(avail);
    // segments of `cap` until what is left fits in `avail`
    (width - avail).div_ceil(cap) + 1
}

/// Number of segments [`hard_break`] produces.
pub fn count_hard_broken(text: &str, avail: usize) -> usize {
    let avail = avail.max(1);
    // the common case: a line that fits, without walking graphemes
    if text.len() <= avail || str_width(text) <= avail {
        return 1;
    }
    let mut segments = 0;
    hard_break(text, avail, |_, _, _| segments += 1);
    segments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_counts_equal_wrapped_counts() {
        let texts = [
            "aa bb cc",
            "  lead and trail  ",
            "x abcdefghijklmnopqrstuvwxyz y",
            "a\n\n  b  \ncc dd",
            "日本語のテキスト 日本 語",
            "e\u{301}e\u{301}e\u{301} wordy words",
            "👩\u{200d}💻👩\u{200d}💻👩\u{200d}💻 x",
            "",
            "\n",
        ];
        for text in texts {
            let measure = Measure::new(text);
            for first in 1..30 {
                for rest in [1, 2, 3, 5, first, 29] {
                    assert_eq!(
                        measure.count(text, first, rest),
                        count_wrapped(text, first, rest),
                        "{text:?} {first} {rest}"
                    );
                }
            }
        }
    }

    fn wrap(text: &str, first: usize, rest: usize) -> Vec<String> {
        let mut lines = vec![String::new()];
        wrap_words(text, first, rest, |event| match event {
            WrapEvent::Piece(s, e) => lines.last_mut().unwrap().push_str(&text[s..e]),
            WrapEvent::Break => lines.push(String::new()),
        });
        assert_eq!(lines.len(), count_wrapped(text, first, rest));
        lines
    }

    fn broken(text: &str, avail: usize) -> Vec<String> {
        let mut out = Vec::new();
        hard_break(text, avail, |s, e, marker| {
            out.push(format!("{}{}", &text[s..e], if marker { "↩" } else { "" }))
        });
        assert_eq!(out.len(), count_hard_broken(text, avail));
        out
    }

    #[test]
    fn wraps_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5, 5), ["aa bb", "cc"]);
        assert_eq!(wrap("aa  bb", 3, 3), ["aa", "bb"]);
        assert_eq!(wrap("aa bb", 2, 4), ["aa", "bb"]);
        assert_eq!(wrap("", 5, 5), [""]);
        assert_eq!(wrap("a\nb", 5, 5), ["a", "b"]);
    }

    #[test]
    fn long_words_are_split() {
        assert_eq!(wrap("x abcdefg", 3, 3), ["x", "abc", "def", "g"]);
        assert_eq!(wrap("日本語", 4, 4), ["日本", "語"]);
    }

    #[test]
    fn hard_breaks_leave_room_for_the_marker() {
        assert_eq!(broken("abcdef", 6), ["abcdef"]);
        assert_eq!(broken("abcdefg", 4), ["abc↩", "defg"]);
        assert_eq!(broken("abcdefgh", 4), ["abc↩", "def↩", "gh"]);
        assert_eq!(broken("", 4), [""]);
        assert_eq!(
            broken("日本語のテキスト", 7),
            ["日本語↩", "のテキ↩", "スト"]
        );
    }

    #[test]
    fn spans_follow_runs() {
        let mut s = Styled::default();
        s.push("ab", Style::new());
        s.push("cd", Style::new().bold());
        let mut out = Vec::new();
        s.spans_into(1, 3, &mut out);
        assert_eq!(
            out,
            [Span::raw("b"), Span::styled("c", Style::new().bold())]
        );
    }
}
