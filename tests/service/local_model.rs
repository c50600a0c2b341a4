//! The `local` engine on the real model (SmolLM2-135M-Instruct, installed by
//! `scripts/fetch-model.sh`; `CONVO_TEST_MODEL` names another file). Replies are sampled
//! greedily (temperature 0), so they are the same on every run, except in the tests of
//! sampling itself.

use std::path::PathBuf;
use std::time::Duration;

use convo_client::api::{Role, StreamEvent};
use convo_core::HistoryEntry;
use convo_service::engine::local::{LocalEngine, LocalOptions};
use convo_service::engine::{EngineEvent, ReplyEngine, ReplyRequest};
use convo_service::{EngineConfig, ServiceConfig};
use reqwest::StatusCode;
use serde_json::json;
use tokio::sync::mpsc;

use super::common::{GUARD, Svc, close, session, start_with, until_end};

/// The model the tests run on.
pub fn test_model() -> PathBuf {
    if let Some(path) = std::env::var_os("CONVO_TEST_MODEL") {
        return PathBuf::from(path);
    }
    let data = std::env::var_os("CONVO_DATA_DIR")
        .map(PathBuf::from)
        .or_else(convo_client::config::default_data_dir)
        .expect("a data dir");
    let path = data.join("models").join("SmolLM2-135M-Instruct.gguf");
    assert!(
        path.is_file(),
        "the local engine's tests run on {}: install it with scripts/fetch-model.sh",
        path.display()
    );
    path
}

/// A data dir whose models dir holds the test model (a link), as `convo model pull` leaves it.
pub(super) fn data_dir_with_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(test_model(), models.join("SmolLM2-135M-Instruct.gguf")).unwrap();
    dir
}

/// The base URL a `convo serve` child (stdout piped) prints first: `listening on URL`.
pub(super) fn listening_url(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("not the address: {line}"))
        .to_string()
}

/// A child process killed and reaped when dropped, also when the test panics first.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn options() -> LocalOptions {
    LocalOptions {
        temperature: 0.0,
        max_reply_tokens: Some(96),
        ..LocalOptions::new(test_model())
    }
}

/// A service on the local engine with `options`, once its model is loaded.
pub(super) async fn start_local(options: LocalOptions) -> Svc {
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = EngineConfig::Local(options);
    let svc = start_with(config).await;
    let mut load = svc.service.engine_load();
    tokio::time::timeout(
        GUARD,
        load.wait_for(|s| *s == convo_service::engine::LoadState::Ready),
    )
    .await
    .expect("the model loads in time")
    .expect("the model loads");
    svc
}

#[tokio::test]
async fn the_capital_of_france_is_paris() {
    let svc = start_local(options()).await;
    let reply = svc
        .send_text(&session(), "What is the capital of France?")
        .await;
    let content = reply["content"].as_str().unwrap();
    assert!(content.contains("Paris"), "{content}");
    assert_eq!(reply["role"], "assistant");
    assert!(reply["tokens"].as_u64().unwrap() > 0);
    assert_eq!(svc.service.engine_label(), "local · SmolLM2-135M-Instruct");
}

#[tokio::test]
async fn a_streamed_reply_arrives_as_many_deltas_that_add_up_to_the_stored_reply() {
    let svc = start_local(options()).await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let (status, body) = svc
        .post(
            &sid,
            json!({"content": "Name three colours of the rainbow.", "stream": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["messageId"].as_str().unwrap().to_string();
    let events = until_end(&mut ws, &id).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Delta { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() >= 5, "only {} deltas", deltas.len());
    let Some(StreamEvent::Done { message }) = events.last() else {
        panic!("no done: {events:?}");
    };
    assert_eq!(deltas.concat(), message.content);
    close(ws).await;
}

#[tokio::test]
async fn a_follow_up_uses_the_earlier_turns_and_reuses_their_computed_state() {
    let svc = start_local(options()).await;
    let sid = session();
    let first = svc.send_text(&sid, "What is the capital of France?").await;
    assert!(first["content"].as_str().unwrap().contains("Paris"));
    // Only the earlier turns say that the question is about capitals.
    let second = svc.send_text(&sid, "And of Germany?").await;
    let content = second["content"].as_str().unwrap();
    assert!(content.contains("Berlin"), "{content}");
}

#[tokio::test]
async fn turn_two_decodes_only_what_is_new() {
    let engine = LocalEngine::start(options()).unwrap();
    engine.ready().await.unwrap();
    let mut history = vec![entry(Role::User, "What is the capital of France?")];
    let reply = collect(&engine, "s1", &history).await;
    let (decoded_1, reused_1) = engine.counters();
    assert_eq!(reused_1, 0);
    history.push(entry(Role::Assistant, &reply));
    history.push(entry(Role::User, "And of Germany?"));
    let reply = collect(&engine, "s1", &history).await;
    assert!(reply.contains("Berlin"), "{reply}");
    let (decoded_2, reused_2) = engine.counters();
    // Turn 1's prompt and reply were kept: turn 2 decoded its new message and its reply.
    assert!(
        reused_2 - reused_1 >= 20,
        "reused {} tokens",
        reused_2 - reused_1
    );
    let turn_2 = decoded_2 - decoded_1;
    assert!(
        turn_2 < decoded_1 + 20,
        "turn 2 decoded {turn_2} tokens (turn 1: {decoded_1})"
    );
    // Another session takes another slot (sharing only the prefix its history has in common).
    let other = collect(&engine, "s2", &history[..1]).await;
    assert!(other.contains("Paris"), "{other}");
}

#[tokio::test]
async fn a_fork_starts_from_its_sources_computed_state() {
    let engine = LocalEngine::start(options()).unwrap();
    engine.ready().await.unwrap();
    let mut history = vec![entry(Role::User, "What is the capital of France?")];
    let reply = collect(&engine, "source", &history).await;
    history.push(entry(Role::Assistant, &reply));
    history.push(entry(Role::User, "And of Germany?"));
    collect(&engine, "source", &history).await;
    let (_, reused_before) = engine.counters();
    // A fork of the source after its first exchange, asking something else: a session this
    // engine never saw, whose history begins as the source's.
    let mut fork = history[..2].to_vec();
    fork.push(entry(Role::User, "And of Italy?"));
    let reply = collect(&engine, "fork", &fork).await;
    assert!(reply.contains("Rome"), "{reply}");
    let (_, reused_after) = engine.counters();
    assert!(
        reused_after - reused_before >= 20,
        "the fork reused {} tokens of its source",
        reused_after - reused_before
    );
}

#[tokio::test]
async fn four_sessions_at_once_are_all_answered() {
    let svc = start_local(options()).await;
    let questions = [
        "What is the capital of France?",
        "What is the capital of Italy?",
        "What is the capital of Spain?",
        "What is the capital of Japan?",
    ];
    let answers = ["Paris", "Rome", "Madrid", "Tokyo"];
    let sends = questions.iter().map(|q| {
        let svc = &svc;
        async move { svc.send_text(&session(), q).await }
    });
    let replies = futures_util::future::join_all(sends).await;
    for (reply, answer) in replies.iter().zip(answers) {
        let content = reply["content"].as_str().unwrap();
        assert!(content.contains(answer), "{answer}? {content}");
    }
}

#[tokio::test]
async fn a_stopped_reply_stops_computing() {
    let engine = LocalEngine::start(LocalOptions {
        max_reply_tokens: Some(2_000),
        ..options()
    })
    .unwrap();
    engine.ready().await.unwrap();
    let history = vec![entry(
        Role::User,
        "Count from 1 to 500, one number per line.",
    )];
    let (tx, mut rx) = mpsc::channel(4);
    let reply = engine.reply(request("s1", &history), tx);
    let reading = async {
        for _ in 0..5 {
            rx.recv().await.expect("a piece");
        }
    };
    tokio::select! {
        _ = reply => panic!("the reply ended before five pieces"),
        _ = reading => {}
    }
    // The turn is gone (the future is dropped): the model thread stops at its next step.
    drop(rx);
    let stopped = settled(&engine).await;
    let (after, _) = engine.counters();
    assert_eq!(stopped, after);
    assert!(
        stopped < 200,
        "{stopped} tokens decoded after the stop (the reply could run to 2,000)"
    );
    still_answers(&engine, "s2").await;
}

#[tokio::test]
async fn a_stop_while_a_long_prompt_is_read_aborts_the_step_under_way() {
    let engine = LocalEngine::start(options()).unwrap();
    engine.ready().await.unwrap();
    // About 3,500 tokens, read in steps of up to 512: after the first progress, at least one
    // whole step is left whatever the machine's speed.
    let long = "The quick brown fox jumps over the lazy dog near the river bank. ".repeat(250);
    let history = vec![entry(Role::User, &format!("{long}\nSummarise this."))];
    let (tx, mut rx) = mpsc::channel(4);
    let reply = engine.reply(request("long", &history), tx);
    let first_progress = async {
        match rx.recv().await.expect("a piece") {
            EngineEvent::Progress { read, total } => (read, total),
            other => panic!("a piece before the prompt is read: {other:?}"),
        }
    };
    let (read, total) = tokio::select! {
        _ = reply => panic!("the reply ended before any progress"),
        progress = first_progress => progress,
    };
    assert!(read < total, "{read} of {total}");
    // The reply is dropped (its turn stopped) while the next step reads the prompt: llama.cpp
    // is asked during the step and abandons it, so no prompt token beyond the progress is
    // counted as decoded (without the abort the step under way would finish: 512 more).
    drop(rx);
    settled(&engine).await;
    let decoded = engine
        .all_counters()
        .prompt
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        decoded < read + 512,
        "{decoded} prompt tokens decoded, {read} when the reply was stopped"
    );
    // The same session too: the aborted step left no cells.
    still_answers(&engine, "long").await;
}

#[tokio::test]
async fn deleting_a_session_stops_its_reply() {
    let svc = start_local(LocalOptions {
        max_reply_tokens: Some(2_000),
        ..options()
    })
    .await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let (status, body) = svc
        .post(
            &sid,
            json!({"content": "Count from 1 to 500, one number per line.", "stream": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["messageId"].as_str().unwrap().to_string();
    // Wait for the reply to be under way.
    loop {
        if let StreamEvent::Delta { .. } = super::common::next_event(&mut ws).await {
            break;
        }
    }
    let (status, _) = svc.delete(&sid).await;
    assert_eq!(status, StatusCode::OK);
    let events = until_end(&mut ws, &id).await;
    match events.last() {
        Some(StreamEvent::Error { error, .. }) => {
            assert_eq!(error.code, "session_not_found")
        }
        other => panic!("expected an error event, got {other:?}"),
    }
    // The session's next message is refused, the service answers others.
    let (status, _) = svc.post(&sid, json!({"content": "still there?"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let reply = svc
        .send_text(&session(), "What is the capital of France?")
        .await;
    assert!(reply["content"].as_str().unwrap().contains("Paris"));
}

#[tokio::test]
async fn the_models_window_lowers_the_context_limit() {
    let mut config = ServiceConfig::ephemeral(0);
    config.max_context_tokens = 1_000_000;
    config.engine = EngineConfig::Local(LocalOptions {
        kv_tokens: 512,
        ..options()
    });
    let svc = start_with(config).await;
    svc.service
        .engine_load()
        .wait_for(|s| *s == convo_service::engine::LoadState::Ready)
        .await
        .unwrap();
    assert_eq!(svc.service.context_limit(), 512);
    // A message over the window is refused with context_overflow, not sent to the model.
    let long = "word ".repeat(600);
    let (status, body) = svc.post(&session(), json!({"content": long})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "context_overflow");
}

/// Without a seed, every reply draws a fresh one: asking again in the same session (what
/// `/retry` does) gets another answer. With a seed, the same conversation gets the same reply.
#[tokio::test]
async fn replies_differ_without_a_seed_and_repeat_with_one() {
    let history = [entry(Role::User, "Write a short poem about the sea.")];
    let sampled = |seed| LocalOptions {
        temperature: 1.0,
        max_reply_tokens: Some(16),
        seed,
        ..options()
    };
    let engine = LocalEngine::start(sampled(None)).unwrap();
    engine.ready().await.unwrap();
    let mut replies = Vec::new();
    for _ in 0..3 {
        replies.push(collect(&engine, "s1", &history).await);
    }
    assert!(
        replies.iter().all(|r| !r.is_empty()),
        "three replies: {replies:?}"
    );
    assert!(
        replies[0] != replies[1] || replies[1] != replies[2],
        "three retries gave one reply: {replies:?}"
    );
    drop(engine);
    // A fixed seed: two engines (so that nothing is reused between them) answer alike.
    let mut seeded = Vec::new();
    for _ in 0..2 {
        let engine = LocalEngine::start(sampled(Some(42))).unwrap();
        engine.ready().await.unwrap();
        seeded.push(collect(&engine, "s1", &history).await);
    }
    assert!(!seeded[0].is_empty());
    assert_eq!(seeded[0], seeded[1]);
}

/// `convo serve` without `--engine` (auto): the default installed model when there is one,
/// else the builtin engine, saying which and how to get a model.
#[test]
fn serve_auto_runs_the_installed_model_or_builtin() {
    let start = |data_dir: &std::path::Path| {
        let mut child = std::process::Command::new(BIN)
            .args(["serve", "--addr", "127.0.0.1:0", "--db", ":memory:"])
            .env("CONVO_DATA_DIR", data_dir)
            .env("RUST_LOG", "off")
            .env_remove("CONVO_SERVE_API_KEYS")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("convo runs");
        listening_url(&mut child);
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let empty = tempfile::tempdir().unwrap();
    let err = start(empty.path());
    assert!(
        err.contains("engine builtin (--engine auto: no model installed"),
        "{err}"
    );
    assert!(err.contains("convo model pull"), "{err}");
    let with_model = data_dir_with_model();
    let err = start(with_model.path());
    assert!(
        err.contains(
            "engine local · SmolLM2-135M-Instruct (--engine auto: the default installed model)"
        ),
        "{err}"
    );
}

/// `convo serve --engine local`'s log when a reply is stopped while its long prompt is read:
/// the engine says it abandoned the step, and none of llama.cpp's errors about that abort
/// ("failed to compute graph", "failed to decode") is there (`engine::log_filter`).
#[tokio::test]
async fn a_stopped_step_leaves_no_error_in_the_log() {
    use std::io::BufRead;
    let data_dir = data_dir_with_model();
    let key = convo_service::generate_api_key();
    let child = std::process::Command::new(BIN)
        .args(SERVE_LOCAL)
        .args([
            "--api-key",
            &key,
            "--max-reply-tokens",
            "8",
            "--temperature",
            "0",
        ])
        .env("CONVO_DATA_DIR", data_dir.path())
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("convo runs");
    let mut child = Killed(child);
    let base = listening_url(&mut child.0);
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = child.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });

    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().timeout(GUARD).build().unwrap();
    let messages = format!("{base}/v1/sessions/{}/messages", session());
    let send = |body: serde_json::Value| http.post(&messages).bearer_auth(&key).json(&body).send();
    // Once the model answers (the first send waits for it to load; 8 tokens at most).
    let warm = send(json!({"content": "Say hi"})).await.expect("request");
    assert_eq!(warm.status(), 200);
    // About 2,500 tokens of prompt, read in steps of up to 512 for several seconds.
    let long = "The quick brown fox jumps over the lazy dog near the bank. ".repeat(160);
    let accepted = send(json!({"content": long, "stream": true}))
        .await
        .expect("request");
    assert_eq!(accepted.status(), 202);
    let reply: serde_json::Value = accepted.json().await.unwrap();
    let reply_id = reply["messageId"].as_str().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let cancel = http
        .post(format!("{messages}/{reply_id}/cancel"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("request");
    assert_eq!(cancel.status(), 202);

    // The log is written in order: once the engine's line is there, llama.cpp's are too.
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + GUARD;
    let told = |seen: &[String], what: &str| seen.iter().any(|l| l.contains(what));
    while !(told(&seen, "step abandoned: a reply of it was stopped")
        && told(&seen, "reply stopped; turn rolled back"))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("the stop is not in the log: {seen:#?}"),
        }
    }
    drop(child);
    let errors: Vec<&String> = seen
        .iter()
        .filter(|l| l.contains("ERROR") || l.contains("failed to decode"))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

pub(super) fn entry(role: Role, content: &str) -> HistoryEntry {
    HistoryEntry {
        role,
        content: content.to_string(),
        tokens: 0,
    }
}

pub(super) fn request(session: &str, history: &[HistoryEntry]) -> ReplyRequest {
    ReplyRequest {
        session_id: session.to_string(),
        history: history.to_vec(),
        context_tokens: 0,
        max_context_tokens: 8192,
        streamed: true,
    }
}

pub(super) async fn collect(
    engine: &LocalEngine,
    session: &str,
    history: &[HistoryEntry],
) -> String {
    let (tx, mut rx) = mpsc::channel(64);
    let reply = engine.reply(request(session, history), tx);
    let mut text = String::new();
    let reading = async {
        while let Some(event) = rx.recv().await {
            if let EngineEvent::Text(piece) = event {
                text.push_str(&piece);
            }
        }
    };
    let (result, ()) = tokio::time::timeout(GUARD, futures_util::future::join(reply, reading))
        .await
        .expect("a reply in time");
    result.expect("a reply");
    text
}

/// The engine answers a question in `session` after a stopped reply.
async fn still_answers(engine: &LocalEngine, session: &str) {
    let question = [entry(Role::User, "What is the capital of France?")];
    let reply = collect(engine, session, &question).await;
    assert!(reply.contains("Paris"), "{reply}");
}

/// The decoded-token count once it stops moving.
pub(super) async fn settled(engine: &LocalEngine) -> u64 {
    let deadline = tokio::time::Instant::now() + GUARD;
    let mut last = engine.counters().0;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = engine.counters().0;
        if now == last {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the model never stopped"
        );
        last = now;
    }
}

const BIN: &str = env!("CARGO_BIN_EXE_convo");

/// `convo serve` on the local engine, on a free port, keeping nothing.
const SERVE_LOCAL: [&str; 7] = [
    "serve",
    "--engine",
    "local",
    "--addr",
    "127.0.0.1:0",
    "--db",
    ":memory:",
];

/// `convo serve --engine local` with these arguments: its exit code and stderr.
fn serve_fails(args: &[&str], data_dir: &std::path::Path) -> (i32, String) {
    let out = std::process::Command::new(BIN)
        .args(SERVE_LOCAL)
        .args(args)
        .env("CONVO_DATA_DIR", data_dir)
        .env("RUST_LOG", "off")
        .output()
        .expect("convo runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_or_broken_model_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    // No model installed, none named.
    let (code, err) = serve_fails(&[], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("scripts/fetch-model.sh"), "{err}");
    assert!(
        err.contains(&dir.path().join("models").display().to_string()),
        "{err}"
    );
    // A path that is not there.
    let missing = dir.path().join("nope.gguf");
    let (code, err) = serve_fails(&["--model", missing.to_str().unwrap()], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    // Not a GGUF file at all.
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, "these are not weights").unwrap();
    let (code, err) = serve_fails(&["--model", text.to_str().unwrap()], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a GGUF model file"), "{err}");
    // A GGUF header followed by garbage: llama.cpp refuses it, convo says which file.
    let broken = dir.path().join("broken.gguf");
    let mut bytes = b"GGUF\x03\x00\x00\x00".to_vec();
    bytes.extend(std::iter::repeat_n(0xA5u8, 4096));
    std::fs::write(&broken, bytes).unwrap();
    let (code, err) = serve_fails(&["--model", broken.to_str().unwrap()], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot load the model"), "{err}");
    assert!(err.contains(&broken.display().to_string()), "{err}");
    // A name that is not installed.
    let (code, err) = serve_fails(&["--model", "NoSuchModel"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("NoSuchModel"), "{err}");
}
