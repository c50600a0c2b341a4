//! The body of a streaming entry: sanitised as it arrives, its settled blocks parsed once.

use super::*;

/// The body of an entry that is streaming: sanitised incrementally, parsed in two parts.
pub(super) struct StreamBody {
    pub(super) sanitizer: Sanitizer,
    pub(super) clean: String,
    /// Blocks of the top-level blocks that lie wholly before `committed_len`: final.
    pub(super) committed: Document,
    pub(super) committed_len: usize,
    /// The rest, re-parsed on every delta.
    pub(super) tail: Document,
    /// False once the text holds a link reference definition: then it is parsed whole.
    pub(super) piecewise: bool,
    pub(super) memo: HighlightMemo,
    pub(super) committed_lines: Option<(u16, Arc<Vec<Line<'static>>>)>,
    pub(super) committed_height: Option<(u16, usize)>,
    /// The tail's lines as last drawn; `None` after a delta.
    pub(super) tail_lines: Option<(u16, TailLines)>,
    /// The lines of each block of the tail as last built, by fingerprint, at a width.
    pub(super) tail_blocks: (u16, Vec<(u64, BlockLines)>),
}

impl StreamBody {
    pub(super) fn new(content: &str) -> Self {
        let mut body = Self {
            sanitizer: Sanitizer::new(),
            clean: String::new(),
            committed: Document::default(),
            committed_len: 0,
            tail: Document::default(),
            piecewise: true,
            memo: HighlightMemo::default(),
            committed_lines: None,
            committed_height: None,
            tail_lines: None,
            tail_blocks: (0, Vec::new()),
        };
        body.push(content);
        body
    }

    pub(super) fn push(&mut self, raw: &str) {
        let before = self.clean.len();
        self.sanitizer.feed(raw, &mut self.clean);
        if self.clean.len() == before {
            return;
        }
        self.tail_lines = None;
        if self.piecewise {
            let tail = Document::parse_clean(&self.clean[self.committed_len..]);
            if !tail.has_refdefs {
                match commit_point(&self.clean[self.committed_len..], &tail.top_starts) {
                    Some(start) => self.commit(tail, start),
                    None => self.tail = tail,
                }
                return;
            }
            self.piecewise = false;
        }
        self.committed = Document::default();
        self.committed_len = 0;
        self.committed_lines = None;
        self.committed_height = None;
        self.tail = Document::parse_clean(&self.clean);
    }

    /// Move the blocks before `start` from the freshly parsed tail to the committed part.
    pub(super) fn commit(&mut self, mut tail: Document, start: TopStart) {
        let head: Vec<Block> = tail.blocks.drain(..start.block).collect();
        let separator = !self.committed.is_empty() && !head.is_empty();
        if let Some((width, lines)) = &mut self.committed_lines {
            let w = usize::from((*width).max(1));
            let lines = Arc::make_mut(lines);
            if separator {
                lines.push(Line::default());
            }
            for block in &head {
                block.lines_into(w, lines, None);
            }
        }
        if let Some((width, height)) = &mut self.committed_height {
            let w = usize::from((*width).max(1));
            *height += usize::from(separator) + head.iter().map(|b| b.height(w)).sum::<usize>();
        }
        self.committed.append(head);
        self.committed_len += start.offset;
        self.tail = Document::parse_clean(&self.clean[self.committed_len..]);
    }

    pub(super) fn separator(&self) -> bool {
        !self.committed.is_empty() && !self.tail.is_empty()
    }

    pub(super) fn height(&mut self, width: u16) -> usize {
        let committed = match self.committed_height {
            Some((w, h)) if w == width => h,
            _ => {
                let h = self.committed.height(width);
                self.committed_height = Some((width, h));
                h
            }
        };
        committed + usize::from(self.separator()) + self.tail.height(width)
    }

    /// `writing`: the entry is streaming, so a code line still being written is drawn plain.
    pub(super) fn lines(&mut self, width: u16, writing: bool) -> BodyLines {
        let committed = match &self.committed_lines {
            Some((w, lines)) if *w == width => Arc::clone(lines),
            _ => {
                let lines = Arc::new(self.committed.lines(width));
                self.committed_lines = Some((width, Arc::clone(&lines)));
                lines
            }
        };
        let tail = match &self.tail_lines {
            Some((w, lines)) if *w == width => Arc::clone(lines),
            _ => {
                let lines = self.build_tail(width, writing);
                self.tail_lines = Some((width, Arc::clone(&lines)));
                lines
            }
        };
        BodyLines::Two(committed, self.separator(), tail)
    }

    /// The tail's lines at `width`, block by block: a block whose fingerprint is unchanged
    /// since the last build keeps its lines; the growing code block is highlighted through
    /// the memo (see [`Growing`]).
    pub(super) fn build_tail(&mut self, width: u16, writing: bool) -> TailLines {
        let open_last_line = writing && self.tail.code_line_open(&self.clean);
        let last_code = self
            .tail
            .blocks
            .iter()
            .rposition(|b| matches!(b, Block::Code { .. }));
        let (built_width, built) = &mut self.tail_blocks;
        if *built_width != width {
            built.clear();
            *built_width = width;
        }
        let w = usize::from(width.max(1));
        let mut parts = Vec::with_capacity(self.tail.blocks.len());
        for (i, block) in self.tail.blocks.iter().enumerate() {
            let growing = Some(i) == last_code;
            let fingerprint = block.fingerprint() ^ u64::from(growing && open_last_line);
            let lines = match built.get(i) {
                Some((f, lines)) if *f == fingerprint => Arc::clone(lines),
                _ => {
                    let mut lines = Vec::new();
                    let mut g = Growing {
                        memo: &mut self.memo,
                        open_last_line,
                    };
                    block.lines_into(w, &mut lines, growing.then_some(&mut g));
                    Arc::new(lines)
                }
            };
            parts.push((fingerprint, lines));
        }
        let tail: TailLines = parts.iter().map(|(_, l)| Arc::clone(l)).collect();
        *built = parts;
        tail
    }
}

/// Where the committed part of a streamed text can end: the start of the last top-level block
/// if its first line is complete (a later line cannot change what came before it), else the
/// start of the one before. `None` if that is the very start.
pub(super) fn commit_point(src: &str, starts: &[TopStart]) -> Option<TopStart> {
    let last = starts.last()?;
    let j = if src[last.offset..].contains('\n') {
        starts.len() - 1
    } else {
        starts.len().checked_sub(2)?
    };
    let start = starts[j];
    (start.offset > 0).then_some(start)
}
