//! The sessions pane: most recent first, title, relative time, token total; `/` filters.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::{theme, truncate};
use crate::app::{App, Focus};
use crate::layout::{SESSION_ROW_HEIGHT, first_visible_session};
use convo_client::format;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let focused = app.focus() == Focus::Sessions;
    let pane = app.sessions_pane();
    let mut title = vec![Span::styled(" Sessions ", theme::bold())];
    if pane.is_filtering() || !pane.filter().is_empty() {
        let cursor = if pane.is_filtering() { "▏" } else { "" };
        title.push(Span::styled(
            format!("/{}{cursor} ", pane.filter()),
            theme::hint(),
        ));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(if focused {
            theme::focused_border()
        } else {
            theme::border()
        })
        .title(Line::from(title));
    let inner = block.inner(area);
    block.render(area, buf);
    let sessions = pane.visible();
    if !app.store_ready() {
        Paragraph::new(Span::styled("loading…", theme::dim())).render(inner, buf);
        return;
    }
    if sessions.is_empty() {
        let text = if pane.filter().is_empty() {
            "no sessions yet"
        } else {
            "no match"
        };
        Paragraph::new(Span::styled(text, theme::dim())).render(inner, buf);
        return;
    }
    let first = first_visible_session(pane.cursor(), inner.height);
    let width = inner.width as usize;
    for (row, (idx, s)) in sessions.iter().enumerate().skip(first).enumerate() {
        let y = inner.y + (row * SESSION_ROW_HEIGHT) as u16;
        if y >= inner.bottom() {
            break;
        }
        let is_open = app.open_id() == Some(s.id.as_str());
        let is_cursor = idx == pane.cursor();
        let marker = if is_open { "● " } else { "  " };
        let mut style = if is_open {
            theme::bold()
        } else {
            Default::default()
        };
        if is_cursor && focused {
            style = style.patch(theme::selected());
        }
        let title = truncate(&s.title, width.saturating_sub(2));
        let line = Line::from(vec![
            Span::styled(marker, theme::hint()),
            Span::styled(format!("{title:<w$}", w = width.saturating_sub(2)), style),
        ]);
        line.render(Rect::new(inner.x, y, inner.width, 1), buf);
        if y + 1 < inner.bottom() {
            let meta = if pane.is_deleting(&s.id) {
                Span::styled("  deleting…", theme::warn())
            } else {
                Span::styled(
                    truncate(
                        &format!(
                            "  {} · {} tok",
                            format::relative(app.now(), s.last_activity),
                            format::count(s.tokens)
                        ),
                        width,
                    ),
                    theme::dim(),
                )
            };
            Line::from(meta).render(Rect::new(inner.x, y + 1, inner.width, 1), buf);
        }
    }
}
