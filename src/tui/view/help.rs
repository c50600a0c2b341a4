//! The help overlay, generated from the key bindings.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use unicode_width::UnicodeWidthStr;

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

/// Where the help goes on `screen` and how it is laid out.
struct Layout {
    area: Rect,
    key_w: usize,
    columns: usize,
    col_w: usize,
    rows: usize,
}

fn layout(entries: &[(String, String)], screen: Rect) -> Layout {
    let key_w = entries
        .iter()
        .map(|(k, _)| k.width())
        .max()
        .unwrap_or(0)
        .min(MAX_KEY_WIDTH);
    let desc_w = entries.iter().map(|(_, d)| d.width()).max().unwrap_or(0);
    // One entry: " key  desc " — two columns only when neither would be cut.
    let entry_w = key_w + desc_w + 3;
    let wide = (2 * entry_w + 2) as u16;
    let area = centered(
        screen,
        wide.min(screen.width.saturating_sub(2)),
        screen.height.saturating_sub(2).max(3),
    );
    let inner_w = area.width.saturating_sub(2) as usize;
    let columns = if inner_w >= 2 * entry_w { 2 } else { 1 };
    Layout {
        area,
        key_w,
        columns,
        col_w: inner_w / columns,
        rows: entries.len().div_ceil(columns),
    }
}

/// The largest useful scroll offset of the help on `screen`.
pub fn max_scroll(app: &App, screen: Rect) -> u16 {
    let l = layout(&lines(app), screen);
    (l.rows as u16).saturating_sub(l.area.height.saturating_sub(2))
}

pub fn render(app: &App, scroll: u16, screen: Rect, buf: &mut Buffer) {
    let entries = lines(app);
    let Layout {
        area,
        key_w,
        columns,
        col_w,
        rows,
    } = layout(&entries, screen);
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
    let inner_h = area.height.saturating_sub(2);
    let max_scroll = (text.len() as u16).saturating_sub(inner_h);
    let scroll = scroll.min(max_scroll);
    let hint = if max_scroll == 0 {
        " any key closes ".to_string()
    } else if scroll < max_scroll {
        format!(
            " ↓ more below ({}/{}) · ↑↓ scroll · any other key closes ",
            scroll + inner_h,
            text.len()
        )
    } else {
        " ↑ scroll up · any other key closes ".to_string()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme::focused_border())
        .title(Line::from(Span::styled(
            " Keys and commands ",
            theme::bold(),
        )))
        .title_bottom(Line::from(Span::styled(hint, theme::dim())));
    let inner = block.inner(area);
    Clear.render(area, buf);
    block.render(area, buf);
    Paragraph::new(text).scroll((scroll, 0)).render(inner, buf);
}

/// Key labels longer than this are cut (a binding with many keys).
const MAX_KEY_WIDTH: usize = 22;
