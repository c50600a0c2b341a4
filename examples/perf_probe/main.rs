//! Whole-process and service figures of `docs/performance.md` (issue 7, items 3–4).
//!
//! Each subcommand measures one figure of a release build of `convo` and prints it; the
//! scripts in `scripts/perf/` run them with the documented arguments. Nothing here asserts a
//! time: these are measurements, read by a person.
//!
//! ```sh
//! cargo build --release --bin convo --example perf_probe
//! target/release/examples/perf_probe first-frame --bin target/release/convo --runs 10
//! ```

mod fake_openai;
mod probes;
mod process;
mod pty;
mod seed;
mod serve;
mod streaming;

use fake_openai::*;
use probes::*;
use process::*;
use pty::*;
use seed::*;
use serve::*;
use streaming::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child as ProcChild, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

/// Guards against a hang; never part of a figure.
const GUARD: Duration = Duration::from_secs(120);

/// What one frame of the TUI writes exactly once: ratatui shows or hides the cursor after
/// flushing each frame's diff (`Terminal::apply_buffer_with_cursor`).
const FRAME_MARKERS: [&[u8]; 2] = [b"\x1b[?25h", b"\x1b[?25l"];

type Result<T> = std::result::Result<T, String>;

#[derive(Parser)]
#[command(about = "Measures convo's whole-process and service figures")]
struct Cli {
    #[command(subcommand)]
    command: Probe,
}

#[derive(Subcommand)]
enum Probe {
    /// Writes a session of N messages into the local store of DATA_DIR and opens it on start.
    Seed {
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long, default_value_t = 10_000)]
        messages: usize,
    },
    /// Time from spawning the TUI in a pty to its first frame with the layout drawn.
    FirstFrame {
        #[arg(long)]
        bin: PathBuf,
        #[arg(long, default_value_t = 10)]
        runs: usize,
        #[command(flatten)]
        size: Size,
    },
    /// CPU time, wake-ups and frames of the TUI while nothing happens.
    IdleCpu {
        #[arg(long)]
        bin: PathBuf,
        /// Length of the measured window.
        #[arg(long, default_value_t = 10)]
        secs: u64,
        /// Wait after the connection is up before measuring (start-up work settles).
        #[arg(long, default_value_t = 5)]
        settle: u64,
        #[command(flatten)]
        size: Size,
    },
    /// Resident memory of the TUI once the open session's transcript is drawn.
    Rss {
        #[arg(long)]
        bin: PathBuf,
        /// A data dir prepared with `seed` (a copy is used; the original stays as it is).
        /// Without it: a fresh, empty data dir.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Text to wait for on screen before measuring.
        #[arg(long, default_value = "perf-marker-last")]
        wait_for: String,
        #[arg(long, default_value_t = 5)]
        settle: u64,
        /// Then send this message, wait for the reply, and measure again.
        #[arg(long)]
        send: Option<String>,
        #[command(flatten)]
        size: Size,
    },
    /// Resident memory of a render `Transcript` of the seeded messages, step by step.
    TranscriptMemory {
        #[arg(long, default_value_t = 10_000)]
        messages: usize,
        #[arg(long, default_value_t = 118)]
        width: u16,
    },
    /// Resident memory of o200k counting: ASCII text, other text, then tiktoken-rs's tables.
    BpeMemory,
    /// Speed of o200k counting against tiktoken-rs's, on ASCII and other text, each counted on
    /// a new thread (the piece cache empty), then again on the same thread (cached).
    TokenSpeed,
    /// An OpenAI-compatible SSE server that streams TOKENS pieces at RATE per second.
    FakeOpenai {
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
        #[arg(long, default_value_t = 2000)]
        rate: u64,
        #[arg(long, default_value_t = 20_000)]
        tokens: u64,
    },
    /// Frames per second and CPU of the TUI while a reply streams RATE tokens per second
    /// (fake OpenAI server → `convo serve --engine openai` → the TUI in a pty).
    StreamFps {
        #[arg(long)]
        bin: PathBuf,
        #[arg(long, default_value_t = 2000)]
        rate: u64,
        #[arg(long, default_value_t = 20_000)]
        tokens: u64,
        #[command(flatten)]
        size: Size,
    },
    /// COUNT concurrent streamed replies against `convo serve` (builtin engine): each opens
    /// the session's WebSocket, POSTs with `stream: true` and reads deltas until `done`.
    Streams {
        #[arg(long)]
        bin: PathBuf,
        #[arg(long, default_value_t = 200)]
        count: usize,
        /// The builtin engine's pause between words.
        #[arg(long, default_value_t = 15)]
        pace_ms: u64,
    },
}

#[derive(clap::Args, Clone, Copy)]
struct Size {
    #[arg(long, default_value_t = 120)]
    cols: u16,
    #[arg(long, default_value_t = 40)]
    rows: u16,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // reqwest and tungstenite are built without a default TLS provider (see `cli::main`).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let result = match cli.command {
        Probe::Seed { data_dir, messages } => seed(&data_dir, messages),
        Probe::FirstFrame { bin, runs, size } => first_frame(&bin, runs, size),
        Probe::IdleCpu {
            bin,
            secs,
            settle,
            size,
        } => idle_cpu(&bin, secs, settle, size),
        Probe::Rss {
            bin,
            data_dir,
            wait_for,
            settle,
            send,
            size,
        } => rss(
            &bin,
            data_dir.as_deref(),
            &wait_for,
            settle,
            send.as_deref(),
            size,
        ),
        Probe::BpeMemory => bpe_memory(),
        Probe::TokenSpeed => token_speed(),
        Probe::TranscriptMemory { messages, width } => transcript_memory(messages, width),
        Probe::FakeOpenai { addr, rate, tokens } => runtime().and_then(|rt| {
            rt.block_on(async {
                let fake = FakeOpenAi::start(&addr, rate, tokens).await?;
                println!("listening on http://{}", fake.addr);
                std::future::pending::<()>().await;
                Ok(())
            })
        }),
        Probe::StreamFps {
            bin,
            rate,
            tokens,
            size,
        } => stream_fps(&bin, rate, tokens, size),
        Probe::Streams {
            bin,
            count,
            pace_ms,
        } => streams(&bin, count, pace_ms),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perf_probe: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}
