//! The `local` engine's state kept across restarts (`LocalOptions::kv_dir`), its progress
//! while reading a long prompt, its stop, its length limits and its counters, on the real
//! model (greedy sampling: the same tokens on every run).

use std::path::Path;

use convo_client::api::Role;
use convo_core::HistoryEntry;
use convo_service::engine::local::{LocalEngine, LocalOptions};
use convo_service::engine::{EngineError, EngineEvent, Finish, ReplyEngine};
use tokio::sync::mpsc;

use super::common::GUARD;
use super::local_model::{entry, listening_url, options, request, settled, test_model};

/// About 2,000 tokens: several steps of up to 512 tokens, so that progress shows.
fn long_text() -> String {
    "Summarise this: ".to_string() + &"the quick brown fox jumps over the lazy dog. ".repeat(200)
}

/// About 220 tokens: enough that a prefix reused or not is plain in the counters.
pub(super) fn mid_text() -> String {
    "Summarise this: ".to_string() + &"the quick brown fox jumps over the lazy dog. ".repeat(20)
}

async fn started(options: LocalOptions) -> LocalEngine {
    let engine = LocalEngine::start(options).unwrap();
    engine.ready().await.unwrap();
    engine
}

/// Every event of one reply, and how it ended.
async fn events(
    engine: &LocalEngine,
    session: &str,
    history: &[HistoryEntry],
) -> (Vec<EngineEvent>, Result<Finish, EngineError>) {
    let (tx, mut rx) = mpsc::channel(64);
    let reply = engine.reply(request(session, history), tx);
    let mut seen = Vec::new();
    let reading = async {
        while let Some(event) = rx.recv().await {
            seen.push(event);
        }
    };
    // Twice the usual guard: a reply of a whole window on cores other builds hold.
    let (finish, ()) = tokio::time::timeout(2 * GUARD, futures_util::future::join(reply, reading))
        .await
        .expect("a reply in time");
    (seen, finish)
}

fn text(events: &[EngineEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// A reply's text, and the tokens decoded and reused for it.
async fn turn(engine: &LocalEngine, session: &str, history: &[HistoryEntry]) -> (String, u64, u64) {
    let (decoded, reused) = engine.counters();
    let (seen, finish) = events(engine, session, history).await;
    finish.expect("a reply");
    let (d, r) = engine.counters();
    (text(&seen), d - decoded, r - reused)
}

fn with_kv(dir: &Path) -> LocalOptions {
    LocalOptions {
        kv_dir: Some(dir.to_path_buf()),
        max_reply_tokens: Some(24),
        ..options()
    }
}

/// The saved states under `dir`, for every model.
pub(super) fn saved(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|m| std::fs::read_dir(m.path()).into_iter().flatten().flatten())
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|x| x == "kv"))
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_sessions_state_is_reused_after_a_restart_and_a_stale_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv");
    let mut history = vec![entry(Role::User, &mid_text())];
    let engine = started(with_kv(&kv)).await;
    let (reply, first_decoded, _) = turn(&engine, "s1", &history).await;
    assert!(first_decoded > 150, "turn 1 decoded {first_decoded}");
    // The engine stops: the session's state is saved.
    drop(engine);
    assert_eq!(saved(&kv).len(), 1);
    history.push(entry(Role::Assistant, &reply));
    history.push(entry(Role::User, "Thanks. How many words was that?"));

    // After the restart the next turn decodes only what is new.
    let engine = started(with_kv(&kv)).await;
    let (_, decoded, reused) = turn(&engine, "s1", &history).await;
    assert!(reused > 150, "reused {reused}");
    assert!(decoded < 80, "decoded {decoded} (turn 1: {first_decoded})");
    drop(engine);

    // Another conversation under the same session id (a different prefix): only the chat
    // template's opening is the same, the rest is read afresh.
    let other = [entry(Role::User, &format!("Translate: {}", mid_text()))];
    let engine = started(with_kv(&kv)).await;
    let (_, decoded, reused) = turn(&engine, "s1", &other).await;
    assert!(reused < 50, "reused {reused} of a different conversation");
    assert!(decoded > 150, "decoded {decoded}");
    drop(engine);

    // Another model file (the same weights but one byte): the saved state is not its own.
    let engine = started(with_kv(&kv)).await;
    let (reply, _, _) = turn(&engine, "s2", &history[..1]).await;
    drop(engine);
    let mut s2 = history[..1].to_vec();
    s2.push(entry(Role::Assistant, &reply));
    s2.push(entry(Role::User, "Thanks."));
    let changed = dir.path().join("changed.gguf");
    let mut bytes = std::fs::read(test_model()).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 1;
    std::fs::write(&changed, bytes).unwrap();
    let engine = started(LocalOptions {
        model: changed,
        ..with_kv(&kv)
    })
    .await;
    let (_, decoded, reused) = turn(&engine, "s2", &s2).await;
    assert_eq!(reused, 0);
    assert!(decoded > 150, "decoded {decoded}");
}

#[tokio::test]
async fn a_forgotten_sessions_saved_state_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let question = [entry(Role::User, "What is the capital of France?")];
    let engine = started(with_kv(dir.path())).await;
    turn(&engine, "keep", &question).await;
    turn(&engine, "gone", &question).await;
    drop(engine);
    assert_eq!(saved(dir.path()).len(), 2);
    let engine = started(with_kv(dir.path())).await;
    // In memory too: the session's next reply (were there one) would start afresh.
    turn(&engine, "gone", &question).await;
    engine.forget_session("gone");
    let deadline = tokio::time::Instant::now() + GUARD;
    while engine.stats().kv_slots_used != 0 {
        assert!(tokio::time::Instant::now() < deadline, "the slot was kept");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    drop(engine);
    assert_eq!(saved(dir.path()).len(), 1);
    let engine = started(with_kv(dir.path())).await;
    let (_, _, reused) = turn(&engine, "gone", &question).await;
    assert_eq!(reused, 0);
    // All of "keep"'s prompt but the last token (decoded again for its logits) was saved.
    let (_, decoded, reused) = turn(&engine, "keep", &question).await;
    assert!(reused >= 10, "reused {reused}");
    assert!(decoded <= 25, "decoded {decoded}");
}

/// An undone exchange (`trim_session`, with the messages that remain) leaves the session's
/// state, in memory and on disk: the same message sent again reuses only what came before it.
/// The part before it stays (saved at the stop, reused after a restart); a saved state found on
/// disk at the undo is removed.
#[tokio::test]
async fn an_undone_exchange_leaves_the_sessions_state() {
    let dir = tempfile::tempdir().unwrap();
    let engine = started(with_kv(dir.path())).await;
    let mut history = vec![entry(Role::User, "What is the capital of France?")];
    let (reply, _, _) = turn(&engine, "s", &history).await;
    history.push(entry(Role::Assistant, &reply));
    let kept = history.clone();
    // About 220 tokens the undo must take out of the state.
    history.push(entry(Role::User, &mid_text()));
    let (_, _, before) = turn(&engine, "s", &history).await;
    assert!(before >= 20, "the first exchange was reused: {before}");

    // In memory: sent again after the undo, the message is read afresh. What is reused is the
    // first exchange read from its text, a few template tokens more than its reply as
    // generated matched (`before`); the undone message would be about 220 more.
    let within = before + 50;
    engine.trim_session("s", &kept);
    let (_, decoded, reused) = turn(&engine, "s", &history).await;
    assert!(
        reused < within,
        "reused {reused} (before the undone message: {before})"
    );
    assert!(decoded > 150, "decoded {decoded}");

    // What the engine saves as it stops holds the first exchange only.
    engine.trim_session("s", &kept);
    drop(engine);
    assert_eq!(saved(dir.path()).len(), 1);
    let engine = started(with_kv(dir.path())).await;
    let (_, _, reused) = turn(&engine, "s", &history).await;
    assert!(
        reused >= 20 && reused < within,
        "reused {reused} after the restart (before the undone message: {before})"
    );

    // A state saved with the undone message (the engine stopped before the undo) is removed.
    drop(engine);
    let engine = started(with_kv(dir.path())).await;
    engine.trim_session("s", &kept);
    drop(engine);
    assert_eq!(saved(dir.path()), Vec::<std::path::PathBuf>::new());
}

#[tokio::test]
async fn over_the_disk_cap_the_least_recently_used_state_goes() {
    let dir = tempfile::tempdir().unwrap();
    let question = [entry(Role::User, "What is the capital of France?")];
    // One slot: a second session takes the first one's place, which is saved then.
    let one_slot = |cap| LocalOptions {
        sessions: 1,
        kv_disk_bytes: cap,
        ..with_kv(dir.path())
    };
    let engine = started(one_slot(u64::MAX)).await;
    turn(&engine, "a", &question).await;
    drop(engine);
    let size = std::fs::metadata(&saved(dir.path())[0]).unwrap().len();
    // Room for one state and a half: saving "b" evicts "a", used longer ago.
    let engine = started(one_slot(size * 3 / 2)).await;
    turn(&engine, "b", &question).await;
    drop(engine);
    assert_eq!(saved(dir.path()).len(), 1);
    let engine = started(one_slot(u64::MAX)).await;
    let (_, _, reused) = turn(&engine, "b", &question).await;
    assert!(reused >= 10, "b reused {reused}");
    let (_, _, reused) = turn(&engine, "a", &question).await;
    assert_eq!(reused, 0, "a's state was evicted");
}

#[tokio::test]
async fn a_long_prompt_reports_its_progress_before_any_text() {
    let engine = started(LocalOptions {
        max_reply_tokens: Some(8),
        ..options()
    })
    .await;
    let (seen, finish) = events(&engine, "s1", &[entry(Role::User, &long_text())]).await;
    finish.unwrap();
    let first_text = seen
        .iter()
        .position(|e| matches!(e, EngineEvent::Text(_)))
        .expect("a reply");
    let progress: Vec<(u64, u64)> = seen[..first_text]
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Progress { read, total } => Some((*read, *total)),
            _ => None,
        })
        .collect();
    assert!(!progress.is_empty(), "no progress before the text");
    assert!(
        seen[first_text..]
            .iter()
            .all(|e| matches!(e, EngineEvent::Text(_)))
    );
    let total = progress[0].1;
    assert!(total > 300, "a prompt of {total} tokens");
    assert!(progress.iter().all(|&(read, t)| t == total && read < total));
    assert!(progress.windows(2).all(|w| w[0].0 < w[1].0), "{progress:?}");
    // A short prompt is read in one step and reports nothing.
    let (seen, _) = events(&engine, "s2", &[entry(Role::User, "Hi!")]).await;
    assert!(
        seen.iter().all(|e| matches!(e, EngineEvent::Text(_))),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_closed_channel_stops_reading_a_long_prompt() {
    let engine = started(options()).await;
    let history = [entry(Role::User, &long_text())];
    let (tx, mut rx) = mpsc::channel(4);
    let reply = engine.reply(request("s1", &history), tx);
    let total = tokio::select! {
        _ = reply => panic!("the reply ended before its first progress"),
        event = rx.recv() => match event {
            Some(EngineEvent::Progress { total, .. }) => total,
            other => panic!("expected progress, got {other:?}"),
        },
    };
    // The turn is gone: the model thread stops at its next step, before the prompt is read.
    drop(rx);
    let stopped = settled(&engine).await;
    assert!(
        stopped < total,
        "{stopped} tokens decoded of a {total}-token prompt"
    );
    assert_eq!(engine.stats().generated_tokens, 0);
}

#[tokio::test]
async fn a_reply_is_cut_by_its_cap_or_by_the_context_with_finish_length() {
    let count = [entry(
        Role::User,
        "Count from 1 to 500, one number per line.",
    )];
    let engine = started(LocalOptions {
        max_reply_tokens: Some(8),
        ..options()
    })
    .await;
    let (_, finish) = events(&engine, "s1", &count).await;
    assert_eq!(finish.unwrap(), Finish::Length { tokens: 8 });
    drop(engine);
    // No cap: the reply goes on until the window (256 tokens here, the least) is full.
    let engine = started(LocalOptions {
        max_reply_tokens: None,
        kv_tokens: 256,
        ..options()
    })
    .await;
    // A prompt of about 120 tokens: the reply has what the prompt leaves (about 130).
    let notes = "The keeper lights the lamp every night and watches the sea. ".repeat(8);
    let story = [entry(
        Role::User,
        &format!("{notes}Write a long story about the keeper and a storm."),
    )];
    let (seen, finish) = events(&engine, "s1", &story).await;
    let Finish::Length { tokens } = finish.unwrap() else {
        panic!(
            "the reply ended before the window was full: {}",
            text(&seen)
        );
    };
    let prompt = engine.stats().prompt_tokens;
    assert!(tokens > 100, "{tokens} tokens");
    assert!(prompt + tokens <= 256, "prompt {prompt} + reply {tokens}");
    // A reply the model ends itself is complete.
    let (_, finish) = events(
        &engine,
        "s2",
        &[entry(Role::User, "What is the capital of France?")],
    )
    .await;
    assert_eq!(finish.unwrap(), Finish::Complete);
}

#[tokio::test]
async fn the_stats_count_what_the_engine_did() {
    let engine = started(LocalOptions {
        sessions: 4,
        ..options()
    })
    .await;
    let before = engine.stats();
    assert_eq!(before.kv_slots_total, 4);
    assert_eq!(before.kv_slots_used, 0);
    let mut history = vec![entry(Role::User, "What is the capital of France?")];
    let (reply, _, _) = turn(&engine, "s1", &history).await;
    let one = engine.stats();
    assert!(one.prompt_tokens > 10, "{one:?}");
    assert!(one.generated_tokens > 0, "{one:?}");
    assert!(
        one.prompt_seconds > 0.0 && one.generation_seconds > 0.0,
        "{one:?}"
    );
    assert_eq!(one.reused_tokens, 0);
    assert_eq!(one.kv_slots_used, 1);
    assert_eq!(one.queue_depth, 0);
    history.push(entry(Role::Assistant, &reply));
    history.push(entry(Role::User, "And of Germany?"));
    turn(&engine, "s1", &history).await;
    let two = engine.stats();
    assert!(two.reused_tokens >= 10, "{two:?}");
    assert_eq!(two.kv_slots_used, 1);
    assert!(two.prompt_tokens > one.prompt_tokens, "{two:?}");
    assert!(two.generated_tokens > one.generated_tokens, "{two:?}");
}

/// `convo serve` saves its sessions' state in `<data dir>/kv` when it stops (SIGTERM).
#[tokio::test]
async fn convo_serve_saves_the_sessions_state_when_it_stops() {
    const KEY: &str = "service_live_kvkvkvkvkvkvkvkvkvkv1234";
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .args(["serve", "--addr", "127.0.0.1:0", "--engine", "local"])
        .args(["--temperature", "0", "--max-reply-tokens", "8"])
        .args([
            "--api-key",
            &format!("{KEY}=enterprise"),
            "--jwt-secret",
            "kv",
        ])
        .arg("--model")
        .arg(test_model())
        .env("CONVO_DATA_DIR", dir.path())
        .env("RUST_LOG", "off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("convo runs");
    let url = listening_url(&mut child);
    let session = convo_wire::new_session_id();
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/sessions/{session}/messages"))
        .bearer_auth(KEY)
        .json(&serde_json::json!({"content": "What is the capital of France?"}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{:?}", resp.text().await);
    // Nothing is saved while the session's state is in memory.
    assert!(saved(&dir.path().join("kv")).is_empty());
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success());
    assert_eq!(saved(&dir.path().join("kv")).len(), 1);
}

#[tokio::test]
async fn an_idle_session_leaves_the_cache_for_another_and_comes_back_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv");
    let engine = started(with_kv(&kv)).await;
    let mut history = vec![entry(Role::User, &mid_text())];
    let (reply, _, _) = turn(&engine, "s1", &history).await;
    assert_eq!(engine.stats().kv_slots_used, 1);
    assert!(saved(&kv).is_empty(), "nothing saved while s1 is alone");
    // Another session's reply: s1 is idle, its cells would slow s2's every token, so its
    // state goes to the store and the cache holds s2 alone.
    turn(
        &engine,
        "s2",
        &[entry(Role::User, "What is the capital of France?")],
    )
    .await;
    assert_eq!(saved(&kv).len(), 1, "s1 saved when s2 started");
    assert_eq!(engine.stats().kv_slots_used, 1);
    // s1's next turn comes back from the store: only the new message is read.
    history.push(entry(Role::Assistant, &reply));
    history.push(entry(Role::User, "Thanks. How many words was that?"));
    let (_, decoded, reused) = turn(&engine, "s1", &history).await;
    assert!(reused > 150, "reused {reused}");
    assert!(decoded < 80, "decoded {decoded}");
    assert_eq!(saved(&kv).len(), 2, "s2 saved in turn");
}

#[tokio::test]
async fn without_a_store_idle_sessions_stay_in_the_cache() {
    let engine = started(options()).await;
    turn(&engine, "s1", &[entry(Role::User, &mid_text())]).await;
    turn(
        &engine,
        "s2",
        &[entry(Role::User, "What is the capital of France?")],
    )
    .await;
    assert_eq!(engine.stats().kv_slots_used, 2);
}
