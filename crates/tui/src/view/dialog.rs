//! Modal dialogs: delete confirmation and context overflow.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use super::{centered, theme, truncate};
use crate::app::App;

fn frame(
    title: &str,
    screen: Rect,
    height: u16,
    style: ratatui::style::Style,
    buf: &mut Buffer,
) -> Rect {
    let area = centered(screen, 64, height);
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style)
        .title(Line::from(Span::styled(
            format!(" {title} "),
            theme::bold(),
        )));
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

pub fn confirm_delete(app: &App, session_id: &str, title: &str, screen: Rect, buf: &mut Buffer) {
    let inner = frame("Delete session?", screen, 9, theme::error(), buf);
    let k = app.keys();
    let lines = vec![
        Line::from(vec![
            Span::raw("Delete "),
            Span::styled(format!("“{}”", truncate(title, 40)), theme::bold()),
        ]),
        Line::from(Span::styled(session_id.to_string(), theme::dim())),
        Line::from(""),
        Line::from(if app.is_local_only(session_id) {
            "Nothing was sent in it: it is removed from this device only."
        } else {
            "Its whole history is removed from the service for good."
        }),
        Line::from(""),
        Line::from(vec![
            Span::styled(format!("[{}]", k.confirm.label()), theme::error()),
            Span::raw(" delete    "),
            Span::styled(format!("[{}]", k.cancel.label()), theme::hint()),
            Span::raw(" cancel"),
        ]),
    ];
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

pub fn context_overflow(app: &App, current: u64, max: u64, screen: Rect, buf: &mut Buffer) {
    let inner = frame("Context window full", screen, 9, theme::warn(), buf);
    let k = app.keys();
    let lines = vec![
        Line::from(vec![
            Span::raw("This message would bring the session to "),
            Span::styled(format!("{current}"), theme::error()),
            Span::raw(format!(" tokens; the limit is {max}.")),
        ]),
        Line::from(""),
        Line::from("Start a new session and carry your message over?"),
        Line::from(""),
        Line::from(vec![
            Span::styled(format!("[{}]", k.confirm.label()), theme::hint()),
            Span::raw(" new session with this draft    "),
            Span::styled(format!("[{}]", k.cancel.label()), theme::dim()),
            Span::raw(" keep editing"),
        ]),
    ];
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}
