//! Metrics over a range, bucket by bucket: the bucket arithmetic ([`buckets`]) and the
//! fetcher that asks the service one metrics query per bucket, a few at a time. Shared by the
//! metrics view (F2) and `convo metrics --series`, so both split a range and query it alike.

pub mod buckets;

use futures_util::{Stream, StreamExt};

use crate::api::{ApiError, Client, Granularity, Metrics};
use buckets::{Bucket, RangeError, TimeRange};

/// Metrics queries in flight at once for one series.
pub const CONCURRENCY: usize = 4;

/// A complete bucket's answer (it ended before it was asked for, so it never changes), as the
/// local store keeps it and the metrics view reuses it.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownBucket {
    pub granularity: Granularity,
    pub bucket: Bucket,
    pub metrics: Box<Metrics>,
}

/// One bucket of a series and its query's answer.
#[derive(Debug, Clone)]
pub struct SeriesRow {
    pub bucket: Bucket,
    pub result: Result<Metrics, ApiError>,
}

/// Asks for the metrics of every range in `queries` at `g`, [`CONCURRENCY`] at a time, and
/// yields each answer with its key as soon as it arrives (not in query order).
pub fn query_all<K>(
    client: &Client,
    g: Granularity,
    queries: impl IntoIterator<Item = (K, TimeRange)>,
) -> impl Stream<Item = (K, Result<Metrics, ApiError>)> {
    futures_util::stream::iter(queries)
        .map(move |(key, r)| {
            let client = client.clone();
            async move { (key, client.metrics(r.start, r.end, Some(g)).await) }
        })
        .buffer_unordered(CONCURRENCY)
}

/// Queries every bucket of `range` at `g` and returns the answers in bucket order. Refuses
/// ranges the metrics view refuses (empty, over 366 days, over 200 buckets).
pub async fn fetch_series(
    client: &Client,
    range: TimeRange,
    g: Granularity,
) -> Result<Vec<SeriesRow>, RangeError> {
    let list = buckets::buckets(range, g)?;
    let queries = list.iter().enumerate().map(|(i, b)| (i, b.range()));
    let mut answers: Vec<(usize, Result<Metrics, ApiError>)> =
        query_all(client, g, queries).collect().await;
    answers.sort_by_key(|(i, _)| *i);
    let rows = list
        .into_iter()
        .zip(answers)
        .map(|(bucket, (_, result))| SeriesRow { bucket, result })
        .collect();
    Ok(rows)
}
