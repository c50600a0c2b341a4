//! `GET /metrics` (docs/service.md, "Operators"): Prometheus's text, read by a Prometheus text
//! parser, with the counters moving as requests are made and the per-account gauges read
//! from the database; only the admin key opens it. The alert rules and the Grafana dashboard
//! of `assets/ops/` load, and every series they name is one `/metrics` exposes.

use std::collections::BTreeSet;

use convo_service::{ServiceConfig, generate_admin_key};
use prometheus_parse::{Scrape, Value as Metric};
use reqwest::StatusCode;
use serde_json::json;

use super::backends::Backend;
use super::common::{Svc, session, start_with};

const ALERTS: &str = include_str!("../../assets/ops/alerts.yaml");
const DASHBOARD: &str = include_str!("../../assets/ops/grafana-dashboard.json");

async fn scrape_text(svc: &Svc, key: &str) -> (StatusCode, String) {
    let resp = svc
        .http
        .get(svc.url("/metrics"))
        .bearer_auth(key)
        .send()
        .await
        .expect("request");
    let status = resp.status();
    (status, resp.text().await.unwrap())
}

/// `/metrics` as `key` sees it, which must answer 200, parsed.
pub(super) async fn scrape(svc: &Svc, key: &str) -> Scrape {
    let (status, text) = scrape_text(svc, key).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    parse(&text)
}

/// A scrape's text, read by a Prometheus text parser.
pub fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text")
}

/// The value of the series `name` whose labels include `labels` (0 when there is none).
pub fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Metric::Counter(v) | Metric::Gauge(v) | Metric::Untyped(v) => *v,
            Metric::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            Metric::Summary(_) => 0.0,
        })
        .sum()
}

fn with_admin(backend: &Backend) -> (ServiceConfig, String) {
    let admin = generate_admin_key();
    let mut config = backend.config();
    config.admin_key = Some(admin.clone());
    (config, admin)
}

#[tokio::test]
async fn metrics_are_prometheus_text_and_move_with_requests() {
    let backend = Backend::sqlite().await;
    let (config, admin) = with_admin(&backend);
    let svc = start_with(config).await;
    let route = [
        ("route", "/v1/sessions/:sessionId/messages"),
        ("method", "POST"),
    ];
    let ok = [route[0], route[1], ("status", "200")];
    let before = scrape(&svc, &admin).await;
    assert_eq!(value(&before, "convo_http_requests_total", &ok), 0.0);
    assert_eq!(value(&before, "convo_accounts", &[]), 1.0);

    let sid = session();
    for text in ["one", "two"] {
        svc.send_text(&sid, text).await;
    }
    let (status, _) = svc.post(&sid, json!({"content": ""})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // What the account's own key sees of its usage (this request included).
    let usage = svc.usage().await;
    let after = scrape(&svc, &admin).await;
    assert_eq!(value(&after, "convo_http_requests_total", &ok), 2.0);
    assert_eq!(
        value(
            &after,
            "convo_http_requests_total",
            &[route[0], ("status", "400")]
        ),
        1.0
    );
    assert_eq!(
        value(&after, "convo_http_request_duration_seconds", &route),
        3.0,
        "every send is in the latency histogram"
    );
    // The previous scrape is counted too, under its route template.
    assert_eq!(
        value(
            &after,
            "convo_http_requests_total",
            &[("route", "/metrics"), ("status", "200")]
        ),
        1.0
    );
    let account = after
        .samples
        .iter()
        .find(|s| s.metric == "convo_account_requests_used")
        .and_then(|s| s.labels.get("account"))
        .expect("the account's series")
        .to_string();
    let of_account = [("account", account.as_str())];
    assert_eq!(
        value(&after, "convo_account_requests_used", &of_account),
        usage["requests"]["used"].as_f64().unwrap()
    );
    assert_eq!(
        value(&after, "convo_account_tokens_used", &of_account),
        usage["tokens"]["used"].as_f64().unwrap()
    );
    assert_eq!(
        value(&after, "convo_account_requests_limit", &of_account),
        50_000.0
    );
    assert_eq!(
        value(&after, "convo_account_sessions_used", &of_account),
        1.0
    );
    assert!(value(&after, "convo_account_tokens_used", &of_account) > 0.0);
    assert_eq!(value(&after, "convo_replies_in_flight", &[]), 0.0);
    assert_eq!(
        value(
            &after,
            "convo_websocket_listeners",
            &[("stream", "session")]
        ),
        0.0
    );

    // Refused without the admin key, and with an API key.
    let resp = svc.http.get(svc.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let (status, _) = scrape_text(&svc, &svc.key).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    svc.service.shutdown().await;
}

/// Every metric name a text exposition holds (histograms with their `_bucket`, `_sum` and
/// `_count` series).
fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// The `convo_…` names an expression uses.
fn named(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("convo_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.insert(name);
    }
    names
}

/// Every `expr` of the dashboard's targets.
fn dashboard_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", serde_json::Value::String(expr)) => out.push(expr.clone()),
                    _ => dashboard_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| dashboard_exprs(v, out)),
        _ => {}
    }
}

/// The alert rules and the dashboard load, have what docs/deploy.md says they have, and name
/// only series a replica on PostgreSQL (which has the relay and pool series too) exposes.
#[tokio::test]
async fn the_alert_rules_and_the_dashboard_name_only_exposed_metrics() {
    let backend = Backend::postgres().await;
    let (config, admin) = with_admin(&backend);
    let svc = start_with(config).await;
    svc.send_text(&session(), "hello").await;
    let (status, text) = scrape_text(&svc, &admin).await;
    assert_eq!(status, StatusCode::OK);
    let exposed = exposed(&text);
    for name in [
        "convo_relay_up",
        "convo_relay_lag_seconds",
        "convo_db_pool_waiting",
        "convo_db_batches_total",
        "convo_db_batched_operations_total",
        "convo_db_batch_busy_seconds_total",
        "convo_history_cache_sessions",
        "convo_history_cache_bytes",
    ] {
        assert!(exposed.contains(name), "{name} in {exposed:?}");
    }
    // The send's start was under way for the time of its write.
    let busy: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix(r#"convo_db_batch_busy_seconds_total{operation="start"} "#))
        .expect("the starts' busy time")
        .parse()
        .expect("a number");
    assert!(busy > 0.0, "{busy}");

    let docs = yaml_rust2::YamlLoader::load_from_str(ALERTS).expect("the rules are YAML");
    let groups = docs[0]["groups"].as_vec().expect("`groups`");
    let group_names: Vec<_> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(group_names, ["convo-quotas", "convo-service"]);
    let mut alerts = Vec::new();
    for rule in groups
        .iter()
        .flat_map(|g| g["rules"].as_vec().expect("`rules`"))
    {
        let alert = rule["alert"].as_str().expect("`alert`");
        let expr = rule["expr"].as_str().expect("`expr`");
        assert!(rule["labels"]["severity"].as_str().is_some(), "{alert}");
        assert!(rule["annotations"]["summary"].as_str().is_some(), "{alert}");
        let names = named(expr);
        assert!(!names.is_empty(), "{alert} names no metric");
        for name in names {
            assert!(exposed.contains(&name), "{alert}: {name} is not exposed");
        }
        alerts.push(alert.to_string());
    }
    for expected in [
        "ConvoAccountNearLimit",
        "ConvoAccountLimitReached",
        "ConvoHighErrorRate",
        "ConvoSlowRequests",
        "ConvoRelayDown",
    ] {
        assert!(
            alerts.iter().any(|a| a == expected),
            "{expected} in {alerts:?}"
        );
    }

    let dashboard: serde_json::Value =
        serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    dashboard_exprs(&dashboard["panels"], &mut exprs);
    assert!(exprs.len() >= 10, "{exprs:?}");
    for expr in exprs {
        for name in named(&expr) {
            assert!(exposed.contains(&name), "dashboard: {name} is not exposed");
        }
    }
    svc.service.shutdown().await;
}

/// `convo serve --metrics-addr`: a second bind answering `/metrics` with no credential, and
/// nothing else; `/metrics` on the service's address still takes the admin key; a bad address
/// stops the start with a usage error.
#[test]
fn metrics_addr_serves_only_metrics_without_a_key() {
    use std::io::BufRead;
    use std::process::Command;

    use super::binary::{BIN, started};

    let dir = tempfile::tempdir().unwrap();
    let key = "service_live_metricsAddrKeyMMMM";
    let (mut child, base, mut stdout) = started(
        Command::new(BIN)
            .args(["serve", "--engine", "builtin", "--addr", "127.0.0.1:0"])
            .args(["--api-key", key, "--metrics-addr", "127.0.0.1:0"])
            .env("CONVO_SERVE_DB", dir.path().join("svc.db"))
            .env_remove("CONVO_SERVE_ADMIN_KEY")
            .env_remove("CONVO_SERVE_API_KEYS"),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let metrics = line
        .trim_end()
        .strip_prefix("metrics on ")
        .unwrap_or_else(|| panic!("unexpected second line {line:?}"))
        .to_string();
    let origin = metrics.strip_suffix("/metrics").unwrap().to_string();
    assert_ne!(origin, base);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let sid = session();
        let resp = http
            .post(format!("{base}/v1/sessions/{sid}/messages"))
            .bearer_auth(key)
            .json(&json!({"content": "hello"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);

        // No credential on the metrics bind, and the counters of the service's address.
        let resp = http.get(&metrics).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let scrape = parse(&resp.text().await.unwrap());
        assert_eq!(value(&scrape, "convo_accounts", &[]), 1.0);
        let sends = [
            ("route", "/v1/sessions/:sessionId/messages"),
            ("status", "200"),
        ];
        assert_eq!(value(&scrape, "convo_http_requests_total", &sends), 1.0);
        // Nothing else there, even with a key.
        for path in ["/v1/sessions", "/v1/admin/accounts", "/healthz"] {
            let resp = http
                .get(format!("{origin}{path}"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        }
        // On the service's address `/metrics` still needs the admin key (none is set: off).
        let resp = http.get(format!("{base}/metrics")).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "admin_disabled");
    });
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    assert!(child.wait().unwrap().success());

    let out = Command::new(BIN)
        .args(["serve", "--engine", "builtin", "--addr", "127.0.0.1:0"])
        .args(["--metrics-addr", "not an address"])
        .env("CONVO_SERVE_DB", ":memory:")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--metrics-addr `not an address`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
