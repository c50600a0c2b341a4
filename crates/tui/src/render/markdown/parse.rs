//! Building a [`Document`] from pulldown-cmark's events: the open frames (lists, quotes,
//! items), the text flowing into a paragraph or a table cell, and the blocks they close into.

use super::*;

#[derive(Debug)]
enum Frame {
    Quote,
    List {
        next_number: Option<u64>,
        bullet: &'static str,
        /// Decided by the first item's text: tight lists have no blank lines between items.
        tight: Option<bool>,
    },
    Item {
        marker: String,
        marker_width: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlowKind {
    Paragraph,
    /// Text directly in a tight list item.
    Tight,
    Heading,
}

#[derive(Debug)]
struct Table {
    aligns: Vec<Alignment>,
    head_rows: usize,
    rows: Vec<Vec<Styled>>,
    row: Vec<Styled>,
    cell: Option<Styled>,
}

#[derive(Default, Debug)]
pub(super) struct Builder {
    pub(super) blocks: Vec<Block>,
    pub(super) top_starts: Vec<TopStart>,
    frames: Vec<Frame>,
    /// `frames[..with_content]` already hold a block (an item's marker has been drawn).
    with_content: usize,
    doc_has_content: bool,
    quotes: usize,
    /// Unordered lists open (their depth picks the bullet).
    bullet_lists: usize,
    flow: Option<(FlowKind, Styled)>,
    /// Inline style stack; empty means the base style.
    styles: Vec<Style>,
    /// Per open link: the destination and where its text starts in the current sink.
    links: Vec<(String, usize)>,
    code: Option<(Option<String>, String)>,
    html: Option<String>,
    table: Option<Table>,
}

impl Builder {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_else(|| {
            if self.quotes > 0 {
                Style::new().add_modifier(style::quote_text())
            } else {
                Style::new()
            }
        })
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let next = f(self.style());
        self.styles.push(next);
    }

    /// The styled text inline content goes to: a table cell, or the open flow (opening a
    /// tight one when text arrives directly in a list item).
    fn sink(&mut self) -> &mut Styled {
        if let Some(cell) = self.table.as_mut().and_then(|t| t.cell.as_mut()) {
            return cell;
        }
        &mut self
            .flow
            .get_or_insert_with(|| (FlowKind::Tight, Styled::default()))
            .1
    }

    fn text(&mut self, text: &str, style: Style) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
        } else if let Some(html) = &mut self.html {
            html.push_str(text);
        } else {
            self.sink().push(text, style);
        }
    }

    /// The prefix of a block inside the first `depth` containers.
    fn prefix(&self, depth: usize) -> Prefix {
        let mut prefix = Prefix::default();
        for (i, frame) in self.frames[..depth]
            .iter()
            .take(MAX_VISUAL_DEPTH)
            .enumerate()
        {
            match frame {
                Frame::Quote => {
                    let bar = Span::styled(QUOTE_BAR, style::quote_bar());
                    prefix.first.push(bar.clone());
                    prefix.rest.push(bar);
                    prefix.width += wrap::str_width(QUOTE_BAR);
                }
                Frame::Item {
                    marker,
                    marker_width,
                } => {
                    let indent = Span::raw(" ".repeat(*marker_width));
                    if i < self.with_content {
                        prefix.first.push(indent.clone());
                    } else {
                        prefix
                            .first
                            .push(Span::styled(marker.clone(), style::list_marker()));
                    }
                    prefix.rest.push(indent);
                    prefix.width += marker_width;
                }
                Frame::List { .. } => {}
            }
        }
        prefix
    }

    /// Whether a block about to be emitted needs a blank line before it.
    fn needs_separator(&self) -> bool {
        let k = self.with_content.min(self.frames.len());
        if k == 0 {
            return self.doc_has_content;
        }
        match &self.frames[k - 1] {
            Frame::Quote => true,
            Frame::List { tight, .. } => !tight.unwrap_or(true),
            Frame::Item { .. } => match k.checked_sub(2).map(|i| &self.frames[i]) {
                Some(Frame::List { tight, .. }) => !tight.unwrap_or(true),
                _ => true,
            },
        }
    }

    fn emit(&mut self, block: impl FnOnce(Arc<Prefix>) -> Block) {
        if self.needs_separator() {
            // drawn inside the containers the two blocks share, not the ones just opened
            let mut sep = self.prefix(self.with_content.min(self.frames.len()));
            sep.first = sep.rest.clone();
            self.blocks.push(Block::Blank {
                prefix: Arc::new(sep),
            });
        }
        let prefix = Arc::new(self.prefix(self.frames.len()));
        self.blocks.push(block(prefix));
        self.with_content = self.frames.len();
        self.doc_has_content = true;
    }

    pub(super) fn flush_flow(&mut self) {
        let Some((kind, text)) = self.flow.take() else {
            return;
        };
        // the first text of a list decides whether it is tight
        if kind != FlowKind::Heading {
            let n = self.frames.len();
            if n >= 2
                && matches!(self.frames[n - 1], Frame::Item { .. })
                && let Frame::List { tight, .. } = &mut self.frames[n - 2]
            {
                tight.get_or_insert(kind == FlowKind::Tight);
            }
        }
        let measure = Measure::new(&text.text);
        self.emit(|prefix| Block::Flow {
            prefix,
            text,
            measure,
        });
    }

    fn pop_frame(&mut self) {
        self.frames.pop();
        self.with_content = self.with_content.min(self.frames.len());
    }

    pub(super) fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => {
                let style = self.style();
                self.text(&text, style);
            }
            Event::Code(text) | Event::InlineMath(text) | Event::DisplayMath(text) => {
                let style = self.style().patch(style::inline_code());
                self.text(&text, style);
            }
            Event::Html(text) => {
                if let Some(html) = &mut self.html {
                    html.push_str(&text);
                } else {
                    self.text(&text, style::html());
                }
            }
            Event::InlineHtml(text) => self.text(&text, style::html()),
            Event::FootnoteReference(label) => {
                let style = self.style();
                self.text(&format!("[^{label}]"), style);
            }
            Event::SoftBreak => {
                let style = self.style();
                self.text(" ", style);
            }
            Event::HardBreak => {
                let style = self.style();
                let in_cell = self.table.as_ref().is_some_and(|t| t.cell.is_some());
                self.text(if in_cell { " " } else { "\n" }, style);
            }
            Event::Rule => {
                self.flush_flow();
                self.emit(|prefix| Block::Rule { prefix });
            }
            Event::TaskListMarker(done) => {
                self.text(if done { "[x] " } else { "[ ] " }, style::list_marker());
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                self.flush_flow();
                self.flow = Some((FlowKind::Paragraph, Styled::default()));
            }
            Tag::Heading { level, .. } => {
                self.flush_flow();
                let level = level as u8;
                let mut text = Styled::default();
                text.push(&"#".repeat(usize::from(level)), style::heading_marker());
                text.push(" ", style::heading_marker());
                self.flow = Some((FlowKind::Heading, text));
                self.styles.push(style::heading(level));
            }
            Tag::BlockQuote(_) => {
                self.flush_flow();
                self.frames.push(Frame::Quote);
                self.quotes += 1;
            }
            Tag::CodeBlock(kind) => {
                self.flush_flow();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => highlight::language_of(&info),
                    CodeBlockKind::Indented => None,
                };
                self.code = Some((lang, String::new()));
            }
            Tag::HtmlBlock => {
                self.flush_flow();
                self.html = Some(String::new());
            }
            Tag::List(start) => {
                self.flush_flow();
                let bullet = BULLETS[self.bullet_lists % BULLETS.len()];
                if start.is_none() {
                    self.bullet_lists += 1;
                }
                self.frames.push(Frame::List {
                    next_number: start,
                    bullet,
                    tight: None,
                });
            }
            Tag::Item => {
                self.flush_flow();
                let marker = match self.frames.last_mut() {
                    Some(Frame::List {
                        next_number: Some(n),
                        ..
                    }) => {
                        let marker = format!("{n}. ");
                        *n = n.saturating_add(1);
                        marker
                    }
                    Some(Frame::List { bullet, .. }) => (*bullet).to_owned(),
                    _ => BULLETS[0].to_owned(),
                };
                let marker_width = wrap::str_width(&marker);
                self.frames.push(Frame::Item {
                    marker,
                    marker_width,
                });
            }
            Tag::Table(aligns) => {
                self.flush_flow();
                self.table = Some(Table {
                    aligns,
                    head_rows: 0,
                    rows: Vec::new(),
                    row: Vec::new(),
                    cell: None,
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.row.clear();
                }
            }
            Tag::TableCell => {
                if let Some(t) = &mut self.table {
                    t.cell = Some(Styled::default());
                }
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(style::emphasis())),
            Tag::Strong => self.push_style(|s| s.add_modifier(style::strong())),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(style::strikethrough())),
            Tag::Superscript | Tag::Subscript => self.push_style(|s| s),
            Tag::Link { dest_url, .. } => {
                let start = self.sink().text.len();
                self.links.push((dest_url.into_string(), start));
                self.push_style(|s| s.patch(style::link_text()));
            }
            Tag::Image { dest_url, .. } => {
                self.text("[image: ", style::link_url());
                let start = self.sink().text.len();
                self.links.push((dest_url.into_string(), start));
                self.push_style(|s| s.patch(style::link_text()));
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.flush_flow(),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.flush_flow(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush_flow();
            }
            TagEnd::BlockQuote(_) => {
                self.flush_flow();
                self.quotes = self.quotes.saturating_sub(1);
                self.pop_frame();
            }
            TagEnd::CodeBlock => {
                if let Some((lang, text)) = self.code.take() {
                    let mut lines: Vec<String> =
                        text.split_terminator('\n').map(str::to_owned).collect();
                    if lines.is_empty() {
                        lines.push(String::new());
                    }
                    self.emit(|prefix| Block::Code {
                        prefix,
                        lang,
                        lines,
                        highlighted: OnceCell::new(),
                    });
                }
            }
            TagEnd::HtmlBlock => {
                if let Some(html) = self.html.take() {
                    let lines = html
                        .split_terminator('\n')
                        .map(|l| Styled::plain(l.to_owned(), style::html()))
                        .collect();
                    self.emit(|prefix| Block::Fixed { prefix, lines });
                }
            }
            TagEnd::List(ordered) => {
                self.flush_flow();
                if !ordered {
                    self.bullet_lists = self.bullet_lists.saturating_sub(1);
                }
                self.pop_frame();
            }
            TagEnd::Item => {
                self.flush_flow();
                // an empty item still shows its marker
                if self.with_content < self.frames.len() {
                    self.emit(|prefix| Block::Flow {
                        prefix,
                        text: Styled::default(),
                        measure: Measure::default(),
                    });
                }
                self.pop_frame();
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    let table =
                        Box::new(TableBlock::new(table.aligns, table.head_rows, table.rows));
                    self.emit(|prefix| Block::Table { prefix, table });
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some(t) = &mut self.table {
                    let row = std::mem::take(&mut t.row);
                    t.rows.push(row);
                    if tag == TagEnd::TableHead {
                        t.head_rows = t.rows.len();
                    }
                }
            }
            TagEnd::TableCell => {
                if let Some(t) = &mut self.table
                    && let Some(cell) = t.cell.take()
                {
                    t.row.push(cell);
                }
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some((url, start)) = self.links.pop() {
                    let sink = self.sink();
                    let text = sink.text.get(start..).unwrap_or("");
                    let same =
                        url.is_empty() || text == url || url.strip_prefix("mailto:") == Some(text);
                    if tag == TagEnd::Image {
                        sink.push("]", style::link_url());
                    }
                    if !same {
                        sink.push(&format!(" ({url})"), style::link_url());
                    }
                }
            }
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.flush_flow(),
        }
    }
}
