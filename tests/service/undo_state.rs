//! An undo through a service whose engine keeps sessions' state (`--engine local`) takes the
//! undone exchange out of that state (`AppState::trim_undone`), on both stores: the same
//! message sent again is read afresh, not reused (docs/deploy.md, "What an undo leaves"). So
//! does an undo through another service on the same database (another replica; on SQLite
//! another process on the file): the engine finds it at its next look (`storage/deletions.rs`).

use convo_service::{Tier, generate_admin_key};
use reqwest::StatusCode;

use super::backends::Backend;
use super::common::{Svc, session};
use super::deletion_processes::loaded;
use super::local_model_state::{mid_text, saved};
use super::metrics::{scrape, value};

const KEY: &str = "service_live_undostateundostate0001";

/// Prompt tokens the engine has reused from a cached state so far (`/metrics`).
async fn reused(svc: &Svc, admin: &str) -> f64 {
    value(
        &scrape(svc, admin).await,
        "convo_engine_reused_tokens_total",
        &[],
    )
}

async fn an_undo_takes_the_exchange_out_of_the_engines_state(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let admin = generate_admin_key();
    let mut config = backend.config();
    config.api_keys = vec![(KEY.to_string(), Tier::Pro)];
    config.admin_key = Some(admin.clone());
    let svc = loaded(config, Some(&dir.path().join("kv"))).await;
    let sid = session();
    svc.send_text(&sid, "What is the capital of France?").await;
    // About 220 tokens, which the undo must take out of the engine's state (without the trim
    // the same message sent again reuses them all).
    let long = mid_text();
    let start = reused(&svc, &admin).await;
    svc.send_text(&sid, &long).await;
    let before = reused(&svc, &admin).await - start;
    assert!(before >= 20.0, "the first exchange was reused: {before}");

    let (status, body) = svc.undo(&sid).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let start = reused(&svc, &admin).await;
    svc.send_text(&sid, &long).await;
    let again = reused(&svc, &admin).await - start;
    // The first exchange again, read from its text (a few tokens more than its reply as
    // generated matched), not the undone message.
    assert!(
        again < before + 50.0,
        "reused {again} tokens after the undo (before the undone message: {before})"
    );
    svc.service.shutdown().await;
}

crate::on_both_backends!(an_undo_takes_the_exchange_out_of_the_engines_state);

async fn an_undo_through_another_service_takes_the_exchange_out_of_the_engines_state(
    backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv");
    let mut config = backend.config();
    config.api_keys = vec![(KEY.to_string(), Tier::Pro)];
    let a = loaded(config, Some(&kv)).await;
    // Another service on the same database, whose engine keeps nothing (`convo serve` on
    // the builtin engine, a one-shot command's service).
    let mut config = backend.config();
    config.api_keys = vec![(KEY.to_string(), Tier::Pro)];
    let b = loaded(config, None).await;
    let sid = session();
    a.send_text(&sid, "What is the capital of France?").await;
    a.send_text(&sid, &mid_text()).await;
    // A reply in another session parks the session's state, the exchange to undo in it.
    a.send_text(&session(), "Say hi.").await;
    let parked = saved(&kv);
    assert_eq!(parked.len(), 1, "{parked:?}");

    let (status, body) = b.undo(&sid).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // `a` looks once more as it stops (and before each reply; on PostgreSQL at each
    // heartbeat too): it finds the undo and the state saved with the undone exchange goes.
    a.service.shutdown().await;
    assert!(
        !parked[0].exists(),
        "the state saved with the undone exchange stayed: {:?}",
        saved(&kv)
    );
    b.service.shutdown().await;
}

crate::on_both_backends!(
    an_undo_through_another_service_takes_the_exchange_out_of_the_engines_state
);
