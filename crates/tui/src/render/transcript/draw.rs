//! Drawing lines into the buffer: fast runs of common cells written directly, the rest through `set_stringn`.

use super::*;

/// `Buffer::set_line`, with a fast path for printable ASCII and the symbols the transcript
/// draws itself (bars, bullets, gutters, rules): one cell per character, no grapheme
/// segmentation (segmentation was most of a frame's cost). Between two such characters there
/// is always a grapheme boundary, so a span is cut there into fast runs (drawn directly) and
/// the rest (drawn by `set_stringn`); the cells are the same as `set_line`'s, which the
/// transcript tests check against.
///
/// Returns the column after the last one drawn.
pub(super) fn draw_line(buf: &mut Buffer, x: u16, y: u16, line: &Line<'_>, max_width: u16) -> u16 {
    let mut x = x;
    let mut remaining = max_width.min(buf.area.right().saturating_sub(x));
    for span in &line.spans {
        if remaining == 0 {
            break;
        }
        let style = line.style.patch(span.style);
        draw_span(buf, &mut x, y, &span.content, &mut remaining, style);
    }
    x
}

/// The transcript's own symbols (bars, bullets, gutters, rules, the break marker) past
/// Latin Extended-B (its `·` is in the Latin-1 Supplement).
pub(super) const FAST_SYMBOLS: [char; 10] = ['▌', '▎', '│', '•', '◦', '▪', '…', '─', '┼', '↩'];

/// Printable ASCII, then the Latin-1 Supplement and Latin Extended-A/B (accented letters and
/// signs), then [`FAST_SYMBOLS`]: the index of a fast character's cell in [`FAST_CELLS`].
pub(super) const LATIN_FIRST: u32 = 0xa1;
pub(super) const LATIN_LAST: u32 = 0x24f;
pub(super) const LATIN_START: usize = 95;
pub(super) const SYMBOLS_START: usize = LATIN_START + (LATIN_LAST - LATIN_FIRST + 1) as usize;

/// The index in [`FAST_CELLS`] of a character one column wide that never joins a neighbour
/// into one grapheme (no combining, prepended, joining, control or regional-indicator
/// character; the soft hyphen is a control), or `None`. `↩` is an emoji base, so a joiner
/// before it joins it: the character of a run touching other text goes the slow way (see
/// `draw_span`). A test checks every pair of these characters.
pub(super) fn fast_index(c: char) -> Option<usize> {
    let n = u32::from(c);
    match n {
        0x20..=0x7e => Some((n - 0x20) as usize),
        0xad => None,
        LATIN_FIRST..=LATIN_LAST => Some(LATIN_START + (n - LATIN_FIRST) as usize),
        _ => FAST_SYMBOLS
            .iter()
            .position(|&s| s == c)
            .map(|k| SYMBOLS_START + k),
    }
}

pub(super) fn is_fast(c: char) -> bool {
    fast_index(c).is_some()
}

/// A cell holding each character of [`fast_index`] (and an unused one for the soft hyphen).
/// Copying a cell is a fraction of `Cell::set_char`, which builds its symbol again.
pub(super) static FAST_CELLS: std::sync::LazyLock<InlineCells> = std::sync::LazyLock::new(|| {
    let cells = (' '..='~')
        .chain((LATIN_FIRST..=LATIN_LAST).filter_map(char::from_u32))
        .chain(FAST_SYMBOLS)
        .map(|c| {
            let mut cell = Cell::EMPTY;
            cell.set_char(c);
            cell
        })
        .collect();
    InlineCells::new(cells).expect("one character of up to 3 bytes is always stored inline")
});

/// `cell.set_char(c)` for the character at `index` of `fast` ([`FAST_CELLS`]); everything
/// but the symbol is kept.
#[allow(deprecated)] // `skip` is kept as `set_char` keeps it
pub(super) fn set_fast_symbol(cell: &mut Cell, fast: &InlineCells, index: usize) {
    let (fg, bg, underline, modifier) = (cell.fg, cell.bg, cell.underline_color, cell.modifier);
    let (diff_option, skip) = (cell.diff_option, cell.skip);
    fast.copy_one(index, cell);
    cell.fg = fg;
    cell.bg = bg;
    cell.underline_color = underline; // ratatui's default feature `underline-color`
    cell.modifier = modifier;
    cell.diff_option = diff_option;
    cell.skip = skip;
}

pub(super) fn draw_span(
    buf: &mut Buffer,
    x: &mut u16,
    y: u16,
    text: &str,
    remaining: &mut u16,
    style: ratatui::style::Style,
) {
    let bytes = text.as_bytes();
    // byte length of the fast character at `i`, or 0
    let fast_len = |i: usize| match bytes[i] {
        0x20..=0x7e => 1,
        0x80.. => text[i..]
            .chars()
            .next()
            .filter(|&c| is_fast(c))
            .map_or(0, char::len_utf8),
        _ => 0,
    };
    // byte length of the character at `i` (a char boundary)
    let char_len = |i: usize| match bytes[i] {
        0..0x80 => 1,
        0xc0..0xe0 => 2,
        0xe0..0xf0 => 3,
        _ => 4,
    };
    let mut slow_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if fast_len(i) == 0 {
            i += char_len(i);
            continue;
        }
        let run_start = i;
        let mut last_len = 0;
        while i < bytes.len() {
            let n = fast_len(i);
            if n == 0 {
                break;
            }
            last_len = n;
            i += n;
        }
        // the characters touching other text may be part of its graphemes
        let fast_start = if run_start > 0 {
            run_start + char_len(run_start)
        } else {
            0
        };
        let fast_end = if i < bytes.len() { i - last_len } else { i };
        if fast_start >= fast_end {
            continue;
        }
        if slow_start < fast_start
            && !draw_slow(buf, x, y, &text[slow_start..fast_start], remaining, style)
        {
            return;
        }
        if *remaining == 0 {
            return;
        }
        let first = buf.index_of(*x, y);
        let run = &text[fast_start..fast_end];
        let fast = &*FAST_CELLS;
        let fits = if run.is_ascii() {
            // one byte per cell
            let n = run.len().min(usize::from(*remaining));
            for (cell, &b) in buf.content[first..first + n].iter_mut().zip(run.as_bytes()) {
                // a reset cell already holds a space: only its style changes
                if b != b' ' || cell.symbol() != " " {
                    set_fast_symbol(cell, fast, usize::from(b - 0x20));
                }
                cell.set_style(style);
            }
            draw_advance(x, remaining, n);
            n == run.len()
        } else {
            let mut n = 0;
            for (cell, c) in buf.content[first..].iter_mut().zip(run.chars()) {
                if n == usize::from(*remaining) {
                    break;
                }
                if c != ' ' || cell.symbol() != " " {
                    set_fast_symbol(cell, fast, fast_index(c).unwrap_or_default());
                }
                cell.set_style(style);
                n += 1;
            }
            draw_advance(x, remaining, n);
            // room left means the whole run was drawn; only a full row needs the count
            *remaining > 0 || run.chars().nth(n).is_none()
        };
        if !fits {
            return;
        }
        slow_start = fast_end;
    }
    if slow_start < text.len() {
        draw_slow(buf, x, y, &text[slow_start..], remaining, style);
    }
}

/// Move the cursor `n` cells on (`n` ≤ `remaining`).
pub(super) fn draw_advance(x: &mut u16, remaining: &mut u16, n: usize) {
    let n = u16::try_from(n).unwrap_or(u16::MAX).min(*remaining);
    *x += n;
    *remaining -= n;
}

/// Draw with `set_stringn`; false when not everything fitted (the span stops there).
pub(super) fn draw_slow(
    buf: &mut Buffer,
    x: &mut u16,
    y: u16,
    text: &str,
    remaining: &mut u16,
    style: ratatui::style::Style,
) -> bool {
    if *remaining == 0 {
        return false;
    }
    let (end, _) = buf.set_stringn(*x, y, text, usize::from(*remaining), style);
    let drawn = end.saturating_sub(*x).min(*remaining);
    *remaining -= drawn;
    *x = end;
    // Stopping early leaves less room than the grapheme that did not fit, and no grapheme is
    // wider than two columns per byte: plenty of room left means everything was drawn.
    usize::from(*remaining) >= 2 * text.len()
        || usize::from(drawn) >= crate::render::wrap::str_width(text)
}
