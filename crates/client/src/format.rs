//! How numbers, money, times, durations and risk scores read on screen and in `convo`'s tables:
//! shared by the TUI's views and the client subcommands, so both print them alike.

use chrono::{DateTime, Utc};

/// A count and its noun: `1 token`, `12 tokens`, `1,234 messages`, `3 matches` (the noun
/// takes an `s`, or `es` after s, x, z, ch and sh).
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        return format!("1 {noun}");
    }
    let es = noun.ends_with(['s', 'x', 'z']) || noun.ends_with("ch") || noun.ends_with("sh");
    format!("{} {noun}{}", group_digits(n), if es { "es" } else { "s" })
}

/// A number with thousands separators: 1234567 → 1,234,567.
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1234.5` → `1,234.5`; at most `decimals` decimals, trailing zeros dropped.
pub fn amount(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let frac = frac.trim_end_matches('0');
    let mut out = String::new();
    if v < 0.0 {
        out.push('-');
    }
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// `$1,234.50`.
pub fn usd(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let cents = format!("{:.2}", v.abs());
    let (int, frac) = cents.split_once('.').unwrap_or((&cents, "00"));
    let sign = if v < 0.0 { "-" } else { "" };
    format!(
        "{sign}${}.{frac}",
        amount(int.parse::<f64>().unwrap_or(0.0), 0)
    )
}

/// A duration in seconds, readably: `0s`, `42s`, `4m 12s`, `1h 03m`, `2d 4h`.
pub fn human_duration(secs: f64) -> String {
    if !secs.is_finite() || secs <= 0.0 {
        return "0s".to_string();
    }
    let s = secs.round() as u64;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m {:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A horizontal gauge of `width` cells filled to `ratio` (0–1), in eighths of a cell.
pub fn gauge_bar(ratio: f64, width: usize) -> (String, String) {
    const PARTIAL: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let ratio = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let eighths = (ratio * width as f64 * 8.0).round() as usize;
    let (full, part) = (eighths / 8, eighths % 8);
    let mut filled = "█".repeat(full);
    filled.push_str(PARTIAL[part]);
    let used = full + usize::from(part > 0);
    (filled, "░".repeat(width.saturating_sub(used)))
}

/// The band of a risk score (0–100): low below 30, medium below 70, high from 70.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RiskBand {
    Low,
    Medium,
    High,
}

impl RiskBand {
    pub fn of(score: f64) -> RiskBand {
        if score >= 70.0 {
            RiskBand::High
        } else if score >= 30.0 {
            RiskBand::Medium
        } else {
            RiskBand::Low
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            RiskBand::Low => "low",
            RiskBand::Medium => "medium",
            RiskBand::High => "high",
        }
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

/// A size in bytes, in decimal units: 512 B, 98.4 MB, 4.1 GB.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if n < 1_000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1_000.0;
    let mut unit = 0;
    while v >= 999.95 && unit + 1 < UNITS.len() {
        v /= 1_000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
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
    fn sizes_read_in_decimal_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1_000), "1.0 kB");
        assert_eq!(bytes(98_362_432), "98.4 MB");
        assert_eq!(bytes(999_999_999), "1.0 GB");
        assert_eq!(bytes(4_100_000_000), "4.1 GB");
    }

    #[test]
    fn counts_take_the_plural_of_their_noun() {
        assert_eq!(counted(1, "token"), "1 token");
        assert_eq!(counted(0, "token"), "0 tokens");
        assert_eq!(counted(1234, "message"), "1,234 messages");
        assert_eq!(counted(1, "match"), "1 match");
        assert_eq!(counted(3, "match"), "3 matches");
        assert_eq!(counted(2, "box"), "2 boxes");
    }

    #[test]
    fn digits_are_grouped_by_thousands() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(100), "100");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1234567), "1,234,567");
    }

    #[test]
    fn amounts_are_grouped_and_trimmed() {
        assert_eq!(amount(1842.317, 6), "1,842.317");
        assert_eq!(amount(0.0, 6), "0");
        assert_eq!(amount(250000.0, 4), "250,000");
        assert_eq!(amount(-1234.5, 2), "-1,234.5");
        assert_eq!(amount(f64::NAN, 2), "–");
        assert_eq!(usd(499882.53), "$499,882.53");
        assert_eq!(usd(0.5), "$0.50");
        assert_eq!(usd(-12.0), "-$12.00");
    }

    #[test]
    fn gauges_fill_in_eighths() {
        assert_eq!(gauge_bar(0.0, 4), (String::new(), "░░░░".to_string()));
        assert_eq!(gauge_bar(0.5, 4), ("██".to_string(), "░░".to_string()));
        assert_eq!(gauge_bar(0.92, 24).0, "██████████████████████▏");
        assert_eq!(gauge_bar(7.0, 4).0, "████");
        assert_eq!(gauge_bar(f64::NAN, 2).1, "░░");
    }

    #[test]
    fn durations_read_like_a_person_would_say_them() {
        assert_eq!(human_duration(0.0), "0s");
        assert_eq!(human_duration(f64::NAN), "0s");
        assert_eq!(human_duration(0.4), "0s");
        assert_eq!(human_duration(42.0), "42s");
        assert_eq!(human_duration(252.0), "4m 12s");
        assert_eq!(human_duration(3780.0), "1h 03m");
        assert_eq!(
            human_duration(2.0 * 86_400.0 + 4.0 * 3600.0 + 59.0),
            "2d 4h"
        );
    }

    #[test]
    fn risk_bands_split_at_30_and_70() {
        assert_eq!(RiskBand::of(0.0), RiskBand::Low);
        assert_eq!(RiskBand::of(29.9), RiskBand::Low);
        assert_eq!(RiskBand::of(30.0), RiskBand::Medium);
        assert_eq!(RiskBand::of(69.9), RiskBand::Medium);
        assert_eq!(RiskBand::of(70.0), RiskBand::High);
        assert_eq!(RiskBand::of(250.0), RiskBand::High);
    }

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
}
