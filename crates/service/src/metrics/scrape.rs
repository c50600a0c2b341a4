//! What a scrape of `/metrics` reads from the running service (`Snapshot`, gathered by
//! `routes::prometheus`), encoded by the registry's collector as constant series.

use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::engine::EngineStats;
use crate::storage::postgres::{BatchUse, PoolUse};

/// The stream relay across replicas (PostgreSQL only).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RelayState {
    pub up: bool,
    /// The round trip of its connection's last probe.
    pub lag_seconds: f64,
}

/// One account's usage this billing period and its plan's limits.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccountUsage {
    pub account: i64,
    pub requests: u64,
    pub requests_limit: u64,
    pub tokens: u64,
    pub tokens_limit: u64,
    pub sessions: u64,
    pub sessions_limit: u64,
}

/// The service's state at a scrape.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub engine: EngineStats,
    pub replies_in_flight: u64,
    /// WebSocket listeners of session streams, account streams and the admin stream.
    pub listeners: (usize, usize, usize),
    pub relay: Option<RelayState>,
    pub pool: Option<PoolUse>,
    pub accounts_total: u64,
    pub accounts: Vec<AccountUsage>,
}

/// A per-account gauge: its name, its help, and its value of an account.
type AccountSeries = (&'static str, &'static str, fn(&AccountUsage) -> u64);

#[derive(Debug, Default)]
pub(super) struct Scraped {
    snapshot: Mutex<Snapshot>,
}

impl Scraped {
    pub(super) fn set(&self, snapshot: Snapshot) {
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = snapshot;
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabel {
    stream: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BatchLabels {
    operation: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AccountLabel {
    account: String,
}

fn gauge<N: prometheus_client::encoding::EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn counter<N: prometheus_client::encoding::EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A family of `kind`: one series per label set.
fn family<'a, L: EncodeLabelSet + 'a, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: prometheus_client::metrics::MetricType,
    series: impl IntoIterator<Item = (&'a L, M)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, metric) in series {
        metric.encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// A gauge family: one series per label set.
fn gauges<L: EncodeLabelSet, N: prometheus_client::encoding::EncodeGaugeValue + Copy>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(L, N)],
) -> Result<(), std::fmt::Error> {
    let series = series.iter().map(|(l, n)| (l, ConstGauge::new(*n)));
    family(
        encoder,
        name,
        help,
        prometheus_client::metrics::MetricType::Gauge,
        series,
    )
}

/// A counter family: one series per label set.
fn counters<L: EncodeLabelSet, N: prometheus_client::encoding::EncodeCounterValue + Copy>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(L, N)],
) -> Result<(), std::fmt::Error> {
    let series = series.iter().map(|(l, n)| (l, ConstCounter::new(*n)));
    family(
        encoder,
        name,
        help,
        prometheus_client::metrics::MetricType::Counter,
        series,
    )
}

/// Two series of a counter family.
type Pair = [(BatchLabels, u64); 2];

/// The batch series of one kind of operation: batches by outcome, operations by how they
/// were written.
fn batch_series(operation: &'static str, used: BatchUse) -> (Pair, Pair) {
    let label = |outcome| BatchLabels { operation, outcome };
    (
        [
            (label("written"), used.batches),
            (label("failed"), used.failed),
        ],
        [
            (label("batched"), used.batched),
            (label("alone"), used.alone),
        ],
    )
}

impl Collector for Scraped {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self
            .snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let engine = s.engine;
        counter(
            &mut e,
            "convo_engine_prompt_tokens",
            "Prompt tokens the engine read (not counting those reused from a cached state)",
            engine.prompt_tokens,
        )?;
        counter(
            &mut e,
            "convo_engine_reused_tokens",
            "Prompt tokens reused from a cached state instead of read again",
            engine.reused_tokens,
        )?;
        counter(
            &mut e,
            "convo_engine_generated_tokens",
            "Reply tokens the engine generated",
            engine.generated_tokens,
        )?;
        counter(
            &mut e,
            "convo_engine_prompt_seconds",
            "Seconds the engine spent reading prompts (prompt tokens/s = rate of tokens / rate of seconds)",
            engine.prompt_seconds,
        )?;
        counter(
            &mut e,
            "convo_engine_generation_seconds",
            "Seconds the engine spent generating replies",
            engine.generation_seconds,
        )?;
        gauge(
            &mut e,
            "convo_engine_queue_depth",
            "Replies waiting for a free slot of the engine",
            engine.queue_depth,
        )?;
        gauge(
            &mut e,
            "convo_engine_kv_slots_used",
            "Sessions whose state the engine holds",
            engine.kv_slots_used,
        )?;
        gauge(
            &mut e,
            "convo_engine_kv_slots",
            "Sessions whose state the engine can hold",
            engine.kv_slots_total,
        )?;
        gauge(
            &mut e,
            "convo_replies_in_flight",
            "Replies being generated on this replica",
            s.replies_in_flight,
        )?;
        let (sessions, accounts, admin) = s.listeners;
        gauges(
            &mut e,
            "convo_websocket_listeners",
            "WebSocket listeners on this replica, by stream",
            &[
                (StreamLabel { stream: "session" }, sessions as i64),
                (StreamLabel { stream: "account" }, accounts as i64),
                (StreamLabel { stream: "admin" }, admin as i64),
            ],
        )?;
        if let Some(relay) = s.relay {
            gauge(
                &mut e,
                "convo_relay_up",
                "1 when the stream relay to the other replicas is connected, else 0",
                i64::from(relay.up),
            )?;
            gauge(
                &mut e,
                "convo_relay_lag_seconds",
                "Round trip of the stream relay connection's last probe (every 5 s)",
                relay.lag_seconds,
            )?;
        }
        if let Some(pool) = s.pool {
            let in_use = pool.size.saturating_sub(pool.available);
            gauges(
                &mut e,
                "convo_db_pool_connections",
                "PostgreSQL connections of this replica's pool, by state",
                &[
                    (StateLabel { state: "in_use" }, in_use as i64),
                    (StateLabel { state: "idle" }, pool.available as i64),
                ],
            )?;
            gauge(
                &mut e,
                "convo_db_pool_max_connections",
                "Most connections this replica's pool opens",
                pool.max_size as i64,
            )?;
            gauge(
                &mut e,
                "convo_db_pool_waiting",
                "Requests waiting for a pooled connection",
                pool.waiting as i64,
            )?;
            let (start_batches, start_ops) = batch_series("start", pool.starts);
            let (reply_batches, reply_ops) = batch_series("reply", pool.replies);
            counters(
                &mut e,
                "convo_db_batches",
                "Transactions that wrote turn starts or replies together, by outcome (a failed one kept nothing)",
                &[start_batches, reply_batches].concat(),
            )?;
            counters(
                &mut e,
                "convo_db_batched_operations",
                "Turn starts and replies written in a batch, or alone (one per transaction)",
                &[start_ops, reply_ops].concat(),
            )?;
            counters(
                &mut e,
                "convo_db_batch_busy_seconds",
                "Seconds a batch of turn starts or replies (or one that came alone) was under way, by operation; one at a time, so its rate is the share of time that kind's writer was busy (near 1: its batches run back to back)",
                &[
                    (
                        OperationLabel { operation: "start" },
                        pool.starts.busy.as_secs_f64(),
                    ),
                    (
                        OperationLabel { operation: "reply" },
                        pool.replies.busy.as_secs_f64(),
                    ),
                ],
            )?;
            gauge(
                &mut e,
                "convo_history_cache_sessions",
                "Sessions whose history this replica holds to read only what comes after it",
                pool.histories.sessions as i64,
            )?;
            gauge(
                &mut e,
                "convo_history_cache_bytes",
                "Text of the histories this replica holds, with a fixed cost per message and per session",
                pool.histories.bytes as i64,
            )?;
        }
        gauge(
            &mut e,
            "convo_accounts",
            "Accounts of the deployment",
            s.accounts_total as i64,
        )?;
        let series = |f: fn(&AccountUsage) -> u64| -> Vec<(AccountLabel, i64)> {
            s.accounts
                .iter()
                .map(|a| {
                    (
                        AccountLabel {
                            account: a.account.to_string(),
                        },
                        i64::try_from(f(a)).unwrap_or(i64::MAX),
                    )
                })
                .collect()
        };
        let per_account: [AccountSeries; 6] = [
            (
                "convo_account_requests_used",
                "Requests the account made this billing period",
                |a| a.requests,
            ),
            (
                "convo_account_requests_limit",
                "Requests the account's plan allows per billing period",
                |a| a.requests_limit,
            ),
            (
                "convo_account_tokens_used",
                "Tokens of the account's messages this billing period",
                |a| a.tokens,
            ),
            (
                "convo_account_tokens_limit",
                "Tokens the account's plan allows per billing period",
                |a| a.tokens_limit,
            ),
            (
                "convo_account_sessions_used",
                "Sessions the account has now",
                |a| a.sessions,
            ),
            (
                "convo_account_sessions_limit",
                "Sessions the account's plan allows at once",
                |a| a.sessions_limit,
            ),
        ];
        for (name, help, value) in per_account {
            gauges(&mut e, name, help, &series(value))?;
        }
        Ok(())
    }
}
