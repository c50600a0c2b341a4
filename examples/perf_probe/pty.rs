//! The TUI in a pseudo-terminal: the screen model, every byte with when it arrived.

use super::*;

/// What the pty reader saw: the screen model, every byte with when it arrived, and when
/// each awaited text first appeared on screen.
pub(crate) struct PtyLog {
    pub(crate) parser: vt100::Parser,
    pub(crate) raw: Vec<u8>,
    /// (arrival, length of `raw` after the chunk).
    pub(crate) chunks: Vec<(Instant, usize)>,
    pub(crate) marks: Vec<(String, Option<Instant>)>,
    pub(crate) first_byte: Option<Instant>,
}

pub(crate) struct Tui {
    pub(crate) log: Arc<Mutex<PtyLog>>,
    pub(crate) writer: Box<dyn Write + Send>,
    pub(crate) child: Box<dyn Child + Send + Sync>,
    pub(crate) pid: u32,
    pub(crate) spawned: Instant,
    pub(crate) _master: Box<dyn MasterPty + Send>,
}

impl Tui {
    /// Starts `bin` with HOME, the XDG dirs and `CONVO_DATA_DIR` under `home`, watching for
    /// each of `marks` on screen.
    pub(crate) fn start(
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

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, PtyLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn screen(&self) -> String {
        self.lock().parser.screen().contents()
    }

    /// When `text` first appeared on screen, waiting for it (up to the guard).
    pub(crate) fn wait_mark(&mut self, text: &str) -> Result<Instant> {
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

    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .write_all(bytes)
            .and_then(|()| self.writer.flush())
            .map_err(|e| format!("write to pty: {e}"))
    }

    /// Frames drawn in `[from, to)`, by the once-per-frame cursor sequence.
    pub(crate) fn frames_between(&self, from: Instant, to: Instant) -> usize {
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
    pub(crate) fn quiet_since(&self, quiet: Duration) -> Instant {
        let start = Instant::now();
        loop {
            let last = self.lock().chunks.last().map_or(self.spawned, |(t, _)| *t);
            if last.elapsed() >= quiet || start.elapsed() > GUARD {
                return last;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn output_len(&self) -> usize {
        self.lock().raw.len()
    }

    pub(crate) fn stop(mut self) {
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

pub(crate) fn count_frames(bytes: &[u8]) -> usize {
    FRAME_MARKERS
        .iter()
        .map(|m| bytes.windows(m.len()).filter(|w| w == m).count())
        .sum()
}
