//! The status bar: connection (embedded or remote), the current notice, key hints.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{theme, truncate};
use crate::app::{App, Focus, Level, Tone};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let conn = connection(app);
    let k = &app.keys;
    // Most important first; the bar keeps as many as fit.
    let hints: Vec<(String, &str)> = match (app.active_view(), app.focus) {
        (Some(view), _) => view.hints(k),
        _ if app.session_search.is_some() => vec![
            (k.open_session.first_label(), "open"),
            (k.back.first_label(), "close"),
            (
                format!("{}/{}", k.move_up.first_label(), k.move_down.first_label()),
                "select",
            ),
        ],
        _ if app.search.is_some() => search_hints(app),
        (_, Focus::Composer) => vec![
            (typing_label(&k.help), "help"),
            (k.send.first_label(), "send"),
            (k.new_session.first_label(), "new"),
            (k.stop_or_quit.first_label(), "quit"),
            (k.focus_next.first_label(), "panes"),
        ],
        (_, Focus::Sessions) if app.sessions_pane().is_filtering() => vec![
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
            (k.copy_code.first_label(), "copy code"),
        ],
    };
    let width = area.width as usize;
    if let Some((level, text)) = app.status_message() {
        let style = match level {
            Level::Info => theme::hint(),
            Level::Warn => theme::warn(),
            Level::Error => theme::error(),
        };
        let ((tone, label), _) = app.status_label(&text, area.width, area.height);
        let conn = Span::styled(label, tone_style(tone));
        let rows = wrapped(&text, width.saturating_sub(conn.width()), width);
        let shown = rows.len().min(area.height as usize);
        for (i, row) in rows.iter().take(shown).enumerate() {
            // A message longer than the rows the bar may take ends in an ellipsis.
            let row = if i + 1 == shown && shown < rows.len() {
                truncate(&format!("{row} …"), width)
            } else {
                row.clone()
            };
            let mut spans = Vec::new();
            if i == 0 {
                spans.push(conn.clone());
            }
            spans.push(Span::styled(row, style));
            let y = area.y + i as u16;
            Line::from(spans).render(Rect::new(area.x, y, area.width, 1), buf);
        }
        return;
    }
    let mut spans = vec![conn.clone()];
    let used = conn.width();
    let room = width.saturating_sub(used);
    let mut text = String::new();
    for (key, what) in hints {
        let item = if what.is_empty() {
            key
        } else {
            format!("{key} {what}")
        };
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
    Line::from(spans).render(Rect::new(area.x, area.y, area.width, 1), buf);
}

/// The search bar's count and keys.
fn search_hints(app: &App) -> Vec<(String, &'static str)> {
    let k = &app.keys;
    let Some(search) = &app.search else {
        return Vec::new();
    };
    let mut hints = vec![(
        search.status().unwrap_or_else(|| "type to search".into()),
        "",
    )];
    if search.editing {
        hints.push((typing_label(&k.search_next), "next"));
    } else {
        hints.push((k.search_next.label(), "next"));
        hints.push((k.search_prev.first_label(), "previous"));
    }
    hints.push((k.back.first_label(), "close"));
    hints
}

/// `text` word-wrapped into a first row of `first` columns and further rows of `rest`.
fn wrapped(text: &str, first: usize, rest: usize) -> Vec<String> {
    use crate::render::wrap::{WrapEvent, wrap_words};
    let mut rows = vec![String::new()];
    wrap_words(text, first, rest, |ev| match ev {
        WrapEvent::Piece(a, b) => rows.last_mut().unwrap().push_str(&text[a..b]),
        WrapEvent::Break => rows.push(String::new()),
    });
    rows
}

/// The connection label in its colour.
fn connection(app: &App) -> Span<'static> {
    let (tone, text) = app.connection_label();
    Span::styled(text, tone_style(tone))
}

fn tone_style(tone: Tone) -> ratatui::style::Style {
    match tone {
        Tone::Good => theme::success(),
        Tone::Pending => theme::warn(),
        Tone::Bad => theme::error(),
    }
}

/// The first key of a binding that works while typing (not a plain character).
pub fn typing_label(b: &crate::keys::Binding) -> String {
    b.0.iter()
        .find(|k| !matches!(k.code, crossterm::event::KeyCode::Char(_)) || !k.modifiers.is_empty())
        .map(|k| k.to_string())
        .unwrap_or_else(|| b.first_label())
}
