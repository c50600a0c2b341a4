//! The composer: multi-line input, `n / 10000` counter, role badge, metadata badge, and the
//! reason of the last failed send.

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Widget};

use super::{theme, truncate};
use convo_client::api::Role;
use convo_wire::limits::MAX_CONTENT_CHARS;

use crate::app::{App, Focus};

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let focused = app.focus == Focus::Composer;
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
            theme::error(),
        )));
    }
    let inner = block.inner(area);
    block.render(area, buf);
    composer.text_area().render(inner, buf);
}
