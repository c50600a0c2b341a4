//! `convo usage` with no base URL (docs/client.md, "convo usage"): the embedded service's local
//! account, read from the data dir and labelled as such, also while the embedded service runs
//! on the same data dir (as a TUI runs it: both count into the same numbers); a data dir that
//! cannot be read is a clear error that leaves it as it was.

use std::path::Path;
use std::sync::Mutex;

use convo_client::config::{Engine, EngineKind};
use convo_tui::embedded::{self, RunningService};
use serde_json::{Value, json};

use super::support::{Run, Sandbox};

const LABEL: &str = "embedded service · pro plan of the local account";

async fn usage(s: &Sandbox, data_dir: &Path, args: &[&str]) -> Run {
    let dir = data_dir.to_str().unwrap();
    let mut all = vec!["usage"];
    all.extend_from_slice(args);
    s.run_env(&all, &[("CONVO_DATA_DIR", dir)]).await
}

fn builtin() -> Engine {
    Engine {
        kind: EngineKind::Builtin,
        model: None,
        url: String::new(),
        api_key: None,
        temperature: 0.0,
        top_p: 1.0,
        seed: None,
        max_reply_tokens: None,
    }
}

/// The embedded service as the TUI starts it on `data` (its handle in `slot`): its base URL
/// and the local account's key.
pub(super) async fn start_embedded(
    data: &Path,
    slot: &Mutex<Option<RunningService>>,
) -> (String, String) {
    let started = embedded::start(data, &builtin(), 0, slot)
        .await
        .expect("the embedded service starts");
    let key = std::fs::read_to_string(data.join("local-service.key")).unwrap();
    let base = match &started.endpoint {
        convo_tui::event::Endpoint::Embedded { addr } => format!("http://{addr}"),
        other => panic!("{other:?}"),
    };
    (base, key.trim().to_string())
}

#[tokio::test]
async fn with_no_base_url_usage_is_the_embedded_services_local_account() {
    let s = Sandbox::new();
    let data = s.home().join("convo-data");

    let human = usage(&s, &data, &[]).await.expect(0);
    assert!(
        human.stdout.starts_with(&format!("{LABEL}\ntier: pro\n")),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("50,000"), "{}", human.stdout);
    assert!(!human.stdout.contains("context window"), "{}", human.stdout);
    assert!(human.stderr.is_empty(), "{}", human.stderr);

    let report = usage(&s, &data, &["--json"]).await.expect(0).json();
    assert_eq!(report["embedded"], true, "{report}");
    assert_eq!(report["tier"], "pro");
    assert_eq!(report["requests"]["limit"], 50_000);
    // The first run's own request, and this one's.
    assert_eq!(report["requests"]["used"], 2, "{report}");
    assert_eq!(report["sessions"]["active"], 0);
    assert!(report.get("context").is_none(), "{report}");
    // Without `embedded`, the Usage object of the interface.
    let mut object = report.as_object().unwrap().clone();
    object.remove("embedded");
    let _: convo_client::api::Usage = serde_json::from_value(Value::Object(object)).unwrap();
}

#[tokio::test]
async fn usage_reads_the_data_dir_while_the_embedded_service_runs_on_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = Sandbox::new();
    let data = s.home().join("convo-data");
    // The embedded service as the TUI starts it, on the same data dir.
    let slot: Mutex<Option<RunningService>> = Mutex::new(None);
    let (base, key) = start_embedded(&data, &slot).await;
    let http = reqwest::Client::new();
    let send = |text: &str| {
        http.post(format!(
            "{base}/v1/sessions/{}/messages",
            convo_client::api::new_session_id()
        ))
        .bearer_auth(&key)
        .json(&json!({"content": text}))
        .send()
    };
    assert_eq!(send("hello").await.unwrap().status(), 200);
    // Without the file that says where the running service listens (a TUI of an older build),
    // the command starts a second service on the same database: safe too. (With it, the
    // command asks the running one: tests/cli/embedded.rs.)
    std::fs::remove_file(data.join(embedded::ADDRESS_FILE)).unwrap();

    let report = usage(&s, &data, &["--json"]).await.expect(0).json();
    assert_eq!(report["embedded"], true, "{report}");
    // The running service's send, and this request.
    assert_eq!(report["requests"]["used"], 2, "{report}");
    assert_eq!(report["sessions"]["active"], 1, "{report}");
    assert!(report["tokens"]["used"].as_u64().unwrap() > 0, "{report}");

    // The running service goes on, and counts what `convo usage` asked.
    assert_eq!(send("again").await.unwrap().status(), 200);
    let own: Value = http
        .get(format!("{base}/v1/analytics/usage"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(own["requests"]["used"], 4, "{own}");
    assert_eq!(own["sessions"]["active"], 2, "{own}");
    let service = slot.lock().unwrap().take().unwrap();
    service.shutdown().await;
}

#[tokio::test]
async fn a_data_dir_that_cannot_be_read_is_a_clear_error_that_changes_nothing() {
    let s = Sandbox::new();
    let data = s.home().join("convo-data");
    std::fs::create_dir_all(&data).unwrap();
    let garbage = b"this is not a SQLite database, and it stays as it is".repeat(100);
    std::fs::write(data.join("service.db"), &garbage).unwrap();

    let failed = usage(&s, &data, &[]).await.expect(2);
    assert!(failed.stdout.is_empty(), "{}", failed.stdout);
    assert!(
        failed
            .stderr
            .starts_with("convo: no base URL configured, and the embedded service's data in "),
        "{}",
        failed.stderr
    );
    assert_eq!(failed.stderr.lines().count(), 1, "{}", failed.stderr);
    let failed = usage(&s, &data, &["--json"]).await.expect(2);
    let error: Value = serde_json::from_str(failed.stderr.trim()).unwrap();
    assert_eq!(error["error"]["code"], "store", "{error}");
    assert_eq!(std::fs::read(data.join("service.db")).unwrap(), garbage);

    // A data dir that is a file.
    let file = s.home().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let failed = usage(&s, &file, &[]).await.expect(2);
    assert!(
        failed.stderr.contains("cannot be read"),
        "{}",
        failed.stderr
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

async fn metrics(s: &Sandbox, data_dir: &Path, args: &[&str]) -> Run {
    let dir = data_dir.to_str().unwrap();
    let mut all = vec!["metrics"];
    all.extend_from_slice(args);
    s.run_env(&all, &[("CONVO_DATA_DIR", dir)]).await
}

/// `convo metrics` with no base URL: the embedded service's local account, as the TUI's
/// F2 shows it, its complete buckets kept where the TUI finds them (`embedded`).
#[tokio::test]
async fn with_no_base_url_metrics_are_the_embedded_services_local_account() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = Sandbox::new();
    let data = s.home().join("convo-data");
    // A message sent through the embedded service as the TUI starts it, then stopped.
    let slot: Mutex<Option<RunningService>> = Mutex::new(None);
    let (base, key) = start_embedded(&data, &slot).await;
    let sent = reqwest::Client::new()
        .post(format!(
            "{base}/v1/sessions/{}/messages",
            convo_client::api::new_session_id()
        ))
        .bearer_auth(&key)
        .json(&json!({"content": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let service = slot.lock().unwrap().take().unwrap();
    service.shutdown().await;

    let report = metrics(&s, &data, &["--json"]).await.expect(0).json();
    assert_eq!(report["messages"]["total"], 2, "{report}");
    assert_eq!(report["messages"]["userMessages"], 1, "{report}");
    assert_eq!(report["sessions"]["active"], 1, "{report}");
    assert!(report["tokens"]["total"].as_u64().unwrap() > 0, "{report}");
    let human = metrics(&s, &data, &[]).await.expect(0);
    assert!(human.stdout.contains("messages total"), "{}", human.stdout);

    // Two days that ended a day ago: complete, so kept under the TUI's account for it.
    let today = chrono::Utc::now().date_naive();
    let day = |d: i64| (today - chrono::Duration::days(d)).to_string();
    let series = metrics(
        &s,
        &data,
        &[
            "--series",
            "--json",
            "--granularity",
            "day",
            "--start",
            &day(3),
            "--end",
            &day(1),
        ],
    )
    .await
    .expect(0)
    .json();
    assert_eq!(series.as_array().map(Vec::len), Some(2), "{series}");
    let store = convo_client::local_store::Store::open(&data.join("convo.db")).unwrap();
    assert_eq!(store.known_buckets("embedded").unwrap().len(), 2);
}
