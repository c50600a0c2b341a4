//! The help overlay, generated from the key bindings.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use super::{centered, theme, truncate};
use crate::tui::app::App;

/// The slash commands of the composer.
pub const SLASH_COMMANDS: &[(&str, &str)] = &[
    ("/new [TEXT]", "new session, TEXT as draft"),
    ("/delete", "delete this session"),
    ("/system TEXT", "send TEXT as system"),
    ("/meta JSON", "metadata, next message"),
    ("/metrics", "metrics view (F2)"),
    ("/wallet [ID]", "wallet view (F3)"),
    ("/help", "this help"),
    ("/quit", "quit"),
];

/// Every line of the help, in order.
pub fn lines(app: &App) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = app
        .keys
        .describe()
        .into_iter()
        .map(|(_, desc, b)| (b.label(), desc.to_string()))
        .collect();
    out.extend(
        SLASH_COMMANDS
            .iter()
            .map(|(k, d)| (k.to_string(), d.to_string())),
    );
    // views: the keys of the metrics and wallet views.
    out.extend(crate::tui::metrics::help_lines(&app.keys));
    out
}

pub fn render(app: &App, scroll: u16, screen: Rect, buf: &mut Buffer) {
    let entries = lines(app);
    let area = centered(screen, 100, screen.height.saturating_sub(2).max(3));
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme::focused_border())
        .title(Line::from(Span::styled(
            " Keys and commands ",
            theme::bold(),
        )))
        .title_bottom(Line::from(Span::styled(
            " ↑↓ scroll · any other key closes ",
            theme::dim(),
        )));
    let inner = block.inner(area);
    block.render(area, buf);
    let columns = if inner.width >= 70 { 2 } else { 1 };
    let col_w = inner.width as usize / columns;
    let key_w = entries
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0)
        .min(14);
    let rows = entries.len().div_ceil(columns);
    let mut text = Vec::new();
    for r in 0..rows {
        let mut spans = Vec::new();
        for c in 0..columns {
            if let Some((k, d)) = entries.get(c * rows + r) {
                let key = truncate(k, key_w);
                let desc = truncate(d, col_w.saturating_sub(key_w + 3));
                spans.push(Span::styled(format!(" {key:<key_w$} "), theme::hint()));
                spans.push(Span::raw(format!(
                    "{desc:<w$}",
                    w = col_w.saturating_sub(key_w + 2)
                )));
            }
        }
        text.push(Line::from(spans));
    }
    let max_scroll = (text.len() as u16).saturating_sub(inner.height);
    Paragraph::new(text)
        .scroll((scroll.min(max_scroll), 0))
        .render(inner, buf);
}
