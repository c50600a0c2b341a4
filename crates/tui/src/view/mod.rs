//! Views: pure functions of `App` that draw into a frame. One file per pane.

pub mod accounts;
pub mod composer;
pub mod dialog;
pub mod help;
pub mod kept;
pub mod metrics;
pub mod search;
pub mod sessions;
pub mod status;
pub mod theme;
pub mod transcript;
pub mod usage;
pub mod wallet;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::app::{App, Overlay, View};

/// Draws the whole app.
pub fn draw(frame: &mut Frame, app: &App) {
    let layout = app.layout();
    let buf = frame.buffer_mut();
    match app.view() {
        View::Chat => {
            usage::render(app, &layout, buf);
            if let Some(area) = layout.sessions {
                sessions::render(app, area, buf);
            }
            transcript::render(app, layout.transcript, buf);
            composer::render(app, layout.composer, buf);
            if let Some(hits) = app.transcript_pane().hits() {
                search::hits(app, hits, frame_area(buf), buf);
            }
        }
        // A full-screen view takes the screen above the status bar.
        View::Metrics | View::Wallet | View::Accounts | View::Kept => {
            let area = buf.area;
            let above = Rect::new(
                area.x,
                area.y,
                area.width,
                layout.status.y.saturating_sub(area.y),
            );
            if let Some(view) = app.active_view() {
                view.render(app.keys(), above, buf);
            }
        }
    }
    status::render(app, layout.status, buf);
    match app.overlay() {
        Some(Overlay::Help { scroll }) => {
            help::render(app.keys(), *scroll, frame.area(), frame.buffer_mut())
        }
        Some(Overlay::ConfirmDelete {
            session_id, title, ..
        }) => dialog::confirm_delete(app, session_id, title, frame.area(), frame.buffer_mut()),
        Some(Overlay::ContextOverflow { current, max, .. }) => {
            dialog::context_overflow(app, *current, *max, frame.area(), frame.buffer_mut())
        }
        None => {}
    }
}

pub use crate::layout::centered;

fn frame_area(buf: &Buffer) -> Rect {
    buf.area
}

/// A list drawn two rows per item in `height` rows, with item `cursor` on screen: the first
/// item shown and how many fit (the search hits, the kept sessions).
pub fn two_row_page(cursor: usize, height: u16) -> (usize, usize) {
    let per_page = usize::from(height / 2).max(1);
    (cursor.saturating_sub(per_page - 1), per_page)
}

/// Cuts `s` to `width` columns, with an ellipsis when cut.
pub fn truncate(s: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let total: usize = s.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
    }
    out
}
