//! One data dir, the TUI pointed in turn at the embedded service and at another server: each
//! target shows only its own sessions, reopens its own last session, and never calls
//! another's session deleted (issue 27, item 1). A second device's session shows up from
//! the server's list (item 2).

use crate::runtime;
use std::path::Path;
use std::time::Duration;

use convo_client::api::client::ClientOptions;
use convo_client::config::{Engine, EngineKind};
use convo_service::{RunningService, ServiceConfig};
use convo_tui::app::{App, Connection, StreamState};
use convo_tui::event::AppEvent;
use convo_tui::render::transcript::EntryState;
use convo_tui::runtime::Runtime;
use convo_tui::workers::Target;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Only a guard against a hang.
const GUARD: Duration = Duration::from_secs(60);

fn embedded(dir: &Path) -> Target {
    Target::Embedded {
        data_dir: dir.to_path_buf(),
        engine: Engine {
            kind: EngineKind::Builtin,
            model: None,
            url: String::new(),
            api_key: None,
            temperature: convo_wire::engine::sampling::DEFAULT_TEMPERATURE,
            top_p: convo_wire::engine::sampling::DEFAULT_TOP_P,
            seed: None,
            max_reply_tokens: None,
        },
        pace_ms: 0,
    }
}

fn remote(svc: &RunningService) -> Target {
    let mut options = ClientOptions::new(svc.base_url().parse().unwrap());
    options.api_key = Some(svc.api_key.clone());
    options.max_retries = 0;
    Target::Remote(options)
}

async fn open(target: Target, dir: &Path) -> Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut rt = runtime::start(target, dir, runtime::kicks_only());
    rt.run_until("connected, store loaded, stream open", GUARD, |app| {
        matches!(app.connection(), Connection::Connected(_))
            && app.store_ready()
            && app
                .session()
                .is_some_and(|o| o.loaded && o.stream == StreamState::Open)
    })
    .await
    .unwrap();
    rt
}

/// Types `text`, then Enter.
fn enter(rt: &mut Runtime, text: &str) {
    for c in text.chars() {
        rt.handle(AppEvent::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
    }
    rt.handle(AppEvent::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    )));
}

async fn send(rt: &mut Runtime, text: &str) -> String {
    enter(rt, text);
    rt.run_until("the reply", GUARD, |app| {
        app.session().is_some_and(|o| {
            o.pending.is_none()
                && o.items.len() >= 2
                && o.items
                    .last()
                    .is_some_and(|i| i.state == EntryState::Complete)
        })
    })
    .await
    .unwrap();
    rt.app.open_id().unwrap().to_string()
}

fn listed(app: &App) -> Vec<String> {
    app.sessions_pane()
        .all()
        .iter()
        .filter(|s| s.tokens > 0)
        .map(|s| s.id.clone())
        .collect()
}

fn no_deleted_notice(app: &App) {
    if let Some(n) = app.notice() {
        assert!(!n.text.contains("deleted"), "{}", n.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_between_the_embedded_service_and_a_server_never_shows_a_foreign_session() {
    let dir = tempfile::tempdir().unwrap();
    let svc = convo_service::start(ServiceConfig::ephemeral(1), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();

    let mut rt = open(embedded(dir.path()), dir.path()).await;
    let mine = send(&mut rt, "on the embedded service").await;
    rt.shutdown().await;

    let mut rt = open(remote(&svc), dir.path()).await;
    assert_ne!(rt.app.open_id(), Some(mine.as_str()));
    assert!(listed(&rt.app).is_empty(), "{:?}", listed(&rt.app));
    no_deleted_notice(&rt.app);
    let theirs = send(&mut rt, "on the other server").await;
    assert_eq!(listed(&rt.app), [theirs.as_str()]);
    no_deleted_notice(&rt.app);
    rt.shutdown().await;

    // Back on the embedded service: its own session, reopened, not deleted.
    let rt = open(embedded(dir.path()), dir.path()).await;
    assert_eq!(rt.app.open_id(), Some(mine.as_str()));
    assert_eq!(listed(&rt.app), [mine.as_str()]);
    no_deleted_notice(&rt.app);
    rt.shutdown().await;

    // And the server's last session is its own again.
    let rt = open(remote(&svc), dir.path()).await;
    assert_eq!(rt.app.open_id(), Some(theirs.as_str()));
    no_deleted_notice(&rt.app);
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_another_device_is_listed_and_opens_with_its_history() {
    let svc = convo_service::start(ServiceConfig::ephemeral(1), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let laptop = tempfile::tempdir().unwrap();
    let mut rt = open(remote(&svc), laptop.path()).await;
    let id = send(&mut rt, "written on the laptop").await;
    rt.shutdown().await;

    let desktop = tempfile::tempdir().unwrap();
    let mut rt = open(remote(&svc), desktop.path()).await;
    rt.run_until("the laptop's session listed", GUARD, |app| {
        app.sessions_pane().get(&id).is_some()
    })
    .await
    .unwrap();
    assert_eq!(
        rt.app.sessions_pane().get(&id).unwrap().title,
        "written on the laptop"
    );
    // Opened: its history comes from the server.
    let pos = rt
        .app
        .sessions_pane()
        .visible()
        .iter()
        .position(|s| s.id == id)
        .unwrap();
    for _ in 0..3 {
        if rt.app.focus() == convo_tui::app::Focus::Sessions {
            break;
        }
        rt.handle(AppEvent::Key(KeyEvent::new(
            KeyCode::Tab,
            KeyModifiers::NONE,
        )));
    }
    assert_eq!(rt.app.focus(), convo_tui::app::Focus::Sessions);
    while rt.app.sessions_pane().cursor() != pos {
        let before = rt.app.sessions_pane().cursor();
        let key = if before < pos {
            KeyCode::Down
        } else {
            KeyCode::Up
        };
        rt.handle(AppEvent::Key(KeyEvent::new(key, KeyModifiers::NONE)));
        assert_ne!(rt.app.sessions_pane().cursor(), before, "the cursor moves");
    }
    rt.handle(AppEvent::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    )));
    rt.run_until("the laptop's messages", GUARD, |app| {
        app.open_id() == Some(id.as_str())
            && app
                .session()
                .is_some_and(|o| o.items.len() == 2 && o.content(0) == "written on the laptop")
    })
    .await
    .unwrap();
    rt.shutdown().await;
}

/// Sessions the store kept aside from the server's earlier database are listed by `/kept`
/// and read from the store there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_lists_the_sessions_of_an_earlier_database_and_reads_one() {
    use convo_client::api::Role;
    use convo_client::local_store::{ServiceSessions, Store, StoredMessage};
    use convo_client::target::TargetId;
    use convo_tui::kept_view::KeptList;
    let dir = tempfile::tempdir().unwrap();
    // A session of the embedded service's earlier database, kept aside when a list came from
    // a new one.
    const S: &str = "session_LIGHTHOUSEKEEPER";
    let store = Store::open(&dir.path().join("convo.db"))
        .unwrap()
        .for_target(&TargetId::embedded())
        .unwrap();
    store
        .append_message(S, &StoredMessage::user(Role::User, "the keeper's logbook"))
        .unwrap();
    let mut reply = StoredMessage::user(Role::Assistant, "12 March: wind from the north-east");
    reply.message_id = Some("msg_0000000000000001".into());
    store.append_message(S, &reply).unwrap();
    let said = |database: &'static str| ServiceSessions::All {
        sessions: &[],
        asked_at: chrono::Utc::now(),
        database_id: Some(database),
        deleted: Some(&[]),
    };
    store.database_said("db-earlier").unwrap();
    let moved = store.merge_service(said("db-newer")).unwrap();
    assert_eq!(moved.archived.map(|a| a.sessions), Some(1));
    drop(store);

    let mut rt = open(embedded(dir.path()), dir.path()).await;
    enter(&mut rt, "/kept");
    rt.run_until(
        "the kept list",
        GUARD,
        |app| matches!(&app.kept().list, KeptList::Loaded(s) if !s.is_empty()),
    )
    .await
    .unwrap();
    let KeptList::Loaded(kept) = &rt.app.kept().list else {
        unreachable!()
    };
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].id, S);
    assert!(
        kept[0].label.contains("earlier database"),
        "{}",
        kept[0].label
    );
    enter(&mut rt, "");
    rt.run_until("the kept session read", GUARD, |app| {
        app.kept()
            .reading
            .as_ref()
            .is_some_and(|r| matches!(r.transcript, Some(Ok(_))))
    })
    .await
    .unwrap();
    let screen = runtime::screen(&rt.app);

    assert!(
        screen.contains("12 March: wind from the north-east"),
        "{screen}"
    );
    rt.shutdown().await;
}
