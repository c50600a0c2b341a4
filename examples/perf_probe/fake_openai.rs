//! A fake OpenAI-compatible server that streams at a given rate.

use super::*;

/// Streams `tokens` pieces at `rate` per second as `chat.completion.chunk` SSE events.
pub(crate) struct FakeOpenAi {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) state: Arc<FakeState>,
}

#[derive(Default)]
pub(crate) struct FakeState {
    pub(crate) started: Mutex<Option<Instant>>,
    pub(crate) finished: Mutex<Option<Instant>>,
    pub(crate) sent: AtomicU64,
}

impl FakeOpenAi {
    pub(crate) async fn start(addr: &str, rate: u64, tokens: u64) -> Result<FakeOpenAi> {
        use axum::routing::post;
        let state = Arc::new(FakeState::default());
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("bind {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let shared = state.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            post(move || {
                let state = shared.clone();
                async move { sse_reply(state, rate.max(1), tokens) }
            }),
        );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeOpenAi { addr, state })
    }
}

pub(crate) fn sse_reply(state: Arc<FakeState>, rate: u64, tokens: u64) -> axum::response::Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<Vec<u8>, std::io::Error>>(64);
    tokio::spawn(async move {
        const WORDS: [&str; 12] = [
            "the ", "stream ", "of ", "tokens ", "keeps ", "coming ", "while ", "frames ", "are ",
            "drawn ", "at ", "sixty ",
        ];
        let began = Instant::now();
        if let Ok(mut s) = state.started.lock() {
            *s = Some(began);
        }
        let mut sent = 0u64;
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        while sent < tokens {
            tick.tick().await;
            // As many pieces as are due by now: the rate holds whatever the timer's jitter.
            let due = ((began.elapsed().as_secs_f64() * rate as f64) as u64).min(tokens);
            let mut chunk = Vec::new();
            while sent < due {
                let mut piece = WORDS[(sent % WORDS.len() as u64) as usize].to_string();
                if sent % 97 == 96 {
                    piece.push_str("\n\n");
                }
                let event = serde_json::json!({
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]
                });
                chunk.extend_from_slice(format!("data: {event}\n\n").as_bytes());
                sent += 1;
            }
            state.sent.store(sent, Ordering::Relaxed);
            if !chunk.is_empty() && tx.send(Ok(chunk)).await.is_err() {
                return;
            }
        }
        let end = serde_json::json!({
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]
        });
        let _ = tx
            .send(Ok(format!("data: {end}\n\ndata: [DONE]\n\n").into_bytes()))
            .await;
        if let Ok(mut f) = state.finished.lock() {
            *f = Some(Instant::now());
        }
    });
    let body = axum::body::Body::from_stream(tokio_stream_from(rx));
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap_or_default()
}

pub(crate) fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}
