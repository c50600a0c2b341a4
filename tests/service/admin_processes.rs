//! The operator's endpoints on two `convo serve` processes over one PostgreSQL database,
//! checked from the outside as an operator sees them (docs/service.md, "Operators"): after
//! sends made through both, `GET /v1/admin/accounts` gives the same numbers from either; an
//! API key is refused on `/v1/admin/*` and `/metrics`, the admin key on `/v1/sessions/…`;
//! each process's `/metrics`, read by a Prometheus text parser, counts its own requests and
//! reports the same accounts' usage from the database.

use convo_service::generate_admin_key;
use convo_wire::admin::AdminAccounts;
use reqwest::StatusCode;
use serde_json::json;

use super::backends::TestDb;
use super::common::session;
use super::metrics::value;
use super::replica_harness::{Options, Replica};

const PRO: &str = "service_live_adminProcsProKeyPPPP";
const FREE: &str = "service_live_adminProcsFreeKeyFFFF";

async fn accounts(replica: &Replica, admin: &str, query: &str) -> AdminAccounts {
    let (status, body) = replica
        .get_as(admin, &format!("/v1/admin/accounts{query}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_value(body).expect("an AdminAccounts body")
}

async fn send(replica: &Replica, key: &str, sid: &str, text: &str) {
    let (status, body) = replica.post_as(key, sid, json!({"content": text})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn two_serve_processes_answer_the_operators_endpoints_alike() {
    let db = TestDb::create().await;
    let admin = generate_admin_key();
    let options = Options {
        more_keys: vec![format!("{FREE}=free")],
        admin_key: Some(admin.clone()),
        ..Options::default()
    };
    let a = Replica::start_with(&db, PRO, 0, None, &options);
    let b = Replica::start_with(&db, PRO, 0, None, &options);

    // Sends through both: the pro account twice in one session (once on each), the free
    // account once on b.
    let sid = session();
    send(&a, PRO, &sid, "one through a").await;
    send(&b, PRO, &sid, "two through b").await;
    send(&b, FREE, &session(), "one of the free account").await;

    for query in ["", "?sort=name", "?sort=requests&q=pro", "?q=ffff"] {
        let (from_a, from_b) =
            tokio::join!(accounts(&a, &admin, query), accounts(&b, &admin, query));
        assert_eq!(from_a, from_b, "{query}");
    }
    let page = accounts(&a, &admin, "?sort=requests").await;
    assert_eq!(page.total, 2);
    let [pro, free] = &page.accounts[..] else {
        panic!("two accounts: {page:?}");
    };
    assert_eq!(
        (pro.key_hints.as_slice(), pro.tier.as_str()),
        (["PPPP".to_string()].as_slice(), "pro")
    );
    assert_eq!((pro.requests.used, pro.requests.limit), (2, 50_000));
    assert_eq!((pro.sessions.active, pro.sessions.limit), (1, 500));
    assert_eq!(
        (free.key_hints.as_slice(), free.tier.as_str()),
        (["FFFF".to_string()].as_slice(), "free")
    );
    assert_eq!((free.requests.used, free.requests.limit), (1, 1_000));
    assert!(pro.tokens.used > free.tokens.used && free.tokens.used > 0);

    // Each credential where it belongs, and nowhere else, on either process.
    for replica in [&a, &b] {
        for key in [PRO, FREE] {
            let (status, body) = replica.get_as(key, "/v1/admin/accounts").await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
            let resp = replica.get_raw(key, "/metrics").await;
            assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        }
        let (status, body) = replica
            .get_as(&admin, &format!("/v1/sessions/{sid}/messages"))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(body["error"]["code"], "forbidden", "{body}");
        let (status, _) = replica.get_as(&admin, "/v1/sessions").await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) = replica
            .get_as(&generate_admin_key(), "/v1/admin/accounts")
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    // Refused requests counted against no account: the numbers are as they were.
    assert_eq!(accounts(&b, &admin, "?sort=requests").await, page);

    // Each process counts its own requests; both read the accounts' usage from the database.
    let sends = [
        ("route", "/v1/sessions/:sessionId/messages"),
        ("method", "POST"),
        ("status", "200"),
    ];
    let (of_a, of_b) = tokio::join!(a.metrics(&admin), b.metrics(&admin));
    assert_eq!(value(&of_a, "convo_http_requests_total", &sends), 1.0);
    assert_eq!(value(&of_b, "convo_http_requests_total", &sends), 2.0);
    for scrape in [&of_a, &of_b] {
        assert_eq!(value(scrape, "convo_accounts", &[]), 2.0);
        assert_eq!(value(scrape, "convo_relay_up", &[]), 1.0);
        for account in [pro, free] {
            let id = account.account_id.to_string();
            let of_account = [("account", id.as_str())];
            assert_eq!(
                value(scrape, "convo_account_requests_used", &of_account),
                account.requests.used as f64
            );
            assert_eq!(
                value(scrape, "convo_account_tokens_used", &of_account),
                account.tokens.used as f64
            );
            assert_eq!(
                value(scrape, "convo_account_sessions_used", &of_account),
                account.sessions.active as f64
            );
        }
    }
    // The counters move with the next request.
    send(&a, FREE, &session(), "another on a").await;
    let again = a.metrics(&admin).await;
    assert_eq!(value(&again, "convo_http_requests_total", &sends), 2.0);
    assert_eq!(
        value(
            &again,
            "convo_http_requests_total",
            &[("route", "/metrics"), ("status", "200")]
        ),
        1.0,
        "the previous scrape"
    );
}
