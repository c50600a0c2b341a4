//! First frame, idle CPU, memory, and the token counter's speed and heap.

use super::*;

/// On the first frame: the sessions pane's title and the composer's counter.
pub(crate) const LAYOUT_MARKS: [&str; 2] = ["Sessions", "/ 10000"];
/// In the status bar once the embedded service answers, with what answers in it: the probes
/// start `convo` on a fresh data dir, which has no model, so the builtin engine.
pub(crate) const CONNECTED_MARK: &str = "● builtin (no model)";

pub(crate) fn first_frame(bin: &Path, runs: usize, size: Size) -> Result<()> {
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

pub(crate) fn idle_cpu(bin: &Path, secs: u64, settle: u64, size: Size) -> Result<()> {
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
pub(crate) const REPLY_MARK: &str = "offline engine";

pub(crate) fn rss(
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

pub(crate) fn transcript_memory(count: usize, width: u16) -> Result<()> {
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

pub(crate) fn token_speed() -> Result<()> {
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

pub(crate) fn bpe_memory() -> Result<()> {
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
