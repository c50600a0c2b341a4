//! What `GET /metrics` exposes, with `prometheus-client` (the Prometheus text format 0.0.4):
//! the HTTP requests by route template and status with their latency (counted by the router's
//! `record` layer), and what each scrape reads from the running service (`scrape.rs`: the
//! engine's counters, WebSocket listeners, replies in flight, the relay, the database pool,
//! every account's usage). The names are listed in docs/service.md, "Operators"; the alert
//! rules and the dashboard in `assets/ops/` use them.

mod scrape;

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use scrape::{AccountUsage, RelayState, Snapshot};

/// Per-account series are kept for at most this many accounts, those nearest a limit (the
/// highest share); `convo_accounts` says how many there are in all.
pub const MAX_ACCOUNT_SERIES: u32 = 1000;

/// The route label of a request that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// The route label of a path template: its parameters written `:name`
/// (`/v1/sessions/:sessionId/messages`), so that PromQL regular expressions and text parsers
/// need no braces inside label values.
pub fn route_label(template: &str) -> String {
    template.replace('{', ":").replace('}', "")
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

/// Latency buckets: 0.5 ms doubling to about 16 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The service's metrics: one registry, its request counters, and the collector of what a
/// scrape reads.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    scraped: Arc<scrape::Scraped>,
    /// One scrape at a time sets the snapshot and encodes it.
    scraping: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "convo_http_requests",
            "HTTP requests answered, by method, route template and status",
            requests.clone(),
        );
        let latency = Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "convo_http_request_duration_seconds",
            "Time from a request's arrival to its answer's head, by method and route template",
            latency.clone(),
        );
        let scraped = Arc::new(scrape::Scraped::default());
        registry.register_collector(Box::new(scraped.clone()));
        Metrics {
            registry,
            requests,
            latency,
            scraped,
            scraping: Mutex::new(()),
        }
    }

    /// One request answered: `route` is the matched path template (`UNMATCHED` for none).
    pub fn record(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_string(),
                route: route.to_string(),
                status: status.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels {
                method: method.to_string(),
                route: route.to_string(),
            })
            .observe(seconds);
    }

    /// Everything in the Prometheus text format, with `snapshot` as what the service holds now.
    pub fn encode(&self, snapshot: Snapshot) -> String {
        let _one = self.scraping.lock().unwrap_or_else(|p| p.into_inner());
        self.scraped.set(snapshot);
        let mut out = String::new();
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        out
    }
}

/// The content type of `encode`'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
