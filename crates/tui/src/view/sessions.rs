//! The sessions pane: most recent first, a fork under its source (`↳`), title, relative
//! time, token total (and the end of the id when two titles are the same); `/` filters.

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
        // The title's room in the border, less " Sessions ", the "/" and a space after.
        let room = usize::from(area.width).saturating_sub(2 + 10 + 2);
        title.push(Span::styled("/", theme::hint()));
        title.extend(pane.filter_input().spans(
            room,
            pane.is_filtering(),
            theme::hint(),
            theme::hint(),
        ));
        title.push(Span::styled(" ", theme::hint()));
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
    let sessions = pane.visible_rows();
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
    for (row, (idx, r)) in sessions.iter().enumerate().skip(first).enumerate() {
        let s = r.session;
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
        let branch = fork_branch(r.depth, r.orphan);
        let room = width.saturating_sub(2 + branch.chars().count());
        let title = truncate(&s.title, room);
        let line = Line::from(vec![
            Span::styled(marker, theme::hint()),
            Span::styled(branch, theme::dim()),
            Span::styled(format!("{title:<room$}"), style),
        ]);
        line.render(Rect::new(inner.x, y, inner.width, 1), buf);
        if y + 1 < inner.bottom() {
            let meta = if pane.is_deleting(&s.id) {
                Span::styled("  deleting…", theme::warn())
            } else {
                // What tells the row apart comes first, where a narrow pane still shows it.
                let mut parts = Vec::new();
                if pane.title_shared(s) {
                    parts.push(id_tail(&s.id));
                }
                if r.orphan {
                    parts.push("source deleted".to_string());
                }
                parts.push(format::relative(app.now(), s.last_activity));
                parts.push(format!("{} tok", format::count(s.tokens)));
                let meta = format!("  {}{}", "  ".repeat(r.depth.min(4)), parts.join(" · "));
                Span::styled(truncate(&meta, width), theme::dim())
            };
            Line::from(meta).render(Rect::new(inner.x, y + 1, inner.width, 1), buf);
        }
    }
}

/// What stands before a session's title: nothing at the top level, `↳ ` under its source
/// (two more columns a level, at most four levels deep), `↳ ` too for a fork whose source is
/// gone.
pub fn fork_branch(depth: usize, orphan: bool) -> String {
    match (depth, orphan) {
        (0, false) => String::new(),
        (0, true) => "↳ ".to_string(),
        (d, _) => format!("{}↳ ", "  ".repeat(d.min(4) - 1)),
    }
}

/// The end of a session id, to tell two sessions of the same title apart: `#` and its last
/// four characters.
pub fn id_tail(id: &str) -> String {
    let tail: String = id
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("#{tail}")
}
