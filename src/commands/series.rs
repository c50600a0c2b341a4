//! What `convo metrics --series` and `convo wallet` print, built like the TUI's views: the
//! per-bucket series from one metrics query per bucket (a few at a time, the same bucket math
//! as the metrics view), and a wallet in the wallet view's sections.

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use comfy_table::Cell;
use serde_json::{Value, json};

use super::{codes, fail, fail_buckets, out, print_json, record, sanitize, table, warn};
use convo_client::api::{ApiError, Client, Granularity, Wallet};
use convo_client::format::{RiskBand, amount, gauge_bar, group_digits, usd};
use convo_client::local_store::Store;
use convo_client::series::buckets::{self, TimeRange};
use convo_client::series::{KnownBucket, SeriesRow, fetch_series};
use convo_wire::exit;

/// The complete buckets of earlier runs, in the local store under the account's id.
pub struct Kept {
    /// None when the store could not be opened: every bucket is asked for.
    pub store: Option<Store>,
    /// The account's id in the store (`AccountReader::account`: the TUI's for the same target).
    pub account: String,
    /// `--fresh`: ask for every bucket (the answers are still kept).
    pub fresh: bool,
}

impl Kept {
    async fn read(&self, account: &str) -> Vec<KnownBucket> {
        let Some(store) = self.store.clone().filter(|_| !self.fresh) else {
            return Vec::new();
        };
        let account = account.to_string();
        match tokio::task::spawn_blocking(move || store.known_buckets(&account)).await {
            Ok(Ok(kept)) => kept,
            Ok(Err(e)) => {
                warn(format_args!("the kept buckets could not be read: {e}"));
                Vec::new()
            }
            Err(e) => {
                warn(format_args!("the kept buckets could not be read: {e}"));
                Vec::new()
            }
        }
    }
}

/// `convo metrics --series`: prints the per-bucket table (or with `json` the array) of
/// `[start, end)` at `g`, complete buckets of earlier runs (the TUI's F2 among them) taken
/// from the local store and the new ones kept there. Exit status 2 for a range the view
/// would refuse, and when a bucket failed, the status of its error (1 service, 3 network)
/// after printing what came.
pub async fn run_series(
    client: &Client,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    g: Granularity,
    json: bool,
    kept: Kept,
) -> ExitCode {
    let range = TimeRange { start, end };
    if let Err(e) = buckets::check(range, g) {
        return fail(exit::USAGE_ERROR, codes::INVALID_ARGUMENT, e);
    }
    // Buckets that have not begun have no metrics yet: they are neither asked for nor shown
    // (as zeros they would read as quiet hours), and stderr says where the series stops.
    let (range, not_yet) = happened(range, g, Utc::now());
    match not_yet {
        Some(_) if range.start >= range.end => {
            warn("the range has not begun yet: no bucket to show")
        }
        Some(from) => warn(format_args!(
            "the buckets from {} on have not happened yet and are not shown",
            buckets::short_label(from, g)
        )),
        None => {}
    }
    if range.start >= range.end {
        return if json {
            print_json(&Value::Array(Vec::new()))
        } else {
            ExitCode::SUCCESS
        };
    }
    let account = kept.account.clone();
    let known = kept.read(&account).await;
    let (rows, complete) = match fetch_series(client, range, g, &known).await {
        Ok(r) => r,
        Err(e) => return fail(exit::USAGE_ERROR, codes::INVALID_ARGUMENT, e),
    };
    if let Some(store) = kept.store.filter(|_| !complete.is_empty()) {
        record(store, "the complete buckets", move |s| {
            s.keep_buckets(&account, &complete)
        })
        .await;
    }
    let printed = if json {
        print_json(&series_json(&rows, g))
    } else {
        out(series_table(&rows, g));
        ExitCode::SUCCESS
    };
    match first_failure(&rows) {
        Some((n, e)) => fail_buckets(n, rows.len(), e),
        None => printed,
    }
}

/// The part of `range` that has begun by `now` (up to the end of the bucket holding `now`), and
/// where the rest starts when some of it has not.
fn happened(
    range: TimeRange,
    g: Granularity,
    now: DateTime<Utc>,
) -> (TimeRange, Option<DateTime<Utc>>) {
    let current_end = buckets::next_boundary(now, g);
    if range.end <= current_end {
        return (range, None);
    }
    let from = current_end.max(range.start);
    let end = from.min(range.end);
    (
        TimeRange {
            start: range.start.min(end),
            end,
        },
        Some(from),
    )
}

fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The series as a table: one row per bucket; a failed bucket says so instead of numbers.
pub fn series_table(rows: &[SeriesRow], g: Granularity) -> String {
    let mut t = table(
        &[
            "bucket (UTC)",
            "messages",
            "user",
            "assistant",
            "tokens",
            "prompt",
            "completion",
            "active sessions",
        ],
        &[1, 2, 3, 4, 5, 6, 7],
    );
    for row in rows {
        // A partial bucket shows its real bounds, as the view's bottom line does.
        let label = if row.bucket.is_partial(g) {
            buckets::describe_bucket(row.bucket, g)
        } else {
            buckets::bucket_label(row.bucket, g)
        };
        let mut cells = vec![Cell::new(label)];
        match &row.result {
            Ok(m) => cells.extend(
                [
                    m.messages.total,
                    m.messages.user_messages,
                    m.messages.assistant_messages,
                    m.tokens.total,
                    m.tokens.prompt,
                    m.tokens.completion,
                    m.sessions.active,
                ]
                .into_iter()
                .map(|v| Cell::new(group_digits(v))),
            ),
            Err(e) => cells.push(Cell::new(format!("failed: {}", sanitize(&e.to_string())))),
        }
        t.add_row(cells);
    }
    format!("{t}\n")
}

/// The series as a JSON array: each bucket's Metrics object as the service sent it, or for a
/// failed bucket `{"period": {...}, "error": {"code", "message"}}`.
pub fn series_json(rows: &[SeriesRow], g: Granularity) -> Value {
    Value::Array(
        rows.iter()
            .map(|row| match &row.result {
                Ok(m) => serde_json::to_value(m).unwrap_or(Value::Null),
                Err(e) => json!({
                    "period": {
                        "start": iso(row.bucket.start),
                        "end": iso(row.bucket.end),
                        "granularity": g.as_str(),
                    },
                    "error": {"code": e.code(), "message": e.to_string()},
                }),
            })
            .collect(),
    )
}

/// The first failure of a series, if any bucket failed.
pub fn first_failure(rows: &[SeriesRow]) -> Option<(usize, &ApiError)> {
    let failed: Vec<&ApiError> = rows
        .iter()
        .filter_map(|r| r.result.as_ref().err())
        .collect();
    failed.first().map(|e| (failed.len(), *e))
}

/// A wallet in the wallet view's sections: who (id, alias, address), balance, risk as a gauge
/// with its band, factors and tags; token accounts by USD value with their total; NFTs with
/// collection and floor price.
pub fn wallet_report(w: &Wallet) -> String {
    let band = RiskBand::of(w.risk_score);
    let (filled, rest) = gauge_bar(w.risk_score / 100.0, 20);
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter()
                .map(|s| format!("[{}]", sanitize(s)))
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    let mut out = String::new();
    let mut t = table(&["wallet", sanitize(&w.wallet_id).as_ref()], &[]);
    for (k, v) in [
        ("alias", sanitize(&w.alias).into_owned()),
        ("address", sanitize(&w.address).into_owned()),
        ("balance", format!("{} SOL", amount(w.balance, 6))),
        (
            "risk",
            format!(
                "{filled}{rest} {}/100 {} risk",
                amount(w.risk_score, 1),
                band.label()
            ),
        ),
        ("risk factors", list(&w.risk_factors)),
        ("tags", list(&w.tags)),
    ] {
        t.add_row(vec![Cell::new(k), Cell::new(v)]);
    }
    out.push_str(&format!("{t}\n"));

    let mut accounts: Vec<_> = w.token_accounts.iter().collect();
    accounts.sort_by(|a, b| b.usd_value.total_cmp(&a.usd_value));
    let total: f64 = accounts.iter().map(|a| a.usd_value).sum();
    out.push_str(&format!(
        "\ntoken accounts ({}) · total {}\n",
        accounts.len(),
        usd(total)
    ));
    if accounts.is_empty() {
        out.push_str("none\n");
    } else {
        let mut t = table(
            &["symbol", "balance", "USD value", "share", "mint"],
            &[1, 2, 3],
        );
        for a in &accounts {
            let share = if total > 0.0 {
                a.usd_value / total * 100.0
            } else {
                0.0
            };
            t.add_row(vec![
                Cell::new(sanitize(&a.symbol)),
                Cell::new(amount(a.balance, 4)),
                Cell::new(usd(a.usd_value)),
                Cell::new(format!("{share:.1}%")),
                Cell::new(sanitize(&a.mint)),
            ]);
        }
        t.add_row(vec![
            Cell::new("total"),
            Cell::new(""),
            Cell::new(usd(total)),
            Cell::new(""),
            Cell::new(""),
        ]);
        out.push_str(&format!("{t}\n"));
    }

    let mut nfts: Vec<_> = w.nfts.iter().collect();
    nfts.sort_by(|a, b| b.floor_price.total_cmp(&a.floor_price));
    let floor: f64 = nfts.iter().map(|n| n.floor_price).sum();
    out.push_str(&format!(
        "\nNFTs ({}) · floor total {} SOL\n",
        nfts.len(),
        amount(floor, 3)
    ));
    if nfts.is_empty() {
        out.push_str("none\n");
    } else {
        let mut t = table(&["name", "collection", "floor price", "mint"], &[2]);
        for n in &nfts {
            t.add_row(vec![
                Cell::new(sanitize(&n.name)),
                Cell::new(sanitize(&n.collection)),
                Cell::new(format!("{} SOL", amount(n.floor_price, 3))),
                Cell::new(sanitize(&n.mint)),
            ]);
        }
        out.push_str(&format!("{t}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use convo_client::api::Metrics;
    use convo_client::series::buckets::Bucket;

    fn metrics(n: u64) -> Metrics {
        serde_json::from_value(json!({
            "period": {"start": "2026-11-22T00:00:00.000Z", "end": "2026-11-22T01:00:00.000Z", "granularity": "hour"},
            "sessions": {"total": 1, "active": 1, "averageDuration": 3.0},
            "messages": {"total": n, "averagePerSession": n as f64, "userMessages": n / 2, "assistantMessages": n - n / 2},
            "tokens": {"total": n * 1000, "prompt": n * 400, "completion": n * 600, "averagePerMessage": 1000.0}
        }))
        .unwrap()
    }

    fn rows() -> Vec<SeriesRow> {
        let at = |h| Utc.with_ymd_and_hms(2026, 11, 22, h, 0, 0).unwrap();
        vec![
            SeriesRow {
                bucket: Bucket {
                    start: at(0),
                    end: at(1),
                },
                result: Ok(metrics(4)),
            },
            SeriesRow {
                bucket: Bucket {
                    start: at(1),
                    end: at(2),
                },
                result: Err(ApiError::Network("cannot connect".into())),
            },
            SeriesRow {
                bucket: Bucket {
                    start: at(2),
                    end: at(2) + chrono::Duration::minutes(30),
                },
                result: Ok(metrics(2)),
            },
        ]
    }

    #[test]
    fn the_table_has_a_row_per_bucket_and_says_which_failed() {
        let text = series_table(&rows(), Granularity::Hour);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("Nov") || l.contains("2026-"))
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].contains("Sun 22 Nov 00:00") && lines[0].contains("4,000"),
            "{text}"
        );
        assert!(
            lines[1].contains("failed: network error: cannot connect"),
            "{text}"
        );
        // The partial last bucket shows its real bounds.
        assert!(lines[2].contains("Sun 22 Nov 02:00–02:30"), "{text}");
    }

    #[test]
    fn json_keeps_each_bucket_and_marks_failures() {
        let v = series_json(&rows(), Granularity::Hour);
        let a = v.as_array().unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[0]["messages"]["total"], 4);
        assert_eq!(a[1]["error"]["code"], "network");
        assert_eq!(a[1]["period"]["start"], "2026-11-22T01:00:00Z");
        assert_eq!(a[1]["period"]["granularity"], "hour");
        assert!(a[1].get("messages").is_none());
        assert_eq!(
            first_failure(&rows()).map(|(n, e)| (n, e.code())),
            Some((1, "network"))
        );
    }

    #[test]
    fn the_wallet_report_has_the_views_sections() {
        let all: Vec<Wallet> =
            serde_json::from_str(include_str!("../../assets/wallets.json")).unwrap();
        let flagged = all.iter().find(|w| w.wallet_id == "flagged").unwrap();
        let text = wallet_report(flagged);
        assert!(text.contains("92/100 high risk"), "{text}");
        assert!(text.contains("[mixer_interaction]"), "{text}");
        assert!(
            text.contains("token accounts (3) · total $302,340.00"),
            "{text}"
        );
        assert!(text.contains("NFTs (1)"), "{text}");
        // Sorted by USD value: BONK ($207,900) before USDC ($72,000).
        let bonk = text.find("BONK").unwrap();
        let usdc = text.find("USDC").unwrap();
        assert!(bonk < usdc, "{text}");
        let empty = all.iter().find(|w| w.wallet_id == "empty").unwrap();
        let text = wallet_report(empty);
        assert!(
            text.contains("token accounts (0) · total $0.00\nnone"),
            "{text}"
        );
        assert!(text.contains("0/100 low risk"), "{text}");
    }

    #[test]
    fn buckets_that_have_not_begun_are_cut_off() {
        let at = |d, h| Utc.with_ymd_and_hms(2026, 11, d, h, 0, 0).unwrap();
        let now = at(25, 18) + chrono::Duration::minutes(57);
        let range = |start, end| TimeRange { start, end };
        // Over by days: up to the end of today, the rest from tomorrow on.
        assert_eq!(
            happened(range(at(20, 0), at(30, 0)), Granularity::Day, now),
            (range(at(20, 0), at(26, 0)), Some(at(26, 0)))
        );
        // By hour: today's 18:00 bucket is shown, 19:00 on is not.
        assert_eq!(
            happened(range(at(25, 0), at(26, 0)), Granularity::Hour, now),
            (range(at(25, 0), at(25, 19)), Some(at(25, 19)))
        );
        // All in the past: unchanged.
        let past = range(at(1, 0), at(20, 0));
        assert_eq!(happened(past, Granularity::Day, now), (past, None));
        // All in the future: nothing.
        let (r, from) = happened(range(at(27, 0), at(29, 0)), Granularity::Day, now);
        assert!(r.start >= r.end, "{r:?}");
        assert_eq!(from, Some(at(27, 0)));
    }
}
