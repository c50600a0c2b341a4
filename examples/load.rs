//! Load test of the local service (docs/reliability.md): N WebSocket streams held open and a
//! steady rate of POSTs for a fixed time, then a count of requests served, errors and
//! messages lost.
//!
//! ```sh
//! cargo run --release --example load -- --streams 200 --rate 500 --secs 30
//! cargo run --release --example load -- --base-url http://127.0.0.1:8787 --api-key service_live_…
//! ```
#![forbid(unsafe_code)]

use std::time::Duration;

use clap::Parser;
use convo_service::{DbLocation, ServiceConfig, Tier};

#[path = "../tests/reliability/loadgen.rs"]
mod loadgen;

/// Load the local service with WebSocket streams and POSTs; report what was lost.
#[derive(Parser, Debug)]
struct Args {
    /// WebSocket streams to hold open (one session each).
    #[arg(long, default_value_t = 200)]
    streams: usize,
    /// POSTs per second.
    #[arg(long, default_value_t = 500)]
    rate: u32,
    /// Seconds of sending.
    #[arg(long, default_value_t = 30)]
    secs: u64,
    /// Seconds to wait for outstanding replies after the last POST.
    #[arg(long, default_value_t = 60)]
    drain_secs: u64,
    /// A running service instead of one started in this process (needs --api-key).
    #[arg(long, requires = "api_key")]
    base_url: Option<String>,
    /// Key of the running service (an enterprise key allows the most requests).
    #[arg(long)]
    api_key: Option<String>,
    /// Keep the in-process service's database in memory instead of a temporary file.
    #[arg(long)]
    memory: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let (base_url, api_key, service) = match (&args.base_url, &args.api_key) {
        (Some(url), Some(key)) => (url.trim_end_matches('/').to_string(), key.clone(), None),
        _ => {
            let mut config = ServiceConfig::ephemeral(0);
            config.api_keys[0].1 = Tier::Enterprise;
            // Each session takes `rate × secs / streams` turns: room for all of them (this
            // measures throughput, not the context window).
            config.max_context_tokens = 1_000_000_000;
            if !args.memory {
                config.db = DbLocation::File(dir.path().join("service.db"));
            }
            let svc = convo_service::start(config, "127.0.0.1:0".parse()?).await?;
            (svc.base_url(), svc.api_key.clone(), Some(svc))
        }
    };
    let config = loadgen::LoadConfig {
        base_url,
        api_key,
        streams: args.streams,
        rate: args.rate,
        duration: Duration::from_secs(args.secs),
        drain: Duration::from_secs(args.drain_secs),
    };
    eprintln!(
        "load: {} streams, {} POST/s for {} s against {}",
        config.streams,
        config.rate,
        args.secs,
        if service.is_some() {
            "an in-process service"
        } else {
            config.base_url.as_str()
        }
    );
    let report = loadgen::run(config.clone()).await;
    println!("{}", report.summary(&config));
    if let Some(svc) = service {
        svc.shutdown().await;
    }
    drop(dir);
    if report.errors > 0 || report.lost() > 0 {
        std::process::exit(1);
    }
    Ok(())
}
