//! The operator's endpoints (docs/service.md, "Operators"): `GET /v1/admin/accounts` sorted,
//! filtered and paged by the database, one account's metrics, the admin stream; only the
//! admin key opens them and it opens nothing else; admin requests count against no account.
//! On SQLite, on two PostgreSQL replicas (the same numbers from either, and a send on one
//! reaches the admin stream of the other), and `convo serve --admin-key` as a user runs it.

use std::process::Command;

use convo_service::{ServiceConfig, Tier, generate_admin_key};
use convo_wire::admin::{AdminAccounts, AdminEvent};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::backends::Backend;
use super::binary::{BIN, started};
use super::common::{Svc, Ws, json as body_json, next_json, session, start_with};

const FREE: &str = "service_live_adminTestFreeKeyAAAA";
const PRO_A: &str = "service_live_adminTestProKeyBBBBB";
const PRO_B: &str = "service_live_adminTestProKeyCCCCC";

/// A configuration with three accounts (free, pro, pro) and an admin key.
fn three_accounts(backend: &Backend, admin: &str) -> ServiceConfig {
    let mut config = backend.config();
    config.api_keys = vec![
        (FREE.to_string(), Tier::Free),
        (PRO_A.to_string(), Tier::Pro),
        (PRO_B.to_string(), Tier::Pro),
    ];
    config.admin_key = Some(admin.to_string());
    config
}

async fn get_as(svc: &Svc, key: &str, path: &str) -> (StatusCode, Value) {
    let resp = svc
        .http
        .get(svc.url(path))
        .bearer_auth(key)
        .send()
        .await
        .expect("request");
    body_json(resp).await
}

async fn accounts(svc: &Svc, admin: &str, query: &str) -> AdminAccounts {
    let (status, body) = get_as(svc, admin, &format!("/v1/admin/accounts{query}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_value(body).expect("an AdminAccounts body")
}

async fn send_as(svc: &Svc, key: &str, times: usize) {
    let sid = session();
    for i in 0..times {
        let (status, body) = svc
            .post_with_key(key, &sid, json!({"content": format!("message {i}")}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

fn hints(page: &AdminAccounts) -> Vec<String> {
    page.accounts
        .iter()
        .map(|a| a.key_hints.join(","))
        .collect()
}

fn metrics_query() -> String {
    let now = chrono::Utc::now();
    let start = (now - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ");
    let end = (now + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ");
    format!("startDate={start}&endDate={end}")
}

#[tokio::test]
async fn admin_endpoints_on_sqlite_sort_filter_page_and_take_only_the_admin_key() {
    let backend = Backend::sqlite().await;
    let admin = generate_admin_key();
    let svc = start_with(three_accounts(&backend, &admin)).await;
    send_as(&svc, FREE, 3).await; // 3 of 1,000 requests: the highest share
    send_as(&svc, PRO_B, 5).await;

    let page = accounts(&svc, &admin, "").await;
    assert_eq!(page.total, 3);
    assert_eq!(hints(&page), ["AAAA", "CCCC", "BBBB"], "by share");
    let free = &page.accounts[0];
    assert_eq!(
        (free.tier.as_str(), free.name.as_str()),
        ("free", "key …AAAA")
    );
    assert_eq!((free.requests.used, free.requests.limit), (3, 1000));
    assert_eq!((free.sessions.active, free.sessions.limit), (1, 10));
    assert_eq!(free.share, 0.1, "1 of 10 sessions is the largest share");
    assert!(free.tokens.used > 0 && free.last_active_at.is_some());
    assert!(page.accounts[2].last_active_at.is_none());
    assert_eq!(
        hints(&accounts(&svc, &admin, "?sort=requests").await),
        ["CCCC", "AAAA", "BBBB"]
    );
    assert_eq!(
        hints(&accounts(&svc, &admin, "?sort=name").await),
        ["AAAA", "BBBB", "CCCC"]
    );
    let filtered = accounts(&svc, &admin, "?q=pro&sort=name&limit=1&offset=1").await;
    assert_eq!((filtered.total, hints(&filtered)), (2, vec!["CCCC".into()]));
    assert_eq!(hints(&accounts(&svc, &admin, "?q=cccc").await), ["CCCC"]);
    let (status, body) = get_as(&svc, &admin, "/v1/admin/accounts?sort=size").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // One account's metrics are what its own key sees of `/v1/analytics/metrics`.
    let id = page.accounts[1].account_id;
    let (status, of_admin) = get_as(
        &svc,
        &admin,
        &format!("/v1/admin/accounts/{id}/metrics?{}", metrics_query()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{of_admin}");
    assert_eq!(of_admin["messages"]["userMessages"], 5);
    let (_, own) = get_as(
        &svc,
        PRO_B,
        &format!("/v1/analytics/metrics?{}", metrics_query()),
    )
    .await;
    assert_eq!(of_admin, own);
    let (status, body) = get_as(
        &svc,
        &admin,
        &format!("/v1/admin/accounts/999/metrics?{}", metrics_query()),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("account_not_found"))
    );

    // Each credential where it belongs, and nowhere else.
    let (status, body) = get_as(&svc, PRO_A, "/v1/admin/accounts").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("admin key"),
        "{body}"
    );
    let (status, body) = get_as(&svc, &admin, "/v1/sessions").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("API key"),
        "{body}"
    );
    let (status, _) = get_as(
        &svc,
        &admin,
        &format!("/v1/sessions/{}/messages", session()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = get_as(&svc, &generate_admin_key(), "/v1/admin/accounts").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let resp = svc
        .http
        .get(svc.url("/v1/admin/accounts"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);

    // Admin requests count against no account.
    let before = accounts(&svc, &admin, "?sort=name").await;
    for _ in 0..3 {
        accounts(&svc, &admin, "").await;
    }
    assert_eq!(accounts(&svc, &admin, "?sort=name").await, before);
    svc.service.shutdown().await;
}

#[tokio::test]
async fn without_an_admin_key_the_operators_endpoints_are_off_and_a_bad_key_is_refused() {
    let backend = Backend::sqlite().await;
    let mut config = backend.config();
    let svc = start_with(config.clone()).await;
    let (status, body) = get_as(&svc, &generate_admin_key(), "/v1/admin/accounts").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "admin_disabled");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--admin-key"),
        "{body}"
    );
    svc.service.shutdown().await;
    for bad in [
        "service_admin_short",
        "service_live_abcdefghijklmnopqrstuvwxyz0123456789",
    ] {
        config.admin_key = Some(bad.into());
        let err = convo_service::start(config.clone(), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("service_admin_"), "{err}");
        assert!(!err.contains(bad), "the key is not echoed: {err}");
    }
}

async fn admin_ws(svc: &Svc, key: &str) -> Ws {
    svc.ws_at("/v1/admin/stream", key).await
}

#[tokio::test]
async fn two_postgres_replicas_give_the_same_numbers_and_stream_each_others_changes() {
    let backend = Backend::postgres().await;
    let admin = generate_admin_key();
    let config = three_accounts(&backend, &admin);
    let (a, b) = tokio::join!(start_with(config.clone()), start_with(config));
    let mut ws = admin_ws(&a, &admin).await;
    assert_eq!(
        next_json::<AdminEvent>(&mut ws).await,
        AdminEvent::Hello { total: 3 }
    );

    send_as(&b, PRO_A, 2).await;
    // The send made on `b` reaches the admin listener on `a`, with its state after it.
    let account = loop {
        match next_json::<AdminEvent>(&mut ws).await {
            AdminEvent::Account { account } if account.requests.used == 2 => break account,
            AdminEvent::Account { account } => assert_eq!(account.key_hints, ["BBBB"]),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(account.key_hints, ["BBBB"]);
    assert_eq!(account.sessions.active, 1);

    send_as(&a, FREE, 1).await;
    for query in ["", "?sort=name", "?sort=tokens&q=pro"] {
        let (from_a, from_b) =
            tokio::join!(accounts(&a, &admin, query), accounts(&b, &admin, query));
        assert_eq!(from_a, from_b, "{query}");
    }
    let page = accounts(&b, &admin, "?sort=requests").await;
    assert_eq!(hints(&page), ["BBBB", "AAAA", "CCCC"]);
    assert_eq!(page.accounts[0].requests.used, 2);
    let (status, _) = get_as(&b, PRO_A, "/v1/admin/accounts").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    drop(ws);
    a.service.shutdown().await;
    b.service.shutdown().await;
}

/// 10,000 accounts: the first page by share, and a page deep in the list, each one query.
/// The time is printed (docs/service.md, "Operators", records it), never asserted.
#[tokio::test]
async fn ten_thousand_accounts_are_paged() {
    for backend in [Backend::sqlite().await, Backend::postgres().await] {
        let admin = generate_admin_key();
        let mut config = backend.config();
        config.api_keys = (0..10_000)
            .map(|i| (format!("service_live_tenThousand{i:05}k"), Tier::Free))
            .collect();
        config.admin_key = Some(admin.clone());
        let svc = start_with(config).await;
        send_as(&svc, "service_live_tenThousand04242k", 1).await;
        for query in ["?limit=100", "?sort=name&limit=100&offset=9950", "?q=242k"] {
            let started = std::time::Instant::now();
            let page = accounts(&svc, &admin, query).await;
            eprintln!(
                "{} accounts{query}: {:.1} ms",
                match backend {
                    Backend::Sqlite(_) => "SQLite",
                    Backend::Postgres(_) => "PostgreSQL",
                },
                started.elapsed().as_secs_f64() * 1000.0
            );
            match query {
                "?limit=100" => {
                    assert_eq!((page.total, page.accounts.len()), (10_000, 100));
                    assert_eq!(page.accounts[0].key_hints, ["242k"]);
                    assert_eq!(page.accounts[0].requests.used, 1);
                }
                // 242, 1242, …, 9242
                "?q=242k" => assert_eq!(page.total, 10),
                _ => assert_eq!(page.accounts.len(), 50),
            }
        }
        svc.service.shutdown().await;
    }
}

#[test]
fn serve_with_an_admin_key_answers_the_operators_endpoints_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let admin = generate_admin_key();
    let (mut child, base, _stdout) = started(
        Command::new(BIN)
            .args(["serve", "--engine", "builtin", "--addr", "127.0.0.1:0"])
            .args(["--api-key", PRO_A])
            .env("CONVO_SERVE_ADMIN_KEY", &admin)
            .env("CONVO_SERVE_DB", dir.path().join("svc.db"))
            .env_remove("CONVO_SERVE_API_KEYS"),
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let get = |path: &str, key: &str| http.get(format!("{base}{path}")).bearer_auth(key).send();
        let resp = get("/v1/admin/accounts", &admin).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let page: AdminAccounts = resp.json().await.unwrap();
        assert_eq!(page.total, 1);
        assert_eq!(page.accounts[0].key_hints, ["BBBB"]);
        let resp = get("/metrics", &admin).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let text = resp.text().await.unwrap();
        assert!(text.contains("convo_accounts 1"), "{text}");
        let resp = get("/metrics", PRO_A).await.unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    });
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    assert!(child.wait().unwrap().success());

    // A malformed admin key is a usage error that does not echo it.
    let out = Command::new(BIN)
        .args(["serve", "--engine", "builtin", "--addr", "127.0.0.1:0"])
        .args(["--admin-key", "service_admin_tooShortSecret"])
        .env("CONVO_SERVE_DB", ":memory:")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`service_admin_` followed by at least 32"),
        "{stderr}"
    );
    assert!(!stderr.contains("tooShortSecret"), "{stderr}");
    let out = Command::new(BIN)
        .args(["serve", "--new-admin-key"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let key = String::from_utf8(out.stdout).unwrap();
    assert!(convo_wire::admin::is_valid_admin_key(key.trim()), "{key}");
}
