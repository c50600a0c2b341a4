//! Render-path benchmarks: `cargo bench --bench render`. Figures go to docs/performance.md.
//!
//! - `render/visible/{100,1000,10000,100000}`: one full frame of a 120×40 transcript pane
//!   following the tail of a history of that many messages (mixed prose, lists, code).
//! - `render/naive_paragraph/{100,1000,10000}`: the baseline, the whole history as one wrapped
//!   ratatui `Paragraph` scrolled to its end, rebuilt each frame as a naive client does.
//! - `stream/delta/10000`: append one delta (a few characters of a markdown reply with prose,
//!   a list and a code block) to a streaming message after 10,000 others, and draw the frame.
//! - `resize/10000`: the first frame after the width changes (every height recounted, the
//!   visible entries re-wrapped).
//! - `search/first/10000`: the first character typed in the transcript's search bar over
//!   10,000 messages: every message's lines at the pane's width built as text, lowercased
//!   and kept, and scanned.
//! - `search/typed_latency/10000`, `search/typed_zebra/10000`: a later character (the lines
//!   are kept): the scan alone, for a word found about 10,000 times and for one found nowhere.
//! - `accounts/visible/10000`: one frame of the accounts view (F4) at 120×40 with 10,000
//!   accounts, the selection in the middle (only the rows on screen are drawn).
//!
//! The clock is the wall clock. With `RENDER_BENCH_CLOCK=cpu` it is this thread's time on a
//! CPU (`CLOCK_THREAD_CPUTIME_ID`, Linux), which leaves out the time spent waiting
//! for a core: on a machine shared with other builds the wall clock mostly measures the queue.
use std::hint::black_box;
use std::time::{Duration, Instant};

use convo_tui::render::highlight;
use convo_tui::render::transcript::{Entry, EntryState, Transcript};
use convo_tui::search::TranscriptSearch;
use convo_wire::types::Role;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Text;
use ratatui::widgets::{Paragraph, Widget, Wrap};

/// The time source of every benchmark (see the module docs).
fn now() -> Duration {
    static CPU: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var("RENDER_BENCH_CLOCK").is_ok_and(|v| v == "cpu"));
    static START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    if *CPU {
        thread_cpu_time()
    } else {
        START.elapsed()
    }
}

#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Duration {
    panic!("RENDER_BENCH_CLOCK=cpu is only supported on Linux")
}

/// Run `f` `iters` times and return the time taken by the clock of [`now`].
fn timed(iters: u64, mut f: impl FnMut()) -> Duration {
    let start = now();
    for _ in 0..iters {
        f();
    }
    now() - start
}

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;

const WORDS: &[&str] = &[
    "the",
    "render",
    "cache",
    "keeps",
    "lines",
    "per",
    "message",
    "and",
    "width",
    "so",
    "a",
    "frame",
    "costs",
    "only",
    "what",
    "is",
    "visible",
    "terminal",
    "session",
    "streaming",
    "reply",
    "tokens",
    "quota",
    "markdown",
    "`inline`",
    "**bold**",
    "*emphasis*",
    "wrapped",
    "history",
    "scroll",
    "résumé",
    "日本語",
    "[docs](https://example.com/docs)",
    "latency",
];

const CODE: &[&str] = &[
    "fn main() {\n    let items = vec![1, 2, 3];\n    for i in &items {\n        println!(\"{i}\");\n    }\n}",
    "def handler(event):\n    total = sum(x['tokens'] for x in event)\n    return {'total': total}",
    "{\n  \"sessionId\": \"session_abcdefghijklmnop\",\n  \"tokens\": 42\n}",
];

fn sentence(rng: &mut StdRng) -> String {
    let n = rng.random_range(6..18);
    let words: Vec<&str> = (0..n)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect();
    words.join(" ") + "."
}

fn paragraph(rng: &mut StdRng) -> String {
    let n = rng.random_range(1..5);
    (0..n).map(|_| sentence(rng)).collect::<Vec<_>>().join(" ")
}

/// One message of mixed markdown: short user prompts, longer assistant replies.
fn message(rng: &mut StdRng, role: Role) -> String {
    if role == Role::User {
        return sentence(rng);
    }
    let mut blocks = vec![paragraph(rng)];
    for _ in 0..rng.random_range(0..4) {
        blocks.push(match rng.random_range(0..6) {
            0 | 1 => paragraph(rng),
            2 => (0..rng.random_range(2..5))
                .map(|i| {
                    let indent = if i > 0 && rng.random_bool(0.3) {
                        "  "
                    } else {
                        ""
                    };
                    format!("{indent}- {}", sentence(rng))
                })
                .collect::<Vec<_>>()
                .join("\n"),
            3 => {
                let lang = ["rust", "python", "json"][rng.random_range(0..3)];
                format!("```{lang}\n{}\n```", CODE[rng.random_range(0..CODE.len())])
            }
            4 => format!("### {}", sentence(rng)),
            _ => format!("> {}", sentence(rng)),
        });
    }
    blocks.join("\n\n")
}

fn history(n: usize) -> Transcript {
    let mut rng = StdRng::seed_from_u64(7);
    let mut t = Transcript::new();
    for i in 0..n {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let content = message(&mut rng, role);
        t.push(Entry::new(
            role,
            content,
            format!("{role} · 12:{:02}", i % 60),
        ));
    }
    t
}

fn area() -> Rect {
    Rect::new(0, 0, WIDTH, HEIGHT)
}

/// Draw the frame that follows the tail.
fn frame(t: &Transcript, buf: &mut Buffer) {
    buf.reset();
    let top = t.height(WIDTH).saturating_sub(usize::from(HEIGHT));
    t.render_on_reset(area(), buf, top, None);
}

/// `RENDER_BENCH_BREAKDOWN_ONLY` set: only the breakdown of `stream/delta/10000` is run and
/// printed (quick, and short enough to run under callgrind).
fn breakdown_only() -> bool {
    std::env::var_os("RENDER_BENCH_BREAKDOWN_ONLY").is_some()
}

fn visible(c: &mut Criterion) {
    if breakdown_only() {
        return;
    }
    highlight::preload();
    let mut group = c.benchmark_group("render");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for n in [100, 1_000, 10_000, 100_000] {
        let started = Instant::now();
        let t = history(n);
        let mut buf = Buffer::empty(area());
        frame(&t, &mut buf);
        eprintln!(
            "history of {n}: built in {:?}, {} lines at width {WIDTH}",
            started.elapsed(),
            t.height(WIDTH)
        );
        group.bench_with_input(BenchmarkId::new("visible", n), &t, |b, t| {
            b.iter_custom(|iters| timed(iters, || frame(black_box(t), &mut buf)))
        });
    }
    group.finish();
}

fn naive_paragraph(c: &mut Criterion) {
    if breakdown_only() {
        return;
    }
    let mut group = c.benchmark_group("render");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    for n in [100, 1_000, 10_000] {
        let t = history(n);
        // the styled lines of every message, unwrapped; the Paragraph wraps them every frame
        let text = Text::from(t.lines_uncached(1000));
        let total = t.height(WIDTH);
        let scroll = u16::try_from(total.saturating_sub(usize::from(HEIGHT))).unwrap_or(u16::MAX);
        let mut buf = Buffer::empty(area());
        group.bench_with_input(BenchmarkId::new("naive_paragraph", n), &text, |b, text| {
            b.iter_custom(|iters| {
                timed(iters, || {
                    buf.reset();
                    Paragraph::new(text.clone())
                        .wrap(Wrap { trim: false })
                        .scroll((scroll, 0))
                        .render(area(), &mut buf);
                })
            })
        });
    }
    group.finish();
}

/// A reply streamed in deltas of 2–8 characters.
fn reply_deltas() -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(11);
    let reply = format!(
        "{}\n\n{}\n\n- {}\n- {}\n- {}\n\n```rust\n{}\n```\n\n{}",
        paragraph(&mut rng),
        paragraph(&mut rng),
        sentence(&mut rng),
        sentence(&mut rng),
        sentence(&mut rng),
        CODE[0],
        paragraph(&mut rng)
    );
    let chars: Vec<char> = reply.chars().collect();
    let mut deltas = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let n = rng.random_range(2..9).min(chars.len() - i);
        deltas.push(chars[i..i + n].iter().collect());
        i += n;
    }
    deltas
}

/// Stream `deltas` into a new entry, drawing a frame after each; returns the time spent
/// appending and drawing, and the number of deltas. The entry is removed afterwards.
#[inline(never)]
fn breakdown_pass(
    t: &mut Transcript,
    deltas: &[String],
    buf: &mut Buffer,
) -> (Duration, Duration, u32) {
    let probe = t.push(Entry::streaming(Role::Assistant, "assistant · now"));
    let (mut append, mut draw) = (Duration::ZERO, Duration::ZERO);
    for delta in deltas {
        let started = now();
        t.append_delta(probe, delta);
        let appended = now();
        frame(t, buf);
        append += appended - started;
        draw += now() - appended;
    }
    t.remove(probe);
    (
        append,
        draw,
        u32::try_from(deltas.len()).unwrap_or(u32::MAX),
    )
}

fn stream_delta(c: &mut Criterion) {
    highlight::preload();
    let mut group = c.benchmark_group("stream");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    let mut t = history(10_000);
    let deltas = reply_deltas();
    let mut buf = Buffer::empty(area());
    frame(&t, &mut buf);
    // one pass over the reply, split into its two costs, for docs/performance.md; the first
    // pass warms what is built once (syntect compiles a syntax's regexes on first use), the
    // second is reported (`valgrind --tool=callgrind --zero-before=render::breakdown_pass`
    // profiles it alone)
    for pass in 1..=2 {
        let (append, draw, n) = breakdown_pass(&mut t, &deltas, &mut buf);
        if pass == 2 {
            eprintln!(
                "stream/delta/10000 breakdown over {n} deltas: append_delta {:?}, frame {:?} per delta",
                append / n,
                draw / n
            );
        }
    }
    if breakdown_only() {
        std::process::exit(0);
    }
    let mut id = t.push(Entry::streaming(Role::Assistant, "assistant · now"));
    let mut next = 0;
    group.bench_function(BenchmarkId::new("delta", 10_000), |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                if next == deltas.len() {
                    // the reply is complete: start the next one (not timed)
                    t.set_state(id, EntryState::Complete);
                    t.remove(id);
                    id = t.push(Entry::streaming(Role::Assistant, "assistant · now"));
                    frame(&t, &mut buf);
                    next = 0;
                }
                let started = now();
                t.append_delta(id, &deltas[next]);
                frame(&t, &mut buf);
                spent += now() - started;
                next += 1;
            }
            spent
        })
    });
    group.finish();
}

fn resize(c: &mut Criterion) {
    highlight::preload();
    let mut group = c.benchmark_group("resize");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    let t = history(10_000);
    let mut buf = Buffer::empty(area());
    frame(&t, &mut buf);
    let mut narrow = false;
    group.bench_function(BenchmarkId::from_parameter(10_000), |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                narrow = !narrow;
                let width = if narrow { WIDTH - 20 } else { WIDTH };
                let area = Rect::new(0, 0, width, HEIGHT);
                buf.reset();
                let top = t.height(width).saturating_sub(usize::from(HEIGHT));
                t.render_on_reset(area, &mut buf, top, None);
            })
        })
    });
    group.finish();
}

fn search(c: &mut Criterion) {
    if breakdown_only() {
        return;
    }
    let mut group = c.benchmark_group("search");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(5));
    let t = history(10_000);
    let width = WIDTH - 2;
    let searched = |query: &str| {
        let mut s = TranscriptSearch::new("session_bench".into(), 0);
        s.query.set_text(query);
        s.refresh(&t, width);
        s
    };
    let warm = searched("latency");
    eprintln!("`latency`: {} matches", warm.matches.len());
    group.bench_function(BenchmarkId::new("first", 10_000), |b| {
        b.iter_custom(|iters| timed(iters, || drop(black_box(searched("handler")))))
    });
    for query in ["latency", "zebra"] {
        let mut s = searched("l");
        let mut flip = false;
        group.bench_function(BenchmarkId::new(format!("typed_{query}"), 10_000), |b| {
            b.iter_custom(|iters| {
                timed(iters, || {
                    // Alternates so that every pass scans again.
                    flip = !flip;
                    s.query.set_text(&if flip {
                        query.to_string()
                    } else {
                        format!("{query} ")
                    });
                    black_box(s.refresh(&t, width));
                })
            })
        });
    }
    group.finish();
}

/// Account `id` with some usage of each limit.
fn admin_account(id: u64) -> convo_wire::admin::AdminAccount {
    use convo_wire::types::{Quota, SessionQuota};
    let (r, t, s) = ((id * 7) % 111, (id * 37) % 1000, id % 6);
    convo_wire::admin::AdminAccount {
        account_id: id,
        name: format!("key …{:04}", id % 10_000),
        tier: if id.is_multiple_of(3) { "pro" } else { "free" }.into(),
        key_hints: vec![format!("{:04}", id % 10_000)],
        requests: Quota {
            used: r,
            limit: 100,
            percentage: r as f64,
        },
        tokens: Quota {
            used: t,
            limit: 1000,
            percentage: t as f64 / 10.0,
        },
        sessions: SessionQuota {
            active: s,
            limit: 5,
            percentage: s as f64 * 20.0,
        },
        share: (r as f64 / 100.0)
            .max(t as f64 / 1000.0)
            .max(s as f64 / 5.0),
        last_active_at: None,
    }
}

fn accounts(c: &mut Criterion) {
    if breakdown_only() {
        return;
    }
    use convo_tui::accounts_view::{AccountsState, Availability};
    let keys = convo_tui::keys::KeyBindings::defaults().expect("default keys");
    let mut group = c.benchmark_group("accounts");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let n = 10_000u64;
    let mut state = AccountsState::default();
    state.availability = Availability::Available;
    state.rows = (1..=n).map(admin_account).collect();
    state.total = n;
    state.loaded = true;
    state.live = true;
    state.selected = 5_000;
    state.offset = 4_990;
    state.page_rows = (HEIGHT - 2) as usize;
    let mut buf = Buffer::empty(area());
    group.bench_function(BenchmarkId::new("visible", n), |b| {
        b.iter_custom(|iters| {
            timed(iters, || {
                buf.reset();
                convo_tui::view::accounts::render(black_box(&state), &keys, area(), &mut buf)
            })
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    visible,
    accounts,
    naive_paragraph,
    stream_delta,
    resize,
    search
);
criterion_main!(benches);
