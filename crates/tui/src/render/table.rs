//! Markdown tables fitted to a width.
//!
//! A table is drawn with ` │ ` between its columns and a rule under its head. When every
//! column can be as wide as its widest cell (its natural width), it is: one line per row.
//! When that is wider than the pane, the columns shrink to fit it exactly and the cells wrap
//! inside their columns (at spaces, and a word too long for its column between graphemes), so
//! a row takes as many lines as its tallest cell, with the separators on each of them. Each
//! column keeps at least [`MIN_COLUMN`] columns (or its natural width when narrower; fewer, down
//! to [`NARROWEST_COLUMN`], when the width needs it), then its longest word where the width
//! allows it (the columns needing the least first); what is left goes to the columns in
//! proportion to what they still lack of their natural width. When even the narrowest columns
//! do not fit, the table is stacked: every cell on its own lines at the full width, the head's
//! cells, the rule, then the rows separated by a blank line.
//!
//! The layout depends on the column widths and the cells' word widths only, so a table's
//! height at a width is counted without its text ([`TableMeasure`]) unless a cell holds words
//! of graphemes wider than one column.
use std::hash::{Hash, Hasher};

use pulldown_cmark::Alignment;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::style;
use super::wrap::{self, Measure, Styled, WrapEvent};

const SEPARATOR: &str = " │ ";
const SEPARATOR_WIDTH: usize = 3;
const RULE: &str = "─";
const RULE_JOIN: &str = "─┼─";

/// A column is not shrunk below this many columns (nor widened to it) while the width allows.
const MIN_COLUMN: usize = 6;
/// In a narrower pane a column is not shrunk below this; where that does not fit either, the
/// table is stacked. At least two, so that a wide grapheme fits in any column holding one.
const NARROWEST_COLUMN: usize = 3;

/// What a table's height at a width depends on.
#[derive(Clone, Debug)]
pub(crate) struct TableMeasure {
    columns: usize,
    rows: usize,
    /// Rows of the head, drawn first; the rule follows them.
    head_rows: usize,
    /// The widest cell of each column.
    natural: Box<[usize]>,
    /// The widest word of each column.
    words: Box<[usize]>,
    /// The word widths of each cell, row by row.
    cells: Box<[Measure]>,
}

/// A table ready to be fitted to a width: its cells (the head's already in the head style),
/// row by row, every row with one per column.
#[derive(Clone, Debug)]
pub(crate) struct TableBlock {
    aligns: Vec<Alignment>,
    cells: Vec<Styled>,
    measure: TableMeasure,
}

/// How a table is drawn at a width.
#[derive(Debug, PartialEq, Eq)]
enum Layout {
    /// Every column at its natural width, one line per row.
    Natural,
    /// Columns of these widths, cells wrapped inside them.
    Columns(Vec<usize>),
    /// One cell under the other.
    Stacked,
}

impl TableMeasure {
    /// True when [`TableMeasure::height`] needs no text.
    pub(crate) fn is_text_free(&self) -> bool {
        self.cells.iter().all(Measure::is_text_free)
    }

    /// Drop spare capacity (kept for the life of an entry).
    pub(crate) fn shrink_to_fit(&mut self) {
        for cell in &mut self.cells {
            cell.shrink_to_fit();
        }
    }

    /// Lines at `avail` columns. `cells` are the texts measured, needed unless
    /// [`TableMeasure::is_text_free`].
    pub(crate) fn height(&self, avail: usize, cells: Option<&[Styled]>) -> usize {
        let rule = usize::from(self.head_rows > 0);
        let count = |i: usize, width: usize| {
            let measure = &self.cells[i];
            match cells {
                Some(cells) => measure.count(&cells[i].text, width, width),
                None => measure.count_without_text(width, width),
            }
        };
        match self.layout(avail) {
            Layout::Natural => self.rows + rule,
            Layout::Columns(widths) => {
                let rows: usize = (0..self.rows)
                    .map(|r| {
                        let first = r * self.columns;
                        widths
                            .iter()
                            .enumerate()
                            .map(|(j, &w)| count(first + j, w))
                            .max()
                            .unwrap_or(1)
                    })
                    .sum();
                rows + rule
            }
            Layout::Stacked => {
                let rows: usize = (0..self.rows)
                    .map(|r| {
                        let first = r * self.columns;
                        (first..first + self.columns)
                            .filter(|&i| !self.cells[i].is_empty())
                            .map(|i| count(i, avail))
                            .sum::<usize>()
                            .max(1)
                    })
                    .sum();
                rows + rule + self.blanks()
            }
        }
    }

    /// Blank lines of the stacked layout: between two rows the rule does not separate.
    fn blanks(&self) -> usize {
        (1..self.rows).filter(|&r| r != self.head_rows).count()
    }

    fn layout(&self, avail: usize) -> Layout {
        let n = self.columns;
        if n == 0 {
            return Layout::Natural;
        }
        let separators = SEPARATOR_WIDTH * (n - 1);
        let natural: usize = self.natural.iter().sum();
        if natural + separators <= avail {
            return Layout::Natural;
        }
        let Some(budget) = avail.checked_sub(separators) else {
            return Layout::Stacked;
        };
        // the largest minimum that fits, down to the narrowest
        let minimum = |m: usize| self.natural.iter().map(|&w| w.min(m)).sum::<usize>();
        let Some(m) = (NARROWEST_COLUMN..=MIN_COLUMN)
            .rev()
            .find(|&m| minimum(m) <= budget)
        else {
            return Layout::Stacked;
        };
        let mut widths: Vec<usize> = self.natural.iter().map(|&w| w.min(m)).collect();
        let mut used: usize = widths.iter().sum();
        // each column's longest word, where it fits: the columns needing the least first
        let need = |j: usize, widths: &[usize]| {
            self.words[j].min(self.natural[j]).saturating_sub(widths[j])
        };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&j| need(j, &widths));
        for j in order {
            let more = need(j, &widths);
            if used + more > budget {
                break;
            }
            widths[j] += more;
            used += more;
        }
        // the rest in proportion to what each column lacks of its natural width; as the
        // natural widths do not fit, together they lack more than is left
        let rest = budget - used;
        let lacking: usize = (0..n).map(|j| self.natural[j] - widths[j]).sum();
        let mut given = 0;
        let mut remainders = Vec::with_capacity(n);
        for (j, width) in widths.iter_mut().enumerate() {
            let exact = (self.natural[j] - *width) as u128 * rest as u128;
            let share = (exact / lacking as u128) as usize;
            *width += share;
            given += share;
            remainders.push((exact % lacking as u128, j));
        }
        // the columns rounded down the most get the columns left by rounding, one each
        remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, j) in remainders.iter().take(rest - given) {
            widths[j] += 1;
        }
        Layout::Columns(widths)
    }
}

impl TableBlock {
    /// A table of `rows` (the first `head_rows` of them its head) with the alignments of its
    /// delimiter row. Rows may be shorter than the widest: they are filled with empty cells.
    pub(crate) fn new(aligns: Vec<Alignment>, head_rows: usize, rows: Vec<Vec<Styled>>) -> Self {
        let columns = rows
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(aligns.len());
        let mut cells = Vec::with_capacity(rows.len() * columns);
        for (i, row) in rows.iter().enumerate() {
            let head = i < head_rows;
            for j in 0..columns {
                let Some(cell) = row.get(j) else {
                    cells.push(Styled::default());
                    continue;
                };
                if head {
                    let mut styled = Styled::default();
                    let mut start = 0;
                    for run in &cell.runs {
                        styled.push(
                            &cell.text[start..run.end],
                            run.style.add_modifier(style::table_header()),
                        );
                        start = run.end;
                    }
                    cells.push(styled);
                } else {
                    cells.push(cell.clone());
                }
            }
        }
        let measures: Box<[Measure]> = cells.iter().map(|c| Measure::new(&c.text)).collect();
        let mut natural = vec![0; columns];
        let mut words = vec![0; columns];
        for (i, (cell, measure)) in cells.iter().zip(measures.iter()).enumerate() {
            let j = i % columns;
            natural[j] = natural[j].max(cell.width());
            words[j] = words[j].max(measure.longest_word());
        }
        Self {
            aligns,
            cells,
            measure: TableMeasure {
                columns,
                rows: rows.len(),
                head_rows,
                natural: natural.into(),
                words: words.into(),
                cells: measures,
            },
        }
    }

    pub(crate) fn measure(&self) -> &TableMeasure {
        &self.measure
    }

    pub(crate) fn into_measure(self) -> TableMeasure {
        self.measure
    }

    /// Lines at `avail` columns.
    pub(crate) fn height(&self, avail: usize) -> usize {
        self.measure.height(avail, Some(&self.cells))
    }

    /// Append the lines at `avail` columns to `out`, each started by `start_line`.
    pub(crate) fn lines_into(
        &self,
        avail: usize,
        start_line: &mut impl FnMut(&mut Vec<Span<'static>>),
        out: &mut Vec<Line<'static>>,
    ) {
        let mut push = |line: &Styled| {
            let mut spans = Vec::new();
            start_line(&mut spans);
            line.spans_into(0, line.text.len(), &mut spans);
            out.push(Line::from(spans));
        };
        let m = &self.measure;
        let border = style::table_border();
        match m.layout(avail) {
            Layout::Natural => {
                for r in 0..m.rows {
                    let row = self.row(r);
                    let whole: Vec<CellLines> = row
                        .iter()
                        .map(|c| CellLines {
                            lines: vec![vec![(0, c.text.len())]],
                        })
                        .collect();
                    self.row_lines(row, &whole, &m.natural, &mut push);
                    if r + 1 == m.head_rows {
                        push(&rule(&m.natural, border));
                    }
                }
            }
            Layout::Columns(widths) => {
                for r in 0..m.rows {
                    let row = self.row(r);
                    let wrapped: Vec<CellLines> = row
                        .iter()
                        .zip(&widths)
                        .map(|(c, &w)| CellLines::wrap(&c.text, w))
                        .collect();
                    self.row_lines(row, &wrapped, &widths, &mut push);
                    if r + 1 == m.head_rows {
                        push(&rule(&widths, border));
                    }
                }
            }
            Layout::Stacked => {
                for r in 0..m.rows {
                    if r > 0 && r != m.head_rows {
                        push(&Styled::default());
                    }
                    let first = r * m.columns;
                    let mut drawn = false;
                    for (cell, measure) in self.row(r).iter().zip(&m.cells[first..]) {
                        if measure.is_empty() {
                            continue;
                        }
                        for pieces in CellLines::wrap(&cell.text, avail).lines {
                            let mut line = Styled::default();
                            for (s, e) in pieces {
                                line.push_range(cell, s, e);
                            }
                            push(&line);
                            drawn = true;
                        }
                    }
                    if !drawn {
                        push(&Styled::default());
                    }
                    if r + 1 == m.head_rows {
                        push(&Styled::plain(RULE.repeat(avail), border));
                    }
                }
            }
        }
    }

    fn row(&self, r: usize) -> &[Styled] {
        let columns = self.measure.columns;
        &self.cells[r * columns..(r + 1) * columns]
    }

    /// The lines of one row: line `k` holds line `k` of each cell (or nothing), padded to its
    /// column as the column is aligned, the last column without padding on its right.
    fn row_lines(
        &self,
        row: &[Styled],
        lines: &[CellLines],
        widths: &[usize],
        push: &mut impl FnMut(&Styled),
    ) {
        let height = lines.iter().map(|c| c.lines.len()).max().unwrap_or(1);
        for k in 0..height {
            let mut line = Styled::default();
            for (j, (&width, cell)) in widths.iter().zip(row).enumerate() {
                if j > 0 {
                    line.push(SEPARATOR, style::table_border());
                }
                let pieces = lines[j].lines.get(k).map_or(&[][..], Vec::as_slice);
                let drawn: usize = pieces
                    .iter()
                    .map(|&(s, e)| wrap::str_width(&cell.text[s..e]))
                    .sum();
                let last = j + 1 == widths.len();
                if last && k > 0 && pieces.is_empty() {
                    // nothing to align: no trailing spaces
                    break;
                }
                let pad = width.saturating_sub(drawn);
                let (left, right) = match self.aligns.get(j) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                line.push(&" ".repeat(left), Style::new());
                for &(s, e) in pieces {
                    line.push_range(cell, s, e);
                }
                if !last {
                    line.push(&" ".repeat(right), Style::new());
                }
            }
            push(&line);
        }
    }
}

impl Hash for TableBlock {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for align in &self.aligns {
            let tag: u8 = match align {
                Alignment::None => 0,
                Alignment::Left => 1,
                Alignment::Center => 2,
                Alignment::Right => 3,
            };
            tag.hash(h);
        }
        self.measure.columns.hash(h);
        self.measure.head_rows.hash(h);
        self.cells.hash(h);
    }
}

/// The rule under the head: one stretch per column, crossing the separators.
fn rule(widths: &[usize], border: Style) -> Styled {
    let text = widths
        .iter()
        .map(|&w| RULE.repeat(w))
        .collect::<Vec<_>>()
        .join(RULE_JOIN);
    Styled::plain(text, border)
}

/// A cell's text on its lines: byte ranges per line.
struct CellLines {
    lines: Vec<Vec<(usize, usize)>>,
}

impl CellLines {
    fn wrap(text: &str, width: usize) -> Self {
        let mut lines = vec![Vec::new()];
        wrap::wrap_words(text, width, width, |event| match event {
            WrapEvent::Piece(s, e) => {
                let line: &mut Vec<(usize, usize)> = lines.last_mut().expect("one line at least");
                match line.last_mut() {
                    Some((_, end)) if *end == s => *end = e,
                    _ => line.push((s, e)),
                }
            }
            WrapEvent::Break => lines.push(Vec::new()),
        });
        Self { lines }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::render::markdown::Document;

    /// The lines of `md` at `width`, checked: none wider than `width`, as many as the
    /// document's height and as its shape's (when it has one).
    fn render(md: &str, width: u16) -> Vec<String> {
        let doc = Document::parse(md);
        let lines = doc.lines(width);
        assert_eq!(
            lines.len(),
            doc.height(width),
            "height of {md:?} at {width}"
        );
        if let Ok(shape) = doc.clone().into_shape() {
            assert_eq!(
                shape.height(width),
                lines.len(),
                "shape of {md:?} at {width}"
            );
        }
        for line in &lines {
            assert!(
                line.width() <= usize::from(width),
                "{line:?} wider than {width}"
            );
        }
        lines.iter().map(ToString::to_string).collect()
    }

    fn is_rule(line: &str) -> bool {
        !line.is_empty() && line.chars().all(|c| c == '─' || c == '┼')
    }

    const WIDE: &str = "| Name | Description | Link |\n\
        |------|:-----------:|-----:|\n\
        | convo | A fast, keyboard-first terminal chat client for the Conversational Session Service | https://example.com/convo/docs/getting-started |\n\
        | serve | The local service | - |";

    #[test]
    fn a_table_that_fits_is_drawn_at_its_natural_width() {
        let md = "| a | bb |\n|--:|:-:|\n| ccc | d |\n| | eeee |";
        assert_eq!(
            render(md, 15),
            ["  a │  bb", "────┼─────", "ccc │  d", "    │ eeee"]
        );
        // narrower: the columns shrink, the text wraps in them
        assert_eq!(
            render(md, 9),
            ["  a │ bb", "────┼────", "ccc │  d", "    │ eee", "    │  e"]
        );
    }

    #[test]
    fn a_wide_table_at_80_columns() {
        assert_eq!(
            render(WIDE, 80),
            [
                "Name  │       Description       │                                           Link",
                "──────┼─────────────────────────┼───────────────────────────────────────────────",
                "convo │ A fast, keyboard-first  │ https://example.com/convo/docs/getting-started",
                "      │  terminal chat client   │ ",
                "      │ for the Conversational  │ ",
                "      │     Session Service     │ ",
                "serve │    The local service    │                                              -",
            ]
        );
    }

    #[test]
    fn a_wide_table_at_40_columns() {
        assert_eq!(
            render(WIDE, 40),
            [
                "Name  │     Description      │      Link",
                "──────┼──────────────────────┼──────────",
                "convo │       A fast,        │ https://e",
                "      │    keyboard-first    │ xample.co",
                "      │ terminal chat client │ m/convo/d",
                "      │       for the        │ ocs/getti",
                "      │    Conversational    │ ng-starte",
                "      │   Session Service    │         d",
                "serve │  The local service   │         -",
            ]
        );
    }

    #[test]
    fn a_wrapped_head_keeps_its_style_and_alignment() {
        let md = "| left head | a right aligned head |\n|---|---:|\n| x | y |";
        let lines = Document::parse(md).lines(20);
        let text: Vec<String> = lines.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "left    │    a right",
                "head    │    aligned",
                "        │       head",
                "────────┼───────────",
                "x       │          y",
            ]
        );
        for line in &lines[..3] {
            for span in &line.spans {
                if span.content == SEPARATOR {
                    assert_eq!(span.style, style::table_border());
                } else if !span.content.trim().is_empty() {
                    assert!(
                        span.style.add_modifier.contains(style::table_header()),
                        "{span:?}"
                    );
                }
            }
        }
        assert!(
            lines[4]
                .spans
                .iter()
                .all(|s| !s.style.add_modifier.contains(style::table_header()))
        );
    }

    #[test]
    fn a_long_url_breaks_inside_its_cell() {
        let md = "| site | url |\n|---|---|\n| docs | https://example.com/a/very/long/path/to/some/page?with=query&and=more |";
        assert_eq!(
            render(md, 30),
            [
                "site │ url",
                "─────┼────────────────────────",
                "docs │ https://example.com/a/v",
                "     │ ery/long/path/to/some/p",
                "     │ age?with=query&and=more",
            ]
        );
    }

    #[test]
    fn wide_graphemes_are_counted_by_their_width() {
        let md = "| 名前 | 説明 |\n|---|---|\n| 東京 | 日本の首都であり最大の都市です 👩‍💻 |";
        assert_eq!(
            render(md, 20),
            [
                "名前 │ 説明",
                "─────┼──────────────",
                "東京 │ 日本の首都で",
                "     │ あり最大の都",
                "     │ 市です 👩\u{200d}💻",
            ]
        );
    }

    #[test]
    fn the_rule_is_one_line_at_every_width() {
        for width in 1..=120 {
            let lines = render(WIDE, width);
            assert_eq!(
                lines.iter().filter(|l| is_rule(l)).count(),
                1,
                "at {width}: {lines:#?}"
            );
        }
    }

    #[test]
    fn too_many_columns_for_the_width_are_stacked() {
        let md =
            "| a | b | c | d |\n|---|---|---|---|\n| one | two | three | four |\n| 5 | | 7 | 8 |";
        assert_eq!(
            render(md, 12),
            [
                "a",
                "b",
                "c",
                "d",
                "────────────",
                "one",
                "two",
                "three",
                "four",
                "",
                "5",
                "7",
                "8",
            ]
        );
    }

    #[test]
    fn prose_after_a_table_wraps_as_prose() {
        let url = "https://example.com/a/very/long/path/to/some/page?with=query&and=more";
        let md = format!("| a | b |\n|---|---|\n| c | d |\n\nsee {url} for more");
        assert_eq!(
            render(&md, 30),
            [
                "a │ b",
                "──┼──",
                "c │ d",
                "",
                "see",
                "https://example.com/a/very/lon",
                "g/path/to/some/page?with=query",
                "&and=more for more",
            ]
        );
        // without the blank line the text is a row of the table (GFM)
        let md = format!("| a | b |\n|---|---|\n| c | d |\n{url}");
        assert_eq!(
            render(&md, 30),
            [
                "a                          │ b",
                "───────────────────────────┼──",
                "c                          │ d",
                "https://example.com/a/very │ ",
                "/long/path/to/some/page?wi │ ",
                "th=query&and=more          │ ",
            ]
        );
    }

    #[test]
    fn a_table_in_a_quote_fits_beside_the_bar() {
        let md = format!("> {}", WIDE.replace('\n', "\n> "));
        assert_eq!(
            render(&md, 40),
            [
                "│ Name  │    Description     │      Link",
                "│ ──────┼────────────────────┼──────────",
                "│ convo │      A fast,       │ https://e",
                "│       │   keyboard-first   │ xample.co",
                "│       │   terminal chat    │ m/convo/d",
                "│       │   client for the   │ ocs/getti",
                "│       │   Conversational   │ ng-starte",
                "│       │  Session Service   │         d",
                "│ serve │ The local service  │         -",
            ]
        );
    }

    #[test]
    fn column_widths_fill_the_width_and_stay_within_the_natural() {
        let doc = Document::parse(WIDE);
        let Some(crate::render::markdown::Block::Table { table, .. }) = doc.blocks.first() else {
            panic!("a table");
        };
        let m = table.measure();
        let natural: usize = m.natural.iter().sum();
        let minimum: usize = m.natural.iter().map(|&n| n.min(NARROWEST_COLUMN)).sum();
        for avail in 0..200 {
            match m.layout(avail) {
                Layout::Natural => assert!(avail >= natural + 6, "{avail}"),
                Layout::Columns(widths) => {
                    assert_eq!(widths.iter().sum::<usize>() + 6, avail);
                    for (w, n) in widths.iter().zip(&m.natural) {
                        assert!(
                            *w <= *n && *w >= (*n).min(NARROWEST_COLUMN),
                            "{widths:?} at {avail}"
                        );
                    }
                }
                Layout::Stacked => assert!(avail < minimum + 6, "{avail}"),
            }
        }
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => "[a-z0-9]{1,8}",
            2 => "[a-z0-9]{9,40}",
            1 => "https://example\\.com/[a-z0-9/]{10,70}",
            1 => prop::sample::select(vec!["日本語", "東京都", "👩‍💻", "한국어", "café", "ﾃﾞｽﾄ"])
                .prop_map(str::to_owned),
            1 => "[日本語東京都市]{1,12}",
        ]
    }

    fn cell() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => Just(String::new()),
            4 => prop::collection::vec(word(), 1..8).prop_map(|w| w.join(" ")),
        ]
    }

    fn table() -> impl Strategy<Value = (Vec<&'static str>, Vec<Vec<String>>)> {
        (1usize..=6).prop_flat_map(|columns| {
            (
                prop::collection::vec(
                    prop::sample::select(vec!["---", ":--", "--:", ":-:"]),
                    columns,
                ),
                prop::collection::vec(prop::collection::vec(cell(), columns), 1..6),
            )
        })
    }

    fn markdown(aligns: &[&str], rows: &[Vec<String>]) -> String {
        let row = |cells: &[String]| format!("| {} |", cells.join(" | "));
        let mut md = format!("{}\n|{}|", row(&rows[0]), aligns.join("|"));
        for cells in &rows[1..] {
            md.push('\n');
            md.push_str(&row(cells));
        }
        md
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
        ))]

        /// At any width: no line is wider, the heights agree with the lines drawn, the head
        /// has one rule, and every word of every cell is drawn in its column.
        #[test]
        fn tables_fit_every_width(
            (aligns, rows) in table(),
            width in 10u16..=200,
            container in prop::sample::select(vec!["", "> ", "- "]),
        ) {
            let md = markdown(&aligns, &rows);
            // in a quote or a list item: its prefix comes off before the columns are read
            let indent = if container == "- " { "  " } else { container };
            let md = format!("{container}{}", md.replace('\n', &format!("\n{indent}")));
            let lines: Vec<String> = render(&md, width)
                .iter()
                .map(|l| l.chars().skip(container.chars().count()).collect())
                .collect();
            let columns = rows[0].len();
            // (a table of one empty column has an empty rule)
            let blank = columns == 1 && rows.iter().flatten().all(String::is_empty);
            let rules = lines.iter().filter(|l| is_rule(l)).count();
            prop_assert_eq!(rules, usize::from(!blank), "{:#?}", lines);
            let stacked = columns > 1 && !lines.iter().any(|l| l.contains('│'));
            let mut drawn = vec![String::new(); columns];
            for line in lines.iter().filter(|l| !is_rule(l)) {
                for (j, part) in line.split('│').enumerate() {
                    drawn[j].extend(part.chars().filter(|c| !c.is_whitespace()));
                }
            }
            for cells in &rows {
                for (j, cell) in cells.iter().enumerate() {
                    let column = if stacked { &drawn[0] } else { &drawn[j] };
                    for word in cell.split(' ').filter(|w| !w.is_empty()) {
                        prop_assert!(column.contains(word), "{:?} not in column {}: {:#?}", word, j, lines);
                    }
                }
            }
        }
    }
}
