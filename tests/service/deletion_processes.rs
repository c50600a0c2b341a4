//! A session deleted through one service leaves nothing in another's engine on the same
//! database: another replica on PostgreSQL, or on SQLite another service on the same file (the
//! TUI's embedded service beside a one-shot command's, on one data dir). The other looks for
//! deletions before each reply and as it stops (and on SQLite as it starts; on PostgreSQL at
//! each heartbeat, the first at once: `storage/deletions.rs`), so its engine never saves the
//! session's state again and a state saved before the deletion goes (docs/deploy.md, "What
//! operators must do about deletion").

use std::path::Path;
use std::time::Duration;

use convo_service::engine::LoadState;
use convo_service::engine::local::LocalOptions;
use convo_service::{ServiceConfig, Tier};
use reqwest::StatusCode;

use super::backends::Backend;
use super::common::{GUARD, Svc, session, start_with};
use super::local_model::options;
use super::local_model_state::saved;

const KEY: &str = "service_live_processesprocesses0001";

/// A service on `backend` with the account of `KEY`: on the local engine with its states
/// saved under `kv` (once its model is loaded), or on the builtin one.
async fn service(backend: &Backend, kv: Option<&Path>) -> Svc {
    let mut config = backend.config();
    config.api_keys = vec![(KEY.to_string(), Tier::Pro)];
    loaded(config, kv).await
}

/// A service of `config`: on the local engine with its states saved under `kv` (once its
/// model is loaded), or on the engine `config` names.
pub(super) async fn loaded(mut config: ServiceConfig, kv: Option<&Path>) -> Svc {
    if let Some(kv) = kv {
        config.engine = convo_service::EngineConfig::Local(LocalOptions {
            kv_dir: Some(kv.to_path_buf()),
            max_reply_tokens: Some(8),
            ..options()
        });
    }
    let svc = start_with(config).await;
    let mut load = svc.service.engine_load();
    let state = tokio::time::timeout(
        GUARD,
        load.wait_for(|s| !matches!(s, LoadState::Loading { .. })),
    )
    .await
    .expect("the model loads in time")
    .expect("the engine is there")
    .clone();
    assert_eq!(state, LoadState::Ready);
    svc
}

/// Polls the saved states under `kv` every 50 ms until there are `want`, for at most `GUARD`.
async fn until_saved(kv: &Path, want: usize) {
    let waited = async {
        while saved(kv).len() != want {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(GUARD, waited)
        .await
        .unwrap_or_else(|_| panic!("{} saved states, not {want}", saved(kv).len()));
}

async fn a_session_deleted_through_another_service_is_never_saved_again(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv");
    let (a, b) = (
        service(&backend, Some(&kv)).await,
        service(&backend, Some(&kv)).await,
    );
    let (deleted, next) = (session(), session());
    a.send_text(&deleted, "What is the capital of France?")
        .await;
    assert!(saved(&kv).is_empty(), "the state is in `a`'s memory");
    assert_eq!(b.delete(&deleted).await.0, StatusCode::OK);
    // `a`'s next reply takes the slot: the deleted session's state is not parked on disk.
    a.send_text(&next, "Say hi.").await;
    assert!(saved(&kv).is_empty(), "{:?}", saved(&kv));
    // Nor saved as `a` stops. A reply in a third session parks the second one's state (the
    // only one saved); the third is deleted through `b`, then `a` stops.
    let third = session();
    a.send_text(&third, "What is the capital of Spain?").await;
    assert_eq!(saved(&kv).len(), 1, "the second session parked");
    assert_eq!(b.delete(&third).await.0, StatusCode::OK);
    a.service.shutdown().await;
    assert_eq!(
        saved(&kv).len(),
        1,
        "the third session's state saved as `a` stopped"
    );
    b.service.shutdown().await;
    assert_eq!(saved(&kv).len(), 1);
}

crate::on_both_backends!(a_session_deleted_through_another_service_is_never_saved_again);

async fn a_state_saved_before_a_deletion_its_engine_missed_goes_at_the_next_start(
    backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv");
    let sid = session();
    let a = service(&backend, Some(&kv)).await;
    a.send_text(&sid, "What is the capital of France?").await;
    a.service.shutdown().await;
    until_saved(&kv, 1).await;
    // Deleted through a service whose engine keeps nothing (`convo serve --engine builtin`):
    // no engine forgets the saved state then.
    let b = service(&backend, None).await;
    assert_eq!(b.delete(&sid).await.0, StatusCode::OK);
    b.service.shutdown().await;
    assert_eq!(saved(&kv).len(), 1);
    // The next start of a local engine on the database finds the deletion and removes it.
    let a = service(&backend, Some(&kv)).await;
    until_saved(&kv, 0).await;
    a.service.shutdown().await;
}

crate::on_both_backends!(a_state_saved_before_a_deletion_its_engine_missed_goes_at_the_next_start);
