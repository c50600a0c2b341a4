//! `convo accounts` from the binary against a fake deployment with the operator's endpoints
//! (`tests/client/fake_admin.rs`): the table in the order asked for, `--filter`, `--json`, and
//! the admin key missing (exit 2) or refused (exit 1).

use super::support::Sandbox;
use crate::fake_admin::{ADMIN_KEY, FakeAdmin, accounts};

async fn serve(fake: &FakeAdmin) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = fake.router();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn accounts_are_listed_sorted_and_filtered_with_the_admin_key() {
    let fake = FakeAdmin::new(accounts(12));
    let base = serve(&fake).await;
    let s = Sandbox::new();
    let env = [
        ("CONVO_BASE_URL", base.as_str()),
        ("CONVO_ADMIN_KEY", ADMIN_KEY),
    ];
    let run = s
        .run_env(&["accounts", "--sort", "requests", "--limit", "3"], &env)
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The most requests first: account 12 (84), 11 (77), 10 (70).
    let first = run.stdout.find("…0012").expect(&run.stdout);
    let second = run.stdout.find("…0011").expect(&run.stdout);
    assert!(first < second, "{}", run.stdout);
    assert!(run.stdout.contains("3 accounts of 12"), "{}", run.stdout);
    assert!(!run.stdout.contains(ADMIN_KEY));

    let run = s
        .run_env(&["accounts", "--filter", "0007", "--json"], &env)
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let page: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(page["total"], 1);
    assert_eq!(page["accounts"][0]["accountId"], 7);
}

#[tokio::test]
async fn no_admin_key_is_a_usage_error_and_a_wrong_one_is_refused() {
    let fake = FakeAdmin::new(accounts(2));
    let base = serve(&fake).await;
    let s = Sandbox::new();
    let run = s
        .run_env(&["accounts"], &[("CONVO_BASE_URL", base.as_str())])
        .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("CONVO_ADMIN_KEY"), "{}", run.stderr);
    let run = s
        .run_env(
            &["accounts", "--json"],
            &[
                ("CONVO_BASE_URL", base.as_str()),
                (
                    "CONVO_ADMIN_KEY",
                    "service_admin_wrongwrongwrongwrongwrongwrong12",
                ),
            ],
        )
        .await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("unauthorized"), "{}", run.stderr);
    assert!(fake.queries.lock().unwrap().is_empty());
}
