//! Metrics over a range, bucket by bucket: the bucket arithmetic ([`buckets`]) and the
//! fetcher that asks the service one metrics query per bucket, a few at a time. Shared by the
//! metrics view (F2) and `convo metrics --series`, so both split a range and query it alike.

pub mod buckets;

use futures_util::{Stream, StreamExt};

use crate::api::{ApiError, Client, Granularity, Metrics};
use buckets::{Bucket, RangeError, TimeRange};

/// Metrics queries in flight at once for one series.
pub const CONCURRENCY: usize = 4;

/// How long after its end a bucket's numbers are taken as final: a margin for clocks that
/// differ, writes in flight and turns rolled back (a failed reply's ledger row goes within
/// seconds; a stopped replica's within 20).
pub const COMPLETE_AFTER: chrono::Duration = chrono::Duration::minutes(5);

/// Whether `bucket`, asked for at `asked_at`, is complete: a whole unit of `g` that ended
/// [`COMPLETE_AFTER`] before. Its numbers never change, so they are kept, not asked again.
pub fn is_complete(
    bucket: Bucket,
    g: Granularity,
    asked_at: chrono::DateTime<chrono::Utc>,
) -> bool {
    !bucket.is_partial(g) && bucket.end + COMPLETE_AFTER <= asked_at
}

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

/// Queries every bucket of `range` at `g` but those in `kept` (complete ones answered before,
/// taken from it), and returns the answers in bucket order, with the buckets this fetch found
/// complete, to keep. Refuses ranges the metrics view refuses (empty, over 366 days, over 200
/// buckets).
pub async fn fetch_series(
    client: &Client,
    range: TimeRange,
    g: Granularity,
    kept: &[KnownBucket],
) -> Result<(Vec<SeriesRow>, Vec<KnownBucket>), RangeError> {
    let list = buckets::buckets(range, g)?;
    let asked_at = chrono::Utc::now();
    let known = |b: &Bucket| {
        kept.iter()
            .find(|k| k.granularity == g && k.bucket == *b)
            .map(|k| k.metrics.clone())
    };
    let queries = (list.iter().enumerate())
        .filter(|(_, b)| known(b).is_none())
        .map(|(i, b)| (i, b.range()));
    let mut answers: std::collections::HashMap<usize, Result<Metrics, ApiError>> =
        query_all(client, g, queries).collect().await;
    let mut complete = Vec::new();
    let rows = (list.into_iter().enumerate())
        .map(|(i, bucket)| {
            let result = match (known(&bucket), answers.remove(&i)) {
                (Some(m), _) => Ok(*m),
                (None, Some(result)) => result,
                (None, None) => Err(ApiError::Network("no answer".into())),
            };
            if let Ok(m) = &result
                && known(&bucket).is_none()
                && is_complete(bucket, g, asked_at)
            {
                complete.push(KnownBucket {
                    granularity: g,
                    bucket,
                    metrics: Box::new(m.clone()),
                });
            }
            SeriesRow { bucket, result }
        })
        .collect();
    Ok((rows, complete))
}
