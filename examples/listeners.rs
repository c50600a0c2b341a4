//! WebSocket listeners for the replica load script (scripts/perf/service-replicas.sh): COUNT
//! listeners on the sessions `session_wrk0000000000001`… (the ones scripts/perf/post.lua POSTs
//! to), spread round-robin over the given service URLs, held open until SIGTERM/SIGINT or
//! `--secs`; then prints the events each URL's listeners received and how many disconnected.
//!
//! ```sh
//! cargo run --release --example listeners -- --key service_live_… --count 200 URL1 URL2
//! ```
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

#[derive(Parser, Debug)]
struct Args {
    /// API key of the service.
    #[arg(long)]
    key: String,
    /// Listeners in all.
    #[arg(long, default_value_t = 200)]
    count: usize,
    /// Stop after this many seconds (default: at SIGTERM/SIGINT).
    #[arg(long)]
    secs: Option<u64>,
    /// Service base URLs (`http://HOST:PORT`).
    #[arg(required = true)]
    urls: Vec<String>,
}

#[derive(Default)]
struct Counts {
    events: AtomicU64,
    dropped: AtomicU64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let counts: Vec<Arc<Counts>> = args.urls.iter().map(|_| Arc::default()).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..args.count {
        let which = i % args.urls.len();
        let url = format!(
            "{}/v1/sessions/session_wrk{:013}/stream",
            args.urls[which].replace("http://", "ws://"),
            i + 1
        );
        let mut request = url.into_client_request()?;
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {}", args.key).parse()?);
        let (mut ws, _) = tokio_tungstenite::connect_async(request).await?;
        let counts = counts[which].clone();
        tasks.spawn(async move {
            while let Some(frame) = ws.next().await {
                match frame {
                    Ok(frame) if frame.is_text() => {
                        counts.events.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            counts.dropped.fetch_add(1, Ordering::Relaxed);
        });
    }
    eprintln!("# {} listeners connected", args.count);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let limit = tokio::time::sleep(Duration::from_secs(args.secs.unwrap_or(u64::MAX / 4)));
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = limit => {}
    }
    for (url, c) in args.urls.iter().zip(&counts) {
        println!(
            "listeners on {url}: {} events received, {} disconnected",
            c.events.load(Ordering::Relaxed),
            c.dropped.load(Ordering::Relaxed)
        );
    }
    Ok(())
}
