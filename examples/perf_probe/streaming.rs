//! Streamed replies: frames per second on screen, and many streams at once.

use super::*;

pub(crate) fn stream_fps(bin: &Path, rate: u64, tokens: u64, size: Size) -> Result<()> {
    let rt = runtime()?;
    let fake = rt.block_on(FakeOpenAi::start("127.0.0.1:0", rate, tokens))?;
    let home = temp_home()?;
    let serve = Serve::start(
        bin,
        &home.path().join("service.db"),
        &[
            "--engine",
            "openai",
            "--engine-url",
            &format!("http://{}", fake.addr),
            "--max-context-tokens",
            "1000000",
        ],
    )?;
    let data = home.path().join("data");
    let env = [
        ("CONVO_BASE_URL", serve.base_url.clone()),
        ("CONVO_API_KEY", serve.key.clone()),
    ];
    const LIVE: &str = "● live";
    let mut tui = Tui::start(bin, home.path(), &data, &env, &[LIVE], size)?;
    // The new session's stream must be up, or the send falls back to a plain POST.
    tui.wait_mark(LIVE)?;
    tui.send(b"stream please")?;
    std::thread::sleep(Duration::from_millis(300));
    tui.send(b"\r")?;
    let hz = clock_ticks_per_sec();
    let started = wait_for(
        || fake.state.started.lock().ok().and_then(|s| *s),
        "the stream to start",
    )?;
    let a = cpu_sample(tui.pid)?;
    let sa = cpu_sample(serve.pid())?;
    let finished = wait_for(
        || fake.state.finished.lock().ok().and_then(|s| *s),
        "the stream to end",
    )?;
    let b = cpu_sample(tui.pid)?;
    let sb = cpu_sample(serve.pid())?;
    // The TUI is done with the stream when its output has been quiet for a while.
    let caught_up = tui.quiet_since(Duration::from_millis(500));
    let window = finished.duration_since(started).as_secs_f64();
    let frames = tui.frames_between(started, finished);
    let lag = caught_up.saturating_duration_since(finished);
    let frames_total = tui.frames_between(started, caught_up + Duration::from_millis(1));
    let (tui_ticks, tui_sched) = cpu_percent(&a, &b, hz);
    let (serve_ticks, _) = cpu_percent(&sa, &sb, hz);
    let (rss_kb, _, _) = memory(tui.pid)?;
    println!(
        "{tokens} tokens at {rate}/s streamed in {window:.2} s ({:.0} tokens/s): TUI drew {frames} \
         frames = {:.1} fps; TUI CPU {tui_ticks:.1} % of a core by utime+stime ({tui_sched:.1} % by \
         the schedstat of live threads), convo serve {serve_ticks:.1} %; last frame {:.0} ms after the stream ended \
         ({frames_total} frames in all); TUI VmRSS {:.1} MB after",
        fake.state.sent.load(Ordering::Relaxed) as f64 / window,
        frames as f64 / window,
        ms(lag),
        rss_kb as f64 / 1024.0
    );
    tui.stop();
    drop(serve);
    Ok(())
}

pub(crate) fn wait_for<T>(mut f: impl FnMut() -> Option<T>, what: &str) -> Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > GUARD {
            return Err(format!("gave up waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------------------
// 200 concurrent streams

#[derive(Debug)]
pub(crate) struct StreamRun {
    pub(crate) connect: Duration,
    pub(crate) first_delta: Option<Duration>,
    pub(crate) done: Duration,
    pub(crate) deltas: u64,
}

pub(crate) fn streams(bin: &Path, count: usize, pace_ms: u64) -> Result<()> {
    let home = temp_home()?;
    let serve = Serve::start(
        bin,
        &home.path().join("service.db"),
        &["--engine-pace-ms", &pace_ms.to_string()],
    )?;
    let rt = runtime()?;
    let hz = clock_ticks_per_sec();
    let mut before = None;
    let mut began = Instant::now();
    let results: Vec<Result<StreamRun>> = rt.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(count)
            .build()
            .map_err(|e| e.to_string())?;
        // One plain send first: the service loads its token tables on the first count, which
        // is start-up cost, not the cost of a stream.
        let warm = client
            .post(format!(
                "{}/v1/sessions/session_perfwarmup000000/messages",
                serve.base_url
            ))
            .bearer_auth(&serve.key)
            .json(&serde_json::json!({"content": "warm up"}))
            .send()
            .await
            .map_err(|e| format!("warm-up POST: {e}"))?;
        if !warm.status().is_success() {
            return Err(format!("warm-up POST answered {}", warm.status()));
        }
        before = Some(cpu_sample(serve.pid())?);
        began = Instant::now();
        // All connect first, then all send at once: COUNT replies in flight together.
        let gate = Arc::new(tokio::sync::Barrier::new(count));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..count {
            let client = client.clone();
            let base = serve.base_url.clone();
            let key = serve.key.clone();
            let gate = gate.clone();
            tasks.spawn(async move {
                let run = one_stream(&client, &base, &key, i, &gate);
                tokio::time::timeout(GUARD, run)
                    .await
                    .unwrap_or_else(|_| Err("timed out".into()))
            });
        }
        Ok::<_, String>(tasks.join_all().await)
    })?;
    let wall = began.elapsed();
    let after = cpu_sample(serve.pid())?;
    let (rss_kb, hwm_kb, _) = memory(serve.pid())?;
    let (ok, failed): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    let ok: Vec<StreamRun> = ok.into_iter().filter_map(Result::ok).collect();
    for e in failed.iter().take(5) {
        if let Err(e) = e {
            eprintln!("failed stream: {e}");
        }
    }
    let pct = |mut v: Vec<f64>, p: f64| -> f64 {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return f64::NAN;
        }
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    let first: Vec<f64> = ok.iter().filter_map(|r| r.first_delta.map(ms)).collect();
    let done: Vec<f64> = ok.iter().map(|r| ms(r.done)).collect();
    let connect: Vec<f64> = ok.iter().map(|r| ms(r.connect)).collect();
    let deltas: u64 = ok.iter().map(|r| r.deltas).sum();
    let before = before.ok_or("no CPU sample")?;
    let (serve_cpu, _) = cpu_percent(&before, &after, hz);
    println!(
        "{count} concurrent streams (builtin engine, pace {pace_ms} ms): {} completed, {} failed \
         in {:.2} s; WebSocket connect p50 {:.1} / p99 {:.1} ms; POST to first delta p50 {:.1} / \
         p99 {:.1} ms; POST to done p50 {:.0} / p99 {:.0} ms; {deltas} deltas ({:.0}/s); \
         convo serve CPU {serve_cpu:.0} % of a core, VmRSS {:.1} MB (peak {:.1} MB)",
        ok.len(),
        failed.len(),
        wall.as_secs_f64(),
        pct(connect.clone(), 0.5),
        pct(connect, 0.99),
        pct(first.clone(), 0.5),
        pct(first, 0.99),
        pct(done.clone(), 0.5),
        pct(done, 0.99),
        deltas as f64 / wall.as_secs_f64(),
        rss_kb as f64 / 1024.0,
        hwm_kb as f64 / 1024.0,
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("{} of {count} streams failed", failed.len()))
    }
}

pub(crate) async fn one_stream(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    i: usize,
    gate: &tokio::sync::Barrier,
) -> Result<StreamRun> {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::{Message as Ws, client::IntoClientRequest};

    let session = format!("session_perf{i:012}");
    let ws_url = format!(
        "{}/v1/sessions/{session}/stream",
        base.replacen("http://", "ws://", 1)
    );
    let mut request = ws_url
        .into_client_request()
        .map_err(|e| format!("ws request: {e}"))?;
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {key}")
            .parse()
            .map_err(|e| format!("header: {e}"))?,
    );
    let t0 = Instant::now();
    let (mut ws, _) = tokio_tungstenite::connect_async(request)
        .await
        .map_err(|e| format!("ws connect: {e}"))?;
    let connect = t0.elapsed();
    gate.wait().await;
    let posted = Instant::now();
    let resp = client
        .post(format!("{base}/v1/sessions/{session}/messages"))
        .bearer_auth(key)
        .json(&serde_json::json!({"content": "Tell me about streams, with some code", "stream": true}))
        .send()
        .await
        .map_err(|e| format!("POST: {e}"))?;
    let status = resp.status();
    let accepted: serde_json::Value = resp.json().await.map_err(|e| format!("POST body: {e}"))?;
    if status.as_u16() != 202 {
        return Err(format!("POST answered {status}: {accepted}"));
    }
    let id = accepted["messageId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut first_delta = None;
    let mut deltas = 0;
    while let Some(frame) = ws.next().await {
        let frame = frame.map_err(|e| format!("ws: {e}"))?;
        let Ws::Text(text) = frame else { continue };
        let event: serde_json::Value =
            serde_json::from_str(text.as_str()).map_err(|e| format!("event: {e}"))?;
        match event["type"].as_str() {
            Some("delta") | Some("snapshot") if event["messageId"] == id.as_str() => {
                first_delta.get_or_insert_with(|| posted.elapsed());
                deltas += 1;
            }
            Some("done") if event["message"]["messageId"] == id.as_str() => {
                return Ok(StreamRun {
                    connect,
                    first_delta,
                    done: posted.elapsed(),
                    deltas,
                });
            }
            Some("error") => return Err(format!("error event: {text}")),
            _ => {}
        }
    }
    Err("the stream closed before `done`".into())
}
