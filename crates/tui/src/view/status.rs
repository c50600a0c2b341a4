//! The status bar: connection (embedded or remote), the current notice, key hints.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{theme, truncate};
use crate::app::{App, Tone};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let conn = connection(app);
    let k = app.keys();
    // Most important first; the bar keeps as many as fit.
    let hints: Vec<(String, &str)> = match app.active_view() {
        Some(view) => view.hints(k),
        None => app.chat_hints(),
    };
    let width = area.width as usize;
    if let Some((level, text)) = app.status_message() {
        let style = theme::level(level);
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
    // Alerts not yet seen in F4 come first, in the warning colour.
    if let Some((key, label)) = app.accounts_alert_hint() {
        spans.push(Span::styled(format!("{key} {label} "), theme::warn()));
    }
    let used: usize = spans.iter().map(Span::width).sum();
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
