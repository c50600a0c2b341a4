//! The transcript pane's model: entries (messages) and the caches that make drawing a frame
//! cost O(visible lines) rather than O(history).
//!
//! - Each entry's markdown is parsed once into a width-independent [`Document`] when its
//!   content is set. Its lines at a width are built only when the entry is drawn, and kept in a
//!   bounded cache keyed by (entry, width).
//! - Heights at the current width sit in a Fenwick tree ([`Heights`]): `top` → entry and
//!   entry → first line are O(log n). On a width change every height is recounted at once: a
//!   count is a pass over the parsed text with no allocation (measured in `docs/performance.md`),
//!   so heights are always exact and scrolling never jumps.
//! - A streaming entry is re-parsed alone, and only from the start of its last top-level block:
//!   the blocks before it are final (committed) and their lines are built once per width. Its
//!   growing code block is re-highlighted from the last changed line only.
//!
//! - A body row drawn on reset cells is kept as cells for the next frame, which copies it
//!   (see [`Transcript::render_on_reset`]).
//!
//! Caches live behind `RefCell`s so the view draws from `&Transcript`.
//!
//! ```
//! use convo::api::types::Role;
//! use convo_tui::render::transcript::{Entry, EntryState, Transcript};
//! use ratatui::{buffer::Buffer, layout::Rect};
//!
//! let mut t = Transcript::new();
//! let id = t.push(Entry::new(Role::Assistant, "Hello **world**", "assistant · 12:04"));
//! t.append_delta(id, ", and more.");
//! assert_eq!(t.height(40), 3); // header, one body line, blank
//! let area = Rect::new(0, 0, 40, 3);
//! let mut buf = Buffer::empty(area);
//! t.render(area, &mut buf, 0, Some(id));
//! ```
pub use handover::Rendered;
use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use foldhash::HashMap;
use ratatui::buffer::{Buffer, Cell, CellDiffOption};
use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

mod draw;
mod handover;
mod line_cache;
mod stream_body;

use draw::*;
use line_cache::*;
use stream_body::*;

use crate::render::cells::InlineCells;
use crate::render::heights::Heights;
use crate::render::highlight::HighlightMemo;
use crate::render::markdown::{Block, Document, Growing, Shape, TopStart};
use crate::render::style;
use convo_client::api::types::Role;
use convo_client::sanitize::{Sanitizer, sanitize};

/// Identifies an entry of one [`Transcript`]: assigned by [`Transcript::push`], increasing,
/// never reused. The app keeps its own map from message ids to entry ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(pub u64);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryState {
    Complete,
    /// Deltas are still arriving.
    Streaming,
    /// The stream stopped before the reply was done (user stop, connection lost).
    Interrupted,
    /// The reply failed; the string says why (shown on the header line).
    Failed(String),
}

/// One message of the transcript. `content` is the message as sent or received (raw,
/// unsanitised: the one copy of it the TUI keeps); it is drawn as [`shown`] shapes it.
/// `header` is the text of the header line, e.g. `"assistant · 12:04 · 42 tokens"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub role: Role,
    pub content: String,
    pub state: EntryState,
    pub header: String,
}

impl Entry {
    /// A complete entry.
    pub fn new(role: Role, content: impl Into<String>, header: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            state: EntryState::Complete,
            header: header.into(),
        }
    }

    /// An entry whose content will arrive by [`Transcript::append_delta`].
    pub fn streaming(role: Role, header: impl Into<String>) -> Self {
        Self {
            state: EntryState::Streaming,
            ..Self::new(role, String::new(), header)
        }
    }
}

/// Lines of an entry: header, body, one blank line.
const CHROME_LINES: usize = 2;
/// Entries whose lines are kept (the rest are rebuilt when drawn again).
const LINE_CACHE_ENTRIES: usize = 4096;

/// The transcript: entries in order, with their render caches.
#[derive(Default)]
pub struct Transcript {
    slots: Vec<Slot>,
    next_id: u64,
    /// Heights at one width (the last asked for).
    heights: RefCell<Option<(u16, Heights)>>,
    lines: RefCell<LineCache>,
}

struct Slot {
    id: EntryId,
    /// Changes whenever the content does ([`Transcript::revision`]).
    revision: u64,
    entry: Entry,
    /// Built from `entry` whenever its header or state changes.
    header: Line<'static>,
    body: RefCell<Body>,
}

enum Body {
    /// A complete entry, held as its [`Shape`]: parsed again from its text when drawn.
    Shaped(Shape),
    /// A complete entry whose height needs its text (CJK, emoji): kept parsed.
    Parsed(Document),
    Streaming(Box<StreamBody>),
}

/// The markdown a message is drawn from. Replies are markdown as the server sent them; what
/// the user typed keeps its line breaks (markdown would join the lines of a paragraph) and
/// the spaces that start a line (markdown drops them, or takes four as code), except inside
/// fenced code, which keeps both anyway, and before a list item, where they nest the list.
pub fn shown(role: Role, content: &str) -> Cow<'_, str> {
    if role == Role::Assistant || !(content.contains('\n') || content.starts_with(' ')) {
        return Cow::Borrowed(content);
    }
    let mut out = String::with_capacity(content.len() + 16);
    let mut in_fence = false;
    let mut lines = content.split('\n').peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start_matches(' ');
        let fence = trimmed.starts_with("```") || trimmed.starts_with("~~~");
        if fence {
            in_fence = !in_fence;
        }
        if in_fence || fence || trimmed.is_empty() || starts_list_item(trimmed) {
            out.push_str(line);
        } else {
            // No-break spaces: shown as typed, and markdown does not take them as indentation.
            out.extend(std::iter::repeat_n('\u{a0}', line.len() - trimmed.len()));
            out.push_str(trimmed);
        }
        if lines.peek().is_some() {
            if !in_fence && !line.trim().is_empty() {
                // A markdown hard break.
                out.push_str("  ");
            }
            out.push('\n');
        }
    }
    Cow::Owned(out)
}

/// `- `, `* `, `+ `, `1. ` or `1) ` (up to nine digits): a line markdown takes as a list item.
fn starts_list_item(line: &str) -> bool {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let marker = match digits {
        0 => line.get(..1).filter(|m| matches!(*m, "-" | "*" | "+")),
        1..=9 => line
            .get(digits..digits + 1)
            .filter(|m| matches!(*m, "." | ")")),
        _ => None,
    };
    marker.is_some() && matches!(line.as_bytes().get(digits + 1), Some(b' ' | b'\t') | None)
}

impl Body {
    /// The body of a complete entry with this content.
    fn settled(role: Role, content: &str) -> Body {
        match Document::parse(&shown(role, content)).into_shape() {
            Ok(shape) => Body::Shaped(shape),
            Err(doc) => Body::Parsed(doc),
        }
    }
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("entries", &self.slots.len())
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

impl Transcript {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add an entry at the end.
    pub fn push(&mut self, entry: Entry) -> EntryId {
        let id = EntryId(self.next_id);
        self.next_id += 1;
        let body = if entry.state == EntryState::Streaming {
            Body::Streaming(Box::new(StreamBody::new(&entry.content)))
        } else {
            Body::settled(entry.role, &entry.content)
        };
        let slot = Slot {
            id,
            revision: next_revision(),
            header: header_line(&entry),
            body: RefCell::new(body),
            entry,
        };
        if let Some((width, heights)) = self.heights.get_mut() {
            heights.push(slot.height(*width));
        }
        self.slots.push(slot);
        id
    }

    /// Append streamed text to an entry; only this entry is re-parsed, and only from the start
    /// of its last top-level block. Unknown ids are ignored.
    pub fn append_delta(&mut self, id: EntryId, text: &str) {
        let Some(i) = self.index(id) else { return };
        let slot = &mut self.slots[i];
        slot.revision = next_revision();
        slot.entry.content.push_str(text);
        let body = slot.body.get_mut();
        match body {
            Body::Streaming(stream) => stream.push(text),
            // What the user typed is drawn reshaped (`shown`), which a stream body does not do:
            // parsed whole again (only replies stream).
            Body::Parsed(_) | Body::Shaped(_) if slot.entry.role != Role::Assistant => {
                *body = Body::settled(slot.entry.role, &slot.entry.content);
                self.lines.get_mut().map.remove(&id.0);
            }
            Body::Parsed(_) | Body::Shaped(_) => {
                *body = Body::Streaming(Box::new(StreamBody::new(&slot.entry.content)));
                self.lines.get_mut().map.remove(&id.0);
            }
        }
        self.refresh_height(i);
    }

    /// Replace an entry's content (re-parsed whole). Unknown ids are ignored.
    pub fn set_content(&mut self, id: EntryId, content: impl Into<String>) {
        let Some(i) = self.index(id) else { return };
        let slot = &mut self.slots[i];
        slot.revision = next_revision();
        slot.entry.content = content.into();
        *slot.body.get_mut() = if slot.entry.state == EntryState::Streaming {
            Body::Streaming(Box::new(StreamBody::new(&slot.entry.content)))
        } else {
            Body::settled(slot.entry.role, &slot.entry.content)
        };
        self.lines.get_mut().map.remove(&id.0);
        self.refresh_height(i);
    }

    /// Change an entry's state. An entry that stops streaming is parsed whole once (its last
    /// code line, drawn plain while it was being written, gets its colours). Unknown ids are
    /// ignored.
    pub fn set_state(&mut self, id: EntryId, state: EntryState) {
        let Some(i) = self.index(id) else { return };
        let slot = &mut self.slots[i];
        slot.entry.state = state;
        slot.header = header_line(&slot.entry);
        match slot.body.get_mut() {
            Body::Streaming(_) if slot.entry.state != EntryState::Streaming => {
                *slot.body.get_mut() = Body::settled(slot.entry.role, &slot.entry.content);
                self.lines.get_mut().map.remove(&id.0);
                self.refresh_height(i);
            }
            // the tail's lines depend on the state (see `StreamBody::lines`)
            Body::Streaming(stream) => stream.tail_lines = None,
            Body::Parsed(_) | Body::Shaped(_) => {}
        }
    }

    /// Change an entry's header text. Unknown ids are ignored.
    pub fn set_header(&mut self, id: EntryId, header: impl Into<String>) {
        if let Some(i) = self.index(id) {
            let slot = &mut self.slots[i];
            slot.entry.header = header.into();
            slot.header = header_line(&slot.entry);
        }
    }

    /// Remove an entry; returns it if it existed.
    pub fn remove(&mut self, id: EntryId) -> Option<Entry> {
        let i = self.index(id)?;
        let slot = self.slots.remove(i);
        if let Some((_, heights)) = self.heights.get_mut() {
            heights.remove(i);
        }
        self.lines.get_mut().map.remove(&id.0);
        Some(slot.entry)
    }

    /// Remove every entry (ids keep increasing).
    pub fn clear(&mut self) {
        self.slots.clear();
        *self.heights.get_mut() = None;
        self.lines.get_mut().map.clear();
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn get(&self, id: EntryId) -> Option<&Entry> {
        self.index(id).map(|i| &self.slots[i].entry)
    }

    /// A number that changes whenever the entry's content does, never the same for two
    /// contents of any entry of any transcript in this process: what caches of an entry's
    /// text are keyed by. `None` for an unknown id.
    pub fn revision(&self, id: EntryId) -> Option<u64> {
        self.index(id).map(|i| self.slots[i].revision)
    }

    /// The text of each body line of entry `id` at `width` (the lines drawn under its
    /// header), as drawn, without building colours: what in-transcript search matches.
    /// Empty for an unknown id.
    pub fn body_text_lines(&self, id: EntryId, width: u16) -> Vec<String> {
        let Some(i) = self.index(id) else {
            return Vec::new();
        };
        let entry = &self.slots[i].entry;
        Document::parse(&shown(entry.role, &entry.content)).text_lines(width)
    }

    /// Entries in order, with their ids.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = (EntryId, &Entry)> + '_ {
        self.slots.iter().map(|s| (s.id, &s.entry))
    }

    pub fn last_id(&self) -> Option<EntryId> {
        self.slots.last().map(|s| s.id)
    }

    /// Total lines at `width`.
    pub fn height(&self, width: u16) -> usize {
        self.with_heights(width, |h| h.total())
    }

    /// The entry drawn on `line` (0 = first line of the transcript) at `width`.
    pub fn entry_at_line(&self, width: u16, line: usize) -> Option<EntryId> {
        self.with_heights(width, |h| h.find(line))
            .map(|i| self.slots[i].id)
    }

    /// The lines entry `id` occupies at `width` (header to trailing blank line); empty for an
    /// unknown id.
    pub fn line_range_of(&self, width: u16, id: EntryId) -> Range<usize> {
        let Some(i) = self.index(id) else {
            return 0..0;
        };
        self.with_heights(width, |h| {
            let start = h.prefix(i);
            start..start + h.get(i)
        })
    }

    /// The code blocks of entry `id`, numbered as drawn: the text of each, tabs as written
    /// ([`super::markdown::code_block_texts`]). Empty for an unknown id.
    pub fn code_blocks(&self, id: EntryId) -> Vec<String> {
        self.get(id).map_or_else(Vec::new, |e| {
            super::markdown::code_block_texts(&shown(e.role, &e.content))
        })
    }

    /// The transcript lines each code block of entry `id` takes at `width`, in the order of
    /// [`Transcript::code_blocks`]: from the same parse as the lines drawn.
    pub fn code_block_lines(&self, width: u16, id: EntryId) -> Vec<Range<usize>> {
        let Some(entry) = self.get(id) else {
            return Vec::new();
        };
        // The body starts under the header line.
        let body = self.line_range_of(width, id).start + 1;
        Document::parse(&shown(entry.role, &entry.content))
            .code_block_lines(width)
            .into_iter()
            .map(|r| body + r.start..body + r.end)
            .collect()
    }

    /// The `top` that shows the last `rows` lines at `width` (following the tail).
    pub fn tail_top(&self, width: u16, rows: u16) -> usize {
        self.height(width).saturating_sub(usize::from(rows))
    }

    /// Draw lines `[top, top + area.height)` into `buf`; the rows of `selected` get the
    /// selection style. Rows past the end are left untouched.
    pub fn render(&self, area: Rect, buf: &mut Buffer, top: usize, selected: Option<EntryId>) {
        self.render_rows(area, buf, top, selected, false);
    }

    /// [`Transcript::render`] into an area whose cells are all as `Buffer::reset` leaves them,
    /// as in every frame of a terminal (ratatui resets the buffer it draws into, and the
    /// pane's block styles only its border): rows drawn in the last frame are then copied
    /// from its cells without checking the cells they land on. Debug builds check the
    /// promise.
    pub fn render_on_reset(
        &self,
        area: Rect,
        buf: &mut Buffer,
        top: usize,
        selected: Option<EntryId>,
    ) {
        self.render_rows(area, buf, top, selected, true);
    }

    fn render_rows(
        &self,
        area: Rect,
        buf: &mut Buffer,
        top: usize,
        selected: Option<EntryId>,
        on_reset: bool,
    ) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        debug_assert!(
            !on_reset
                || area
                    .rows()
                    .all(|row| row.columns().all(|p| is_reset(&buf[p]))),
            "render_on_reset into cells that are not reset"
        );
        let width = area.width;
        let mut heights = self.heights.borrow_mut();
        let heights = self.heights_at(&mut heights, width);
        let Some(mut i) = heights.find(top) else {
            return;
        };
        let mut skip = top - heights.prefix(i);
        let mut y = area.y;
        let mut cache = self.lines.borrow_mut();
        cache.clock += 1;
        while y < area.bottom() && i < self.slots.len() {
            let slot = &self.slots[i];
            let body = slot.lines(width, &mut cache);
            let first_row = y;
            for n in skip..heights.get(i) {
                if y >= area.bottom() {
                    break;
                }
                if n == 0 {
                    draw_line(buf, area.x, y, &slot.header, width);
                } else if let Some((lines, index)) = body.locate(n - 1) {
                    cache.draw_row(buf, (area.x, y), width, (lines, index), on_reset);
                }
                y += 1;
            }
            if selected == Some(slot.id) && y > first_row {
                let rows = Rect::new(area.x, first_row, width, y - first_row);
                buf.set_style(rows, style::selected());
            }
            skip = 0;
            i += 1;
        }
        cache.evict();
    }

    /// Every line at `width`, rendered from scratch without any cache: the reference the
    /// cached path is tested against, and the naive baseline of the benchmarks.
    pub fn lines_uncached(&self, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        for slot in &self.slots {
            out.push(header_line(&slot.entry));
            if slot.entry.state == EntryState::Streaming {
                let clean = sanitize(&slot.entry.content);
                out.extend(Document::parse_clean(&clean).lines_streaming(&clean, width));
            } else {
                Document::parse(&shown(slot.entry.role, &slot.entry.content))
                    .lines_into(width, &mut out, None);
            }
            out.push(Line::default());
        }
        out
    }

    fn index(&self, id: EntryId) -> Option<usize> {
        self.slots.binary_search_by_key(&id, |s| s.id).ok()
    }

    fn refresh_height(&mut self, i: usize) {
        if let Some((width, heights)) = self.heights.get_mut() {
            heights.set(i, self.slots[i].height(*width));
        }
    }

    fn heights_at<'a>(&self, cell: &'a mut Option<(u16, Heights)>, width: u16) -> &'a Heights {
        if cell.as_ref().is_none_or(|(w, _)| *w != width) {
            *cell = None;
        }
        let (_, heights) = cell.get_or_insert_with(|| {
            let values = self.slots.iter().map(|s| s.height(width)).collect();
            (width, Heights::from_values(values))
        });
        heights
    }

    fn with_heights<T>(&self, width: u16, f: impl FnOnce(&Heights) -> T) -> T {
        let mut cell = self.heights.borrow_mut();
        f(self.heights_at(&mut cell, width))
    }
}

/// The next entry revision ([`Transcript::revision`]).
fn next_revision() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The transcript as a ratatui widget:
/// `frame.render_widget(TranscriptView::new(&transcript).top(top).selected(id), area)`.
#[derive(Clone, Copy, Debug)]
pub struct TranscriptView<'a> {
    transcript: &'a Transcript,
    top: usize,
    selected: Option<EntryId>,
}

impl<'a> TranscriptView<'a> {
    pub fn new(transcript: &'a Transcript) -> Self {
        Self {
            transcript,
            top: 0,
            selected: None,
        }
    }

    /// First line shown (0 = the top of the transcript).
    pub fn top(mut self, top: usize) -> Self {
        self.top = top;
        self
    }

    pub fn selected(mut self, selected: Option<EntryId>) -> Self {
        self.selected = selected;
        self
    }
}

impl Widget for TranscriptView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        self.transcript.render(area, buf, self.top, self.selected);
    }
}

impl Slot {
    fn height(&self, width: u16) -> usize {
        CHROME_LINES
            + match &mut *self.body.borrow_mut() {
                Body::Shaped(shape) => shape.height(width),
                Body::Parsed(doc) => doc.height(width),
                Body::Streaming(stream) => stream.height(width),
            }
    }

    fn lines(&self, width: u16, cache: &mut LineCache) -> BodyLines {
        match &mut *self.body.borrow_mut() {
            Body::Shaped(_) => BodyLines::One(cache.get_or_build(self.id, width, || {
                Document::parse(&shown(self.entry.role, &self.entry.content)).lines(width)
            })),
            Body::Parsed(doc) => {
                BodyLines::One(cache.get_or_build(self.id, width, || doc.lines(width)))
            }
            Body::Streaming(stream) => {
                stream.lines(width, self.entry.state == EntryState::Streaming)
            }
        }
    }
}

/// The body lines of one entry at one width.
enum BodyLines {
    One(Arc<Vec<Line<'static>>>),
    /// A streaming entry: committed lines, a separator if both parts have lines, the lines of
    /// each block of the tail.
    Two(Arc<Vec<Line<'static>>>, bool, TailLines),
}

/// The lines of one block.
type BlockLines = Arc<Vec<Line<'static>>>;

/// The lines of the blocks of a streaming tail, block by block.
type TailLines = Arc<[BlockLines]>;

impl BodyLines {
    /// The vector holding line `n` and its index there; `None` for the blank separator (which
    /// draws nothing) and past the end.
    fn locate(&self, n: usize) -> Option<(&Arc<Vec<Line<'static>>>, usize)> {
        match self {
            BodyLines::One(lines) => (n < lines.len()).then_some((lines, n)),
            BodyLines::Two(head, sep, tail) => {
                if n < head.len() {
                    return Some((head, n));
                }
                let mut n = n - head.len();
                if *sep {
                    n = n.checked_sub(1)?;
                }
                for part in tail.iter() {
                    if n < part.len() {
                        return Some((part, n));
                    }
                    n -= part.len();
                }
                None
            }
        }
    }
}

/// Header line: a bar and the header text in the role's colour, then the state.
fn header_line(entry: &Entry) -> Line<'static> {
    let role = style::role(entry.role);
    let header = one_line(&entry.header);
    let mut spans = vec![Span::styled("▌ ", role)];
    let name = entry.role.as_str();
    if header.is_empty() {
        spans.push(Span::styled(name, role));
    } else if let Some(rest) = header.strip_prefix(name) {
        spans.push(Span::styled(name, role));
        spans.push(Span::styled(rest.to_owned(), style::header_text()));
    } else {
        spans.push(Span::styled(header, style::header_text()));
    }
    match &entry.state {
        EntryState::Complete => {}
        EntryState::Streaming => {
            spans.push(Span::styled(" · streaming…", style::streaming_marker()))
        }
        EntryState::Interrupted => {
            spans.push(Span::styled(" · interrupted", style::interrupted_marker()))
        }
        EntryState::Failed(reason) => {
            let reason = one_line(reason);
            let text = if reason.is_empty() {
                " · failed".to_owned()
            } else {
                format!(" · failed: {reason}")
            };
            spans.push(Span::styled(text, style::failed_marker()));
        }
    }
    Line::from(spans)
}

fn one_line(text: &str) -> String {
    sanitize(text).replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    fn drawn(t: &Transcript, width: u16, top: usize, rows: u16) -> Vec<String> {
        let area = Rect::new(0, 0, width, rows);
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, top, None);
        (0..rows)
            .map(|y| {
                (0..width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn entries_draw_header_body_blank() {
        let mut t = Transcript::new();
        t.push(Entry::new(Role::User, "hi", "user · 12:00"));
        let id = t.push(Entry::streaming(Role::Assistant, "assistant · 12:01"));
        t.append_delta(id, "one ");
        t.append_delta(id, "two");
        assert_eq!(t.height(40), 6);
        assert_eq!(
            drawn(&t, 40, 0, 6),
            [
                "▌ user · 12:00",
                "hi",
                "",
                "▌ assistant · 12:01 · streaming…",
                "one two",
                ""
            ]
        );
        assert_eq!(t.entry_at_line(40, 4), Some(id));
        assert_eq!(t.line_range_of(40, id), 3..6);
        assert_eq!(drawn(&t, 40, 4, 1), ["one two"]);
    }

    #[test]
    fn a_user_message_keeps_the_spaces_that_start_its_lines() {
        let text = "one\n    indented line three\n  two\n```\n  code\n```";
        let doc = Document::parse(&shown(Role::User, text));
        let lines: Vec<String> = doc
            .lines(60)
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        let plain: Vec<String> = lines.iter().map(|l| l.replace('\u{a0}', " ")).collect();
        assert!(
            plain.iter().any(|l| l == "    indented line three"),
            "{plain:?}"
        );
        assert!(plain.iter().any(|l| l == "  two"), "{plain:?}");
        assert!(plain.iter().any(|l| l.ends_with("  code")), "{plain:?}");
        // Before a list item the spaces nest the list, as markdown has it.
        assert_eq!(shown(Role::User, "- a\n  - b"), "- a  \n  - b");
        assert!(starts_list_item("12. x") && starts_list_item("* x") && starts_list_item("-"));
        assert!(!starts_list_item("-x") && !starts_list_item("1.5 kg") && !starts_list_item("x"));
        // Only a user's text: a reply is markdown, where four spaces start code.
        assert_eq!(shown(Role::Assistant, text), text);
        assert_eq!(shown(Role::User, "  lead"), "\u{a0}\u{a0}lead");
    }

    #[test]
    fn streaming_commits_blocks_and_matches_a_full_parse() {
        let text_in = "# Title\n\nfirst para\n\n- a\n- b\n\n```rust\nfn x() {}\n```\n\nlast";
        let mut t = Transcript::new();
        let id = t.push(Entry::streaming(Role::Assistant, "a"));
        for (i, c) in text_in.char_indices() {
            t.append_delta(id, &text_in[i..i + c.len_utf8()]);
            for width in [20, 33] {
                let area = Rect::new(0, 0, width, 40);
                let mut buf = Buffer::empty(area);
                t.render(area, &mut buf, 0, None);
                let expected = t.lines_uncached(width);
                assert_eq!(t.height(width), expected.len());
                let mut want = Buffer::empty(area);
                for (y, line) in expected.iter().enumerate() {
                    want.set_line(0, y as u16, line, width);
                }
                assert_eq!(buf, want, "after {:?} at {width}", &text_in[..=i]);
            }
        }
        let Body::Streaming(stream) = &*t.slots[0].body.borrow() else {
            panic!("not streaming")
        };
        assert!(stream.committed_len > 0);
    }

    #[test]
    fn a_code_line_being_written_is_plain_until_its_newline_or_the_end() {
        let mut t = Transcript::new();
        let id = t.push(Entry::streaming(Role::Assistant, "a"));
        t.append_delta(id, "```rust\nfn main() {}\nlet x");
        let spans = |t: &Transcript, row: usize| {
            let area = Rect::new(0, 0, 40, 6);
            let mut buf = Buffer::empty(area);
            t.render(area, &mut buf, 0, None);
            (0..40u16)
                .map(|x| buf[(x, row as u16)].fg)
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        // rows: header, `fn main() {}`, `let x`
        assert!(spans(&t, 1) > 3, "a finished line has its colours");
        // gutter, code colour, and the empty cells after the text
        assert_eq!(spans(&t, 2), 3, "the line being written is plain");
        t.append_delta(id, " = 1;\n");
        assert!(spans(&t, 2) > 3, "coloured once its newline came");
        t.append_delta(id, "let y");
        assert_eq!(spans(&t, 3), 3);
        t.set_state(id, EntryState::Complete);
        assert!(spans(&t, 3) > 3, "coloured when the reply ends");
    }

    #[test]
    fn rows_drawn_again_match_a_fresh_transcript_on_reset_and_on_styled_cells() {
        use ratatui::style::Style;
        let content = "Some *styled* text, `code`, café and 日本語 words that wrap around.\n\n\
                       - a list item\n- another\n\n```rust\nfn main() {}\n```";
        let build = || {
            let mut t = Transcript::new();
            for i in 0..6 {
                t.push(Entry::new(
                    Role::Assistant,
                    content,
                    format!("assistant · {i}"),
                ));
            }
            t
        };
        let cached = build();
        let area = Rect::new(0, 0, 30, 12);
        for top in [0, 3, 4, 9, 4, 0, 20] {
            for styled in [false, true, false] {
                let prepare = |buf: &mut Buffer| {
                    if styled {
                        buf.set_style(area, Style::new().on_blue().italic());
                    }
                };
                let mut got = Buffer::empty(area);
                prepare(&mut got);
                if styled {
                    cached.render(area, &mut got, top, None);
                } else {
                    cached.render_on_reset(area, &mut got, top, None);
                }
                let mut want = Buffer::empty(area);
                prepare(&mut want);
                build().render(area, &mut want, top, None);
                assert_eq!(got, want, "top {top}, styled {styled}");
            }
        }
    }

    #[test]
    fn fast_characters_are_one_column_and_never_join_each_other() {
        use unicode_segmentation::UnicodeSegmentation;
        let fast: Vec<char> = (' '..='\u{2fff}').filter(|&c| is_fast(c)).collect();
        assert_eq!(fast.len(), FAST_CELLS.len() - 1, "all but the soft hyphen");
        for &a in &fast {
            assert_eq!(unicode_width::UnicodeWidthChar::width(a), Some(1), "{a:?}");
            assert_eq!(
                FAST_CELLS.as_slice()[fast_index(a).unwrap()].symbol(),
                a.to_string()
            );
            for &b in &fast {
                let pair = format!("{a}{b}");
                assert_eq!(pair.graphemes(true).count(), 2, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn draw_line_matches_set_line() {
        use ratatui::style::Style;
        let samples = [
            "plain ascii only",
            "e\u{301}tude cafe\u{301}",
            "a\u{600}1b",
            "日本語 and more 日本",
            "x\u{200d}y 👩\u{200d}💻 z",
            "wide at the edge: 日本語日本語",
            "ﾃﾞｽﾄ ﾟa",
            "aaa·bbbb·ccccc·dddddd·e",
            "▌ assistant · 12:00 · streaming…",
            "▎ code↩ │ a ─┼─ • ◦ ▪",
            "x\u{200d}↩ ↩\u{fe0f} ▌\u{301} \u{600}▎ ·\u{200d}·",
            "🇫🇷•🇫🇷 ▌日本▌",
            "café naïve Ærø œuvre ŧ ɏ e\u{301}é\u{301} ¡¿ soft\u{ad}hyphen",
        ];
        for text in samples {
            for width in 1..=24u16 {
                let line = Line::from(vec![
                    Span::styled(text, Style::new().bold()),
                    Span::raw("|tail"),
                    Span::styled("語x", Style::new().red()),
                ]);
                // the line reaching the buffer's right edge is the case to get right
                let area = Rect::new(0, 0, width, 1);
                let (mut want, mut got) = (Buffer::empty(area), Buffer::empty(area));
                // a buffer already styled (a pane's background, an underline) keeps its style
                if width % 2 == 0 {
                    let under = Style::new().on_blue().underlined().italic();
                    want.set_style(area, under);
                    got.set_style(area, under);
                }
                want.set_line(0, 0, &line, width);
                draw_line(&mut got, 0, 0, &line, width);
                assert_eq!(got, want, "{text:?} at {width}");
            }
        }
    }

    #[test]
    fn remove_and_clear() {
        let mut t = Transcript::new();
        let a = t.push(Entry::new(Role::User, "a", "user"));
        let b = t.push(Entry::new(Role::User, "b\n\nc", "user"));
        assert_eq!(t.height(20), 3 + 5);
        assert_eq!(t.remove(a).map(|e| e.content), Some("a".into()));
        assert_eq!(t.height(20), 5);
        assert_eq!(t.line_range_of(20, b), 0..5);
        assert_eq!(t.line_range_of(20, a), 0..0);
        t.clear();
        assert_eq!(t.height(20), 0);
        assert!(t.is_empty());
        assert_eq!(text(&t.lines_uncached(20)), Vec::<String>::new());
    }

    #[test]
    fn code_blocks_are_found_where_they_are_drawn_complete_or_streaming() {
        let mut t = Transcript::new();
        t.push(Entry::new(
            Role::User,
            "show me\ntwo blocks",
            "user · 12:00",
        ));
        let reply = "First:\n\n```rust\nfn a() {}\n```\n\nSecond, a longer text that wraps:\n\n~~~\nls\n~~~";
        let done = t.push(Entry::new(Role::Assistant, reply, "assistant · 12:01"));
        let coming = t.push(Entry::streaming(Role::Assistant, "assistant · 12:02"));
        t.append_delta(coming, "```sh\necho one\n```\n\ntext\n\n```\nhalf");
        assert_eq!(t.code_blocks(done), ["fn a() {}", "ls"]);
        assert_eq!(t.code_blocks(coming), ["echo one", "half"]);
        assert!(t.code_blocks(EntryId(99)).is_empty());
        for width in [24u16, 60] {
            let rows = drawn(&t, width, 0, t.height(width) as u16);
            let at = |id, i: usize| rows[t.code_block_lines(width, id)[i].start].clone();
            assert!(at(done, 0).contains("fn a() {}"), "{rows:?}");
            assert!(at(done, 1).contains("ls"), "{rows:?}");
            assert!(at(coming, 0).contains("echo one"), "{rows:?}");
            assert!(at(coming, 1).contains("half"), "{rows:?}");
        }
    }
}
