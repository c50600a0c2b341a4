//! Timestamps: stored as milliseconds since the Unix epoch (UTC), shown as RFC 3339.

use chrono::{DateTime, Datelike, SecondsFormat, TimeZone, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

pub fn to_rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub fn ms_to_rfc3339(ms: i64) -> String {
    to_rfc3339(from_ms(ms))
}

pub fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

/// The billing period containing `t`: the calendar month (UTC), `[start, end)`.
pub fn billing_period(t: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = Utc
        .with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(t);
    let (y, m) = if t.month() == 12 {
        (t.year() + 1, 1)
    } else {
        (t.year(), t.month() + 1)
    };
    let end = Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(t);
    (start, end)
}

/// Parses an ISO 8601 date-time (RFC 3339, e.g. `2026-11-01T00:00:00Z`); a bare date
/// (`2026-11-01`) means midnight UTC and a date-time without offset is taken as UTC.
pub fn parse_iso8601(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            return Some(t.and_utc());
        }
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn billing_period_is_the_calendar_month() {
        let t = Utc.with_ymd_and_hms(2026, 12, 15, 10, 0, 0).unwrap();
        let (s, e) = billing_period(t);
        assert_eq!(to_rfc3339(s), "2026-12-01T00:00:00.000Z");
        assert_eq!(to_rfc3339(e), "2027-01-01T00:00:00.000Z");
    }

    #[test]
    fn iso_dates_parse() {
        assert!(parse_iso8601("2026-11-01T00:00:00Z").is_some());
        assert!(parse_iso8601("2026-11-01T00:00:00+02:00").is_some());
        assert!(parse_iso8601("2026-11-01").is_some());
        assert!(parse_iso8601("2026-11-01T10:00:00").is_some());
        assert!(parse_iso8601("yesterday").is_none());
        assert!(parse_iso8601("2026-13-01").is_none());
    }
}
