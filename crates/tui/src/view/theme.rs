//! Colour roles, written down once, and the small formatters every pane shares.
//! dim = secondary, cyan = hint / focus, green = success, yellow = warning, red = error.

use ratatui::style::{Color, Modifier, Style};

pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}
pub fn hint() -> Style {
    Style::default().fg(Color::Cyan)
}
pub fn success() -> Style {
    Style::default().fg(Color::Green)
}
pub fn warn() -> Style {
    Style::default().fg(Color::Yellow)
}
pub fn error() -> Style {
    Style::default().fg(Color::Red)
}
/// How a message of `level` is drawn (the status bar, the composer's note).
pub fn level(level: crate::app::Level) -> Style {
    match level {
        crate::app::Level::Info => hint(),
        crate::app::Level::Warn => warn(),
        crate::app::Level::Error => error(),
    }
}

pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}
pub fn selected() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}
/// The number of a code block while one is being chosen (`copy_code`): stands out from code
/// and from a selected message alike.
pub fn code_label() -> Style {
    Style::default()
        .fg(Color::Black)
        .bg(Color::Yellow)
        .add_modifier(Modifier::BOLD)
        .remove_modifier(Modifier::REVERSED)
}
/// Border of the focused pane.
pub fn focused_border() -> Style {
    Style::default().fg(Color::Cyan)
}
pub fn border() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// A match of the transcript search.
pub fn search_match() -> Style {
    Style::default().fg(Color::Black).bg(Color::Yellow)
}
/// The current match of the transcript search.
pub fn search_current() -> Style {
    Style::default()
        .fg(Color::Black)
        .bg(Color::LightRed)
        .add_modifier(Modifier::BOLD)
}

/// Gauge colour by share used: green, yellow from 70 %, red from 90 %.
pub fn gauge(percent: f64) -> Style {
    if percent >= 90.0 {
        error()
    } else if percent >= 70.0 {
        warn()
    } else {
        success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_change_colour_at_70_and_90_percent() {
        assert_eq!(gauge(69.9), success());
        assert_eq!(gauge(70.0), warn());
        assert_eq!(gauge(90.0), error());
    }
}
