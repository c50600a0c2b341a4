//! The admin feed end to end: a TUI against a fake deployment with the operator's endpoints
//! (`tests/client/fake_admin.rs`) holds the admin stream open, takes the accounts nearest
//! their limits as its baseline, and alerts once when an account then crosses 80 % (not again
//! within the same band) and once when another reaches 100 %.

use crate::runtime;
use std::time::Duration;

use convo_tui::app::App;
use convo_tui::workers::Target;

use crate::client_support::{options, serve};
use crate::fake_admin::{ADMIN_KEY, FakeAdmin, account, accounts};

const GUARD: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crossing_seen_on_the_admin_stream_alerts_once() {
    let fake = FakeAdmin::new(accounts(12));
    let base = serve(fake.router()).await;
    let mut o = options(&base);
    o.admin_key = Some(ADMIN_KEY.into());
    o.max_retries = 0;
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime::start(Target::Remote(o), dir.path(), runtime::kicks_only());
    rt.run_until("the stream open and the baseline taken", GUARD, |app| {
        app.accounts().live && app.accounts().alerts.watched() == 12
    })
    .await
    .unwrap();
    assert_eq!(app_alerts(&rt.app), 0);
    // Account 1 used 7 requests of 100: now 85.
    fake.change(account(1, 85));
    rt.run_until("the alert", GUARD, |app| app_alerts(app) == 1)
        .await
        .unwrap();
    let notice = rt
        .app
        .notice()
        .expect("the status bar says it")
        .text
        .clone();
    assert!(
        notice.contains("account key …0001 passed 80 % of its requests limit"),
        "{notice}"
    );
    // 85 → 90: the same band, no alert. The stream keeps its order: once account 2's crossing
    // (14 → 100) has alerted, account 1's change was taken before it.
    fake.change(account(1, 90));
    fake.change(account(2, 100));
    rt.run_until("account 2's alert", GUARD, |app| {
        app.accounts()
            .last_alert
            .as_ref()
            .is_some_and(|a| a.account_id == 2)
    })
    .await
    .unwrap();
    assert_eq!(app_alerts(&rt.app), 2);
    rt.shutdown().await;
}

fn app_alerts(app: &App) -> usize {
    app.accounts().unseen_alerts
}
