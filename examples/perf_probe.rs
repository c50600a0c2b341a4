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

// ---------------------------------------------------------------------------------------
// Seeding the local store

fn seed(data_dir: &Path, count: usize) -> Result<()> {
    use convo_client::api::Role;
    use convo_client::local_store::{MessageStatus, Store, StoredMessage};

    std::fs::create_dir_all(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let store = Store::open(&data_dir.join("convo.db")).map_err(|e| e.to_string())?;
    let session = "session_perf000000010000";
    let start = chrono::Utc::now() - chrono::Duration::seconds(count as i64 * 30);
    let began = Instant::now();
    for i in 0..count {
        let user = i % 2 == 0;
        let content = if i + 1 == count {
            // The last message is what `rss` waits for: the transcript is drawn at its end.
            format!("Last one, number {i}: perf-marker-last")
        } else if user {
            seeded_question(i)
        } else {
            seeded_reply(i)
        };
        let message = StoredMessage {
            role: if user { Role::User } else { Role::Assistant },
            tokens: (content.len() / 4) as u64,
            content,
            created_at: start + chrono::Duration::seconds(i as i64 * 30),
            message_id: (!user).then(|| format!("msg_perf{i:020}")),
            status: MessageStatus::Complete,
        };
        store
            .append_message(session, &message)
            .map_err(|e| e.to_string())?;
    }
    store
        .set_last_open_session(session)
        .map_err(|e| e.to_string())?;
    let bytes = std::fs::metadata(data_dir.join("convo.db"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "seeded {count} messages into {} ({:.1} MB) in {:.1} s; session {session}",
        data_dir.join("convo.db").display(),
        bytes as f64 / 1e6,
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

fn seeded_question(i: usize) -> String {
    const QUESTIONS: [&str; 4] = [
        "How do I share state between tokio tasks without holding a lock across an await?",
        "What is the difference between `&str` and `String`, and when should a function take each?",
        "Can you explain lifetimes in trait objects, e.g. `Box<dyn Fn() + 'a>`?",
        "Why does my iterator chain allocate? I only call `map`, `filter` and `collect` once.",
    ];
    format!("{} (question {i})", QUESTIONS[i / 2 % QUESTIONS.len()])
}

/// A reply of realistic shape: paragraphs, a list, and every third one a code block.
fn seeded_reply(i: usize) -> String {
    let mut s = format!(
        "Reply {i}. The short answer is that **ownership** decides who frees a value, and \
         *borrowing* lets others look at it for a while without taking it. The compiler checks \
         both at compile time, so there is no cost at run time.\n\n\
         - keep the lock guard in a block that ends before the `.await`\n\
         - or send messages to one task that owns the state\n\
         - measure before reaching for `Arc<Mutex<_>>` everywhere\n"
    );
    if i % 3 == 1 {
        s.push_str(
            "\n```rust\nlet total: u64 = items\n    .iter()\n    .filter(|m| m.role == Role::User)\n    \
             .map(|m| m.tokens)\n    .sum();\nprintln!(\"{total}\");\n```\n",
        );
    }
    s.push_str("\nDoes that answer it?");
    s
}

// ---------------------------------------------------------------------------------------
// The TUI in a pty

/// What the pty reader saw: the screen model, every byte with when it arrived, and when
/// each awaited text first appeared on screen.
struct PtyLog {
    parser: vt100::Parser,
    raw: Vec<u8>,
    /// (arrival, length of `raw` after the chunk).
    chunks: Vec<(Instant, usize)>,
    marks: Vec<(String, Option<Instant>)>,
    first_byte: Option<Instant>,
}

struct Tui {
    log: Arc<Mutex<PtyLog>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn Child + Send + Sync>,
    pid: u32,
    spawned: Instant,
    _master: Box<dyn MasterPty + Send>,
}

impl Tui {
    /// Starts `bin` with HOME, the XDG dirs and `CONVO_DATA_DIR` under `home`, watching for
    /// each of `marks` on screen.
    fn start(
        bin: &Path,
        home: &Path,
        data_dir: &Path,
        env: &[(&str, String)],
        marks: &[&str],
        size: Size,
    ) -> Result<Tui> {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: size.rows,
                cols: size.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| format!("openpty: {e}"))?;
        // The child runs in `home`: a relative path would not be found there.
        let bin = std::fs::canonicalize(bin).map_err(|e| format!("{}: {e}", bin.display()))?;
        let mut cmd = CommandBuilder::new(&bin);
        cmd.env_clear();
        cmd.env("HOME", home);
        cmd.env("XDG_CONFIG_HOME", home.join(".config"));
        cmd.env("XDG_DATA_HOME", home.join(".local/share"));
        cmd.env("CONVO_DATA_DIR", data_dir);
        cmd.env("TERM", "xterm-256color");
        cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(home);
        let log = Arc::new(Mutex::new(PtyLog {
            parser: vt100::Parser::new(
                std::num::NonZeroU16::new(size.rows).ok_or("rows must be > 0")?,
                std::num::NonZeroU16::new(size.cols).ok_or("cols must be > 0")?,
                0,
            ),
            raw: Vec::new(),
            chunks: Vec::new(),
            marks: marks.iter().map(|m| (m.to_string(), None)).collect(),
            first_byte: None,
        }));
        let spawned = Instant::now();
        let child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        drop(pair.slave);
        let pid = child.process_id().ok_or("the child has no pid")?;
        let mut reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| format!("pty reader: {e}"))?;
        let writer = pair
            .master
            .take_writer()
            .map_err(|e| format!("pty writer: {e}"))?;
        {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let now = Instant::now();
                            let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                            log.first_byte.get_or_insert(now);
                            log.parser.process(&buf[..n]);
                            log.raw.extend_from_slice(&buf[..n]);
                            let len = log.raw.len();
                            log.chunks.push((now, len));
                            if log.marks.iter().any(|(_, seen)| seen.is_none()) {
                                let screen = log.parser.screen().contents();
                                for (text, seen) in log.marks.iter_mut() {
                                    if seen.is_none() && screen.contains(text.as_str()) {
                                        *seen = Some(now);
                                    }
                                }
                            }
                        }
                    }
                }
            });
        }
        Ok(Tui {
            log,
            writer,
            child,
            pid,
            spawned,
            _master: pair.master,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PtyLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn screen(&self) -> String {
        self.lock().parser.screen().contents()
    }

    /// When `text` first appeared on screen, waiting for it (up to the guard).
    fn wait_mark(&mut self, text: &str) -> Result<Instant> {
        let start = Instant::now();
        loop {
            let seen = self
                .lock()
                .marks
                .iter()
                .find(|(t, _)| t == text)
                .and_then(|(_, s)| *s);
            if let Some(at) = seen {
                return Ok(at);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "convo exited ({status:?}) before `{text}` appeared; screen:\n{}",
                    self.screen()
                ));
            }
            if start.elapsed() > GUARD {
                return Err(format!(
                    "gave up waiting for `{text}`; screen:\n{}",
                    self.screen()
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .write_all(bytes)
            .and_then(|()| self.writer.flush())
            .map_err(|e| format!("write to pty: {e}"))
    }

    /// Frames drawn in `[from, to)`, by the once-per-frame cursor sequence.
    fn frames_between(&self, from: Instant, to: Instant) -> usize {
        let log = self.lock();
        let start = log
            .chunks
            .iter()
            .take_while(|(t, _)| *t < from)
            .last()
            .map_or(0, |(_, end)| *end);
        let end = log
            .chunks
            .iter()
            .take_while(|(t, _)| *t < to)
            .last()
            .map_or(0, |(_, end)| *end);
        // A frame's marker straddling `start` is counted in the window it ends in.
        let from_byte = start.saturating_sub(5);
        count_frames(&log.raw[from_byte..end.max(from_byte)])
    }

    /// Waits until nothing was written for `quiet`; returns when the last chunk came.
    fn quiet_since(&self, quiet: Duration) -> Instant {
        let start = Instant::now();
        loop {
            let last = self.lock().chunks.last().map_or(self.spawned, |(t, _)| *t);
            if last.elapsed() >= quiet || start.elapsed() > GUARD {
                return last;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn output_len(&self) -> usize {
        self.lock().raw.len()
    }

    fn stop(mut self) {
        // Ctrl-C quits when no reply streams; a kill is the fallback.
        let _ = self.send(b"\x03");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn count_frames(bytes: &[u8]) -> usize {
    FRAME_MARKERS
        .iter()
        .map(|m| bytes.windows(m.len()).filter(|w| w == m).count())
        .sum()
}

// ---------------------------------------------------------------------------------------
// /proc

/// CPU time and wake-ups of a process, summed over its threads.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    at: Instant,
    /// utime + stime, in clock ticks.
    ticks: u64,
    /// Time on CPU from schedstat, nanoseconds, of the threads alive now (finer than ticks,
    /// but the time of threads that ended is lost).
    run_ns: u64,
    /// Voluntary + involuntary context switches.
    switches: u64,
}

fn clock_ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

fn cpu_sample(pid: u32) -> Result<CpuSample> {
    let at = Instant::now();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the command (which may hold spaces) start at field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> u64 { fields.get(n - 3).and_then(|f| f.parse().ok()).unwrap_or(0) };
    let ticks = field(14) + field(15);
    let mut run_ns = 0;
    let mut switches = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let path = task.path();
            if let Ok(s) = std::fs::read_to_string(path.join("schedstat")) {
                run_ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
            if let Ok(s) = std::fs::read_to_string(path.join("status")) {
                for line in s.lines() {
                    if let Some(v) = line
                        .strip_prefix("voluntary_ctxt_switches:")
                        .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                    {
                        switches += v.trim().parse::<u64>().unwrap_or(0);
                    }
                }
            }
        }
    }
    Ok(CpuSample {
        at,
        ticks,
        run_ns,
        switches,
    })
}

/// Share of one core used between two samples, in percent, by ticks and by schedstat.
fn cpu_percent(a: &CpuSample, b: &CpuSample, hz: u64) -> (f64, f64) {
    let secs = b.at.duration_since(a.at).as_secs_f64();
    let by_ticks = b.ticks.saturating_sub(a.ticks) as f64 / hz as f64 / secs * 100.0;
    let by_sched = b.run_ns.saturating_sub(a.run_ns) as f64 / 1e9 / secs * 100.0;
    (by_ticks, by_sched)
}

/// `VmRSS`, `VmHWM` and `RssAnon` in kB.
fn memory(pid: u32) -> Result<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    let kb = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Ok((kb("VmRSS:"), kb("VmHWM:"), kb("RssAnon:")))
}

fn temp_home() -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("convo-perf-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ---------------------------------------------------------------------------------------
// First frame

/// On the first frame: the sessions pane's title and the composer's counter.
const LAYOUT_MARKS: [&str; 2] = ["Sessions", "/ 10000"];
/// In the status bar once the embedded service answers.
const CONNECTED_MARK: &str = "local service 127.0.0.1";

fn first_frame(bin: &Path, runs: usize, size: Size) -> Result<()> {
    let mut first_bytes = Vec::new();
    let mut layouts = Vec::new();
    let mut connected = Vec::new();
    println!(
        "run  first byte ms  first frame ms  connected ms  earlier frames  ({}x{})",
        size.cols, size.rows
    );
    for run in 1..=runs {
        let home = temp_home()?;
        let data = home.path().join("data");
        let mut marks: Vec<&str> = LAYOUT_MARKS.to_vec();
        marks.push(CONNECTED_MARK);
        let mut tui = Tui::start(bin, home.path(), &data, &[], &marks, size)?;
        let layout = LAYOUT_MARKS
            .iter()
            .map(|m| tui.wait_mark(m))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .max()
            .ok_or("no layout marks")?;
        let up = tui.wait_mark(CONNECTED_MARK)?;
        let first = tui.lock().first_byte.ok_or("no output")?;
        let (b, f, c) = (
            ms(first - tui.spawned),
            ms(layout - tui.spawned),
            ms(up - tui.spawned),
        );
        // Frames finished before the layout showed: 0 when it came with the very first frame.
        let nth = tui.frames_between(tui.spawned, layout);
        println!("{run:>3}  {b:>13.1}  {f:>14.1}  {c:>12.1}  {nth:>14}");
        first_bytes.push(b);
        layouts.push(f);
        connected.push(c);
        tui.stop();
    }
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("min {lo:.1}, max {hi:.1}")
    };
    println!(
        "median first frame {:.1} ms ({}); first byte {:.1} ms; embedded service connected {:.1} ms ({})",
        median(layouts.clone()),
        range(&layouts),
        median(first_bytes),
        median(connected.clone()),
        range(&connected)
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Idle CPU

fn idle_cpu(bin: &Path, secs: u64, settle: u64, size: Size) -> Result<()> {
    let home = temp_home()?;
    let data = home.path().join("data");
    let mut tui = Tui::start(bin, home.path(), &data, &[], &[CONNECTED_MARK], size)?;
    tui.wait_mark(CONNECTED_MARK)?;
    std::thread::sleep(Duration::from_secs(settle));
    let hz = clock_ticks_per_sec();
    let a = cpu_sample(tui.pid)?;
    let bytes_a = tui.output_len();
    std::thread::sleep(Duration::from_secs(secs));
    let b = cpu_sample(tui.pid)?;
    let bytes_b = tui.output_len();
    let frames = tui.frames_between(a.at, b.at);
    let (by_ticks, by_sched) = cpu_percent(&a, &b, hz);
    let window = b.at.duration_since(a.at).as_secs_f64();
    println!(
        "idle {window:.1} s after {settle} s settling: CPU {by_ticks:.2} % of a core by \
         utime+stime at {hz} Hz ({by_sched:.3} % by the schedstat of live threads), {} context \
         switches ({:.1}/s), \
         {frames} frames drawn, {} bytes written",
        b.switches.saturating_sub(a.switches),
        b.switches.saturating_sub(a.switches) as f64 / window,
        bytes_b - bytes_a
    );
    tui.stop();
    Ok(())
}

// ---------------------------------------------------------------------------------------
// RSS

/// What the builtin engine's replies say.
const REPLY_MARK: &str = "offline engine";

fn rss(
    bin: &Path,
    seeded: Option<&Path>,
    wait_for: &str,
    settle: u64,
    send: Option<&str>,
    size: Size,
) -> Result<()> {
    let home = temp_home()?;
    let data = home.path().join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let mark = match seeded {
        Some(src) => {
            for name in ["convo.db", "convo.db-wal", "convo.db-shm"] {
                let from = src.join(name);
                if from.exists() {
                    std::fs::copy(&from, data.join(name))
                        .map_err(|e| format!("{}: {e}", from.display()))?;
                }
            }
            wait_for
        }
        None => CONNECTED_MARK,
    };
    let marks = [mark, CONNECTED_MARK, REPLY_MARK];
    let mut tui = Tui::start(bin, home.path(), &data, &[], &marks, size)?;
    let drawn = tui.wait_mark(mark)?;
    tui.wait_mark(CONNECTED_MARK)?;
    let (rss_drawn, _, _) = memory(tui.pid)?;
    std::thread::sleep(Duration::from_secs(settle));
    let (rss_kb, hwm_kb, anon_kb) = memory(tui.pid)?;
    println!(
        "{}: drawn after {:.0} ms; VmRSS {:.1} MB when drawn, {:.1} MB after {settle} s \
         (peak VmHWM {:.1} MB, RssAnon {:.1} MB)",
        match seeded {
            Some(d) => format!("seeded store {}", d.display()),
            None => "empty data dir".into(),
        },
        ms(drawn - tui.spawned),
        rss_drawn as f64 / 1024.0,
        rss_kb as f64 / 1024.0,
        hwm_kb as f64 / 1024.0,
        anon_kb as f64 / 1024.0,
    );
    if let Some(text) = send {
        tui.send(text.as_bytes())?;
        std::thread::sleep(Duration::from_millis(300));
        tui.send(b"\r")?;
        tui.wait_mark(REPLY_MARK)?;
        tui.quiet_since(Duration::from_secs(1));
        std::thread::sleep(Duration::from_secs(settle));
        let (rss_kb, hwm_kb, anon_kb) = memory(tui.pid)?;
        println!(
            "  after sending `{text}` and its reply: VmRSS {:.1} MB (peak VmHWM {:.1} MB, \
             RssAnon {:.1} MB)",
            rss_kb as f64 / 1024.0,
            hwm_kb as f64 / 1024.0,
            anon_kb as f64 / 1024.0,
        );
    }
    tui.stop();
    Ok(())
}

fn transcript_memory(count: usize, width: u16) -> Result<()> {
    use convo_client::api::Role;
    use convo_tui::render::transcript::{Entry, Transcript};
    let me = std::process::id();
    let mb = |kb: u64| kb as f64 / 1024.0;
    let (base, _, _) = memory(me)?;
    let contents: Vec<(Role, String)> = (0..count)
        .map(|i| {
            if i % 2 == 0 {
                (Role::User, seeded_question(i))
            } else {
                (Role::Assistant, seeded_reply(i))
            }
        })
        .collect();
    let bytes: usize = contents.iter().map(|(_, c)| c.len()).sum();
    let (texts, _, _) = memory(me)?;
    let mut transcript = Transcript::new();
    // The transcript takes the texts: the TUI keeps one copy of each message, in its entry.
    for (role, content) in contents {
        transcript.push(Entry::new(role, content, "assistant · 12:00 · 42 tokens"));
    }
    let (pushed, _, _) = memory(me)?;
    let height = transcript.height(width);
    let (heights, _, _) = memory(me)?;
    let mut buf = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, width, 30));
    let top = transcript.tail_top(width, 30);
    transcript.render(buf.area, &mut buf, top, None);
    let (drawn, _, _) = memory(me)?;
    println!(
        "{count} messages ({:.1} MB of text) at width {width} ({height} lines): VmRSS {:.1} MB \
         at start, +{:.1} MB for the texts (each held once, by its entry), +{:.1} MB for \
         Transcript::push (parsed documents), \
         +{:.1} MB for the heights, +{:.1} MB for drawing the tail",
        bytes as f64 / 1e6,
        mb(base),
        mb(texts - base),
        mb(pushed - texts),
        mb(heights - pushed),
        mb(drawn - heights),
    );
    Ok(())
}

fn token_speed() -> Result<()> {
    use convo_tokens as tokens;
    let tiktoken = tiktoken_rs::o200k_base_singleton();
    tokens::warm();
    // Words made up per run, so that neither the pieces nor tiktoken's caches repeat.
    let words: Vec<String> = (0..20_000u32)
        .map(|i| {
            format!(
                "{}{}",
                ["pre", "anti", "sub", "inter"][i as usize % 4],
                i * 7919 % 100_003
            )
        })
        .collect();
    let ascii = format!("Hello, world: {} end.\n", words.join(" "));
    let other = format!("Grüße aus Köln: {} fin, ça va ? 你好\n", words.join(" é "));
    for (name, text) in [("ASCII", &ascii), ("other", &other)] {
        let expected = tiktoken.encode_ordinary(text).len() as u64;
        let owned = text.clone();
        let cold = std::thread::spawn(move || {
            let started = Instant::now();
            let n = tokens::count(&owned);
            let cold = started.elapsed();
            let started = Instant::now();
            let again = tokens::count(&owned);
            (n, again, cold, started.elapsed())
        })
        .join()
        .map_err(|_| "counting panicked".to_string())?;
        let started = Instant::now();
        let by_tiktoken = tiktoken.encode_ordinary(text).len() as u64;
        let tiktoken_time = started.elapsed();
        let (n, again, cold, warm) = cold;
        if n != expected || again != expected || by_tiktoken != expected {
            return Err(format!("{name}: counted {n}/{again}, tiktoken {expected}"));
        }
        let kb = text.len() as f64 / 1024.0;
        let per_kb = |d: Duration| d.as_secs_f64() * 1e6 / kb;
        println!(
            "{name} text, {kb:.0} KiB, {n} tokens: {:.1} µs/KiB uncached, {:.1} µs/KiB cached; \
             tiktoken-rs {:.1} µs/KiB",
            per_kb(cold),
            per_kb(warm),
            per_kb(tiktoken_time)
        );
    }
    Ok(())
}

fn bpe_memory() -> Result<()> {
    let me = std::process::id();
    let mb = |kb: u64| kb as f64 / 1024.0;
    let (base, _, _) = memory(me)?;
    // ASCII text touches only the compact tables (part of the binary); other text also
    // compiles the o200k pattern.
    let ascii = convo_tokens::count(&"Hello, world: how do lifetimes work? ".repeat(400));
    let (one, _, _) = memory(me)?;
    let other = convo_tokens::count(&"Grüße aus Köln, ça va ? Привет! 你好 ".repeat(400));
    let (two, _, _) = memory(me)?;
    // tiktoken-rs's own tables, which the counting used before (docs/performance.md).
    let tiktoken = tiktoken_rs::o200k_base_singleton();
    let n = tiktoken.encode_ordinary("hello world").len();
    let (three, _, _) = memory(me)?;
    println!(
        "o200k counting: VmRSS {:.1} MB before, {:.1} MB after counting ASCII text (+{:.1}), \
         {:.1} MB after counting other text (+{:.1}); tiktoken-rs's CoreBPE would add {:.1} MB \
         ({ascii} + {other} + {n} tokens counted)",
        mb(base),
        mb(one),
        mb(one - base),
        mb(two),
        mb(two - one),
        mb(three - two),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Fake OpenAI-compatible server

/// Streams `tokens` pieces at `rate` per second as `chat.completion.chunk` SSE events.
struct FakeOpenAi {
    addr: std::net::SocketAddr,
    state: Arc<FakeState>,
}

#[derive(Default)]
struct FakeState {
    started: Mutex<Option<Instant>>,
    finished: Mutex<Option<Instant>>,
    sent: AtomicU64,
}

impl FakeOpenAi {
    async fn start(addr: &str, rate: u64, tokens: u64) -> Result<FakeOpenAi> {
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

fn sse_reply(state: Arc<FakeState>, rate: u64, tokens: u64) -> axum::response::Response {
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

fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}

// ---------------------------------------------------------------------------------------
// `convo serve` as a child process

struct Serve {
    child: ProcChild,
    base_url: String,
    key: String,
}

impl Serve {
    fn start(bin: &Path, db: &Path, extra: &[&str]) -> Result<Serve> {
        let key = "service_live_perfprobe0000000001".to_string();
        let mut child = Command::new(bin)
            .arg("serve")
            .args(["--addr", "127.0.0.1:0", "--jwt-secret", "perf-probe-secret"])
            .arg("--db")
            .arg(db)
            .arg("--api-key")
            .arg(format!("{key}=enterprise"))
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn {} serve: {e}", bin.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading serve's stdout: {e}"))?;
        let base_url = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("serve said `{}`", line.trim()))?
            .to_string();
        Ok(Serve {
            child,
            base_url,
            key,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// Streaming at 2,000 tokens/s

fn stream_fps(bin: &Path, rate: u64, tokens: u64, size: Size) -> Result<()> {
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

fn wait_for<T>(mut f: impl FnMut() -> Option<T>, what: &str) -> Result<T> {
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
struct StreamRun {
    connect: Duration,
    first_delta: Option<Duration>,
    done: Duration,
    deltas: u64,
}

fn streams(bin: &Path, count: usize, pace_ms: u64) -> Result<()> {
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

async fn one_stream(
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
