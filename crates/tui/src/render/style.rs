//! Colour roles of rendered text, in one place.
//!
//! Dim is secondary (urls, markers, rules), cyan is structure (list markers, headings),
//! yellow is code, green is the user, magenta the system, blue the assistant, red an error.
use ratatui::style::{Color, Modifier, Style};

use convo_client::api::types::Role;

pub fn heading(level: u8) -> Style {
    let base = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
    match level {
        1 => base.add_modifier(Modifier::UNDERLINED),
        2 => base,
        _ => Style::new().add_modifier(Modifier::BOLD),
    }
}

pub fn heading_marker() -> Style {
    Style::new().fg(Color::Cyan).add_modifier(Modifier::DIM)
}

pub fn emphasis() -> Modifier {
    Modifier::ITALIC
}

pub fn strong() -> Modifier {
    Modifier::BOLD
}

pub fn strikethrough() -> Modifier {
    Modifier::CROSSED_OUT
}

pub fn inline_code() -> Style {
    Style::new().fg(Color::Yellow)
}

pub fn link_text() -> Style {
    Style::new()
        .fg(Color::Blue)
        .add_modifier(Modifier::UNDERLINED)
}

pub fn link_url() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

pub fn html() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

pub fn quote_bar() -> Style {
    Style::new().fg(Color::Green).add_modifier(Modifier::DIM)
}

pub fn quote_text() -> Modifier {
    Modifier::ITALIC
}

pub fn list_marker() -> Style {
    Style::new().fg(Color::Cyan)
}

pub fn rule() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

pub fn table_border() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

pub fn table_header() -> Modifier {
    Modifier::BOLD
}

/// Plain code (no highlighting: unknown language, or a block too large to highlight).
pub fn code() -> Style {
    Style::new().fg(Color::Yellow)
}

/// The gutter drawn left of every code block line.
pub fn code_gutter() -> Style {
    Style::new().fg(Color::DarkGray)
}

/// The marker at the end of a code or HTML line that was broken at the width.
pub fn break_marker() -> Style {
    Style::new().fg(Color::DarkGray)
}

pub fn role(role: Role) -> Style {
    let color = match role {
        Role::User => Color::Green,
        Role::System => Color::Magenta,
        Role::Assistant => Color::Blue,
    };
    Style::new().fg(color).add_modifier(Modifier::BOLD)
}

pub fn header_text() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

pub fn streaming_marker() -> Style {
    Style::new().fg(Color::Cyan)
}

pub fn interrupted_marker() -> Style {
    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)
}

pub fn failed_marker() -> Style {
    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
}

/// Patched over the rows of the selected entry.
pub fn selected() -> Style {
    Style::new().bg(Color::Indexed(236))
}
