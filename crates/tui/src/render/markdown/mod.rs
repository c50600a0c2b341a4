//! Markdown → styled lines.
//!
//! Parsing (pulldown-cmark) produces a [`Document`]: a flat list of blocks that does not depend
//! on the width (prose with style runs, code lines, tables, rules, blank separators, each
//! with the prefix of its containers: quote bars, list markers and hanging indents). Fitting a
//! document to a width is then a cheap pass, and counting its lines at a width allocates
//! nothing but a table's column widths; the transcript caches both.
//!
//! The walk is iterative with an explicit container stack, so 10,000 nested `>` or lists do not
//! touch the call stack; only the first [`MAX_VISUAL_DEPTH`] containers indent, and a prefix never
//! takes more than half the width.
use std::cell::OnceCell;
use std::ops::Range;
use std::sync::Arc;

use pulldown_cmark::{Alignment, CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

mod parse;

use crate::render::highlight::{self, HighlightMemo};
use crate::render::style;
use crate::render::table::{TableBlock, TableMeasure};
use crate::render::wrap::{self, Measure, Styled, WrapEvent};
use convo_client::sanitize::sanitize;
use parse::Builder;

/// Containers deeper than this draw no further bar or indent.
pub const MAX_VISUAL_DEPTH: usize = 12;

const QUOTE_BAR: &str = "│ ";
const CODE_GUTTER: &str = "▎ ";
const BULLETS: [&str; 3] = ["• ", "◦ ", "▪ "];

/// Render markdown (sanitised first) to lines of at most `width` columns.
///
/// ```
/// let lines = convo_tui::render::markdown::render_markdown("# Title\n\nSome *text*.", 40);
/// assert_eq!(lines.len(), 3);
/// ```
pub fn render_markdown(markdown: &str, width: u16) -> Vec<Line<'static>> {
    Document::parse(markdown).lines(width)
}

/// The text of each code block of `markdown`, numbered as [`Document::parse`] numbers them
/// ([`Document::code_blocks`]), with tabs as written: for the clipboard. Should the two parses
/// ever count different blocks, the blocks are as drawn (tabs as spaces).
///
/// ```
/// let md = "Run:\n\n```make\nall:\n\tcc main.c\n```\n\n~~~\nls\n~~~\n";
/// assert_eq!(convo_tui::render::markdown::code_block_texts(md), ["all:\n\tcc main.c", "ls"]);
/// ```
pub fn code_block_texts(markdown: &str) -> Vec<String> {
    let drawn = Document::parse(markdown).code_blocks();
    let written = Document::parse_clean(&convo_client::sanitize::sanitize_keeping_tabs(markdown))
        .code_blocks();
    if written.len() == drawn.len() {
        written
    } else {
        drawn
    }
}

/// The spans drawn left of a block's lines. `first` carries a list marker, `rest` the same
/// width in spaces, so both have the same width.
#[derive(Clone, Debug, Default, PartialEq, Hash)]
pub struct Prefix {
    first: Vec<Span<'static>>,
    rest: Vec<Span<'static>>,
    width: usize,
}

impl Prefix {
    /// Prefix width drawn at `width`: never more than half of it.
    fn drawn_width(&self, width: usize) -> usize {
        self.width.min(width / 2)
    }

    fn spans(&self, first: bool, width: usize, out: &mut Vec<Span<'static>>) {
        let spans = if first { &self.first } else { &self.rest };
        let limit = self.drawn_width(width);
        if self.width <= limit {
            out.extend(spans.iter().cloned());
            return;
        }
        let mut left = limit;
        for span in spans {
            let w = wrap::str_width(&span.content);
            if w <= left {
                out.push(span.clone());
                left -= w;
            } else {
                let mut cut = String::new();
                for g in unicode_segmentation::UnicodeSegmentation::graphemes(&*span.content, true)
                {
                    let gw = wrap::grapheme_width(g);
                    if gw > left {
                        break;
                    }
                    cut.push_str(g);
                    left -= gw;
                }
                out.push(Span::styled(cut, span.style));
                break;
            }
        }
    }
}

/// One width-independent block of a document.
#[derive(Clone, Debug)]
pub(crate) enum Block {
    /// Word-wrapped text (paragraphs, headings, list item text).
    Flow {
        prefix: Arc<Prefix>,
        text: Styled,
        measure: Measure,
    },
    /// Lines kept as they are, broken at the width with a marker (HTML blocks).
    Fixed {
        prefix: Arc<Prefix>,
        lines: Vec<Styled>,
    },
    /// A table, its columns fitted to the width (see [`super::table`]).
    Table {
        prefix: Arc<Prefix>,
        table: Box<TableBlock>,
    },
    /// A fenced or indented code block, highlighted when first drawn.
    Code {
        prefix: Arc<Prefix>,
        lang: Option<String>,
        lines: Vec<String>,
        highlighted: OnceCell<Vec<Styled>>,
    },
    Rule {
        prefix: Arc<Prefix>,
    },
    /// The separator between two blocks.
    Blank {
        prefix: Arc<Prefix>,
    },
}

impl Block {
    fn prefix(&self) -> &Prefix {
        match self {
            Block::Flow { prefix, .. }
            | Block::Fixed { prefix, .. }
            | Block::Table { prefix, .. }
            | Block::Code { prefix, .. }
            | Block::Rule { prefix }
            | Block::Blank { prefix } => prefix,
        }
    }

    /// A hash of everything the block's lines depend on (not the width): two blocks with the
    /// same fingerprint draw the same lines. The streaming tail keeps the lines of its blocks
    /// by fingerprint, so a delta rebuilds only the block it changed.
    /// Seeded at random per process, so text cannot be made to collide on purpose.
    pub(crate) fn fingerprint(&self) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        static SEED: std::sync::LazyLock<foldhash::fast::RandomState> =
            std::sync::LazyLock::new(foldhash::fast::RandomState::default);
        let mut h = SEED.build_hasher();
        std::mem::discriminant(self).hash(&mut h);
        self.prefix().hash(&mut h);
        match self {
            Block::Flow { text, .. } => text.hash(&mut h),
            Block::Fixed { lines, .. } => lines.hash(&mut h),
            Block::Table { table, .. } => table.hash(&mut h),
            Block::Code { lang, lines, .. } => {
                lang.hash(&mut h);
                lines.hash(&mut h);
            }
            Block::Rule { .. } | Block::Blank { .. } => {}
        }
        h.finish()
    }

    /// Lines this block takes at `width`.
    pub(crate) fn height(&self, width: usize) -> usize {
        let avail = width
            .saturating_sub(self.prefix().drawn_width(width))
            .max(1);
        match self {
            Block::Flow { text, measure, .. } => measure.count(&text.text, avail, avail),
            Block::Fixed { lines, .. } => lines
                .iter()
                .map(|l| wrap::count_hard_broken(&l.text, avail))
                .sum(),
            Block::Table { table, .. } => table.height(avail),
            Block::Code { lines, .. } => {
                let avail = code_avail(avail);
                lines
                    .iter()
                    .map(|l| wrap::count_hard_broken(l, avail))
                    .sum()
            }
            Block::Rule { .. } | Block::Blank { .. } => 1,
        }
    }

    /// Append this block's lines at `width` to `out`. `growing` serves a code block that is
    /// still growing (the streaming tail).
    pub(crate) fn lines_into(
        &self,
        width: usize,
        out: &mut Vec<Line<'static>>,
        growing: Option<&mut Growing<'_>>,
    ) {
        let prefix = self.prefix();
        let avail = width.saturating_sub(prefix.drawn_width(width)).max(1);
        let mut first = true;
        let mut start_line = |spans: &mut Vec<Span<'static>>| {
            prefix.spans(first, width, spans);
            first = false;
        };
        match self {
            Block::Flow { text, .. } => {
                let mut spans = Vec::new();
                start_line(&mut spans);
                let mut run: Option<(usize, usize)> = None;
                wrap::wrap_words(&text.text, avail, avail, |event| match event {
                    WrapEvent::Piece(s, e) => match &mut run {
                        Some((_, end)) if *end == s => *end = e,
                        _ => {
                            if let Some((rs, re)) = run.take() {
                                text.spans_into(rs, re, &mut spans);
                            }
                            run = Some((s, e));
                        }
                    },
                    WrapEvent::Break => {
                        if let Some((rs, re)) = run.take() {
                            text.spans_into(rs, re, &mut spans);
                        }
                        out.push(Line::from(std::mem::take(&mut spans)));
                        start_line(&mut spans);
                    }
                });
                if let Some((rs, re)) = run.take() {
                    text.spans_into(rs, re, &mut spans);
                }
                out.push(Line::from(spans));
            }
            Block::Fixed { lines, .. } => {
                for line in lines {
                    hard_broken_into(line, avail, None, &mut start_line, out);
                }
            }
            Block::Table { table, .. } => table.lines_into(avail, &mut start_line, out),
            Block::Code {
                lang,
                lines,
                highlighted,
                ..
            } => {
                let with_gutter = code_has_gutter(avail);
                let avail = code_avail(avail);
                let fresh;
                let styled: &[Styled] = match growing {
                    Some(g) => {
                        fresh = g.highlight(lang.as_deref(), lines);
                        &fresh
                    }
                    None => highlighted
                        .get_or_init(|| highlight::highlight(lang.as_deref(), lines, None)),
                };
                let gutter = with_gutter.then(|| Span::styled(CODE_GUTTER, style::code_gutter()));
                for line in styled {
                    hard_broken_into(line, avail, gutter.as_ref(), &mut start_line, out);
                }
            }
            Block::Rule { .. } => {
                let mut spans = Vec::new();
                start_line(&mut spans);
                spans.push(Span::styled("─".repeat(avail), style::rule()));
                out.push(Line::from(spans));
            }
            Block::Blank { .. } => {
                let mut spans = Vec::new();
                start_line(&mut spans);
                // no trailing blanks: a quote's separator is `│`, a list item's is empty
                while let Some(last) = spans.last_mut() {
                    let trimmed = last.content.trim_end();
                    if trimmed.is_empty() {
                        spans.pop();
                    } else {
                        if trimmed.len() < last.content.len() {
                            last.content = trimmed.to_owned().into();
                        }
                        break;
                    }
                }
                out.push(Line::from(spans));
            }
        }
    }
}

/// What the height of a [`Document`] at any width depends on, without its text, styles or
/// spans: a tenth of the memory of the document it was taken from. The transcript keeps this
/// for every complete entry and parses an entry again only when it is drawn (its lines are
/// then cached): a 10,000-message history is held in a few MB.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    blocks: Box<[ShapeBlock]>,
}

#[derive(Clone, Debug)]
enum ShapeBlock {
    /// Word-wrapped text: its prefix width and word widths.
    Flow { prefix: usize, measure: Measure },
    /// Hard-broken lines (code when `code`, else HTML): their widths.
    Lines {
        prefix: usize,
        code: bool,
        widths: Box<[u32]>,
    },
    /// A table: its prefix width, column widths and cells' word widths.
    Table {
        prefix: usize,
        table: Box<TableMeasure>,
    },
    /// A rule or a separator: one line.
    One,
}

impl Shape {
    /// Lines at `width`: the same as [`Document::height`] of the document it was taken from.
    pub(crate) fn height(&self, width: u16) -> usize {
        let width = usize::from(width.max(1));
        let avail = |prefix: usize| width.saturating_sub(prefix.min(width / 2)).max(1);
        self.blocks
            .iter()
            .map(|b| match b {
                ShapeBlock::Flow { prefix, measure } => {
                    let avail = avail(*prefix);
                    measure.count_without_text(avail, avail)
                }
                ShapeBlock::Lines {
                    prefix,
                    code,
                    widths,
                } => {
                    let avail = if *code {
                        code_avail(avail(*prefix))
                    } else {
                        avail(*prefix)
                    };
                    widths
                        .iter()
                        .map(|w| wrap::count_hard_broken_uniform(*w as usize, avail))
                        .sum()
                }
                ShapeBlock::Table { prefix, table } => table.height(avail(*prefix), None),
                ShapeBlock::One => 1,
            })
            .sum()
    }
}

impl Document {
    /// The document's [`Shape`], when its height can be counted without its text: not when a
    /// word (of prose or of a table cell) or a code line holds graphemes of other than one
    /// column (CJK, emoji), since where those break depends on each grapheme. Then the
    /// document comes back.
    pub(crate) fn into_shape(self) -> Result<Shape, Document> {
        let width = |line: &str| wrap::uniform_width(line).and_then(|w| u32::try_from(w).ok());
        let fits = self.blocks.iter().all(|b| match b {
            Block::Flow { measure, .. } => measure.is_text_free(),
            Block::Fixed { lines, .. } => lines.iter().all(|l| width(&l.text).is_some()),
            Block::Table { table, .. } => table.measure().is_text_free(),
            Block::Code { lines, .. } => lines.iter().all(|l| width(l).is_some()),
            Block::Rule { .. } | Block::Blank { .. } => true,
        });
        if !fits {
            return Err(self);
        }
        let blocks = self
            .blocks
            .into_iter()
            .map(|b| match b {
                Block::Flow {
                    prefix,
                    mut measure,
                    ..
                } => {
                    measure.shrink_to_fit();
                    ShapeBlock::Flow {
                        prefix: prefix.width,
                        measure,
                    }
                }
                Block::Fixed { prefix, lines } => ShapeBlock::Lines {
                    prefix: prefix.width,
                    code: false,
                    widths: lines.iter().map(|l| width(&l.text).unwrap_or(0)).collect(),
                },
                Block::Table { prefix, table } => {
                    let mut table = table.into_measure();
                    table.shrink_to_fit();
                    ShapeBlock::Table {
                        prefix: prefix.width,
                        table: Box::new(table),
                    }
                }
                Block::Code { prefix, lines, .. } => ShapeBlock::Lines {
                    prefix: prefix.width,
                    code: true,
                    widths: lines.iter().map(|l| width(l).unwrap_or(0)).collect(),
                },
                Block::Rule { .. } | Block::Blank { .. } => ShapeBlock::One,
            })
            .collect();
        Ok(Shape { blocks })
    }
}

/// The highlighting of the code block a streamed reply is writing: lines already highlighted
/// are kept in `memo`, and the line still being written (`open_last_line`) is drawn plain
/// until its newline arrives. Highlighting it again on every delta was most of a delta's cost
/// (syntect runs its regexes over the whole line each time); the colours come the moment the
/// line is complete, or when the reply ends.
pub(crate) struct Growing<'a> {
    pub memo: &'a mut HighlightMemo,
    pub open_last_line: bool,
}

impl Growing<'_> {
    fn highlight(&mut self, lang: Option<&str>, lines: &[String]) -> Vec<Styled> {
        match lines.split_last() {
            Some((last, done)) if self.open_last_line => {
                let mut styled = highlight::highlight(lang, done, Some(&mut *self.memo));
                styled.push(Styled::plain(last.clone(), style::code()));
                styled
            }
            _ => highlight::highlight(lang, lines, Some(&mut *self.memo)),
        }
    }
}

/// Below this many columns a code block drops its gutter: the code needs them more (a wide
/// character and the break marker take three).
const MIN_CODE_COLUMNS_WITH_GUTTER: usize = 5;

fn code_has_gutter(avail: usize) -> bool {
    avail >= MIN_CODE_COLUMNS_WITH_GUTTER
}

/// Columns left for the code itself.
fn code_avail(avail: usize) -> usize {
    if code_has_gutter(avail) {
        avail - wrap::str_width(CODE_GUTTER)
    } else {
        avail.max(1)
    }
}

fn hard_broken_into(
    line: &Styled,
    avail: usize,
    gutter: Option<&Span<'static>>,
    start_line: &mut impl FnMut(&mut Vec<Span<'static>>),
    out: &mut Vec<Line<'static>>,
) {
    wrap::hard_break(&line.text, avail, |s, e, marker| {
        let mut spans = Vec::new();
        start_line(&mut spans);
        spans.extend(gutter.cloned());
        line.spans_into(s, e, &mut spans);
        if marker {
            spans.push(Span::styled(wrap::BREAK_MARKER, style::break_marker()));
        }
        out.push(Line::from(spans));
    });
}

/// Where a top-level block starts: the byte offset of its first line in the source, and the
/// index of the first [`Block`] produced after it (before any separator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TopStart {
    pub offset: usize,
    pub block: usize,
}

/// A parsed markdown text, ready to be fitted to any width.
#[derive(Clone, Debug, Default)]
pub struct Document {
    pub(crate) blocks: Vec<Block>,
    pub(crate) top_starts: Vec<TopStart>,
    /// Link reference definitions make later text depend on earlier text (and the reverse),
    /// so a document holding any cannot be parsed piecewise while streaming.
    pub(crate) has_refdefs: bool,
}

impl Document {
    /// Sanitise and parse `markdown`.
    pub fn parse(markdown: &str) -> Self {
        Self::parse_clean(&sanitize(markdown))
    }

    /// Parse text that is already sanitised.
    pub(crate) fn parse_clean(clean: &str) -> Self {
        let options =
            Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
        let parser = Parser::new_ext(clean, options);
        let has_refdefs = parser.reference_definitions().iter().next().is_some();
        let mut builder = Builder::default();
        let mut depth = 0usize;
        for (event, range) in parser.into_offset_iter() {
            let top_level_start = match &event {
                Event::Start(_) => {
                    depth += 1;
                    depth == 1
                }
                Event::End(_) => {
                    depth = depth.saturating_sub(1);
                    false
                }
                Event::Rule => depth == 0,
                _ => false,
            };
            if top_level_start {
                let offset = clean[..range.start].rfind('\n').map_or(0, |i| i + 1);
                builder.top_starts.push(TopStart {
                    offset,
                    block: builder.blocks.len(),
                });
            }
            builder.event(event);
        }
        builder.flush_flow();
        Document {
            blocks: builder.blocks,
            top_starts: builder.top_starts,
            has_refdefs,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The text of each code block, in order: fenced (``` or ~~~, however long the fence)
    /// and indented ones alike, since both are drawn as code, in any container (a list item,
    /// a quote). The lines are as drawn, without the fences and without a last newline.
    pub fn code_blocks(&self) -> Vec<String> {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Block::Code { lines, .. } => Some(lines.join("\n")),
                _ => None,
            })
            .collect()
    }

    /// The lines each code block takes at `width`, counted from the document's first line,
    /// in the order of [`Document::code_blocks`].
    pub fn code_block_lines(&self, width: u16) -> Vec<Range<usize>> {
        let width = usize::from(width.max(1));
        let mut line = 0;
        let mut out = Vec::new();
        for block in &self.blocks {
            let height = block.height(width);
            if matches!(block, Block::Code { .. }) {
                out.push(line..line + height);
            }
            line += height;
        }
        out
    }

    /// Number of lines at `width`.
    pub fn height(&self, width: u16) -> usize {
        let width = usize::from(width.max(1));
        self.blocks.iter().map(|b| b.height(width)).sum()
    }

    /// The lines at `width`.
    pub fn lines(&self, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        self.lines_into(width, &mut out, None);
        out
    }

    /// Append the lines at `width`; `growing` serves the last code block (streaming).
    pub(crate) fn lines_into(
        &self,
        width: u16,
        out: &mut Vec<Line<'static>>,
        mut growing: Option<Growing<'_>>,
    ) {
        let width = usize::from(width.max(1));
        let last_code = self
            .blocks
            .iter()
            .rposition(|b| matches!(b, Block::Code { .. }));
        for (i, block) in self.blocks.iter().enumerate() {
            let growing = if Some(i) == last_code {
                growing.as_mut()
            } else {
                None
            };
            block.lines_into(width, out, growing);
        }
    }

    /// The text of each line at `width`, as [`Document::lines`] draws it (prefixes, bullets,
    /// borders and break markers included), without building the colours: code is not
    /// highlighted. What in-transcript search matches against.
    pub fn text_lines(&self, width: u16) -> Vec<String> {
        let width = usize::from(width.max(1));
        let mut lines = Vec::new();
        for block in &self.blocks {
            match block {
                Block::Code {
                    prefix,
                    lines: code,
                    ..
                } => {
                    let plain = Block::Code {
                        prefix: Arc::clone(prefix),
                        lang: None,
                        lines: Vec::new(),
                        highlighted: OnceCell::from(highlight::plain(code)),
                    };
                    plain.lines_into(width, &mut lines, None);
                }
                other => other.lines_into(width, &mut lines, None),
            }
        }
        lines
            .iter()
            .map(|line| line.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    /// The lines of a document that is still streaming in: as [`Document::lines`], except that
    /// the last line of a code block still being written is drawn plain (see `Growing`).
    /// `clean` is the sanitised text the document was parsed from.
    pub fn lines_streaming(&self, clean: &str, width: u16) -> Vec<Line<'static>> {
        let mut memo = HighlightMemo::default();
        let mut out = Vec::new();
        self.lines_into(
            width,
            &mut out,
            Some(Growing {
                memo: &mut memo,
                open_last_line: self.code_line_open(clean),
            }),
        );
        out
    }

    /// True when `clean` (the sanitised text this document was parsed from) ends inside the
    /// last line of a code block: that line is still being written.
    pub(crate) fn code_line_open(&self, clean: &str) -> bool {
        if clean.ends_with('\n') {
            return false;
        }
        let Some(Block::Code { lines, .. }) = self.blocks.last() else {
            return false;
        };
        let written = clean.rsplit('\n').next().unwrap_or(clean);
        lines
            .last()
            .is_some_and(|last| !last.is_empty() && written.ends_with(last.as_str()))
    }

    /// Append `other` after this document, with the separator a single parse would put there.
    pub(crate) fn append(&mut self, other: Vec<Block>) {
        if !self.blocks.is_empty() && !other.is_empty() {
            self.blocks.push(Block::Blank {
                prefix: Arc::default(),
            });
        }
        self.blocks.extend(other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    fn check(md: &str, width: u16) -> Vec<String> {
        let doc = Document::parse(md);
        let lines = doc.lines(width);
        assert_eq!(
            lines.len(),
            doc.height(width),
            "height of {md:?} at {width}"
        );
        for line in &lines {
            assert!(
                line.width() <= usize::from(width),
                "{line:?} wider than {width}"
            );
        }
        text(&lines)
    }

    #[test]
    fn paragraphs_wrap_and_are_separated() {
        assert_eq!(
            check("one two three four\n\nfive", 9),
            ["one two", "three", "four", "", "five"]
        );
    }

    #[test]
    fn lists_hang_and_nest() {
        assert_eq!(
            check("- aaa bbb ccc\n- c\n  1. d\n  2. e", 12),
            ["• aaa bbb", "  ccc", "• c", "  1. d", "  2. e"]
        );
        assert_eq!(check("- a\n\n- b", 20), ["• a", "", "• b"]);
        assert_eq!(check("- - x", 20), ["• ◦ x"]);
    }

    #[test]
    fn quotes_code_rules_tables() {
        assert_eq!(check("> a\n>\n> b", 10), ["│ a", "│", "│ b"]);
        assert_eq!(check("```\nabcdefghij\n```", 8), ["▎ abcde↩", "▎ fghij"]);
        assert_eq!(check("---", 5), ["─────"]);
        assert_eq!(
            check("| a | bb |\n|--:|---|\n| ccc | d |", 30),
            ["  a │ bb", "────┼───", "ccc │ d"]
        );
    }

    #[test]
    fn links_show_their_url() {
        assert_eq!(
            check("[site](https://x.y) <https://a.b>", 60),
            ["site (https://x.y) https://a.b"]
        );
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let quotes = ">".repeat(10_000) + " deep";
        let lines = check(&quotes, 40);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].ends_with("deep"));
        let lists = "- ".repeat(10_000) + "x";
        assert!(!check(&lists, 40).is_empty());
    }

    #[test]
    fn top_level_starts_are_recorded() {
        let doc = Document::parse("a\n\n- b\n- c\n\n```\nx\n```\n");
        let offsets: Vec<usize> = doc.top_starts.iter().map(|s| s.offset).collect();
        assert_eq!(offsets, [0, 3, 12]);
    }

    #[test]
    fn a_shape_counts_what_its_document_counts_at_every_width() {
        let samples = [
            "plain words and a verylongwordthatsplitsacrosslines here",
            "# Café\n\nNaïve façade, résumé — déjà vu… ﬁnal ligature e\u{301}e\u{301}e\u{301}e\u{301}",
            "> quoted `code` and **bold**\n> - nested list\n>   1. deep\n\n---\n\nafter",
            "```rust\nfn main() { println!(\"héllo wörld, a long line of code that must break\"); }\n```",
            "| a | bé |\n|---|---|\n| ccc | dddddddddddddddddddddddddddddddd |",
            "> | name | what it does | where |\n> |:-|:-:|-:|\n> | x | wraps in its column when narrow | https://example.com/a/long/url |\n> | | | |",
            "- [x] done\n- [ ] todo with a longer text that wraps around\n\n    indented code",
            "1. one\n2. two\n\n\n\n   trailing   spaces   ",
        ];
        for text in samples {
            let doc = Document::parse(text);
            let shape = doc.clone().into_shape().expect("one-column graphemes only");
            for width in 1..=130 {
                assert_eq!(
                    shape.height(width),
                    doc.height(width),
                    "{text:?} at {width}"
                );
            }
        }
    }

    #[test]
    fn text_lines_are_the_drawn_lines_without_colours() {
        let samples = [
            "plain **bold** and `code` words that wrap around at narrow widths",
            "# Title\n\n> quoted *text*\n> - item\n\n---\n\n1. one\n2. two",
            "```rust\nfn main() { println!(\"a long line of code that must break\"); }\n```",
            "| a | bé |\n|---|---|\n| ccc | dddddddddddddddddddddd |",
            "日本語のテキスト and [a link](https://example.com)",
        ];
        for text in samples {
            let doc = Document::parse(text);
            for width in [1, 8, 20, 33, 80] {
                let drawn: Vec<String> = doc.lines(width).iter().map(|l| l.to_string()).collect();
                assert_eq!(doc.text_lines(width), drawn, "{text:?} at {width}");
            }
        }
    }

    #[test]
    fn wide_graphemes_keep_the_document() {
        for text in [
            "日本語のテキスト",
            "👩\u{200d}💻 at work",
            "```\n表 a\n```",
            "| a | b |\n|---|---|\n| 表 | c |",
        ] {
            assert!(Document::parse(text).into_shape().is_err(), "{text:?}");
        }
    }

    #[test]
    fn code_blocks_are_every_block_drawn_as_code_in_order() {
        let md = "Intro with `inline` code, not a block.\n\n\
                  ````markdown\n```rust\nfn nested() {}\n```\n````\n\n\
                  ~~~sh\nls -l\n~~~\n\n\
                  - item\n\n  ```\n  in a list\n  ```\n\n\
                  > ```py\n> quoted = True\n> ```\n\n\
                  Then an indented block:\n\n    indented();\n    more();\n\n\
                  ```\n```\n";
        let doc = Document::parse(md);
        assert_eq!(
            doc.code_blocks(),
            [
                // a longer fence holds a shorter one: one block, the inner fence is text
                "```rust\nfn nested() {}\n```",
                "ls -l",
                "in a list",
                "quoted = True",
                "indented();\nmore();",
                // an empty block is a block
                "",
            ]
        );
        // Where they are drawn: each range holds exactly the block's lines.
        for width in [20u16, 40, 80] {
            let lines: Vec<String> = doc.lines(width).iter().map(|l| l.to_string()).collect();
            let ranges = doc.code_block_lines(width);
            assert_eq!(ranges.len(), 6);
            assert!(lines[ranges[0].start].contains("```rust"), "{lines:?}");
            assert!(lines[ranges[1].start].contains("ls -l"), "{lines:?}");
            assert!(lines[ranges[2].start].contains("in a list"), "{lines:?}");
            assert!(
                lines[ranges[3].start].contains("quoted = True"),
                "{lines:?}"
            );
            assert!(lines[ranges[4].start].contains("indented();"), "{lines:?}");
            assert_eq!(ranges[4].len(), 2);
            assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
        }
    }

    #[test]
    fn copied_code_keeps_its_tabs_but_loses_escape_sequences() {
        let md = "```make\nall:\n\tcc -o x\x1b[31m main.c\n```\n\n\tindented\tcode\n";
        assert_eq!(
            code_block_texts(md),
            ["all:\n\tcc -o x main.c", "indented\tcode"]
        );
        // As drawn, the tabs are spaces: same blocks, same order.
        assert_eq!(
            Document::parse(md).code_blocks(),
            ["all:\n    cc -o x main.c", "indented    code"]
        );
        assert!(code_block_texts("no code here").is_empty());
    }
}
