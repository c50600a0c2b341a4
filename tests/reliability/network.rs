//! Network faults on the client side (issue 6, item 1), driven through `FaultProxy`: the
//! server down at start, a stream cut mid-reply, the server killed mid-reply, a stalled
//! connection, a response lost after the server committed, a handshake cut short.

use std::time::Duration;

use convo_client::api::client::Client;
use convo_client::api::stream::{SessionStream, StreamTiming, StreamUpdate};
use convo_client::api::{SendMessage, new_idempotency_key, new_session_id, send_streaming};
use convo_client::local_store::{MessageStatus, Store, StoredMessage};
use convo_service::{RunningService, ServiceConfig};
use convo_tui::app::{App, StreamState};
use convo_tui::render::transcript::EntryState;
use crossterm::event::{KeyCode, KeyModifiers};
use tokio::sync::mpsc;

use super::proxy::{Fault, FaultProxy};
use super::tui::{GUARD, Tui, options};
use crate::upstream::{Upstream, chunk, finish};

async fn service(config: ServiceConfig) -> RunningService {
    convo_service::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts")
}

fn stream_state(app: &App) -> Option<&StreamState> {
    app.session().map(|o| &o.stream)
}

fn stream_down(app: &App) -> bool {
    matches!(stream_state(app), Some(StreamState::Down(_)))
}

fn stream_open(app: &App) -> bool {
    stream_state(app) == Some(&StreamState::Open)
}

fn last_reply(app: &App) -> Option<(&str, &EntryState)> {
    let o = app.session()?;
    let i = o.items.last()?;
    Some((o.content(o.items.len() - 1), &i.state))
}

fn reply_complete(app: &App) -> bool {
    app.session().is_some_and(|o| o.pending.is_none())
        && last_reply(app).is_some_and(|(c, s)| *s == EntryState::Complete && !c.is_empty())
}

/// The stored history of a session on the service (the `/messages` extension).
async fn history(svc: &RunningService, session: &str) -> Vec<serde_json::Value> {
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/sessions/{session}/messages", svc.base_url()))
        .bearer_auth(&svc.api_key)
        .send()
        .await
        .expect("history request");
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        return Vec::new();
    }
    let body: serde_json::Value = resp.json().await.expect("history JSON");
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// Waits (guarded) until the service holds `n` messages in `session`.
async fn until_stored(svc: &RunningService, session: &str, n: usize) -> Vec<serde_json::Value> {
    let wait = async {
        loop {
            let h = history(svc, session).await;
            if h.len() >= n {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(GUARD, wait)
        .await
        .expect("the service stores the turn")
}

/// Waits (guarded) until the app's local store holds `n` messages of `session`.
async fn until_in_local_store(tui: &Tui, session: &str, n: usize) -> Vec<StoredMessage> {
    let file = tui.store_file.clone();
    let session = session.to_string();
    let wait = async move {
        loop {
            let found = Store::open(&file)
                .and_then(|s| s.transcript(&session))
                .unwrap_or_default();
            if found.len() >= n {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(GUARD, wait)
        .await
        .expect("the local store gets the messages")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_down_at_start_shows_offline_keeps_the_text_and_recovers_by_itself() {
    let proxy = FaultProxy::start(None).await;
    let svc = service(ServiceConfig::ephemeral(0)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(options(proxy.url(), &svc.api_key), dir.path());
    tui.until("the app open with its stream down", |app| {
        app.store_ready() && stream_down(app)
    })
    .await;
    let screen = tui.screen();
    assert!(screen.contains("stream down"), "{screen}");

    // A send while the server is down fails and leaves its text in the composer.
    tui.type_text("are you there?");
    tui.press(KeyCode::Enter);
    tui.until("the send failed", |app| {
        app.composer().send_error().is_some()
    })
    .await;
    assert_eq!(tui.app().composer_text(), "are you there?");
    assert!(
        tui.app().session().unwrap().items.is_empty(),
        "the failed message left the transcript"
    );

    // The server comes up: the stream reconnects with no key pressed.
    proxy.set_upstream(Some(svc.addr));
    tui.until("the stream open again", stream_open).await;
    tui.press(KeyCode::Enter);
    tui.until("the reply", reply_complete).await;
    let sid = tui.app().open_id().unwrap().to_string();
    let stored = history(&svc, &sid).await;
    assert_eq!(stored.len(), 2, "one message and its reply: {stored:?}");
    assert_eq!(stored[0]["content"], "are you there?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_reconnects_back_off_exponentially_one_attempt_each() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let proxy = FaultProxy::start(None).await;
    let svc = service(ServiceConfig::ephemeral(0)).await;
    let timing = StreamTiming {
        ping_interval: Duration::from_secs(600),
        silence_timeout: Duration::from_secs(1200),
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(160),
    };
    let (handle, mut rx) = SessionStream::connect_with(
        options(proxy.url(), &svc.api_key),
        &new_session_id(),
        timing,
    );
    let mut waits = Vec::new();
    while waits.len() < 7 {
        match tokio::time::timeout(GUARD, rx.recv())
            .await
            .expect("an update")
        {
            Some(StreamUpdate::Disconnected { retry_in, .. }) => {
                waits.push(retry_in.expect("it keeps retrying").as_millis())
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(waits, [20, 40, 80, 160, 160, 160, 160]);
    // The server comes up: the stream opens by itself.
    proxy.set_upstream(Some(svc.addr));
    let mut disconnects = waits.len();
    loop {
        match tokio::time::timeout(GUARD, rx.recv())
            .await
            .expect("an update")
        {
            Some(StreamUpdate::Connected) => break,
            Some(StreamUpdate::Disconnected { .. }) => disconnects += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(handle);
    // No busy loop: one connection per failed attempt, plus the one that succeeded.
    assert_eq!(proxy.accepted(), disconnects + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_cut_short_is_retried_not_taken_for_a_server_without_streams() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let svc = service(ServiceConfig::ephemeral(0)).await;
    let proxy = FaultProxy::start(Some(svc.addr)).await;
    proxy.next(Fault::Truncate(20));
    let timing = StreamTiming {
        backoff_base: Duration::from_millis(20),
        ..StreamTiming::default()
    };
    let (_handle, mut rx) = SessionStream::connect_with(
        options(proxy.url(), &svc.api_key),
        &new_session_id(),
        timing,
    );
    let first = tokio::time::timeout(GUARD, rx.recv())
        .await
        .expect("an update");
    assert!(
        matches!(
            first,
            Some(StreamUpdate::Disconnected {
                retry_in: Some(_),
                ..
            })
        ),
        "a cut-off handshake is a network failure to retry: {first:?}"
    );
    let second = tokio::time::timeout(GUARD, rx.recv())
        .await
        .expect("an update");
    assert_eq!(second, Some(StreamUpdate::Connected));
}

/// A service on the `openai` engine whose reply the test writes chunk by chunk, a proxy in
/// front of it, and the app behind the proxy with a message sent and two chunks shown.
async fn mid_reply() -> (
    RunningService,
    FaultProxy,
    Tui,
    mpsc::UnboundedSender<String>,
    tempfile::TempDir,
) {
    let (upstream, tx) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    // The upstream server task lives on in the runtime; the handle is not needed.
    drop(upstream);
    let svc = service(config).await;
    let proxy = FaultProxy::start(Some(svc.addr)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(options(proxy.url(), &svc.api_key), dir.path());
    tui.until("stream open", |app| app.store_ready() && stream_open(app))
        .await;
    tui.type_text("tell me everything");
    tui.press(KeyCode::Enter);
    tx.send(chunk("Partial ")).unwrap();
    tx.send(chunk("answer, ")).unwrap();
    tui.until("two chunks on screen", |app| {
        last_reply(app).is_some_and(|(c, _)| c == "Partial answer, ")
    })
    .await;
    (svc, proxy, tui, tx, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_reply_keeps_the_partial_reply_and_resumes_it() {
    let (svc, proxy, mut tui, tx, _dir) = mid_reply().await;
    proxy.set(Fault::Reset);
    proxy.cut_all();
    tui.until("the stream down", stream_down).await;
    assert_eq!(last_reply(tui.app()).unwrap().0, "Partial answer, ");
    let screen = tui.screen();
    assert!(
        screen.contains("Partial answer,") && screen.contains("stream down"),
        "{screen}"
    );

    proxy.set(Fault::Pass);
    tui.until("the stream open again", stream_open).await;
    tx.send(chunk("and the rest.")).unwrap();
    tx.send(finish()).unwrap();
    tui.until("the reply complete", reply_complete).await;
    assert_eq!(
        last_reply(tui.app()).unwrap().0,
        "Partial answer, and the rest."
    );
    let sid = tui.app().open_id().unwrap().to_string();
    let stored = until_stored(&svc, &sid, 2).await;
    assert_eq!(stored[1]["content"], "Partial answer, and the rest.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_reply_is_marked_interrupted_while_the_stream_is_down() {
    let (_svc, proxy, mut tui, _tx, _dir) = mid_reply().await;
    proxy.set(Fault::Reset);
    proxy.cut_all();
    tui.until("the stream down", stream_down).await;
    let screen = tui.screen();
    assert!(
        screen.contains("interrupted") && !screen.contains("streaming…"),
        "{screen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_finished_while_the_stream_was_down_is_shown_whole_after_reconnect() {
    let (svc, proxy, mut tui, tx, _dir) = mid_reply().await;
    proxy.set(Fault::Reset);
    proxy.cut_all();
    tui.until("the stream down", stream_down).await;
    tx.send(chunk("and the rest.")).unwrap();
    tx.send(finish()).unwrap();
    let sid = tui.app().open_id().unwrap().to_string();
    until_stored(&svc, &sid, 2).await;
    proxy.set(Fault::Pass);
    tui.until("the stream open again", stream_open).await;
    tui.until("the final reply", reply_complete).await;
    assert_eq!(
        last_reply(tui.app()).unwrap().0,
        "Partial answer, and the rest."
    );
    // Kept in the local store too, whole.
    let local = until_in_local_store(&tui, &sid, 2).await;
    assert_eq!(local[1].content, "Partial answer, and the rest.");
    assert_eq!(local[1].status, MessageStatus::Complete);
}

/// A service on a database in `dir` whose replies stream slowly, the app behind a proxy,
/// a message sent and part of its reply shown.
async fn killable(dir: &std::path::Path) -> (RunningService, FaultProxy, Tui) {
    let first = service(ServiceConfig::persistent(dir, 200).unwrap()).await;
    let proxy = FaultProxy::start(Some(first.addr)).await;
    let mut tui = Tui::start(options(proxy.url(), &first.api_key), dir);
    tui.until("stream open", |app| app.store_ready() && stream_open(app))
        .await;
    tui.type_text("please write a long story about lighthouses");
    tui.press(KeyCode::Enter);
    tui.until("part of the reply", |app| {
        last_reply(app).is_some_and(|(c, s)| *s == EntryState::Streaming && !c.is_empty())
    })
    .await;
    (first, proxy, tui)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_reply_and_restarted_is_reconnected_to_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _proxy, mut tui) = killable(dir.path()).await;
    let addr = first.addr;
    // The server goes away mid-reply: the turn is rolled back on its side.
    first.shutdown().await;
    tui.until("the stream down", stream_down).await;
    let partial = last_reply(tui.app()).unwrap().0.to_string();
    assert!(!partial.is_empty());
    assert!(
        tui.screen()
            .contains(partial.split_whitespace().next().unwrap())
    );

    // The same service comes back on the same address and database.
    let second = convo_service::start(ServiceConfig::persistent(dir.path(), 0).unwrap(), addr)
        .await
        .expect("the service restarts on its address");
    tui.until("the stream open again", stream_open).await;
    // The reply was cut short: the service's `error` event marks it failed, or, when the
    // close beat that event, it reads interrupted and the history fetched after the
    // reconnect settles it: the turn was rolled back, so the reply reads `not kept` (kept
    // locally as far as it came), the message `not sent`, and its text is back in the
    // composer to send again.
    tui.until("the reply settled", |app| {
        app.session()
            .is_some_and(|o| o.pending.is_none() && o.cut_off.is_none())
    })
    .await;
    let (kept, state) = last_reply(tui.app()).unwrap();
    let kept = kept.to_string();
    assert!(kept.starts_with(&partial), "what arrived stays visible");
    assert!(matches!(state, EntryState::Failed(_)), "{state:?}");
    // Either way the turn failed on the service's side, so the message is marked not sent
    // and its text is back in the composer to send again.
    assert_eq!(
        tui.app().composer_text(),
        "please write a long story about lighthouses"
    );
    if *state == EntryState::Failed("not kept".into()) {
        let notice = tui.app().notice().cloned().unwrap().text;
        assert!(notice.contains("did not keep"), "{notice}");
        assert!(tui.screen().contains("not sent"), "{}", tui.screen());
        let sid = tui.app().open_id().unwrap().to_string();
        let local = until_in_local_store(&tui, &sid, 2).await;
        assert_eq!(local[1].content, kept);
        assert_eq!(local[1].status, MessageStatus::Failed);
    }
    // Not this time: the composer is cleared to write something else.
    tui.key(KeyCode::Char('u'), KeyModifiers::CONTROL);
    assert_eq!(tui.app().composer_text(), "");
    tui.type_text("again, briefly");
    tui.press(KeyCode::Enter);
    tui.until("the reply", reply_complete).await;
    let sid = tui.app().open_id().unwrap().to_string();
    let stored = history(&second, &sid).await;
    let contents: Vec<&str> = stored
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        stored.len(),
        2,
        "the killed turn was rolled back: {contents:?}"
    );
    assert_eq!(contents[0], "again, briefly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_reply_ends_the_pending_reply_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _proxy, mut tui) = killable(dir.path()).await;
    first.shutdown().await;
    tui.until("the reply no longer pending", |app| {
        app.session().is_some_and(|o| o.pending.is_none())
    })
    .await;
    let (partial, state) = last_reply(tui.app()).unwrap();
    assert!(!partial.is_empty(), "what arrived stays visible");
    assert!(
        matches!(state, EntryState::Interrupted | EntryState::Failed(_)),
        "{state:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_connection_times_out_while_the_ui_keeps_working() {
    let svc = service(ServiceConfig::ephemeral(0)).await;
    let proxy = FaultProxy::start(Some(svc.addr)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(proxy.url(), &svc.api_key);
    opts.timeouts.request = Duration::from_millis(800);
    opts.timeouts.connect = Duration::from_millis(800);
    // With the stream down the send is a plain POST, which waits as long as a reply takes
    // to write: the reply timeout (ten minutes by default).
    opts.timeouts.reply = Duration::from_millis(800);
    let mut tui = Tui::start(opts, dir.path());
    tui.until("stream open", |app| app.store_ready() && stream_open(app))
        .await;
    // From now on the network swallows everything and answers nothing.
    proxy.set(Fault::Stall);
    proxy.cut_all();
    tui.until("the stream down", stream_down).await;
    tui.type_text("hello?");
    tui.press(KeyCode::Enter);
    assert!(tui.app().session().unwrap().pending.is_some());
    // The UI takes keys while the send hangs.
    tui.type_text("still typing");
    assert_eq!(tui.app().composer_text(), "still typing");
    tui.until("the send timed out", |app| {
        app.composer().send_error().is_some()
    })
    .await;
    let composer = tui.app().composer_text();
    assert!(
        composer.contains("hello?") && composer.contains("still typing"),
        "both texts kept: {composer:?}"
    );
    let why = tui.app().composer().send_error().unwrap().to_string();
    assert!(why.contains("time"), "says it timed out: {why}");
    let Some(StreamState::Down(stream_why)) = stream_state(tui.app()).cloned() else {
        unreachable!()
    };
    assert!(!stream_why.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_lost_after_the_server_committed_is_retried_and_stored_once() {
    let svc = service(ServiceConfig::ephemeral(0)).await;
    let proxy = FaultProxy::start(Some(svc.addr)).await;
    let mut opts = options(proxy.url(), &svc.api_key);
    opts.max_retries = 2;
    let client = Client::new(opts).unwrap();
    let sid = new_session_id();
    proxy.next(Fault::DropResponse);
    let body = SendMessage {
        content: "exactly once, please".into(),
        role: None,
        stream: None,
        metadata: None,
    };
    let reply = client
        .send_message(&sid, &body, &new_idempotency_key())
        .await
        .expect("the retry gets the reply");
    assert!(
        proxy.accepted() >= 2,
        "the first answer was lost, so it retried"
    );
    let stored = history(&svc, &sid).await;
    assert_eq!(stored.len(), 2, "one message, one reply: {stored:?}");
    assert_eq!(stored[0]["content"], "exactly once, please");
    assert_eq!(stored[1]["messageId"], reply.message_id.as_str());
    assert_eq!(stored[1]["content"], reply.content.as_str());

    // The same through a truncated answer.
    proxy.next(Fault::Truncate(40));
    let sid2 = new_session_id();
    let reply = client
        .send_message(&sid2, &body, &new_idempotency_key())
        .await
        .expect("the retry gets the reply");
    let stored = history(&svc, &sid2).await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert_eq!(stored[1]["messageId"], reply.message_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_link_delivers_the_streamed_reply_whole() {
    let svc = service(ServiceConfig::ephemeral(0)).await;
    let proxy = FaultProxy::start(Some(svc.addr)).await;
    proxy.set(Fault::Delay(Duration::from_millis(30)));
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(options(proxy.url(), &svc.api_key), dir.path());
    tui.until("stream open", |app| app.store_ready() && stream_open(app))
        .await;
    tui.type_text("show me some code");
    tui.press(KeyCode::Enter);
    tui.until("the reply", reply_complete).await;
    let sid = tui.app().open_id().unwrap().to_string();
    let stored = history(&svc, &sid).await;
    assert_eq!(
        last_reply(tui.app()).unwrap().0,
        stored[1]["content"].as_str().unwrap(),
        "every delta, in order, none twice"
    );
}

/// `send_streaming` (what `convo send --stream` runs) through `proxy`, its printed pieces
/// reported on the returned channel.
fn follow(
    proxy: &FaultProxy,
    api_key: &str,
    session: &str,
    text: &str,
) -> (
    tokio::task::JoinHandle<Result<convo_client::api::Message, convo_client::api::ApiError>>,
    mpsc::UnboundedReceiver<String>,
) {
    let client = Client::new(options(proxy.url(), api_key)).unwrap();
    let (printed_tx, printed) = mpsc::unbounded_channel();
    let body = SendMessage {
        content: text.into(),
        role: None,
        stream: None,
        metadata: None,
    };
    let session = session.to_string();
    let task = tokio::spawn(async move {
        send_streaming(&client, &session, &body, &new_idempotency_key(), |piece| {
            let _ = printed_tx.send(piece.to_string());
        })
        .await
    });
    (task, printed)
}

/// Collects printed pieces (guarded) until they make `want`.
async fn until_printed(
    printed: &mut mpsc::UnboundedReceiver<String>,
    sofar: &mut String,
    want: &str,
) {
    let wait = async {
        while sofar.as_str() != want {
            match printed.recv().await {
                Some(piece) => sofar.push_str(&piece),
                None => panic!("printing ended at {sofar:?}, wanted {want:?}"),
            }
        }
    };
    tokio::time::timeout(GUARD, wait)
        .await
        .expect("the pieces are printed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_reconnects_and_gets_a_reply_that_finished_while_the_stream_was_down() {
    let (upstream, tx) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    drop(upstream);
    let svc = service(config).await;
    let proxy = FaultProxy::start(Some(svc.addr)).await;
    let sid = new_session_id();
    let (task, mut printed) = follow(&proxy, &svc.api_key, &sid, "tell me everything");
    let mut sofar = String::new();
    tx.send(chunk("Partial ")).unwrap();
    tx.send(chunk("answer, ")).unwrap();
    until_printed(&mut printed, &mut sofar, "Partial answer, ").await;

    // The stream drops; the reply finishes meanwhile; the stream comes back.
    proxy.set(Fault::Reset);
    proxy.cut_all();
    tx.send(chunk("and the rest.")).unwrap();
    tx.send(finish()).unwrap();
    until_stored(&svc, &sid, 2).await;
    proxy.set(Fault::Pass);
    let reply = tokio::time::timeout(GUARD, task)
        .await
        .expect("send_streaming ends")
        .unwrap()
        .expect("the stored reply, fetched after the reconnect");
    assert_eq!(reply.content, "Partial answer, and the rest.");
    // What was printed is the whole reply, each piece once.
    until_printed(&mut printed, &mut sofar, "Partial answer, and the rest.").await;
    assert!(printed.try_recv().is_err(), "nothing printed twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_says_clearly_when_the_server_dropped_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let first = service(ServiceConfig::persistent(dir.path(), 200).unwrap()).await;
    let addr = first.addr;
    let proxy = FaultProxy::start(Some(addr)).await;
    let sid = new_session_id();
    let (task, mut printed) = follow(&proxy, &first.api_key, &sid, "a long story, please");
    let first_piece = tokio::time::timeout(GUARD, printed.recv())
        .await
        .expect("part of the reply")
        .expect("a piece");
    assert!(!first_piece.is_empty());
    // The server stops mid-reply (the turn is rolled back) and comes back.
    first.shutdown().await;
    let _second = convo_service::start(ServiceConfig::persistent(dir.path(), 0).unwrap(), addr)
        .await
        .expect("the service restarts on its address");
    let e = tokio::time::timeout(GUARD, task)
        .await
        .expect("send_streaming ends by itself")
        .unwrap()
        .expect_err("the reply is gone");
    // Either the service's `error` event beat the close, or the history settled it.
    let why = e.to_string();
    assert!(
        why.contains("did not keep the reply") || why.contains("shutting down"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convo_send_stream_prints_a_reply_that_finished_while_its_stream_was_down() {
    use tokio::io::AsyncReadExt;
    let (upstream, tx) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    drop(upstream);
    let svc = service(config).await;
    let proxy = FaultProxy::start(Some(svc.addr)).await;
    let home = tempfile::tempdir().unwrap();
    let sid = new_session_id();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .args([
            "send",
            "--stream",
            "--new",
            "--session",
            &sid,
            "tell me everything",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("NO_COLOR", "1")
        .env("CONVO_BASE_URL", proxy.url().as_str())
        .env("CONVO_API_KEY", &svc.api_key)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("convo starts");
    let mut stdout = child.stdout.take().unwrap();
    let mut printed = Vec::new();
    tx.send(chunk("Partial ")).unwrap();
    tx.send(chunk("answer, ")).unwrap();
    let first_part = async {
        let mut buf = [0u8; 256];
        while !String::from_utf8_lossy(&printed).contains("Partial answer, ") {
            let n = stdout.read(&mut buf).await.expect("stdout");
            assert!(
                n > 0,
                "convo ended early: {:?}",
                String::from_utf8_lossy(&printed)
            );
            printed.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(GUARD, first_part)
        .await
        .expect("the first part is printed");

    // The stream drops; the reply finishes meanwhile; the network comes back.
    proxy.set(Fault::Reset);
    proxy.cut_all();
    tx.send(chunk("and the rest.")).unwrap();
    tx.send(finish()).unwrap();
    until_stored(&svc, &sid, 2).await;
    proxy.set(Fault::Pass);
    let rest = async {
        stdout.read_to_end(&mut printed).await.expect("stdout");
        child.wait().await.expect("convo ends")
    };
    let status = tokio::time::timeout(GUARD, rest)
        .await
        .expect("convo ends by itself");
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await;
    assert!(status.success(), "exit {status:?}; stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&printed),
        "Partial answer, and the rest.\n",
        "the whole reply, each piece once"
    );
    // The local store has the exchange, the reply whole.
    let store = Store::open(&home.path().join("data").join("convo").join("convo.db")).unwrap();
    let local = store.transcript(&sid).unwrap();
    assert_eq!(local.len(), 2, "{local:?}");
    assert_eq!(local[1].content, "Partial answer, and the rest.");
}
