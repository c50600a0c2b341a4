//! The virtualised table: which rows are on screen. Only those are drawn, so a list of
//! 10,000 accounts costs what a screenful costs (`benches/render.rs`, docs/performance.md).

use std::ops::Range;

/// The first row shown so that `selected` is on a screen of `height` rows, moving `offset`
/// as little as possible; never past the last screenful.
pub fn clamp_offset(offset: usize, selected: usize, height: usize, len: usize) -> usize {
    if height == 0 || len == 0 {
        return 0;
    }
    let mut offset = offset.min(len.saturating_sub(height));
    if selected < offset {
        offset = selected;
    } else if selected >= offset + height {
        offset = selected + 1 - height;
    }
    offset
}

/// The rows on screen.
pub fn visible(offset: usize, height: usize, len: usize) -> Range<usize> {
    let start = offset.min(len);
    start..(start + height).min(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_follows_the_selection_and_stays_within_the_list() {
        assert_eq!(clamp_offset(0, 5, 10, 10_000), 0);
        assert_eq!(clamp_offset(0, 10, 10, 10_000), 1);
        assert_eq!(clamp_offset(50, 40, 10, 10_000), 40);
        assert_eq!(clamp_offset(9_999, 9_999, 10, 10_000), 9_990);
        // A list shorter than the screen starts at its top.
        assert_eq!(clamp_offset(3, 2, 10, 4), 0);
        assert_eq!(clamp_offset(3, 0, 0, 4), 0);
        assert_eq!(visible(9_990, 10, 10_000), 9_990..10_000);
        assert_eq!(visible(0, 20, 3), 0..3);
        assert_eq!(visible(5, 20, 3), 3..3);
    }
}
