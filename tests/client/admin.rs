//! The operator's endpoints from the client (`convo_client::api::admin`), against a fake
//! deployment (`fake_admin.rs`): a page in the order asked for, the filter, the admin key
//! refused, one account's metrics, a server without the endpoints, and the admin stream.

use std::time::Duration;

use axum::Router;
use chrono::{TimeZone, Utc};
use convo_client::api::admin::{ACCOUNT_NOT_FOUND, AccountsQuery, AdminStream, AdminUpdate};
use convo_client::api::{AccountSort, AdminEvent, ApiError, Client, StreamTiming};

use super::fake_admin::{ADMIN_KEY, FakeAdmin, account, accounts};
use super::support::{options, serve};

async fn admin_client(router: Router, key: Option<&str>) -> Client {
    let base = serve(router).await;
    let mut o = options(&base);
    o.admin_key = key.map(String::from);
    Client::new(o).unwrap()
}

#[tokio::test]
async fn a_page_comes_in_the_order_asked_for_and_filtered_by_the_server() {
    let fake = FakeAdmin::new(accounts(30));
    let client = admin_client(fake.router(), Some(ADMIN_KEY)).await;
    let query = AccountsQuery {
        sort: AccountSort::Requests,
        limit: Some(5),
        offset: 2,
        q: None,
    };
    let page = client.admin_accounts(&query).await.unwrap().unwrap();
    assert_eq!(page.total, 30);
    assert_eq!(page.accounts.len(), 5);
    let used: Vec<u64> = page.accounts.iter().map(|a| a.requests.used).collect();
    assert!(used.windows(2).all(|w| w[0] >= w[1]), "{used:?}");
    let filtered = client
        .admin_accounts(&AccountsQuery {
            q: Some("0012".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(filtered.total, 1);
    assert_eq!(filtered.accounts[0].account_id, 12);
    assert_eq!(
        fake.queries.lock().unwrap().as_slice(),
        [
            "sort=requests limit=Some(5) offset=Some(2) q=None",
            "sort=share limit=None offset=None q=Some(\"0012\")"
        ]
    );
}

#[tokio::test]
async fn a_wrong_admin_key_is_refused_and_none_is_a_clear_error() {
    let fake = FakeAdmin::new(accounts(3));
    let wrong = admin_client(
        fake.router(),
        Some("service_admin_wrongwrongwrongwrongwrongwrong12"),
    )
    .await;
    let err = wrong
        .admin_accounts(&AccountsQuery::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ApiError::Unauthorized { .. }), "{err:?}");
    // The API key alone is never sent to the admin endpoints.
    let none = admin_client(fake.router(), None).await;
    let err = none
        .admin_accounts(&AccountsQuery::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("CONVO_ADMIN_KEY"), "{err}");
    assert!(fake.queries.lock().unwrap().is_empty());
}

#[tokio::test]
async fn one_accounts_metrics_and_an_unknown_account() {
    let fake = FakeAdmin::new(accounts(3));
    let client = admin_client(fake.router(), Some(ADMIN_KEY)).await;
    let start = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2026, 11, 21, 0, 0, 0).unwrap();
    let m = client
        .admin_account_metrics(2, start, end, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.tokens.total, 20 * 250 + 2);
    let err = client
        .admin_account_metrics(99, start, end, None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), ACCOUNT_NOT_FOUND);
}

#[tokio::test]
async fn a_server_without_the_endpoints_is_unsupported() {
    let client = admin_client(Router::new(), Some(ADMIN_KEY)).await;
    assert_eq!(
        client
            .admin_accounts(&AccountsQuery::default())
            .await
            .unwrap(),
        None
    );
    let t = Utc::now();
    assert_eq!(
        client.admin_account_metrics(1, t, t, None).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn the_admin_stream_says_hello_then_each_change() {
    let fake = FakeAdmin::new(accounts(4));
    let base = serve(fake.router()).await;
    let mut o = options(&base);
    o.admin_key = Some(ADMIN_KEY.into());
    let timing = StreamTiming {
        ping_interval: Duration::from_secs(3600),
        silence_timeout: Duration::from_secs(3600),
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
    };
    let (_handle, mut rx) = AdminStream::connect_with(&o, timing).unwrap();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an update (guard against a hang)")
            .expect("the stream task is alive")
    };
    assert_eq!(next().await, AdminUpdate::Connected);
    assert_eq!(
        next().await,
        AdminUpdate::Event(AdminEvent::Hello { total: 4 })
    );
    fake.change(account(2, 95));
    match next().await {
        AdminUpdate::Event(AdminEvent::Account { account }) => {
            assert_eq!((account.account_id, account.requests.used), (2, 95));
        }
        other => panic!("expected an account event, got {other:?}"),
    }
}
