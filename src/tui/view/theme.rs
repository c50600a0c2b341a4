//! Colour roles, written down once, and the small formatters every pane shares.
//! dim = secondary, cyan = hint / focus, green = success, yellow = warning, red = error.

use chrono::{DateTime, Utc};
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
pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}
pub fn selected() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}
/// Border of the focused pane.
pub fn focused_border() -> Style {
    Style::default().fg(Color::Cyan)
}
pub fn border() -> Style {
    Style::default().fg(Color::DarkGray)
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

/// "just now", "5m ago", "3h ago", "2d ago", or the date.
pub fn relative(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let secs = (now - then).num_seconds();
    match secs {
        s if s < 60 => "just now".to_string(),
        s if s < 3600 => format!("{}m ago", s / 60),
        s if s < 86_400 => format!("{}h ago", s / 3600),
        s if s < 7 * 86_400 => format!("{}d ago", s / 86_400),
        _ => then.format("%Y-%m-%d").to_string(),
    }
}

/// "in 3d 4h", "in 12m", "now".
pub fn time_until(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let secs = (then - now).num_seconds();
    if secs <= 0 {
        return "now".to_string();
    }
    let (d, h, m) = (secs / 86_400, (secs % 86_400) / 3600, (secs % 3600) / 60);
    if d > 0 {
        format!("in {d}d {h}h")
    } else if h > 0 {
        format!("in {h}h {m}m")
    } else {
        format!("in {}m", m.max(1))
    }
}

/// 950, 1.2k, 3.4M.
pub fn count(n: u64) -> String {
    match n {
        n if n < 1_000 => n.to_string(),
        n if n < 1_000_000 => trim(format!("{:.1}k", n as f64 / 1_000.0)),
        n if n < 1_000_000_000 => trim(format!("{:.1}M", n as f64 / 1_000_000.0)),
        n => trim(format!("{:.1}G", n as f64 / 1_000_000_000.0)),
    }
}

fn trim(s: String) -> String {
    s.replace(".0k", "k")
        .replace(".0M", "M")
        .replace(".0G", "G")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn formats_counts_and_times() {
        assert_eq!(count(950), "950");
        assert_eq!(count(1_000), "1k");
        assert_eq!(count(1_250), "1.2k");
        assert_eq!(count(10_000_000), "10M");
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap();
        assert_eq!(relative(now, now), "just now");
        assert_eq!(relative(now, now - chrono::Duration::minutes(5)), "5m ago");
        assert_eq!(relative(now, now - chrono::Duration::hours(3)), "3h ago");
        assert_eq!(
            time_until(now, now + chrono::Duration::hours(50)),
            "in 2d 2h"
        );
        assert_eq!(time_until(now, now - chrono::Duration::hours(1)), "now");
    }

    #[test]
    fn gauges_change_colour_at_70_and_90_percent() {
        assert_eq!(gauge(69.9), success());
        assert_eq!(gauge(70.0), warn());
        assert_eq!(gauge(90.0), error());
    }
}
