//! The local engine against raw llama.cpp, side by side on one GGUF file.
//!
//! `raw`: this program calls `llama-cpp-2` directly (one sequence, the prompt in one batch,
//! the same sampler as the engine: repetition penalty then greedy). `stack`: `convo serve
//! --engine local --temperature 0` in its own process, driven from here as a client would
//! (POST `stream: true`, the deltas over the session's WebSocket), with a data dir of its own
//! as `convo serve` has by default. Both answer the same prompts greedily; the engine computes
//! attention without flash attention, so a near-tie can turn the texts apart ("same text").
//! Rounds alternate so that both see the same machine. It prints first-token times,
//! tokens/s, turn 7 against turn 1, a 2,000-token prompt (raw with llama-cpp-2's default cache,
//! f16 with flash attention where llama.cpp chooses it, with 8-bit cells, and without flash
//! attention, against the stack), raw's generation after that prompt with and without flash
//! attention, the next turn of a 1,500-token
//! conversation after `convo serve` restarts, how soon a stop stops the model, and the RSS of
//! both. `--raw-only` prints the raw figures alone (the portable build's run, for native
//! against portable). `scripts/perf/local-model.sh` builds and runs it.
//!
//!     cargo run --release --example local_model_bench -- MODEL.gguf [ROUNDS] [--raw-only]

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const PROMPT: &str = "Write a short story about a lighthouse keeper and a storm.";
const MAX_TOKENS: u32 = 200;
const KEY: &str = "service_live_benchbenchbench1234";
const TURNS: [&str; 7] = [
    "What is the capital of France?",
    "And of Germany?",
    "Which of the two is larger?",
    "Name a famous building in each.",
    "Which river flows through Paris?",
    "And through Berlin?",
    "Summarise what we talked about.",
];

struct Run {
    first_ms: f64,
    /// Seconds from the first token (or delta) to the last.
    after_first_s: f64,
    text: String,
}

/// Tokens per second after the first.
fn rate(tokens: u32, after_first_s: f64) -> f64 {
    tokens.saturating_sub(1) as f64 / after_first_s.max(1e-9)
}

/// About 2,000 tokens.
fn long_prompt() -> String {
    "Summarise this: ".to_string() + &"the quick brown fox jumps over the lazy dog. ".repeat(200)
}

/// `text` made new to the engine for round `round`: the engine reuses the longest prompt
/// prefix another session holds, so a prompt it has seen would be measured as read already
/// (only the chat template's opening is shared then, as it would be in use).
fn unseen(round: usize, text: &str) -> String {
    format!("Round {}. {text}", round + 1)
}

/// The raw side's KV cache: llama-cpp-2's defaults (f16 cells, flash attention when
/// llama.cpp finds it faster), 8-bit cells with flash attention, or f16 cells without flash
/// attention (what the engine uses).
#[derive(Clone, Copy)]
enum Cache {
    Default,
    Q8,
    NoFlash,
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let raw_only = all.iter().any(|a| a == "--raw-only");
    let mut args = all.into_iter().filter(|a| a != "--raw-only");
    let model_path = PathBuf::from(
        args.next()
            .expect("usage: local_model_bench MODEL.gguf [ROUNDS] [--raw-only]"),
    );
    let rounds: usize = args
        .next()
        .map_or(3, |r| r.parse().expect("ROUNDS is a number"));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "# model {} ({:.1} MB), {threads} threads, {MAX_TOKENS} tokens at most",
        model_path.display(),
        std::fs::metadata(&model_path).map_or(0, |m| m.len()) as f64 / 1e6
    );

    // The process has one llama.cpp backend; the engine below shares it.
    let backend = convo_service::engine::local::backend().expect("llama.cpp starts");
    let model = LlamaModel::load_from_file(backend, &model_path, &LlamaModelParams::default())
        .expect("the model loads");

    // Raw alone: the short prompt's speed and the long prompt's first token, per cache.
    let mut raw_long = Vec::new();
    for (name, cache) in [
        ("f16 (defaults)", Cache::Default),
        ("q8_0 + flash", Cache::Q8),
    ] {
        let mut firsts = Vec::new();
        for _ in 0..rounds {
            let (run, _) = raw_reply(backend, &model, threads as i32, &long_prompt(), 1, cache);
            firsts.push(run.first_ms);
        }
        let first = median(firsts);
        println!("raw, a 2,000-token prompt, {name} cache: first token {first:.1} ms (median)");
        raw_long.push(first);
    }
    let raw_long = raw_long[0];
    if raw_only {
        let mut tps = Vec::new();
        let mut firsts = Vec::new();
        for _ in 0..rounds {
            let (run, tokens) = raw_reply(
                backend,
                &model,
                threads as i32,
                PROMPT,
                MAX_TOKENS,
                Cache::Default,
            );
            tps.push(rate(tokens, run.after_first_s));
            firsts.push(run.first_ms);
        }
        println!(
            "raw, the short prompt: first token {:.1} ms, {:.1} tok/s (median)",
            median(firsts),
            median(tps)
        );
        let (rss, hwm) = rss_of(std::process::id());
        println!(
            "raw process RSS {:.1} MB (peak {:.1} MB)",
            rss / 1e3,
            hwm / 1e3
        );
        return;
    }

    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    // As `convo serve` runs by default: with a data dir (its database, and the saved KV state
    // of sessions that leave the cache).
    let data_dir = tempfile::tempdir().expect("a temporary dir");
    let (mut serve, url) = start_serve(&model_path, data_dir.path());
    let (mut raw_first, mut raw_tps, mut stack_first, mut stack_tps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let prompt = unseen(round, PROMPT);
        let (raw, tokens) = raw_reply(
            backend,
            &model,
            threads as i32,
            &prompt,
            MAX_TOKENS,
            Cache::Default,
        );
        let stack = runtime.block_on(stack_reply(&url, &prompt));
        // The stack's tokens: its text through the model's tokenizer.
        let vocab = model.vocab();
        let stack_tokens = vocab.tokenize(stack.text.as_bytes(), false, false).len() as u32;
        let (r, s) = (
            rate(tokens, raw.after_first_s),
            rate(stack_tokens, stack.after_first_s),
        );
        println!(
            "round {}: raw first token {:.1} ms, {tokens} tokens, {r:.1} tok/s | stack first delta {:.1} ms, {stack_tokens} tokens, {s:.1} tok/s | same text: {}",
            round + 1,
            raw.first_ms,
            stack.first_ms,
            if raw.text == stack.text { "yes" } else { "NO" }
        );
        raw_first.push(raw.first_ms);
        raw_tps.push(r);
        stack_first.push(stack.first_ms);
        stack_tps.push(s);
    }
    // The raw side's peak: the model and one 8,192-token context at a time.
    let (_, raw_hwm) = rss_of(std::process::id());
    raw_without_flash_attention(backend, &model, threads as i32, rounds);
    let (raw_first, raw_tps) = (median(raw_first), median(raw_tps));
    let (stack_first, stack_tps) = (median(stack_first), median(stack_tps));
    println!(
        "median: raw {raw_first:.1} ms first token, {raw_tps:.1} tok/s; stack {stack_first:.1} ms first delta, {stack_tps:.1} tok/s ({:.2}x raw; first delta raw + {:.1} ms)",
        stack_tps / raw_tps,
        stack_first - raw_first
    );

    // A conversation of seven turns: the engine keeps the session's state between turns.
    let firsts = runtime.block_on(conversation(&url));
    for (i, ms) in firsts.iter().enumerate() {
        println!("conversation turn {}: first delta {ms:.1} ms", i + 1);
    }
    println!(
        "turn 7 / turn 1 first delta: {:.2}",
        firsts[6] / firsts[0].max(0.001)
    );
    let mut firsts = Vec::new();
    for round in 0..rounds {
        let prompt = unseen(round, &long_prompt());
        let (first, _, _) = runtime.block_on(streamed(&url, &new_session(), &prompt));
        firsts.push(first.as_secs_f64() * 1e3);
    }
    let stack_long = median(firsts);
    println!(
        "a 2,000-token prompt: stack first delta {stack_long:.1} ms, raw (defaults) {raw_long:.1} ms: {:.2}x raw (median)",
        stack_long / raw_long
    );
    restart(&runtime, &model_path);

    // A stopped reply: how long the model thread computes after the turn is dropped, while
    // generating and while reading a long prompt.
    let engine = convo_service::engine::local::LocalEngine::start(
        convo_service::engine::local::LocalOptions {
            temperature: 0.0,
            max_reply_tokens: Some(2_000),
            ..convo_service::engine::local::LocalOptions::new(model_path.clone())
        },
    )
    .expect("the engine starts");
    runtime.block_on(engine.ready()).expect("the engine loads");
    let counting = "Count from 1 to 500, one number per line.".to_string();
    let long = long_prompt();
    for (what, text, pieces) in [
        ("generating", counting, 5),
        ("reading a 2,000-token prompt", long, 0),
    ] {
        let mut worst = 0.0f64;
        for round in 0..rounds {
            let text = unseen(round, &text);
            worst = worst.max(runtime.block_on(stop_latency(&engine, &text, pieces)));
        }
        println!(
            "stopped while {what}: the model thread stopped {worst:.1} ms after the turn ended (worst of {rounds})"
        );
    }
    drop(engine);

    let (rss, hwm) = rss_of(serve.id());
    println!(
        "convo serve RSS {:.1} MB (peak {:.1} MB); raw process peak {:.1} MB; stack peak - raw peak = {:.1} MB; model file {:.1} MB",
        rss / 1e3,
        hwm / 1e3,
        raw_hwm / 1e3,
        (hwm - raw_hwm) / 1e3,
        std::fs::metadata(&model_path).map_or(0, |m| m.len()) as f64 / 1e6,
    );
    let _ = serve.kill();
    let _ = serve.wait();
}

/// Raw without flash attention (the engine's choice) against the defaults: the long prompt's
/// first token, and generation late in a long conversation (once each: about 20 s a run).
/// After the RSS peak is read: without flash attention a 512-token batch holds larger buffers.
fn raw_without_flash_attention(
    backend: &LlamaBackend,
    model: &LlamaModel,
    threads: i32,
    rounds: usize,
) {
    let mut firsts = Vec::new();
    for _ in 0..rounds {
        let (run, _) = raw_reply(backend, model, threads, &long_prompt(), 1, Cache::NoFlash);
        firsts.push(run.first_ms);
    }
    println!(
        "raw, a 2,000-token prompt, f16, no flash attention cache: first token {:.1} ms (median)",
        median(firsts)
    );
    for (name, cache) in [
        ("f16 (defaults)", Cache::Default),
        ("f16, no flash attention (the engine's)", Cache::NoFlash),
    ] {
        let (run, tokens) = raw_reply(backend, model, threads, &long_prompt(), MAX_TOKENS, cache);
        println!(
            "raw, {tokens} tokens after a 2,000-token prompt, {name} cache: {:.1} tok/s (first token {:.1} ms)",
            rate(tokens, run.after_first_s),
            run.first_ms
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `text` answered by llama-cpp-2 directly, in a context of 8,192 tokens (the engine's), the
/// prompt in one batch, at most `max_tokens` tokens.
fn raw_reply(
    backend: &LlamaBackend,
    model: &LlamaModel,
    threads: i32,
    text: &str,
    max_tokens: u32,
    cache: Cache,
) -> (Run, u32) {
    let mut params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(8192))
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    if let Cache::NoFlash = cache {
        params = params.with_flash_attention_policy(0);
    }
    if let Cache::Q8 = cache {
        params = params
            .with_flash_attention_policy(1)
            .with_type_k(KvCacheType::Q8_0)
            .with_type_v(KvCacheType::Q8_0);
    }
    let mut ctx = model.new_context(backend, params).expect("a context");
    let template = model.chat_template(None).expect("a chat template");
    let chat = [LlamaChatMessage::new("user".into(), text.into()).expect("a message")];
    let prompt = model
        .apply_chat_template(&template, &chat, true)
        .expect("the template applies");
    let vocab = model.vocab();
    let tokens = vocab.tokenize(prompt.as_bytes(), vocab.should_add_bos(), true);
    let started = Instant::now();
    let mut batch = LlamaBatch::new(tokens.len().max(1), 1);
    let last = tokens.len() - 1;
    for (i, t) in tokens.iter().enumerate() {
        batch
            .add(*t, i as i32, &[0], i == last)
            .expect("room in the batch");
    }
    ctx.decode(&mut batch).expect("the prompt decodes");
    let mut sampler = LlamaSampler::chain_simple([
        LlamaSampler::penalties(model.n_vocab(), 64, 1.1, 0.0, 0.0),
        LlamaSampler::greedy(),
    ]);
    let mut at = batch.n_tokens() - 1;
    let mut pos = tokens.len() as i32;
    let mut bytes = Vec::new();
    let mut first = None;
    let mut generated = 0;
    loop {
        let token = sampler.sample(&ctx, at);
        if first.is_none() {
            first = Some(started.elapsed());
        }
        if vocab.is_eog(token) {
            break;
        }
        generated += 1;
        bytes.extend(vocab.token_to_piece(token, false, None));
        if generated >= max_tokens {
            break;
        }
        batch.clear();
        batch.add(token, pos, &[0], true).expect("room");
        pos += 1;
        ctx.decode(&mut batch).expect("a token decodes");
        at = 0;
    }
    let first = first.unwrap_or_default();
    let run = Run {
        first_ms: first.as_secs_f64() * 1e3,
        after_first_s: (started.elapsed() - first).as_secs_f64(),
        text: String::from_utf8_lossy(&bytes).into_owned(),
    };
    (run, generated)
}

/// `convo serve` on `model`, its database and saved KV state in `data_dir`.
fn start_serve(model: &Path, data_dir: &Path) -> (Child, String) {
    let bin = std::env::var("CONVO_BIN").unwrap_or_else(|_| "target/release/convo".into());
    let db = data_dir.join("service.db").display().to_string();
    let mut child = Command::new(&bin)
        .env("CONVO_DATA_DIR", data_dir)
        .args(["serve", "--addr", "127.0.0.1:0", "--db", &db])
        .args([
            "--api-key",
            &format!("{KEY}=enterprise"),
            "--jwt-secret",
            "bench",
        ])
        .args(["--engine", "local", "--temperature", "0"])
        .arg("--max-reply-tokens")
        .arg(MAX_TOKENS.to_string())
        .arg("--model")
        .arg(model)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .expect("convo serve prints where it listens");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, url)
}

fn new_session() -> String {
    convo_wire::new_session_id()
}

/// One streamed reply in a new session.
async fn stack_reply(url: &str, text: &str) -> Run {
    let session = new_session();
    let (first, after_first, content) = streamed(url, &session, text).await;
    Run {
        first_ms: first.as_secs_f64() * 1e3,
        after_first_s: after_first.as_secs_f64(),
        text: content,
    }
}

/// Sends `text` to `session` with `stream: true` and reads the deltas until `done`: the
/// time to the first delta, the time after it, and the reply.
async fn streamed(url: &str, session: &str, text: &str) -> (Duration, Duration, String) {
    let ws_url = format!(
        "{}/v1/sessions/{session}/stream",
        url.replacen("http://", "ws://", 1)
    );
    let mut request = ws_url.into_client_request().expect("a ws request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {KEY}").parse().expect("a header"),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("the stream connects");
    let http = reqwest::Client::new();
    let started = Instant::now();
    let resp = http
        .post(format!("{url}/v1/sessions/{session}/messages"))
        .bearer_auth(KEY)
        .json(&serde_json::json!({"content": text, "stream": true}))
        .send()
        .await
        .expect("the send is answered");
    assert_eq!(resp.status().as_u16(), 202, "{:?}", resp.text().await);
    let mut first = None;
    let mut content = String::new();
    while let Some(frame) = ws.next().await {
        let WsMessage::Text(frame) = frame.expect("a frame") else {
            continue;
        };
        let event: serde_json::Value = serde_json::from_str(frame.as_str()).expect("JSON");
        match event["type"].as_str() {
            Some("delta") => {
                first.get_or_insert_with(|| started.elapsed());
                content.push_str(event["content"].as_str().unwrap_or_default());
            }
            Some("done") => break,
            Some("error") => panic!("the reply failed: {event}"),
            _ => {}
        }
    }
    let first = first.unwrap_or_default();
    (first, started.elapsed() - first, content)
}

/// The next turn of a 1,500-token conversation after `convo serve` restarts (its state was
/// saved at the stop), against a fresh short prompt's first delta on the restarted service.
fn restart(runtime: &tokio::runtime::Runtime, model: &Path) {
    let dir = tempfile::tempdir().expect("a temporary dir");
    let session = new_session();
    let long = "Summarise this: ".to_string()
        + &"the quick brown fox jumps over the lazy dog. ".repeat(150);
    let (mut serve, url) = start_serve(model, dir.path());
    runtime.block_on(streamed(&url, &session, &long));
    let stopped = Instant::now();
    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    let _ = serve.wait();
    let stop_ms = stopped.elapsed().as_secs_f64() * 1e3;
    let (mut serve, url) = start_serve(model, dir.path());
    let (next, _, _) = runtime.block_on(streamed(&url, &session, "Thanks. How many words?"));
    let (fresh, _, _) = runtime.block_on(streamed(&url, &new_session(), "Hi!"));
    let (next, fresh) = (next.as_secs_f64() * 1e3, fresh.as_secs_f64() * 1e3);
    println!(
        "after a restart: the next turn of a 1,500-token conversation first delta {next:.1} ms, a fresh short prompt {fresh:.1} ms: {:.2}x (the stop, saving the state, took {stop_ms:.0} ms)",
        next / fresh.max(0.001)
    );
    let _ = serve.kill();
    let _ = serve.wait();
}

async fn conversation(url: &str) -> Vec<f64> {
    let session = new_session();
    let mut firsts = Vec::new();
    for text in TURNS {
        let (first, _, _) = streamed(url, &session, text).await;
        firsts.push(first.as_secs_f64() * 1e3);
    }
    firsts
}

/// Starts a reply, drops it after `pieces` pieces (0: at once), and returns the milliseconds
/// until the engine's decoded-token count last moved.
async fn stop_latency(
    engine: &convo_service::engine::local::LocalEngine,
    text: &str,
    pieces: usize,
) -> f64 {
    use convo_service::engine::ReplyEngine;
    let request = convo_service::engine::ReplyRequest {
        session_id: new_session(),
        history: vec![convo_core::HistoryEntry {
            role: convo_wire::Role::User,
            content: text.to_string(),
            tokens: 0,
        }],
        context_tokens: 0,
        max_context_tokens: 8192,
        streamed: true,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    {
        let reply = engine.reply(request, tx);
        tokio::pin!(reply);
        let mut got = 0;
        while got < pieces {
            tokio::select! {
                _ = &mut reply => break,
                p = rx.recv() => if p.is_some() { got += 1 } else { break },
            }
        }
        if pieces == 0 {
            // Let the job reach the model thread and start its prompt.
            let _ = tokio::time::timeout(Duration::from_millis(30), &mut reply).await;
        }
    }
    drop(rx);
    let dropped = Instant::now();
    let mut last = engine.counters().0;
    let mut last_change = dropped;
    while dropped.elapsed() < Duration::from_millis(1000) {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let now = engine.counters().0;
        if now != last {
            last = now;
            last_change = Instant::now();
        }
    }
    (last_change - dropped).as_secs_f64() * 1e3
}

/// VmRSS and VmHWM of a process, in kB.
fn rss_of(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
