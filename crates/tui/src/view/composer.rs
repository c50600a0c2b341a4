//! The composer: multi-line input, `n / 10000` counter, role badge, metadata badge, and the
//! reason of the last failed send.

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Widget};

use super::{theme, truncate};
use convo_client::api::Role;
use convo_wire::limits::MAX_CONTENT_CHARS;

use crate::app::{App, Focus};
use crate::composer_pane::{Composer, width_at};
use unicode_segmentation::UnicodeSegmentation;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let focused = app.focus() == Focus::Composer;
    let composer = app.composer();
    let badge = match composer.role() {
        Role::System => Span::styled(" system ", theme::warn().patch(theme::selected())),
        _ => Span::styled(" user ", theme::hint().patch(theme::selected())),
    };
    let mut title = vec![Span::raw(" "), badge, Span::raw(" ")];
    if let Some(meta) = composer.metadata() {
        let text = truncate(
            &meta.to_string(),
            (area.width as usize).saturating_sub(30).max(8),
        );
        title.push(Span::styled(format!("meta {text} "), theme::hint()));
    }
    let n = composer.chars();
    let counter_style = if n > MAX_CONTENT_CHARS {
        theme::error()
    } else {
        theme::dim()
    };
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(if focused {
            theme::focused_border()
        } else {
            theme::border()
        })
        .title(Line::from(title))
        .title_top(
            Line::from(Span::styled(
                format!(" {n} / {MAX_CONTENT_CHARS} "),
                counter_style,
            ))
            .alignment(Alignment::Right),
        );
    if let Some(err) = app.composer().send_error() {
        // Too long for the border: its start here, all of it in the status bar below.
        let text = if app.send_error_fits(err) {
            err.to_string()
        } else {
            format!("{} ↓", truncate(err, area.width.saturating_sub(6) as usize))
        };
        block = block.title_bottom(Line::from(Span::styled(
            format!(" {text} "),
            theme::level(app.send_note_level()),
        )));
    }
    let inner = block.inner(area);
    block.render(area, buf);
    let text_area = composer.text_area();
    if composer.is_empty() {
        // The placeholder, with the cursor before it.
        text_area.render(inner, buf);
        return;
    }
    // The text area keeps its own rows at this size, for Up and Down; what is drawn is the
    // composer's word wrap, where no row starts with the space of a break.
    text_area.render(inner, &mut Buffer::empty(inner));
    draw_text(composer, inner, buf);
}

/// The draft's rows that fit in `area`, the cursor on screen, a selection highlighted.
fn draw_text(composer: &Composer, area: Rect, buf: &mut Buffer) {
    let width = usize::from(area.width);
    let screen = composer.screen(width);
    let height = usize::from(area.height);
    let top = composer.scroll_top(screen.cursor.0, height);
    let text_area = composer.text_area();
    let selection = text_area.selection_range();
    let selected = |line: usize, char_col: usize| {
        selection.is_some_and(|(from, to)| (line, char_col) >= from && (line, char_col) < to)
    };
    let lines = composer.lines();
    for (y, row) in screen.rows.iter().enumerate().skip(top).take(height) {
        let y = area.y + (y - top) as u16;
        let Some(row) = row else { continue };
        let line = &lines[row.line];
        let mut char_col = line[..row.start].chars().count();
        let mut col = 0;
        for g in line[row.start..row.end].graphemes(true) {
            let w = width_at(g, col);
            if col + w > width {
                break;
            }
            let style = if selected(row.line, char_col) {
                SELECTION
            } else {
                Style::default()
            };
            let x = area.x + col as u16;
            if g == "\t" {
                buf.set_stringn(x, y, " ".repeat(w), w, style);
            } else {
                buf.set_stringn(x, y, g, w, style);
            }
            col += w;
            char_col += g.chars().count();
        }
    }
    let (row, col) = screen.cursor;
    if (top..top + height).contains(&row) && col < width {
        let cell = &mut buf[(area.x + col as u16, area.y + (row - top) as u16)];
        cell.set_style(text_area.cursor_style());
    }
}

/// How the text area highlights a selection (its default).
const SELECTION: Style = Style::new().bg(Color::LightBlue);
