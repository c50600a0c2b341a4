//! Where each pane goes for a terminal size. Shared by the views and by mouse hit-testing,
//! so a click lands on what is drawn.

use ratatui::layout::{Constraint, Layout, Rect};

/// Rows per entry of the sessions list (title, then time and tokens).
pub const SESSION_ROW_HEIGHT: usize = 2;
/// From this width on, the usage gauges get their own column on the right.
pub const WIDE: u16 = 120;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppLayout {
    /// Usage gauges: a right column when wide, else a band at the top.
    pub usage: Rect,
    pub usage_is_column: bool,
    /// The sessions pane (with border) and its list inside the border.
    pub sessions: Option<Rect>,
    pub session_list: Option<Rect>,
    pub transcript: Rect,
    /// The transcript's text area inside its border.
    pub transcript_inner: Rect,
    pub composer: Rect,
    pub status: Rect,
    /// The search bar's row (the last of the transcript's text area), while it is open.
    pub search_bar: Option<Rect>,
}

/// Composer rows (text lines) shown at most; more scroll inside it.
const MAX_COMPOSER_LINES: usize = 8;

/// Rows the status bar may take for a long message: a quarter of the screen, at most 4.
pub fn max_status_rows(size: Rect) -> u16 {
    (size.height / 4).clamp(1, 4)
}

/// The panes for a terminal of `size`, a composer of `composer_lines` wrapped lines and a
/// status bar of `status_rows` rows (one, more for a message that wraps).
pub fn compute(
    size: Rect,
    composer_lines: usize,
    show_sessions: bool,
    status_rows: u16,
) -> AppLayout {
    let status_rows = status_rows.clamp(1, max_status_rows(size));
    let [main, status] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(status_rows)]).areas(size);
    let wide = size.width >= WIDE;
    let (usage, body) = if wide {
        let [body, usage] =
            Layout::horizontal([Constraint::Min(0), Constraint::Length(30)]).areas(main);
        (usage, body)
    } else {
        let [usage, body] =
            Layout::vertical([Constraint::Length(2), Constraint::Min(0)]).areas(main);
        (usage, body)
    };
    let show_sessions = show_sessions && body.width >= 60;
    let (sessions, center) = if show_sessions {
        let w = if wide { 28 } else { 24 };
        let [s, c] = Layout::horizontal([Constraint::Length(w), Constraint::Min(0)]).areas(body);
        (Some(s), c)
    } else {
        (None, body)
    };
    let composer_h = composer_lines.clamp(1, MAX_COMPOSER_LINES) as u16 + 2;
    let composer_h = composer_h.min(center.height.saturating_sub(3).max(3));
    let [transcript, composer] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(composer_h)]).areas(center);
    AppLayout {
        usage,
        usage_is_column: wide,
        sessions,
        session_list: sessions.map(inner),
        transcript,
        transcript_inner: inner(transcript),
        composer,
        status,
        search_bar: None,
    }
}

/// Takes the last row of the transcript's text area for the search bar (when the area has
/// a row to spare).
pub fn take_search_bar(transcript_inner: &mut Rect) -> Option<Rect> {
    if transcript_inner.height < 2 {
        return None;
    }
    transcript_inner.height -= 1;
    Some(Rect::new(
        transcript_inner.x,
        transcript_inner.bottom(),
        transcript_inner.width,
        1,
    ))
}

fn inner(r: Rect) -> Rect {
    Rect::new(
        r.x.saturating_add(1),
        r.y.saturating_add(1),
        r.width.saturating_sub(2),
        r.height.saturating_sub(2),
    )
}

/// Index of the first session shown in a list of `height` rows with `cursor` selected.
pub fn first_visible_session(cursor: usize, height: u16) -> usize {
    let rows = (height as usize / SESSION_ROW_HEIGHT).max(1);
    (cursor + 1).saturating_sub(rows)
}

/// A rectangle of at most `w`×`h` centred in `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panes_tile_the_screen_at_80x24() {
        let l = compute(Rect::new(0, 0, 80, 24), 1, true, 1);
        assert_eq!(l.status, Rect::new(0, 23, 80, 1));
        assert!(!l.usage_is_column);
        assert_eq!(l.usage.height, 2);
        let s = l.sessions.unwrap();
        assert_eq!(s.x + s.width, l.transcript.x);
        assert_eq!(l.transcript.y + l.transcript.height, l.composer.y);
        assert_eq!(l.composer.height, 3);
        assert_eq!(l.composer.y + l.composer.height, 23);
    }

    #[test]
    fn wide_terminals_get_a_usage_column() {
        let l = compute(Rect::new(0, 0, 200, 60), 3, true, 1);
        assert!(l.usage_is_column);
        assert_eq!(l.usage.x + l.usage.width, 200);
        assert_eq!(l.composer.height, 5);
    }

    #[test]
    fn tiny_terminals_do_not_panic() {
        for (w, h) in [(0, 0), (1, 1), (10, 3), (40, 6)] {
            let _ = compute(Rect::new(0, 0, w, h), 20, true, 1);
        }
    }

    #[test]
    fn session_list_scrolls_with_the_cursor() {
        assert_eq!(first_visible_session(0, 10), 0);
        assert_eq!(first_visible_session(4, 10), 0);
        assert_eq!(first_visible_session(5, 10), 1);
    }
}
