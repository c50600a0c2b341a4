//! The per-row line cache: each entry's drawn rows kept by (entry, width, revision).

use super::*;

#[derive(Default)]
pub(super) struct LineCache {
    pub(super) map: HashMap<u64, CachedLines>,
    pub(super) clock: u64,
    /// The cells of the body lines drawn in the last frame, each as drawn on a row of reset
    /// cells (see [`LineCache::draw_row`]).
    pub(super) rows: HashMap<RowKey, CachedRow>,
}

/// A line by the address of the vector holding it (kept alive by [`CachedRow::_lines`], so
/// the address cannot be reused for other lines while the row is cached), its index there
/// and the width it was drawn at.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct RowKey {
    pub(super) lines: usize,
    pub(super) index: usize,
    pub(super) width: u16,
}

pub(super) struct CachedRow {
    pub(super) _lines: Arc<Vec<Line<'static>>>,
    /// From the row's first column to the last one the line touched.
    pub(super) cells: InlineCells,
    pub(super) used: u64,
}

/// A cell as `Buffer::reset` leaves it.
#[allow(deprecated)] // `skip` is part of the state drawing starts from
pub(super) fn is_reset(cell: &Cell) -> bool {
    cell.symbol() == " "
        && cell.fg == Color::Reset
        && cell.bg == Color::Reset
        && cell.underline_color == Color::Reset
        && cell.modifier.is_empty()
        && cell.diff_option == CellDiffOption::None
        && !cell.skip
}

pub(super) struct CachedLines {
    pub(super) width: u16,
    pub(super) lines: Arc<Vec<Line<'static>>>,
    pub(super) used: u64,
}

impl LineCache {
    pub(super) fn get_or_build(
        &mut self,
        id: EntryId,
        width: u16,
        build: impl FnOnce() -> Vec<Line<'static>>,
    ) -> Arc<Vec<Line<'static>>> {
        let clock = self.clock;
        let cached = self.map.entry(id.0).or_insert_with(|| CachedLines {
            width: 0,
            lines: Arc::default(),
            used: 0,
        });
        if cached.used == 0 || cached.width != width {
            cached.lines = Arc::new(build());
            cached.width = width;
        }
        cached.used = clock.max(1);
        Arc::clone(&cached.lines)
    }

    /// Draw line `index` of `lines` at (`x`, `y`). Drawing a line on reset cells always gives
    /// the same cells, so a line drawn so in the last frame is copied from its cells when its
    /// cells are reset again (as every frame of a terminal starts): a copy is a fraction of
    /// drawing, and a frame following a stream redraws the same rows, shifted.
    /// `on_reset`: the caller promises the row's cells are reset (no need to look).
    pub(super) fn draw_row(
        &mut self,
        buf: &mut Buffer,
        (x, y): (u16, u16),
        width: u16,
        (lines, index): (&Arc<Vec<Line<'static>>>, usize),
        on_reset: bool,
    ) {
        let Some(line) = lines.get(index) else { return };
        let key = RowKey {
            lines: Arc::as_ptr(lines) as usize,
            index,
            width,
        };
        let start = buf.index_of(x, y);
        if let Some(row) = self.rows.get_mut(&key) {
            let target = &mut buf.content[start..start + row.cells.len()];
            if on_reset || target.iter().all(is_reset) {
                row.cells.copy_to(target);
                row.used = self.clock;
                return;
            }
            draw_line(buf, x, y, line, width);
            return;
        }
        let reset = on_reset
            || buf.content[start..start + usize::from(width)]
                .iter()
                .all(is_reset);
        let end = draw_line(buf, x, y, line, width);
        // a row holding a grapheme cluster too long to be stored inline is drawn every time
        if let Some(cells) = reset
            .then(|| InlineCells::new(buf.content[start..start + usize::from(end - x)].to_vec()))
            .flatten()
        {
            self.rows.insert(
                key,
                CachedRow {
                    _lines: Arc::clone(lines),
                    cells,
                    used: self.clock,
                },
            );
        }
    }

    /// Keep the most recently drawn half when over budget; keep only the rows drawn in the
    /// last frame.
    pub(super) fn evict(&mut self) {
        let clock = self.clock;
        self.rows.retain(|_, row| row.used == clock);
        if self.map.len() <= LINE_CACHE_ENTRIES {
            return;
        }
        let mut stamps: Vec<u64> = self.map.values().map(|c| c.used).collect();
        let mid = stamps.len() / 2;
        let cutoff = *stamps.select_nth_unstable(mid).1;
        self.map.retain(|_, c| c.used > cutoff);
    }
}
