//! The app driven with key events against the local service started in-process.

use crate::killable::{restart, start_killable};
use std::time::Duration;

use convo_client::api::client::{Client, ClientOptions};
use convo_service::{RunningService, ServiceConfig};
use convo_tui::app::{App, Connection, Overlay, StreamState};
use convo_tui::event::AppEvent;
use convo_tui::render::transcript::EntryState;
use convo_tui::runtime::Runtime;
use convo_tui::search::HitsState;
use convo_tui::workers::Target;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Only a guard against a hang; nothing depends on how fast things are.
const GUARD: Duration = Duration::from_secs(60);

struct Harness {
    rt: Runtime,
    service: Option<RunningService>,
    client: Client,
    _dir: tempfile::TempDir,
}

async fn start(config: ServiceConfig) -> Harness {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let service = convo_service::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut options = ClientOptions::new(service.base_url().parse().unwrap());
    options.api_key = Some(service.api_key.clone());
    options.max_retries = 0;
    let client = Client::new(options.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(options, &dir);
    let mut h = Harness {
        rt,
        service: Some(service),
        client,
        _dir: dir,
    };
    h.ready().await;
    h
}

/// The TUI's app and workers, on the store in `dir`.
fn runtime(options: ClientOptions, dir: &tempfile::TempDir) -> Runtime {
    crate::runtime::start(
        Target::Remote(options),
        dir.path(),
        crate::runtime::kicks_only(),
    )
}

impl Harness {
    /// Waits until the app is connected, has read the store and opened its session's stream.
    async fn ready(&mut self) {
        self.until("connected, store loaded, stream open", |app| {
            matches!(app.connection(), Connection::Connected(_))
                && app.store_ready()
                && app
                    .session()
                    .is_some_and(|o| o.loaded && o.stream == StreamState::Open)
        })
        .await;
    }

    /// Quits the TUI and starts it again on the same store and service, as a user does: the
    /// first has written what it queued and closed its store before the next reads it.
    async fn restarted(self) -> Harness {
        let mut options = self.client.options().clone();
        options.max_retries = 0;
        let Harness {
            rt,
            service,
            client,
            _dir,
        } = self;
        rt.shutdown().await;
        let mut next = Harness {
            rt: runtime(options, &_dir),
            service,
            client,
            _dir,
        };
        next.ready().await;
        next
    }

    /// Handles events until `done` holds; on a hang, panics with what the app holds and shows.
    async fn until(&mut self, what: &str, done: impl Fn(&App) -> bool) {
        if let Err(e) = self.rt.run_until(what, GUARD, done).await {
            let app = &self.rt.app;
            let session = app.session().map(|o| {
                let states: Vec<_> = o.items.iter().map(|i| &i.state).collect();
                format!(
                    "stream {:?}, loaded {}, items {states:?}",
                    o.stream, o.loaded
                )
            });
            panic!(
                "{e}\nconnection {:?}, open session {session:?}\nscreen:\n{}",
                app.connection(),
                self.screen()
            );
        }
    }

    /// Waits until the session titled `title` heads the list. A session just made sorts by the
    /// app's clock until the account stream brings the service's activity time, and the app's
    /// clock may be behind the service's time of another session's reply.
    async fn until_on_top(&mut self, title: &str) {
        self.until(&format!("{title} on top"), |app| {
            app.sessions_pane()
                .all()
                .first()
                .is_some_and(|s| s.title == title)
        })
        .await;
    }

    fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) {
        self.rt
            .handle(AppEvent::Key(KeyEvent::new(code, modifiers)));
    }

    fn press(&mut self, code: KeyCode) {
        self.key(code, KeyModifiers::NONE);
    }

    fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.press(KeyCode::Char(c));
        }
    }

    fn screen(&self) -> String {
        crate::runtime::screen(&self.rt.app)
    }

    async fn send_and_wait(&mut self, text: &str) {
        self.type_text(text);
        self.press(KeyCode::Enter);
        self.until("the reply", |app| {
            let o = app.session().unwrap();
            let last = o.items.len().wrapping_sub(1);
            o.pending.is_none()
                && o.items
                    .last()
                    .is_some_and(|i| i.state == EntryState::Complete && !o.content(last).is_empty())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_the_reply_into_the_transcript() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    h.type_text("hello there");
    h.press(KeyCode::Enter);
    // The reply arrives as deltas first.
    h.until("streamed text", |app| {
        let o = app.session().unwrap();
        !o.content(o.items.len().wrapping_sub(1)).is_empty()
    })
    .await;
    h.until("the reply", |app| {
        let o = app.session().unwrap();
        o.pending.is_none()
            && o.items
                .last()
                .is_some_and(|i| i.state == EntryState::Complete)
    })
    .await;
    let o = h.rt.app.session().unwrap();
    assert_eq!(o.items.len(), 2);
    let reply = o.content(1).to_string();
    assert!(o.items[1].tokens > 0);
    assert!(
        o.items[0].tokens > 0,
        "the sent message's tokens are counted"
    );
    let first_words: String = reply
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let screen = h.screen();
    assert!(screen.contains("hello there"), "{screen}");
    assert!(
        screen.contains(&first_words),
        "`{first_words}` not on screen:\n{screen}"
    );
    // The usage poll after the send counted the request.
    h.until("usage", |app| {
        app.usage()
            .usage
            .as_ref()
            .is_some_and(|u| u.requests.used > 0)
    })
    .await;
    assert_eq!(h.rt.app.sessions_pane().all()[0].title, "hello there");
}

/// A session written on another device is listed here without its messages: the search
/// across sessions says it was not searched, Tab reads it, and the search finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tab_in_the_search_reads_a_session_written_on_another_device() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    let elsewhere = convo_client::api::new_session_id();
    let body = convo_client::api::SendMessage {
        content: "otters hold hands while they sleep".into(),
        role: None,
        stream: None,
        metadata: None,
    };
    h.client
        .send_message(&elsewhere, &body, "written-elsewhere-1")
        .await
        .unwrap();
    h.until("the other device's session listed with its tokens", |app| {
        app.sessions_pane()
            .all()
            .iter()
            .any(|s| s.id == elsewhere && s.tokens > 0)
    })
    .await;
    h.type_text("/search otters");
    h.press(KeyCode::Enter);
    h.until("the search answered", |app| {
        app.transcript_pane()
            .hits()
            .is_some_and(|s| s.state == HitsState::Done && s.unsearched.contains(&elsewhere))
    })
    .await;
    assert!(h.rt.app.transcript_pane().hits().unwrap().hits.is_empty());
    assert!(
        h.screen()
            .contains("1 session from other devices not searched: Tab reads it"),
        "{}",
        h.screen()
    );
    h.press(KeyCode::Tab);
    h.until("the session read and found", |app| {
        app.transcript_pane().hits().is_some_and(|s| {
            s.reading == 0
                && s.unsearched.is_empty()
                && s.hits.iter().any(|hit| hit.session_id == elsewhere)
        })
    })
    .await;
    assert!(h.screen().contains("otters"), "{}", h.screen());
}

/// The clock ticks every 15 s; a message sent between ticks is stamped when it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_stamped_when_it_is_sent_not_at_the_last_tick() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    // Well after the tick at start (the next one is 15 s away).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = chrono::Utc::now();
    h.send_and_wait("what time is it").await;
    let o = h.rt.app.session().unwrap();
    for item in &o.items {
        assert!(
            item.created_at >= before,
            "{:?} stamped {} before it was sent ({before})",
            item.role,
            item.created_at
        );
    }
    let session = &h.rt.app.sessions_pane().all()[0];
    assert!(session.last_activity >= before, "{session:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_n_opens_a_new_session() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    h.send_and_wait("in the first session").await;
    let first = h.rt.app.open_id().unwrap().to_string();
    h.key(KeyCode::Char('n'), KeyModifiers::CONTROL);
    h.until("the new session's stream", |app| {
        app.open_id() != Some(first.as_str())
            && app.session().is_some_and(|o| o.stream == StreamState::Open)
    })
    .await;
    assert_eq!(h.rt.app.sessions_pane().all().len(), 2);
    assert!(h.rt.app.session().unwrap().items.is_empty());
    h.send_and_wait("in the second session").await;
    h.until_on_top("in the second session").await;
    // Back to the first: its transcript comes from the store.
    h.press(KeyCode::Tab);
    h.press(KeyCode::Down);
    h.press(KeyCode::Enter);
    h.until("the first transcript", |app| {
        app.open_id() == Some(first.as_str())
            && app
                .session()
                .is_some_and(|o| o.loaded && o.items.len() == 2)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_asks_then_deletes_on_the_server() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    h.send_and_wait("doomed").await;
    let doomed = h.rt.app.open_id().unwrap().to_string();
    h.key(KeyCode::Char('n'), KeyModifiers::CONTROL);
    h.send_and_wait("keeper").await;
    h.until_on_top("keeper").await;
    h.press(KeyCode::Tab);
    h.press(KeyCode::Down);
    h.press(KeyCode::Char('d'));
    assert!(
        matches!(h.rt.app.overlay(), Some(Overlay::ConfirmDelete { session_id, .. }) if *session_id == doomed)
    );
    assert!(h.screen().contains("Delete “doomed”"));
    h.press(KeyCode::Char('y'));
    h.until("the session gone", |app| {
        app.sessions_pane().all().iter().all(|s| s.id != doomed)
    })
    .await;
    assert_eq!(h.rt.app.sessions_pane().all().len(), 1);
    // The server agrees: it is gone.
    let again = h.client.delete_session(&doomed).await;
    assert!(
        matches!(
            again,
            Err(convo_client::api::error::ApiError::SessionNotFound { .. })
        ),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_session_is_removed_when_the_server_does_not_know_it() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    h.type_text("soon gone");
    h.press(KeyCode::Enter);
    h.until("the reply", |app| {
        app.session()
            .is_some_and(|o| o.items.len() == 2 && !o.is_streaming())
    })
    .await;
    let id = h.rt.app.open_id().unwrap().to_string();
    // Deleted behind this client's back.
    h.client.delete_session(&id).await.unwrap();
    h.press(KeyCode::Tab);
    h.press(KeyCode::Char('d'));
    h.press(KeyCode::Enter);
    h.until("the stale entry removed", |app| {
        app.sessions_pane().all().iter().all(|s| s.id != id)
    })
    .await;
    let notice = h.rt.app.notice().unwrap().text.clone();
    assert!(notice.contains("already deleted"), "{notice}");
    assert_eq!(
        h.rt.app.sessions_pane().all().len(),
        1,
        "a fresh session replaces it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_never_sent_to_is_deleted_here_without_asking_the_server() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    let id = h.rt.app.open_id().unwrap().to_string();
    // Ctrl-N in an empty new session does not add another.
    h.key(KeyCode::Char('n'), KeyModifiers::CONTROL);
    h.key(KeyCode::Char('n'), KeyModifiers::CONTROL);
    assert_eq!(h.rt.app.sessions_pane().all().len(), 1);
    assert_eq!(h.rt.app.open_id(), Some(id.as_str()));
    h.press(KeyCode::Tab);
    h.press(KeyCode::Char('d'));
    h.press(KeyCode::Enter);
    h.until("the entry removed", |app| {
        app.sessions_pane().all().iter().all(|s| s.id != id)
    })
    .await;
    let notice = h.rt.app.notice().unwrap().text.clone();
    assert!(notice.contains("had no messages"), "{notice}");
    assert!(!notice.contains("already deleted"), "{notice}");
    assert_eq!(
        h.rt.app.sessions_pane().all().len(),
        1,
        "a fresh session replaces it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_offers_a_new_session_with_the_draft() {
    let mut config = ServiceConfig::ephemeral(1);
    config.max_context_tokens = 40;
    let mut h = start(config).await;
    let long = "word ".repeat(60);
    h.type_text(long.trim());
    h.press(KeyCode::Enter);
    h.until("the overflow dialog", |app| {
        matches!(app.overlay(), Some(Overlay::ContextOverflow { .. }))
    })
    .await;
    let Some(Overlay::ContextOverflow { current, max, .. }) = h.rt.app.overlay().cloned() else {
        unreachable!()
    };
    assert_eq!(max, 40);
    assert!(current > 40);
    let screen = h.screen();
    assert!(
        screen.contains(&format!("{current} tokens")) && screen.contains("is 40."),
        "{screen}"
    );
    let sessions = h.rt.app.sessions_pane().all().len();
    h.press(KeyCode::Enter);
    // The refused message was this session's first, so it is still an empty new session:
    // that one takes the draft (there is at most one empty new session).
    assert_eq!(h.rt.app.sessions_pane().all().len(), sessions);
    assert!(h.rt.app.session().unwrap().items.is_empty());
    assert_eq!(h.rt.app.composer_text(), long.trim());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_gauge_shows_the_services_window_before_any_overflow() {
    let mut config = ServiceConfig::ephemeral(1);
    config.max_context_tokens = 300;
    let mut h = start(config).await;
    h.until("the window from the first usage poll", |app| {
        app.session().is_some_and(|o| o.context_max == 300)
    })
    .await;
    h.send_and_wait("hello").await;
    let screen = h.screen();
    assert!(screen.contains("/300"), "{screen}");
    assert!(!screen.contains("8.2k"), "{screen}");
    // A session opened later starts with it too.
    h.key(KeyCode::Char('n'), KeyModifiers::CONTROL);
    assert_eq!(h.rt.app.session().unwrap().context_max, 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_failure_marks_the_gauges_stale() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    h.until("a first usage poll", |app| app.usage().usage.is_some())
        .await;
    h.service.take().unwrap().shutdown().await;
    h.press(KeyCode::Tab);
    h.press(KeyCode::Char('r'));
    h.until("a failed poll", |app| app.usage().error.is_some())
        .await;
    assert!(h.rt.app.usage().usage.is_some(), "the last values stay");
    let screen = h.screen();
    assert!(screen.contains("STALE"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_says_to_check_it_and_keeps_the_text() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let service = convo_service::start(ServiceConfig::ephemeral(1), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut options = ClientOptions::new(service.base_url().parse().unwrap());
    options.api_key = Some("service_live_WrongWrongWrongWrong".into());
    options.max_retries = 0;
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime(options, &dir);
    rt.run_until("connected and loaded", GUARD, |app| {
        matches!(app.connection(), Connection::Connected(_))
            && app.session().is_some_and(|o| o.loaded)
    })
    .await
    .unwrap();
    for c in "secret plans".chars() {
        rt.handle(AppEvent::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
    }
    rt.handle(AppEvent::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    )));
    rt.run_until("the refusal", GUARD, |app| {
        app.composer().send_error().is_some()
    })
    .await
    .unwrap();
    assert!(
        rt.app
            .composer()
            .send_error()
            .unwrap()
            .contains("check your API key")
    );
    assert_eq!(rt.app.composer_text(), "secret plans");
    assert!(rt.app.session().unwrap().items.is_empty());
    rt.run_until("the usage poll refused", GUARD, |app| {
        app.usage().error.is_some()
    })
    .await
    .unwrap();
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_metrics_buckets_are_kept_across_a_restart() {
    let mut h = start(ServiceConfig::ephemeral(1)).await;
    h.press(KeyCode::F(2));
    h.until("the 24-hour chart", |app| {
        app.metrics
            .current
            .as_ref()
            .is_some_and(|l| !l.is_loading())
    })
    .await;
    // Whole hours that ended over 5 minutes ago: 23, or 22 just after the hour.
    let kept = h.rt.app.metrics.known.len();
    assert!((22..=23).contains(&kept), "{kept}");
    h = h.restarted().await;
    h.until("the kept buckets", |app| app.metrics.known.len() == kept)
        .await;
    h.press(KeyCode::F(2));
    let load = h.rt.app.metrics.current.as_ref().unwrap();
    let asked = load.buckets.iter().filter(|(_, s)| s.is_pending()).count();
    assert_eq!(
        asked,
        load.buckets.len() - kept,
        "only the hours not complete are asked"
    );
    h.until("the chart", |app| {
        app.metrics
            .current
            .as_ref()
            .is_some_and(|l| !l.is_loading())
    })
    .await;
    assert_eq!(
        h.rt.app.metrics.current.as_ref().unwrap().failed_buckets(),
        0
    );
}

/// Issue 25, item 5: the server killed mid-reply keeps the user message without a reply;
/// started again on the same database, the TUI (`● live` again) settles the reply through
/// its reply follower as `convo send --stream` does: `failed: not kept`, not `interrupted`
/// for ever. The message stays as sent, as the service holds it, and its text is back in the
/// composer to ask again (docs/tui.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_reply_and_restarted_fails_the_reply_as_not_kept() {
    let data = tempfile::tempdir().unwrap();
    let (killed, service, options) = killable_on(data.path());
    let addr = service.addr;
    let mut h = device(&options).await;
    h.type_text("tell me a long story");
    h.press(KeyCode::Enter);
    h.until("a part of the reply", |app| {
        let o = app.session().unwrap();
        o.items.len() == 2 && !o.content(1).is_empty()
    })
    .await;
    // Killed mid-reply: no rollback; the database keeps the message without a reply.
    killed.shutdown_background();
    std::mem::forget(service);
    h.until("the stream lost", |app| {
        app.session()
            .is_some_and(|o| matches!(o.stream, StreamState::Down(_)))
    })
    .await;
    // The killed runtime lets go of the port in the background.
    let restarted = restart(data.path(), addr, Duration::from_secs(5)).await;
    let history = h
        .client
        .session_messages(&h.rt.app.session().unwrap().id)
        .await;
    let history = history.unwrap().unwrap();
    assert_eq!(
        history.len(),
        1,
        "the killed server kept the message without a reply: {history:?}"
    );
    h.until("the reply settled as not kept", |app| {
        let o = app.session().unwrap();
        o.stream == StreamState::Open
            && o.items
                .get(1)
                .is_some_and(|i| i.state == EntryState::Failed("not kept".into()))
    })
    .await;
    let o = h.rt.app.session().unwrap();
    assert_eq!(o.items[0].state, EntryState::Complete);
    assert!(o.pending.is_none() && o.cut_off.is_none());
    assert_eq!(h.rt.app.composer_text(), "tell me a long story");
    let screen = h.screen();
    assert!(screen.contains("not kept"), "{screen}");
    restarted.shutdown().await;
}

/// A service on the database in `data` (its builtin replies paced 150 ms a word), on a
/// runtime of its own that the test can kill, and the options of a client of it.
fn killable_on(data: &std::path::Path) -> (tokio::runtime::Runtime, RunningService, ClientOptions) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (killed, service) = start_killable(
        ServiceConfig::persistent(data, 150).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
    );
    let mut options = ClientOptions::new(service.base_url().parse().unwrap());
    options.api_key = Some(service.api_key.clone());
    options.max_retries = 0;
    (killed, service, options)
}

/// A device on `options`' service with a store of its own (another device), ready.
async fn device(options: &ClientOptions) -> Harness {
    let client = Client::new(options.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness {
        rt: runtime(options.clone(), &dir),
        service: None,
        client,
        _dir: dir,
    };
    h.ready().await;
    h
}

/// Two devices in one session when the server is killed mid-reply and started again: the
/// device watching the other's reply settles it through the same reply follower as the device
/// that sent it, so both end as the service holds the session (the message kept, the reply
/// `not kept`), and only the sender offers the message again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_watched_on_another_device_settles_as_on_the_sender_after_a_kill() {
    two_devices_through_a_restart(false).await;
}

/// The same when the server stops in good order mid-reply: it rolls the turn back, so both
/// mark the message not sent; the sender puts it back in its composer, the watcher does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_watched_on_another_device_settles_as_on_the_sender_after_a_stop() {
    two_devices_through_a_restart(true).await;
}

async fn two_devices_through_a_restart(graceful: bool) {
    let data = tempfile::tempdir().unwrap();
    let (killed, service, options) = killable_on(data.path());
    let addr = service.addr;
    let mut sender = device(&options).await;
    let mut watcher = device(&options).await;
    sender.type_text("tell me a long story");
    sender.press(KeyCode::Enter);
    sender
        .until("a part of the reply", |app| {
            let o = app.session().unwrap();
            o.items.len() == 2 && !o.content(1).is_empty()
        })
        .await;
    // The watcher opens the session (filtered by its title) and follows the reply live.
    watcher
        .until("the session listed", |app| {
            app.sessions_pane()
                .all()
                .iter()
                .any(|s| s.title == "tell me a long story")
        })
        .await;
    watcher.press(KeyCode::Tab);
    watcher.press(KeyCode::Char('/'));
    watcher.type_text("long story");
    watcher.press(KeyCode::Enter);
    watcher
        .until("the other device's reply streaming", |app| {
            app.session().is_some_and(|o| {
                o.items.len() == 2
                    && o.items[1].state == EntryState::Streaming
                    && !o.content(1).is_empty()
            })
        })
        .await;

    if graceful {
        service.shutdown().await;
    } else {
        std::mem::forget(service);
    }
    killed.shutdown_background();
    watcher
        .until("the watched reply no longer streaming", |app| {
            app.session().is_some_and(|o| {
                matches!(o.stream, StreamState::Down(_))
                    && o.items[1].state != EntryState::Streaming
            })
        })
        .await;
    let restarted = restart(data.path(), addr, Duration::from_secs(5)).await;
    // Killed, the server kept the message without a reply; stopped, it kept neither.
    let message = if graceful {
        EntryState::Failed("not sent".into())
    } else {
        EntryState::Complete
    };
    let settled = |app: &App| {
        app.session().is_some_and(|o| {
            o.stream == StreamState::Open
                && o.items.len() == 2
                && o.items[0].state == message
                && matches!(o.items[1].state, EntryState::Failed(_))
        })
    };
    watcher.until("the watched reply settled", settled).await;
    sender.until("the sent reply settled", settled).await;
    assert_eq!(sender.rt.app.composer_text(), "tell me a long story");
    assert_eq!(
        watcher.rt.app.composer_text(),
        "",
        "sent from the other device"
    );
    restarted.shutdown().await;
}

/// Another device's message reaches the service just before this device's (its reply has
/// begun, but none of its events has reached this device yet, when Enter is pressed here): the
/// service holds this send until that turn ends. This device does not take the other reply for
/// its own (it did: the other reply showed, and was stored, as the answer to this message):
/// its message steps back, the other exchange shows where the service stores it, and this
/// message and its own reply come after it, on screen, in the local store and on the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_racing_another_devices_turn_comes_after_it_as_on_the_service() {
    let mut h = start(ServiceConfig::ephemeral(5)).await;
    let sid = h.rt.app.session().unwrap().id.clone();
    let laptop = convo_client::api::SendMessage {
        content: "from the laptop".into(),
        role: None,
        stream: Some(true),
        metadata: None,
    };
    // Answered once its turn has started (and its `started` is on its way to this device).
    let theirs = h
        .client
        .post_message(&sid, &laptop, "key-of-the-laptop")
        .await
        .unwrap()
        .message
        .message_id;
    // Typed before this device has handled any event of that turn.
    h.type_text("mine");
    h.press(KeyCode::Enter);
    h.until("mine held behind their turn", |app| {
        app.session()
            .is_some_and(|o| o.held.is_some() && o.pending.is_none())
    })
    .await;
    h.until("both replies, in the service's order", |app| {
        let o = app.session().unwrap();
        o.pending.is_none()
            && o.held.is_none()
            && o.items.len() == 4
            && o.items.iter().all(|i| i.state == EntryState::Complete)
    })
    .await;
    let o = h.rt.app.session().unwrap();
    let shown: Vec<(Option<String>, String)> = (0..4)
        .map(|i| (o.items[i].message_id.clone(), o.content(i).to_string()))
        .collect();
    assert_eq!(shown[0].1, "from the laptop");
    assert_eq!(
        shown[1].0.as_deref(),
        Some(theirs.as_str()),
        "their reply answers theirs"
    );
    assert_eq!(shown[2].1, "mine");
    let history = h.client.session_messages(&sid).await.unwrap().unwrap();
    let stored: Vec<String> = history.iter().map(|m| m.content.clone()).collect();
    let on_screen: Vec<String> = shown.iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(on_screen, stored, "the screen shows what the service holds");
    assert_eq!(history[3].message_id, shown[3].0.clone().unwrap());
    // The local store kept the same order.
    h = h.restarted().await;
    h.until("the session reloaded", |app| {
        app.session()
            .is_some_and(|o| o.loaded && o.items.len() == 4)
    })
    .await;
    let o = h.rt.app.session().unwrap();
    let reloaded: Vec<String> = (0..4).map(|i| o.content(i).to_string()).collect();
    assert_eq!(reloaded, stored);
}

/// What the open session shows, in order: each message's content.
fn shown(app: &App) -> Vec<String> {
    let o = app.session().unwrap();
    (0..o.items.len())
        .map(|i| o.content(i).to_string())
        .collect()
}

/// Ctrl-C twice right after Enter, both before the service answered the send: the reply is no
/// longer followed, and the answer that comes after the stop still stores the message and
/// names the reply, so that the reply the service stores shows whole over the cut one, here,
/// on the service and in the local store after a restart (the answer was dropped: the local
/// store never had the message, and the whole reply came as a second one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stopped_before_its_answer_is_kept_here_as_on_the_service() {
    let mut h = start(ServiceConfig::ephemeral(5)).await;
    let sid = h.rt.app.session().unwrap().id.clone();
    h.type_text("remember the tulip");
    // Before this device has handled the send's answer or any event of its turn.
    h.press(KeyCode::Enter);
    h.key(KeyCode::Char('c'), KeyModifiers::CONTROL);
    h.key(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(h.rt.app.session().unwrap().stopped.is_some());
    h.until("the reply shown whole", |app| {
        let o = app.session().unwrap();
        o.stopped.is_none() && o.items.len() == 2 && o.items[1].state == EntryState::Complete
    })
    .await;
    let history = h.client.session_messages(&sid).await.unwrap().unwrap();
    let stored: Vec<String> = history.iter().map(|m| m.content.clone()).collect();
    assert_eq!(stored[0], "remember the tulip");
    assert_eq!(
        shown(&h.rt.app),
        stored,
        "the screen shows what the service holds"
    );
    let o = h.rt.app.session().unwrap();
    assert_eq!(
        o.items[1].message_id.as_deref(),
        Some(history[1].message_id.as_str())
    );
    assert!(o.items[0].tokens > 0, "the message's tokens are counted");
    h = h.restarted().await;
    h.until("the session reloaded", |app| {
        app.session()
            .is_some_and(|o| o.loaded && o.items.len() == 2)
    })
    .await;
    assert_eq!(shown(&h.rt.app), stored, "the local store holds the same");
}

/// One Ctrl-C right after Enter, before the reply's id is known: the stop goes to the service
/// once the send's answer or the stream names the reply. However far the reply had come, this
/// device ends where the service does: the reply kept as far as it came, marked stopped, or,
/// stopped before any text, the turn undone and the text back in the composer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_right_after_enter_stops_the_reply_on_the_service() {
    let mut h = start(ServiceConfig::ephemeral(20)).await;
    let sid = h.rt.app.session().unwrap().id.clone();
    h.type_text("write a long answer");
    h.press(KeyCode::Enter);
    h.key(KeyCode::Char('c'), KeyModifiers::CONTROL);
    h.until("the stop settled", |app| {
        let o = app.session().unwrap();
        o.pending.is_none()
            && o.stopped.is_none()
            && o.items.get(1).is_some_and(|i| {
                !matches!(i.state, EntryState::Streaming | EntryState::Interrupted)
            })
    })
    .await;
    let history = h.client.session_messages(&sid).await.unwrap().unwrap();
    let stored: Vec<String> = history.iter().map(|m| m.content.clone()).collect();
    assert_eq!(
        shown(&h.rt.app),
        stored,
        "the screen shows what the service holds"
    );
    if stored.is_empty() {
        assert_eq!(h.rt.app.composer_text(), "write a long answer");
    } else {
        assert_eq!(
            history[1].finish_reason,
            Some(convo_client::api::FinishReason::Stopped)
        );
        let o = h.rt.app.session().unwrap();
        assert_eq!(
            o.items[1].finish,
            Some(convo_client::api::FinishReason::Stopped)
        );
    }
    h = h.restarted().await;
    h.until("the session reloaded", |app| {
        app.session()
            .is_some_and(|o| o.loaded && o.kept_items().count() == stored.len())
    })
    .await;
    assert_eq!(shown(&h.rt.app), stored, "the local store holds the same");
}
