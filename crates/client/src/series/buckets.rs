//! Time ranges and their buckets, all in UTC: the range presets of the metrics view, the
//! custom range as typed, and the split of a range into calendar buckets (hours, days, ISO
//! weeks starting Monday, months). The first bucket starts at the range start and the last
//! ends at the range end, so either may be partial.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};

use crate::api::Granularity;

/// Most buckets one view may ask for: one metrics query each.
pub const MAX_BUCKETS: usize = 200;
/// Longest range the service answers (docs/design.md, "Metrics").
pub const MAX_RANGE_DAYS: i64 = 366;

/// A half-open time range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeRange {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// One bucket of a range: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bucket {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Bucket {
    /// The bucket as a range, to query it.
    pub fn range(self) -> TimeRange {
        TimeRange {
            start: self.start,
            end: self.end,
        }
    }

    /// True when the bucket is shorter than a whole calendar unit (cut by the range).
    pub fn is_partial(&self, g: Granularity) -> bool {
        floor(self.start, g) != self.start || next_boundary(self.start, g) != self.end
    }
}

/// Why a range cannot be charted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("the range is empty: the start must be before the end")]
    Empty,
    #[error("the range is {days} days long; the service allows at most {MAX_RANGE_DAYS}")]
    TooLong { days: i64 },
    #[error("{count} {} buckets are more than {MAX_BUCKETS}: {}", adjective(*granularity), suggestion(*coarser))]
    TooManyBuckets {
        count: usize,
        granularity: Granularity,
        /// The finest coarser granularity that fits, if any.
        coarser: Option<Granularity>,
    },
}

fn adjective(g: Granularity) -> &'static str {
    match g {
        Granularity::Hour => "hourly",
        Granularity::Day => "daily",
        Granularity::Week => "weekly",
        Granularity::Month => "monthly",
    }
}

fn suggestion(coarser: Option<Granularity>) -> String {
    match coarser {
        Some(g) => format!("choose {g} or a shorter range"),
        None => "choose a shorter range".to_string(),
    }
}

/// The start of the hour, day, ISO week (Monday) or month that contains `t`.
pub fn floor(t: DateTime<Utc>, g: Granularity) -> DateTime<Utc> {
    let date = t.date_naive();
    let midnight = |d: NaiveDate| d.and_time(chrono::NaiveTime::MIN).and_utc();
    match g {
        Granularity::Hour => midnight(date) + Duration::hours(i64::from(t.hour())),
        Granularity::Day => midnight(date),
        Granularity::Week => {
            midnight(date) - Duration::days(i64::from(date.weekday().num_days_from_monday()))
        }
        Granularity::Month => midnight(date.with_day(1).unwrap_or(date)),
    }
}

/// The first bucket boundary strictly after `t`.
pub fn next_boundary(t: DateTime<Utc>, g: Granularity) -> DateTime<Utc> {
    let start = floor(t, g);
    match g {
        Granularity::Hour => start + Duration::hours(1),
        Granularity::Day => start + Duration::days(1),
        Granularity::Week => start + Duration::weeks(1),
        Granularity::Month => {
            let d = start.date_naive();
            let (y, m) = if d.month() == 12 {
                (d.year() + 1, 1)
            } else {
                (d.year(), d.month() + 1)
            };
            NaiveDate::from_ymd_opt(y, m, 1)
                .map(|n| n.and_time(chrono::NaiveTime::MIN).and_utc())
                // Only past year 262143: no real range gets here.
                .unwrap_or(DateTime::<Utc>::MAX_UTC)
        }
    }
}

/// How many buckets `range` has at granularity `g` (0 for an empty range), without
/// building them.
pub fn bucket_count(range: TimeRange, g: Granularity) -> usize {
    if range.start >= range.end {
        return 0;
    }
    let first = floor(range.start, g);
    let last = floor(range.end - Duration::nanoseconds(1), g);
    let n = match g {
        Granularity::Hour => (last - first).num_hours(),
        Granularity::Day => (last - first).num_days(),
        Granularity::Week => (last - first).num_weeks(),
        Granularity::Month => {
            let (a, b) = (first.date_naive(), last.date_naive());
            i64::from(b.year() - a.year()) * 12 + i64::from(b.month()) - i64::from(a.month())
        }
    };
    usize::try_from(n).unwrap_or(0) + 1
}

/// Checks that `range` can be charted at `g`: not empty, within the service's maximum, and
/// at most [`MAX_BUCKETS`] buckets.
pub fn check(range: TimeRange, g: Granularity) -> Result<usize, RangeError> {
    if range.start >= range.end {
        return Err(RangeError::Empty);
    }
    let length = range.end - range.start;
    if length > Duration::days(MAX_RANGE_DAYS) {
        return Err(RangeError::TooLong {
            days: length.num_days() + i64::from(length.num_seconds() % 86_400 != 0),
        });
    }
    let count = bucket_count(range, g);
    if count > MAX_BUCKETS {
        let coarser = [Granularity::Day, Granularity::Week, Granularity::Month]
            .into_iter()
            .filter(|c| rank(*c) > rank(g))
            .find(|c| bucket_count(range, *c) <= MAX_BUCKETS);
        return Err(RangeError::TooManyBuckets {
            count,
            granularity: g,
            coarser,
        });
    }
    Ok(count)
}

fn rank(g: Granularity) -> u8 {
    match g {
        Granularity::Hour => 0,
        Granularity::Day => 1,
        Granularity::Week => 2,
        Granularity::Month => 3,
    }
}

/// The buckets of `range` at `g`, in order, after [`check`].
pub fn buckets(range: TimeRange, g: Granularity) -> Result<Vec<Bucket>, RangeError> {
    let count = check(range, g)?;
    let mut out = Vec::with_capacity(count);
    let mut start = range.start;
    while start < range.end {
        let end = next_boundary(start, g).min(range.end);
        out.push(Bucket { start, end });
        start = end;
    }
    Ok(out)
}

/// The range presets of the metrics view. Each ends now and starts on a whole hour (24 h)
/// or a whole day (UTC), so that its hourly or daily buckets are whole except the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangePreset {
    Last24Hours,
    Last7Days,
    Last30Days,
    Last90Days,
}

impl RangePreset {
    pub const ALL: [RangePreset; 4] = [
        RangePreset::Last24Hours,
        RangePreset::Last7Days,
        RangePreset::Last30Days,
        RangePreset::Last90Days,
    ];

    /// Short label for the range selector.
    pub fn label(self) -> &'static str {
        match self {
            RangePreset::Last24Hours => "24h",
            RangePreset::Last7Days => "7d",
            RangePreset::Last30Days => "30d",
            RangePreset::Last90Days => "90d",
        }
    }

    /// Long label for titles.
    pub fn describe(self) -> &'static str {
        match self {
            RangePreset::Last24Hours => "last 24 hours",
            RangePreset::Last7Days => "last 7 days",
            RangePreset::Last30Days => "last 30 days",
            RangePreset::Last90Days => "last 90 days",
        }
    }

    /// The range ending at `now`: the current hour and the 23 before it, or the current day
    /// and the 6, 29 or 89 before it.
    pub fn resolve(self, now: DateTime<Utc>) -> TimeRange {
        // Whole seconds, since the wire carries seconds: rounded up, so that what happened in
        // the current second is inside the (end-exclusive) range.
        let now = match now.with_nanosecond(0) {
            Some(whole) if whole != now => whole + Duration::seconds(1),
            _ => now,
        };
        let (unit, n) = match self {
            RangePreset::Last24Hours => (Granularity::Hour, 24),
            RangePreset::Last7Days => (Granularity::Day, 7),
            RangePreset::Last30Days => (Granularity::Day, 30),
            RangePreset::Last90Days => (Granularity::Day, 90),
        };
        let step = match unit {
            Granularity::Hour => Duration::hours(1),
            _ => Duration::days(1),
        };
        let current = floor(now, unit);
        let start = if current == now {
            now - step * n
        } else {
            current - step * (n - 1)
        };
        TimeRange { start, end: now }
    }
}

/// An instant as typed: an RFC 3339 date-time (`2026-11-01T12:00:00Z`, any offset), a
/// date-time without offset (UTC, seconds optional), or a date (midnight UTC).
pub fn parse_instant(s: &str) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, format) {
            return Ok(t.and_utc());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(Utc.from_utc_datetime(&d.and_time(chrono::NaiveTime::MIN)));
    }
    Err(format!(
        "`{s}` is not a date: use 2026-11-01 or 2026-11-01T12:00:00Z"
    ))
}

/// A custom range as typed in the metrics view: `START..END`, `START END` or
/// `START to END`, each an instant for [`parse_instant`]. The end is exclusive.
pub fn parse_range(input: &str) -> Result<TimeRange, String> {
    let input = input.trim();
    if input.is_empty() {
        return Err("type a start and an end, like 2026-11-01..2026-11-22".to_string());
    }
    let (a, b) = if let Some((a, b)) = input.split_once("..") {
        (a, b)
    } else if let Some((a, b)) = input.split_once(" to ") {
        (a, b)
    } else if let Some((a, b)) = input.split_once('→') {
        (a, b)
    } else if let Some((a, b)) = input.split_once(char::is_whitespace) {
        (a, b)
    } else {
        parse_instant(input).map_err(|e| format!("start: {e}"))?;
        return Err("now the end: START..END, like 2026-11-01..2026-11-22".to_string());
    };
    let start = parse_instant(a).map_err(|e| format!("start: {e}"))?;
    let b = b.trim();
    if b.is_empty() {
        return Err("now the end: START..END, like 2026-11-01..2026-11-22".to_string());
    }
    let end = parse_instant(b).map_err(|e| format!("end: {e}"))?;
    if start >= end {
        return Err("the start must be before the end".to_string());
    }
    Ok(TimeRange { start, end })
}

/// A bucket's start as a short axis label for `g`.
pub fn short_label(start: DateTime<Utc>, g: Granularity) -> String {
    match g {
        Granularity::Hour => start.format("%d %H:%M").to_string(),
        Granularity::Day => start.format("%a %d").to_string(),
        Granularity::Week => format!("W{:02}", start.iso_week().week()),
        Granularity::Month => start.format("%b %Y").to_string(),
    }
}

/// A bucket as a readable span: `Tue 18 Nov 14:00–15:00`, `Tue 18 Nov`, `week 47 (17–23 Nov)`,
/// `November 2026`; a partial bucket shows its actual bounds.
pub fn describe_bucket(b: Bucket, g: Granularity) -> String {
    if b.is_partial(g) {
        let last = b.end - Duration::nanoseconds(1);
        return if last.date_naive() == b.start.date_naive() {
            format!(
                "{}–{}",
                b.start.format("%a %d %b %H:%M"),
                b.end.format("%H:%M")
            )
        } else {
            describe_span(b.start, b.end)
        };
    }
    match g {
        Granularity::Hour => format!(
            "{}–{}",
            b.start.format("%a %d %b %H:%M"),
            b.end.format("%H:%M")
        ),
        Granularity::Day => b.start.format("%a %d %b %Y").to_string(),
        Granularity::Week => {
            let last = b.end - Duration::days(1);
            format!(
                "week {} ({} – {})",
                b.start.iso_week().week(),
                b.start.format("%d %b"),
                last.format("%d %b %Y")
            )
        }
        Granularity::Month => b.start.format("%B %Y").to_string(),
    }
}

/// `2026-11-01 00:00 → 2026-11-22 12:34 UTC`.
pub fn describe_span(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    format!(
        "{} → {} UTC",
        start.format("%Y-%m-%d %H:%M"),
        end.format("%Y-%m-%d %H:%M")
    )
}

/// A bucket in a table row: as precise as its granularity needs.
pub fn bucket_label(b: Bucket, g: Granularity) -> String {
    match g {
        Granularity::Hour => b.start.format("%a %d %b %H:%M").to_string(),
        Granularity::Day => b.start.format("%a %d %b %Y").to_string(),
        Granularity::Week => format!(
            "W{:02} {}",
            b.start.iso_week().week(),
            b.start.format("%d %b %Y")
        ),
        Granularity::Month => b.start.format("%b %Y").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    fn range(a: DateTime<Utc>, b: DateTime<Utc>) -> TimeRange {
        TimeRange { start: a, end: b }
    }

    #[test]
    fn aligned_hours_split_exactly() {
        let b = buckets(
            range(at(2026, 11, 22, 0, 0), at(2026, 11, 22, 3, 0)),
            Granularity::Hour,
        )
        .unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].start, at(2026, 11, 22, 0, 0));
        assert_eq!(b[0].end, at(2026, 11, 22, 1, 0));
        assert_eq!(b[2].end, at(2026, 11, 22, 3, 0));
        assert!(b.iter().all(|b| !b.is_partial(Granularity::Hour)));
        // Contiguous, no gaps or overlaps.
        assert!(b.windows(2).all(|w| w[0].end == w[1].start));
    }

    #[test]
    fn the_last_bucket_ends_at_the_range_end() {
        let r = range(at(2026, 11, 20, 0, 0), at(2026, 11, 22, 12, 34));
        let b = buckets(r, Granularity::Day).unwrap();
        assert_eq!(b.len(), 3);
        let last = b[2];
        assert_eq!(last.start, at(2026, 11, 22, 0, 0));
        assert_eq!(last.end, r.end);
        assert!(last.is_partial(Granularity::Day));
        assert!(!b[0].is_partial(Granularity::Day));
        assert_eq!(bucket_count(r, Granularity::Day), 3);
    }

    #[test]
    fn an_unaligned_start_makes_a_partial_first_bucket() {
        let r = range(at(2026, 11, 20, 18, 30), at(2026, 11, 22, 0, 0));
        let b = buckets(r, Granularity::Day).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].start, r.start);
        assert_eq!(b[0].end, at(2026, 11, 21, 0, 0));
        assert!(b[0].is_partial(Granularity::Day));
        assert!(!b[1].is_partial(Granularity::Day));
    }

    #[test]
    fn a_boundary_at_the_end_adds_no_empty_bucket() {
        // The end is exclusive: a range ending exactly at midnight has no bucket after it.
        let r = range(at(2026, 11, 21, 0, 0), at(2026, 11, 22, 0, 0));
        assert_eq!(buckets(r, Granularity::Day).unwrap().len(), 1);
        assert_eq!(buckets(r, Granularity::Hour).unwrap().len(), 24);
        let one_minute = range(at(2026, 11, 21, 23, 59), at(2026, 11, 22, 0, 0));
        assert_eq!(buckets(one_minute, Granularity::Month).unwrap().len(), 1);
    }

    #[test]
    fn weeks_start_on_monday() {
        // 2026-11-22 is a Sunday; its ISO week began on Monday 2026-11-16.
        assert_eq!(
            floor(at(2026, 11, 22, 23, 59), Granularity::Week),
            at(2026, 11, 16, 0, 0)
        );
        assert_eq!(
            floor(at(2026, 11, 16, 0, 0), Granularity::Week),
            at(2026, 11, 16, 0, 0)
        );
        assert_eq!(
            floor(at(2026, 11, 23, 0, 0), Granularity::Week),
            at(2026, 11, 23, 0, 0)
        );
        // A week across a year end: Monday 2026-12-28 to Monday 2027-01-04.
        assert_eq!(
            floor(at(2027, 1, 1, 8, 0), Granularity::Week),
            at(2026, 12, 28, 0, 0)
        );
        let b = buckets(
            range(at(2026, 11, 1, 0, 0), at(2026, 12, 1, 0, 0)),
            Granularity::Week,
        )
        .unwrap();
        // Sun 1 Nov (partial), then weeks from 2, 9, 16, 23 and a partial from the 30th.
        assert_eq!(b.len(), 6);
        assert_eq!(b[0].end, at(2026, 11, 2, 0, 0));
        assert_eq!(b[1].start, at(2026, 11, 2, 0, 0));
        assert_eq!(b[1].end, at(2026, 11, 9, 0, 0));
        assert_eq!(b[5].start, at(2026, 11, 30, 0, 0));
        assert_eq!(b[5].end, at(2026, 12, 1, 0, 0));
        assert!(b[5].is_partial(Granularity::Week));
    }

    #[test]
    fn months_have_their_own_lengths() {
        let b = buckets(
            range(at(2028, 1, 1, 0, 0), at(2029, 1, 1, 0, 0)),
            Granularity::Month,
        )
        .unwrap();
        assert_eq!(b.len(), 12);
        let days: Vec<i64> = b.iter().map(|b| (b.end - b.start).num_days()).collect();
        // 2028 is a leap year.
        assert_eq!(days, [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]);
        assert_eq!(
            next_boundary(at(2027, 2, 14, 5, 0), Granularity::Month),
            at(2027, 3, 1, 0, 0)
        );
        assert_eq!(
            next_boundary(at(2026, 12, 31, 23, 0), Granularity::Month),
            at(2027, 1, 1, 0, 0)
        );
        assert_eq!(
            bucket_count(
                range(at(2026, 11, 15, 0, 0), at(2027, 2, 2, 0, 0)),
                Granularity::Month
            ),
            4
        );
    }

    #[test]
    fn other_time_zones_are_converted_to_utc() {
        // 01:30 in +02:00 is 23:30 UTC the day before: it belongs to that UTC day.
        let t = parse_instant("2026-11-22T01:30:00+02:00").unwrap();
        assert_eq!(t, at(2026, 11, 21, 23, 30));
        assert_eq!(floor(t, Granularity::Day), at(2026, 11, 21, 0, 0));
        let r = parse_range("2026-11-22T00:00:00+02:00..2026-11-22T00:00:00-03:00").unwrap();
        assert_eq!(r.start, at(2026, 11, 21, 22, 0));
        assert_eq!(r.end, at(2026, 11, 22, 3, 0));
        let b = buckets(r, Granularity::Day).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].end, at(2026, 11, 22, 0, 0));
    }

    #[test]
    fn too_many_buckets_is_refused_with_a_suggestion() {
        let r = range(at(2026, 8, 1, 0, 0), at(2026, 11, 1, 0, 0));
        let e = check(r, Granularity::Hour).unwrap_err();
        assert_eq!(
            e,
            RangeError::TooManyBuckets {
                count: 92 * 24,
                granularity: Granularity::Hour,
                coarser: Some(Granularity::Day),
            }
        );
        assert_eq!(
            e.to_string(),
            "2208 hourly buckets are more than 200: choose day or a shorter range"
        );
        assert_eq!(check(r, Granularity::Day), Ok(92));
        // Exactly at the cap is allowed.
        let cap = range(
            at(2026, 1, 1, 0, 0),
            at(2026, 1, 1, 0, 0) + Duration::hours(200),
        );
        assert_eq!(check(cap, Granularity::Hour), Ok(200));
        let over = range(cap.start, cap.end + Duration::minutes(1));
        assert!(check(over, Granularity::Hour).is_err());
    }

    #[test]
    fn empty_and_too_long_ranges_are_refused() {
        let t = at(2026, 11, 22, 0, 0);
        assert_eq!(check(range(t, t), Granularity::Day), Err(RangeError::Empty));
        assert_eq!(
            check(range(t, t - Duration::days(1)), Granularity::Day),
            Err(RangeError::Empty)
        );
        assert_eq!(
            check(range(t - Duration::days(367), t), Granularity::Month),
            Err(RangeError::TooLong { days: 367 })
        );
        assert_eq!(
            check(range(t - Duration::days(366), t), Granularity::Month),
            Ok(13)
        );
    }

    #[test]
    fn presets_end_now_and_start_on_whole_units() {
        let now = at(2026, 11, 22, 12, 34);
        let r = RangePreset::Last24Hours.resolve(now);
        assert_eq!(r.end, now);
        assert_eq!(r.start, at(2026, 11, 21, 13, 0));
        assert_eq!(bucket_count(r, Granularity::Hour), 24);
        let r = RangePreset::Last7Days.resolve(now);
        assert_eq!(r.start, at(2026, 11, 16, 0, 0));
        assert_eq!(bucket_count(r, Granularity::Day), 7);
        assert_eq!(check(r, Granularity::Hour), Ok(6 * 24 + 13));
        assert_eq!(
            bucket_count(RangePreset::Last90Days.resolve(now), Granularity::Day),
            90
        );
        // A fraction of a second rounds the end up: the current second is in the range.
        let r = RangePreset::Last24Hours.resolve(now + Duration::milliseconds(250));
        assert_eq!(r.end, now + Duration::seconds(1));
        // Exactly on a boundary: the whole previous units.
        let midnight = at(2026, 11, 22, 0, 0);
        let r = RangePreset::Last7Days.resolve(midnight);
        assert_eq!(r.start, at(2026, 11, 15, 0, 0));
        assert_eq!(bucket_count(r, Granularity::Day), 7);
    }

    #[test]
    fn custom_ranges_parse_as_typed() {
        let r = parse_range("2026-11-01..2026-11-22").unwrap();
        assert_eq!(r, range(at(2026, 11, 1, 0, 0), at(2026, 11, 22, 0, 0)));
        assert_eq!(parse_range("2026-11-01 2026-11-22").unwrap(), r);
        assert_eq!(parse_range("2026-11-01 to 2026-11-22").unwrap(), r);
        assert_eq!(parse_range(" 2026-11-01 → 2026-11-22 ").unwrap(), r);
        assert_eq!(
            parse_range("2026-11-01T06:00..2026-11-01T18:30:00Z").unwrap(),
            range(at(2026, 11, 1, 6, 0), at(2026, 11, 1, 18, 30))
        );
        assert!(parse_range("").unwrap_err().contains("type a start"));
        assert!(
            parse_range("2026-11-01")
                .unwrap_err()
                .contains("now the end")
        );
        assert!(
            parse_range("2026-11-01..")
                .unwrap_err()
                .contains("now the end")
        );
        assert_eq!(
            parse_range("2026-11-3x..2026-11-22").unwrap_err(),
            "start: `2026-11-3x` is not a date: use 2026-11-01 or 2026-11-01T12:00:00Z"
        );
        assert!(
            parse_range("2026-11-01..2026-13-01")
                .unwrap_err()
                .starts_with("end: ")
        );
        assert_eq!(
            parse_range("2026-11-22..2026-11-01").unwrap_err(),
            "the start must be before the end"
        );
    }

    #[test]
    fn buckets_are_described_readably() {
        let g = Granularity::Hour;
        let b = Bucket {
            start: at(2026, 11, 18, 14, 0),
            end: at(2026, 11, 18, 15, 0),
        };
        assert_eq!(describe_bucket(b, g), "Wed 18 Nov 14:00–15:00");
        let b = Bucket {
            start: at(2026, 11, 16, 0, 0),
            end: at(2026, 11, 23, 0, 0),
        };
        assert_eq!(
            describe_bucket(b, Granularity::Week),
            "week 47 (16 Nov – 22 Nov 2026)"
        );
        let b = Bucket {
            start: at(2026, 11, 22, 0, 0),
            end: at(2026, 11, 22, 12, 34),
        };
        assert_eq!(
            describe_bucket(b, Granularity::Day),
            "Sun 22 Nov 00:00–12:34"
        );
        let b = Bucket {
            start: at(2026, 11, 20, 18, 0),
            end: at(2026, 11, 23, 0, 0),
        };
        assert_eq!(
            describe_bucket(b, Granularity::Week),
            "2026-11-20 18:00 → 2026-11-23 00:00 UTC"
        );
        assert_eq!(
            short_label(at(2026, 11, 1, 0, 0), Granularity::Month),
            "Nov 2026"
        );
    }
}
