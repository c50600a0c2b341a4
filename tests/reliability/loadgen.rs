//! The load generator behind `cargo run --release --example load` and the short CI run in
//! `tests/reliability/load.rs`: it holds N WebSocket streams open (one session each) and
//! sends a steady rate of POSTs to those sessions for a fixed time, then checks that every
//! accepted message's reply arrived on its session's stream and is stored.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convo_client::api::{StreamEvent, new_session_id};
use futures_util::StreamExt;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// `http://HOST:PORT` of the service.
    pub base_url: String,
    pub api_key: String,
    /// WebSocket streams held open, one session each.
    pub streams: usize,
    /// POSTs per second, spread over the sessions in turn.
    pub rate: u32,
    /// How long POSTs are sent.
    pub duration: Duration,
    /// After the last POST, how long to wait for outstanding replies before counting them lost.
    pub drain: Duration,
}

/// What happened.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub streams_opened: usize,
    pub posts_sent: u64,
    pub posts_accepted: u64,
    /// Failed POSTs (non-2xx or no answer) and streams that failed or closed early.
    pub errors: u64,
    pub error_samples: Vec<String>,
    /// Accepted messages whose reply never arrived as `done` on the session's stream.
    pub lost_on_stream: u64,
    /// Messages the service should hold (a user message and a reply per accepted POST)
    /// minus what it holds.
    pub lost_in_store: i64,
    pub stream_events: u64,
    pub elapsed: Duration,
    /// The sending phase: from the first POST to the last one sent.
    pub sending: Duration,
    /// POST latencies in milliseconds: p50, p99, max.
    pub latency_ms: (f64, f64, f64),
}

impl LoadReport {
    /// Achieved POSTs per second over the sending phase.
    pub fn rate(&self) -> f64 {
        self.posts_sent as f64 / self.sending.as_secs_f64().max(1e-9)
    }

    /// The report as a few lines of text.
    pub fn summary(&self, config: &LoadConfig) -> String {
        let (p50, p99, max) = self.latency_ms;
        let mut s = format!(
            "streams {}/{} open · POSTs {} sent in {:.1} s ({:.0}/s, target {}/s) · {} accepted\n\
             errors {} · lost {} (on the stream {}, in the store {}) · stream events {}\n\
             POST latency p50 {p50:.1} ms · p99 {p99:.1} ms · max {max:.1} ms · total {:.1} s",
            self.streams_opened,
            config.streams,
            self.posts_sent,
            self.sending.as_secs_f64(),
            self.rate(),
            config.rate,
            self.posts_accepted,
            self.errors,
            self.lost(),
            self.lost_on_stream,
            self.lost_in_store,
            self.stream_events,
            self.elapsed.as_secs_f64(),
        );
        for e in &self.error_samples {
            s.push_str("\n  error: ");
            s.push_str(e);
        }
        s
    }

    pub fn lost(&self) -> u64 {
        self.lost_on_stream + self.lost_in_store.max(0) as u64
    }
}

struct Shared {
    errors: AtomicU64,
    samples: Mutex<Vec<String>>,
    events: AtomicU64,
}

impl Shared {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut s = self.samples.lock().unwrap();
        if s.len() < 10 {
            s.push(what);
        }
    }
}

/// Runs the load. The service must accept `api_key` with a plan that allows `streams`
/// sessions and the requests of the run.
pub async fn run(config: LoadConfig) -> LoadReport {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shared = Arc::new(Shared {
        errors: AtomicU64::new(0),
        samples: Mutex::new(Vec::new()),
        events: AtomicU64::new(0),
    });
    let sessions: Vec<String> = (0..config.streams).map(|_| new_session_id()).collect();
    // Per session: message ids whose `done` arrived.
    let done: Vec<Arc<Mutex<HashSet<String>>>> = sessions
        .iter()
        .map(|_| Arc::new(Mutex::new(HashSet::new())))
        .collect();
    let ws_base = config.base_url.replacen("http", "ws", 1);
    let mut readers = Vec::new();
    let opened = Arc::new(AtomicU64::new(0));
    let connect_limit = Arc::new(Semaphore::new(32));
    for (sid, done) in sessions.iter().zip(&done) {
        let url = format!("{ws_base}/v1/sessions/{sid}/stream");
        let key = config.api_key.clone();
        let (done, shared, opened, limit) = (
            done.clone(),
            shared.clone(),
            opened.clone(),
            connect_limit.clone(),
        );
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        readers.push((
            ready_rx,
            tokio::spawn(async move {
                let mut request = url.into_client_request().expect("stream URL");
                request
                    .headers_mut()
                    .insert("authorization", format!("Bearer {key}").parse().unwrap());
                let permit = limit.acquire_owned().await;
                let ws = tokio_tungstenite::connect_async(request).await;
                drop(permit);
                let mut ws = match ws {
                    Ok((ws, _)) => ws,
                    Err(e) => {
                        shared.error(format!("stream connect: {e}"));
                        drop(ready_tx);
                        return;
                    }
                };
                opened.fetch_add(1, Ordering::Relaxed);
                let _ = ready_tx.send(());
                while let Some(frame) = ws.next().await {
                    match frame {
                        Ok(WsMessage::Text(text)) => {
                            shared.events.fetch_add(1, Ordering::Relaxed);
                            match serde_json::from_str::<StreamEvent>(text.as_str()) {
                                Ok(StreamEvent::Done { message }) => {
                                    done.lock().unwrap().insert(message.message_id);
                                }
                                Ok(StreamEvent::Error { error, .. }) => {
                                    shared.error(format!("stream error event: {}", error.code))
                                }
                                Ok(_) => {}
                                Err(e) => shared.error(format!("stream frame: {e}")),
                            }
                        }
                        Ok(WsMessage::Close(_)) => break,
                        Ok(_) => {}
                        Err(e) => {
                            shared.error(format!("stream read: {e}"));
                            break;
                        }
                    }
                }
            }),
        ));
    }
    let mut tasks = Vec::new();
    for (ready, task) in readers {
        let _ = ready.await;
        tasks.push(task);
    }
    let streams_opened = opened.load(Ordering::Relaxed) as usize;

    // The steady stream of POSTs.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("HTTP client");
    let accepted: Arc<Mutex<Vec<(usize, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(Semaphore::new(1024));
    let total = (config.rate as f64 * config.duration.as_secs_f64()).round() as u64;
    let period = Duration::from_secs_f64(1.0 / config.rate.max(1) as f64);
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut posts = Vec::new();
    for n in 0..total {
        ticker.tick().await;
        let i = (n as usize) % sessions.len();
        let url = format!("{}/v1/sessions/{}/messages", config.base_url, sessions[i]);
        let (http, key, shared, accepted, latencies) = (
            http.clone(),
            config.api_key.clone(),
            shared.clone(),
            accepted.clone(),
            latencies.clone(),
        );
        let permit = in_flight.clone().acquire_owned().await.expect("semaphore");
        posts.push(tokio::spawn(async move {
            let t = Instant::now();
            let body = serde_json::json!({
                "content": format!("load message {n}: how are things in session {i}?"),
                "stream": n % 2 == 0,
            });
            let result = http
                .post(&url)
                .bearer_auth(&key)
                .header("idempotency-key", format!("load-{n}"))
                .json(&body)
                .send()
                .await;
            match result {
                Ok(resp) if resp.status().is_success() => {
                    match resp.json::<serde_json::Value>().await {
                        Ok(v) => {
                            let id = v["messageId"].as_str().unwrap_or_default().to_string();
                            accepted.lock().unwrap().push((i, id));
                            latencies
                                .lock()
                                .unwrap()
                                .push(t.elapsed().as_secs_f64() * 1000.0);
                        }
                        Err(e) => shared.error(format!("POST body: {e}")),
                    }
                }
                Ok(resp) => {
                    let status = resp.status();
                    let text = resp.text().await.unwrap_or_default();
                    shared.error(format!("POST {status}: {}", &text[..text.len().min(200)]));
                }
                Err(e) => shared.error(format!("POST: {e}")),
            }
            drop(permit);
        }));
    }
    let sending = started.elapsed();
    for p in posts {
        let _ = p.await;
    }

    // Every accepted reply arrives on its stream, or is counted lost after the drain time.
    let accepted = accepted.lock().unwrap().clone();
    let deadline = Instant::now() + config.drain;
    let missing = loop {
        let missing = accepted
            .iter()
            .filter(|(i, id)| !done[*i].lock().unwrap().contains(id))
            .count() as u64;
        if missing == 0 || Instant::now() >= deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let elapsed = started.elapsed();
    for t in &tasks {
        t.abort();
    }

    // And is stored: a user message and a reply per accepted POST.
    let stored = match http
        .get(format!("{}/v1/sessions", config.base_url))
        .bearer_auth(&config.api_key)
        .send()
        .await
    {
        Ok(resp) => match resp.json::<serde_json::Value>().await {
            Ok(v) => v["sessions"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|s| s["messageCount"].as_i64().unwrap_or(0))
                        .sum::<i64>()
                })
                .unwrap_or(0),
            Err(e) => {
                shared.error(format!("session list: {e}"));
                0
            }
        },
        Err(e) => {
            shared.error(format!("session list: {e}"));
            0
        }
    };
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    LoadReport {
        streams_opened,
        posts_sent: total,
        posts_accepted: accepted.len() as u64,
        errors: shared.errors.load(Ordering::Relaxed),
        error_samples: shared.samples.lock().unwrap().clone(),
        lost_on_stream: missing,
        lost_in_store: 2 * accepted.len() as i64 - stored,
        stream_events: shared.events.load(Ordering::Relaxed),
        elapsed,
        sending,
        latency_ms: (pct(0.5), pct(0.99), lat.last().copied().unwrap_or(0.0)),
    }
}
