//! `convo metrics`: aggregate metrics over a date range, of the configured server's account,
//! or with no base URL of the embedded service's local account (`account_reader.rs`).
use std::process::ExitCode;

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, Timelike, Utc};
use comfy_table::Cell;

use super::account_reader::AccountReader;
use super::{codes, fail, fail_api, load_config, out, print_json, sanitize, table};
use convo_client::api::{Granularity, Metrics};
use convo_client::config::Config;
use convo_client::format::group_digits;
use convo_wire::exit;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Dates are ISO 8601 date-times (2026-11-01T00:00:00Z) or dates (2026-11-01, \
                        midnight UTC). The range is [start, end).\n\nExample:\n  \
                        convo metrics --start 2026-11-01 --end 2026-12-01 --json | jq .tokens.total"
)]
pub struct MetricsArgs {
    /// Start of the range (default: 7 days before the end)
    #[arg(long, value_parser = parse_date, value_name = "DATE")]
    pub start: Option<DateTime<Utc>>,
    /// End of the range, exclusive (default: now)
    #[arg(long, value_parser = parse_date, value_name = "DATE")]
    pub end: Option<DateTime<Utc>>,
    /// Bucket size: hour, day, week or month (the service's default: day)
    #[arg(long, value_parser = parse_granularity)]
    pub granularity: Option<Granularity>,
    /// One row per bucket of the granularity (one query each), as the metrics view charts it;
    /// complete buckets answered before come from the local store, not asked again
    #[arg(long)]
    pub series: bool,
    /// With --series: ask for every bucket, also the complete ones kept from earlier runs
    #[arg(long, requires = "series")]
    pub fresh: bool,
    /// Print the Metrics object (with --series, the array of them) as JSON
    #[arg(long)]
    pub json: bool,
}

fn parse_granularity(s: &str) -> Result<Granularity, String> {
    s.parse()
}

/// An ISO 8601 date-time with offset, a date-time without one (UTC), or a date (midnight UTC).
pub fn parse_date(s: &str) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S") {
        return Ok(t.and_utc());
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M") {
        return Ok(t.and_utc());
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc());
    }
    Err(format!(
        "`{s}` is not a date: use 2026-11-01 or 2026-11-01T12:00:00Z"
    ))
}

/// Now, rounded up to the next whole second: a plain date-time in the query that still
/// covers everything that happened up to this moment.
fn now_rounded_up() -> DateTime<Utc> {
    let now = Utc::now();
    let whole = now.with_nanosecond(0).unwrap_or(now);
    if whole < now {
        whole + Duration::seconds(1)
    } else {
        whole
    }
}

pub async fn run(args: MetricsArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let end = args.end.unwrap_or_else(now_rounded_up);
    let start = args.start.unwrap_or(end - Duration::days(7));
    if start > end {
        return fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            format_args!("--start ({start}) is after --end ({end})"),
        );
    }
    let config = match load_config(&global) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let reader = match AccountReader::start(&config).await {
        Ok(reader) => reader,
        Err(code) => return code,
    };
    let code = report(&args, start, end, &config, &reader).await;
    reader.finish().await;
    code
}

/// The report of `[start, end)` from the account `reader` asks.
async fn report(
    args: &MetricsArgs,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    config: &Config,
    reader: &AccountReader,
) -> ExitCode {
    let client = &reader.client;
    if args.series {
        let g = args.granularity.unwrap_or_default();
        // Without the store the series is only asked for in full: a warning, not a failure.
        let store = match convo_client::local_store::Store::open(&config.paths.store_file()) {
            Ok(s) => Some(s),
            Err(e) => {
                super::warn(format_args!("complete buckets are not kept: {e}"));
                None
            }
        };
        let kept = super::series::Kept {
            store,
            account: reader.account(),
            fresh: args.fresh,
        };
        return super::series::run_series(client, start, end, g, args.json, kept).await;
    }
    match client.metrics(start, end, args.granularity).await {
        Ok(m) if args.json => print_json(&m),
        Ok(m) => {
            out(render(&m));
            ExitCode::SUCCESS
        }
        Err(e) => fail_api(&e),
    }
}

/// The human-readable report.
pub fn render(m: &Metrics) -> String {
    let mut t = table(&["metric", "value"], &[1]);
    let rows: [(&str, String); 11] = [
        ("sessions total", group_digits(m.sessions.total)),
        ("sessions active", group_digits(m.sessions.active)),
        (
            "average session duration",
            format!("{:.1} s", m.sessions.average_duration),
        ),
        ("messages total", group_digits(m.messages.total)),
        (
            "messages per session",
            format!("{:.2}", m.messages.average_per_session),
        ),
        ("user messages", group_digits(m.messages.user_messages)),
        (
            "assistant messages",
            group_digits(m.messages.assistant_messages),
        ),
        ("tokens total", group_digits(m.tokens.total)),
        ("prompt tokens", group_digits(m.tokens.prompt)),
        ("completion tokens", group_digits(m.tokens.completion)),
        (
            "tokens per message",
            format!("{:.1}", m.tokens.average_per_message),
        ),
    ];
    for (name, value) in rows {
        t.add_row(vec![Cell::new(name), Cell::new(value)]);
    }
    format!(
        "period: {} – {} (by {})\n{t}\n",
        sanitize(&m.period.start),
        sanitize(&m.period.end),
        m.period.granularity
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_in_several_forms() {
        let midnight = parse_date("2026-11-01").unwrap();
        assert_eq!(midnight.to_rfc3339(), "2026-11-01T00:00:00+00:00");
        assert_eq!(parse_date("2026-11-01T02:00:00+02:00").unwrap(), midnight);
        assert_eq!(parse_date("2026-11-01T00:00:00").unwrap(), midnight);
        assert!(parse_date("yesterday").unwrap_err().contains("not a date"));
    }
}
