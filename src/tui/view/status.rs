//! The status bar: connection (embedded or remote), the current notice, key hints.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{theme, truncate};
use crate::service::engine::LoadState;
use crate::tui::app::{App, Connection, Focus, Level};
use crate::tui::event::{Endpoint, EngineStatus};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let conn = match &app.connection {
        Connection::Connecting => Span::styled("◌ connecting… ", theme::warn()),
        Connection::Connected(Endpoint::Embedded { addr }) => match &app.engine {
            None => Span::styled(format!("● local service {addr} "), theme::success()),
            Some(engine) => engine_span(engine),
        },
        Connection::Connected(Endpoint::Remote { base_url }) => {
            Span::styled(format!("● {base_url} "), theme::success())
        }
        Connection::Failed(_) => Span::styled("✗ not connected ", theme::error()),
    };
    let k = &app.keys;
    // Most important first; the bar keeps as many as fit.
    let hints: Vec<(String, &str)> = match (app.active_view(), app.focus) {
        (Some(view), _) => view.hints(k),
        (_, Focus::Composer) => vec![
            (typing_label(&k.help), "help"),
            (k.send.first_label(), "send"),
            (k.new_session.first_label(), "new"),
            (k.stop_or_quit.first_label(), "quit"),
            (k.focus_next.first_label(), "panes"),
        ],
        (_, Focus::Sessions) if app.filtering => vec![
            (k.open_session.first_label(), "open"),
            ("Esc".to_string(), "clear filter"),
            (
                format!("{}/{}", k.move_up.first_label(), k.move_down.first_label()),
                "select",
            ),
        ],
        (_, Focus::Sessions) => vec![
            (k.help.first_label(), "help"),
            (k.open_session.first_label(), "open"),
            (k.delete_session.first_label(), "delete"),
            (k.filter_sessions.first_label(), "filter"),
            (k.quit.first_label(), "quit"),
        ],
        (_, Focus::Transcript) => vec![
            (k.help.first_label(), "help"),
            (k.move_up.first_label(), "select"),
            (k.copy_reply.first_label(), "copy"),
            (k.scroll_up.first_label(), "scroll"),
            (k.quit.first_label(), "quit"),
        ],
    };
    let width = area.width as usize;
    let mut spans = vec![conn.clone()];
    let used = conn.width();
    // While typing a filter its keys matter more than the last notice.
    let notice = app.notice.as_ref().filter(|_| !app.filtering);
    match notice {
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
            let mut text = String::new();
            for (key, what) in hints {
                let item = format!("{key} {what}");
                let sep = if text.is_empty() { "" } else { " · " };
                if text.chars().count() + sep.len() + item.chars().count() > room {
                    break;
                }
                text.push_str(sep);
                text.push_str(&item);
            }
            let hints = text;
            let pad = room.saturating_sub(unicode_width::UnicodeWidthStr::width(hints.as_str()));
            spans.push(Span::raw(" ".repeat(pad)));
            spans.push(Span::styled(hints, theme::dim()));
        }
    }
    Line::from(spans).render(area, buf);
}

/// What answers in the embedded service: the model loading (with its progress), ready, or
/// failed to load.
fn engine_span(engine: &EngineStatus) -> Span<'static> {
    match &engine.state {
        LoadState::Loading { fraction } => Span::styled(
            format!(
                "◌ loading {} {:.0}% ",
                engine.label,
                (fraction * 100.0).clamp(0.0, 100.0)
            ),
            theme::warn(),
        ),
        LoadState::Ready => Span::styled(format!("● {} ", engine.label), theme::success()),
        LoadState::Failed(_) => Span::styled(format!("✗ {} ", engine.label), theme::error()),
    }
}

/// The first key of a binding that works while typing (not a plain character).
pub fn typing_label(b: &crate::keys::Binding) -> String {
    b.0.iter()
        .find(|k| !matches!(k.code, crossterm::event::KeyCode::Char(_)) || !k.modifiers.is_empty())
        .map(|k| k.to_string())
        .unwrap_or_else(|| b.first_label())
}
