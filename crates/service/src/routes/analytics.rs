//! `GET /v1/analytics/usage` and `GET /v1/analytics/metrics`, computed from stored data.

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};

use crate::error::HttpError;
use crate::paths::{METRICS, USAGE};
use crate::storage::Storage;
use crate::storage::rows::MetricCounts;
use crate::{AppState, auth, time};
use convo_core::Account;
use convo_wire::{
    BillingPeriod, ContextWindow, Granularity, MessageMetrics, Metrics, MetricsPeriod, Quota,
    SessionMetrics, SessionQuota, TokenMetrics, Usage,
};

/// Longest accepted query string, in bytes.
pub const MAX_QUERY_BYTES: usize = 2048;
/// Longest metrics range.
pub const MAX_RANGE_DAYS: i64 = 366;

/// used / limit × 100, rounded to two decimals.
pub fn percentage(used: u64, limit: u64) -> f64 {
    if limit == 0 {
        return 0.0;
    }
    (used as f64 / limit as f64 * 10_000.0).round() / 100.0
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        (num as f64 / den as f64 * 100.0).round() / 100.0
    }
}

pub(crate) async fn usage(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Json<Usage>, HttpError> {
    let account = auth::admit(&state, &headers, "GET", USAGE).await?;
    Ok(Json(usage_of(&state, account).await?))
}

/// The account's usage now, as `GET /v1/analytics/usage` answers it (and the account
/// stream's `hello` and `usage` events carry it).
pub(crate) async fn usage_of(state: &AppState, account: Account) -> Result<Usage, HttpError> {
    let (start, end) = time::billing_period(Utc::now());
    let counts = state
        .store
        .usage_counts(account.id, start.timestamp_millis())
        .await?;
    let limits = account.tier.limits();
    Ok(Usage {
        billing_period: BillingPeriod {
            start: time::to_rfc3339(start),
            end: time::to_rfc3339(end),
        },
        requests: Quota {
            used: counts.requests,
            limit: limits.requests,
            percentage: percentage(counts.requests, limits.requests),
        },
        tokens: Quota {
            used: counts.tokens,
            limit: limits.tokens,
            percentage: percentage(counts.tokens, limits.tokens),
        },
        sessions: SessionQuota {
            active: counts.sessions,
            limit: limits.sessions,
            percentage: percentage(counts.sessions, limits.sessions),
        },
        tier: account.tier.as_str().to_string(),
        // An extension: clients show the window before a send is refused.
        context: Some(ContextWindow {
            max_tokens: state.context_limit(),
        }),
    })
}

/// A validated metrics query.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsQuery {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub granularity: Granularity,
}

pub fn parse_metrics_query(raw: Option<&str>) -> Result<MetricsQuery, HttpError> {
    let raw = raw.unwrap_or("");
    if raw.len() > MAX_QUERY_BYTES {
        return Err(HttpError::invalid(format!(
            "the query string is longer than {MAX_QUERY_BYTES} bytes"
        )));
    }
    let (mut start, mut end, mut granularity) = (None, None, None);
    for (name, value) in url::form_urlencoded::parse(raw.as_bytes()) {
        let slot = match name.as_ref() {
            "startDate" => &mut start,
            "endDate" => &mut end,
            "granularity" => &mut granularity,
            _ => continue,
        };
        if slot.is_some() {
            return Err(HttpError::invalid(format!(
                "`{name}` is given more than once"
            )));
        }
        *slot = Some(value.into_owned());
    }
    let date = |name: &str, value: Option<String>| -> Result<DateTime<Utc>, HttpError> {
        let value = value.ok_or_else(|| HttpError::invalid(format!("`{name}` is required")))?;
        time::parse_iso8601(&value).ok_or_else(|| {
            HttpError::invalid(format!(
                "`{name}` must be an ISO 8601 date-time such as 2026-11-01T00:00:00Z"
            ))
        })
    };
    let start = date("startDate", start)?;
    let end = date("endDate", end)?;
    let granularity = match granularity {
        None => Granularity::Day,
        Some(g) => g.parse::<Granularity>().map_err(|_| {
            HttpError::invalid("`granularity` must be one of hour, day, week, month")
        })?,
    };
    if start > end {
        return Err(HttpError::invalid("`startDate` is after `endDate`"));
    }
    if end - start > chrono::Duration::days(MAX_RANGE_DAYS) {
        return Err(HttpError::invalid(format!(
            "the range from `startDate` to `endDate` is longer than {MAX_RANGE_DAYS} days"
        )));
    }
    Ok(MetricsQuery {
        start,
        end,
        granularity,
    })
}

pub fn metrics_from_counts(q: &MetricsQuery, m: &MetricCounts) -> Metrics {
    let tokens_total = m.prompt_tokens + m.completion_tokens;
    Metrics {
        period: MetricsPeriod {
            start: time::to_rfc3339(q.start),
            end: time::to_rfc3339(q.end),
            granularity: q.granularity,
        },
        sessions: SessionMetrics {
            total: m.sessions_total,
            active: m.sessions_active,
            average_duration: if m.sessions_active == 0 {
                0.0
            } else {
                (m.duration_ms_sum as f64 / 1000.0 / m.sessions_active as f64 * 100.0).round()
                    / 100.0
            },
        },
        messages: MessageMetrics {
            total: m.messages_total,
            average_per_session: ratio(m.messages_total, m.sessions_active),
            user_messages: m.user_messages,
            assistant_messages: m.assistant_messages,
        },
        tokens: TokenMetrics {
            total: tokens_total,
            prompt: m.prompt_tokens,
            completion: m.completion_tokens,
            average_per_message: ratio(tokens_total, m.messages_total),
        },
    }
}

pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<Metrics>, HttpError> {
    let account = auth::admit(&state, &headers, "GET", METRICS).await?;
    let query = parse_metrics_query(raw.as_deref())?;
    let (start, end) = (query.start.timestamp_millis(), query.end.timestamp_millis());
    let counts = state.store.metric_counts(account.id, start, end).await?;
    Ok(Json(metrics_from_counts(&query, &counts)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_are_decimal_percent() {
        assert_eq!(percentage(425, 1000), 42.5);
        assert_eq!(percentage(1, 3), 33.33);
        assert_eq!(percentage(0, 0), 0.0);
    }

    #[test]
    fn metrics_queries_are_validated() {
        let ok = parse_metrics_query(Some(
            "startDate=2026-11-01T00:00:00Z&endDate=2026-11-02T00:00:00Z",
        ))
        .unwrap();
        assert_eq!(ok.granularity, Granularity::Day);
        let msg = |q: &str| parse_metrics_query(Some(q)).unwrap_err().body.message;
        assert!(msg("endDate=2026-11-02").contains("`startDate` is required"));
        assert!(msg("startDate=x&endDate=2026-11-02").contains("`startDate` must be"));
        assert!(msg("startDate=2026-11-03&endDate=2026-11-02").contains("after"));
        assert!(msg("startDate=2024-01-01&endDate=2026-11-02").contains("366"));
        assert!(
            msg("startDate=2026-11-01&endDate=2026-11-02&granularity=year")
                .contains("`granularity`")
        );
        assert!(msg(&"a".repeat(3000)).contains("query string"));
    }
}
