//! The help overlay, generated from the key bindings.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use unicode_width::UnicodeWidthStr;

use super::{theme, truncate};
use crate::help::{HelpLayout, HelpRow, layout, lines};
use crate::keys::KeyBindings;

pub fn render(keys: &KeyBindings, scroll: u16, screen: Rect, buf: &mut Buffer) {
    let HelpLayout {
        area,
        key_w,
        col_w,
        columns,
    } = layout(&lines(keys), screen);
    let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
    let mut text = Vec::new();
    for r in 0..rows {
        let mut spans = Vec::new();
        for (c, column) in columns.iter().enumerate() {
            let last = c + 1 == columns.len();
            match column.get(r) {
                Some(HelpRow::Entry(k, d)) => {
                    let key = truncate(k, key_w);
                    let desc = truncate(d, col_w.saturating_sub(key_w + 3));
                    spans.push(Span::styled(format!(" {key:<key_w$} "), theme::hint()));
                    spans.push(Span::raw(format!(
                        "{desc:<w$}",
                        w = col_w.saturating_sub(key_w + 2)
                    )));
                }
                Some(HelpRow::Header(title)) => {
                    let title = truncate(title, col_w.saturating_sub(1));
                    spans.push(Span::styled(format!(" {title}"), theme::bold()));
                    if !last {
                        let pad = col_w.saturating_sub(title.width() + 1);
                        spans.push(Span::raw(" ".repeat(pad)));
                    }
                }
                Some(HelpRow::Blank) | None => {
                    if !last {
                        spans.push(Span::raw(" ".repeat(col_w)));
                    }
                }
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
