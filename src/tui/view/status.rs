//! The status bar: connection (embedded or remote), the current notice, key hints.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{theme, truncate};
use crate::tui::app::{App, Connection, Focus, Level};
use crate::tui::event::Endpoint;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let conn = match &app.connection {
        Connection::Connecting => Span::styled("◌ connecting… ", theme::warn()),
        Connection::Connected(Endpoint::Embedded { addr }) => {
            Span::styled(format!("● local service {addr} "), theme::success())
        }
        Connection::Connected(Endpoint::Remote { base_url }) => {
            Span::styled(format!("● {base_url} "), theme::success())
        }
        Connection::Failed(_) => Span::styled("✗ not connected ", theme::error()),
    };
    let k = &app.keys;
    let hints = match app.focus {
        Focus::Composer => format!(
            "{} send · {} new · {} panes · {} help · {} quit",
            k.send.first_label(),
            k.new_session.first_label(),
            k.focus_next.first_label(),
            k.help.label(),
            k.stop_or_quit.first_label()
        ),
        Focus::Sessions => format!(
            "{} open · {} delete · {} filter · {} help · {} quit",
            k.open_session.first_label(),
            k.delete_session.first_label(),
            k.filter_sessions.first_label(),
            k.help.first_label(),
            k.quit.first_label()
        ),
        Focus::Transcript => format!(
            "{} select · {} copy · {} scroll · {} help · {} quit",
            k.move_up.first_label(),
            k.copy_reply.first_label(),
            k.scroll_up.first_label(),
            k.help.first_label(),
            k.quit.first_label()
        ),
    };
    let width = area.width as usize;
    let mut spans = vec![conn.clone()];
    let used = conn.width();
    match &app.notice {
        Some(n) => {
            let style = match n.level {
                Level::Info => theme::hint(),
                Level::Warn => theme::warn(),
                Level::Error => theme::error(),
            };
            spans.push(Span::styled(
                truncate(&n.text, width.saturating_sub(used)),
                style,
            ));
        }
        None => {
            let room = width.saturating_sub(used);
            let hints = truncate(&hints, room);
            let pad = room.saturating_sub(unicode_width::UnicodeWidthStr::width(hints.as_str()));
            spans.push(Span::raw(" ".repeat(pad)));
            spans.push(Span::styled(hints, theme::dim()));
        }
    }
    Line::from(spans).render(area, buf);
}
