//! Runs `convo` in a pseudo-terminal and keeps a vt100 model of its screen.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convo_service::RunningService;
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

/// Generous: the machine is shared; this only stops a hung test.
pub const GUARD: Duration = Duration::from_secs(60);

/// A `convo serve` started in this process (in memory, the builtin engine), for the binary to
/// be pointed at ([`Convo::start_remote`]).
pub struct Server {
    // Dropped before the runtime it runs on.
    pub service: RunningService,
    pub runtime: tokio::runtime::Runtime,
}

impl Server {
    /// Generating a word every `pace_ms`.
    pub fn start(pace_ms: u64) -> Server {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let service = runtime
            .block_on(convo_service::start(
                convo_service::ServiceConfig::ephemeral(pace_ms),
                "127.0.0.1:0".parse().unwrap(),
            ))
            .expect("the service starts");
        Server { service, runtime }
    }
}

pub struct Convo {
    parser: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    log: std::path::PathBuf,
}

impl Convo {
    /// Starts `convo` with HOME, the data dir and the XDG dirs under `home`.
    pub fn start(home: &Path, cols: u16, rows: u16) -> Convo {
        Convo::start_with_env(home, cols, rows, &[])
    }

    /// [`Convo::start`] pointed at `service` with its key (`CONVO_BASE_URL`, `CONVO_API_KEY`).
    pub fn start_remote(home: &Path, cols: u16, rows: u16, service: &RunningService) -> Convo {
        let base = service.base_url();
        let env = [
            ("CONVO_BASE_URL", std::ffi::OsStr::new(&base)),
            ("CONVO_API_KEY", std::ffi::OsStr::new(&service.api_key)),
        ];
        Convo::start_with_env(home, cols, rows, &env)
    }

    /// [`Convo::start`] with more environment variables (`EDITOR`).
    pub fn start_with_env(
        home: &Path,
        cols: u16,
        rows: u16,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Convo {
        Convo::command(home, cols, rows, &[], env)
    }

    /// `convo ARGS` (a one-shot command at a terminal) as [`Convo::start_with_env`] starts it.
    pub fn command(
        home: &Path,
        cols: u16,
        rows: u16,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Convo {
        let pty = native_pty_system();
        let pair = pty
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_convo"));
        cmd.args(args);
        cmd.env_clear();
        cmd.env("HOME", home);
        cmd.env("XDG_CONFIG_HOME", home.join(".config"));
        cmd.env("XDG_DATA_HOME", home.join(".local/share"));
        cmd.env("CONVO_DATA_DIR", home.join("data"));
        cmd.env("TERM", "xterm-256color");
        cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
        if let Ok(level) = std::env::var("CONVO_LOG") {
            cmd.env("CONVO_LOG", level);
        }
        for (name, value) in env {
            cmd.env(name, value);
        }
        cmd.cwd(home);
        let child = pair.slave.spawn_command(cmd).expect("spawn convo");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZeroU16::new(rows).expect("rows > 0"),
            std::num::NonZeroU16::new(cols).expect("cols > 0"),
            0,
        )));
        let raw = Arc::new(Mutex::new(Vec::new()));
        {
            let parser = parser.clone();
            let raw = raw.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            parser.lock().unwrap().process(&buf[..n]);
                            raw.lock().unwrap().extend_from_slice(&buf[..n]);
                        }
                    }
                }
            });
        }
        Convo {
            parser,
            raw,
            writer,
            child,
            master: pair.master,
            log: home.join("data/convo.log"),
        }
    }

    pub fn screen(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Polls the screen until `pred` holds; panics with the screen after the guard.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            if start.elapsed() > GUARD {
                panic!(
                    "gave up waiting for {what}; screen:\n{screen}\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("`{text}`"), |s| s.contains(text))
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write to pty");
        self.writer.flush().expect("flush pty");
    }

    pub fn type_text(&mut self, text: &str) {
        // One key at a time, as a person types (a burst would arrive as a paste-like run).
        for c in text.chars() {
            let mut b = [0u8; 4];
            self.send(c.encode_utf8(&mut b).as_bytes());
        }
    }

    /// Quits with Ctrl-C: a second one when the first only says how (right after a reply
    /// ended, `press Ctrl-C again to quit`); returns whether it exited successfully.
    pub fn quit(&mut self) -> bool {
        self.send(keys::CTRL_C);
        let start = Instant::now();
        loop {
            if self.child.try_wait().expect("try_wait").is_some() {
                return self.wait_exit();
            }
            if self.screen().contains("press Ctrl-C again to quit") {
                self.send(keys::CTRL_C);
                return self.wait_exit();
            }
            if start.elapsed() > GUARD {
                return self.wait_exit();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to end and returns whether it exited successfully.
    pub fn wait_exit(&mut self) -> bool {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the reader thread take the last bytes.
                std::thread::sleep(Duration::from_millis(200));
                return status.success();
            }
            if start.elapsed() > GUARD {
                let _ = self.child.kill();
                panic!(
                    "convo did not exit; screen:\n{}\n{}",
                    self.screen(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The end of the program's log, for a failure message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        format!("log ({}):\n{tail}", self.log.display())
    }

    /// Sends the process a signal (`TERM`, `HUP`, `INT`, …) with `kill`.
    pub fn signal(&mut self, name: &str) {
        let pid = self.child.process_id().expect("the child's pid");
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// Kills the process with SIGKILL: no chance to save anything on the way out.
    pub fn kill_9(&mut self) {
        let pid = self.child.process_id().expect("the child's pid");
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -KILL {pid}");
        let start = Instant::now();
        while self.child.try_wait().expect("try_wait").is_none() {
            assert!(start.elapsed() < GUARD, "convo survived SIGKILL");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resizes the terminal (the program gets SIGWINCH) and the screen model with it.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.parser.lock().unwrap().set_size(
            std::num::NonZeroU16::new(rows).expect("rows > 0"),
            std::num::NonZeroU16::new(cols).expect("cols > 0"),
        );
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("resize the pty");
    }

    /// Everything the program wrote, as bytes.
    pub fn output(&self) -> Vec<u8> {
        self.raw.lock().unwrap().clone()
    }

    /// The state of the terminal after the program left.
    pub fn restored(&self) -> Restored {
        let parser = self.parser.lock().unwrap();
        let screen = parser.screen();
        let raw = self.raw.lock().unwrap();
        Restored {
            alternate_screen: screen.alternate_screen(),
            cursor_hidden: screen.hide_cursor(),
            mouse_captured: screen.mouse_protocol_mode() != vt100::MouseProtocolMode::None,
            bracketed_paste: screen.bracketed_paste(),
            left_alternate_screen: contains(&raw, b"\x1b[?1049l"),
        }
    }
}

impl Drop for Convo {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Restored {
    pub alternate_screen: bool,
    pub cursor_hidden: bool,
    pub mouse_captured: bool,
    pub bracketed_paste: bool,
    pub left_alternate_screen: bool,
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

pub mod keys {
    pub const ENTER: &[u8] = b"\r";
    pub const TAB: &[u8] = b"\t";
    pub const CTRL_C: &[u8] = b"\x03";
    pub const CTRL_N: &[u8] = b"\x0e";
    pub const DOWN: &[u8] = b"\x1b[B";
    pub const UP: &[u8] = b"\x1b[A";
    pub const DELETE: &[u8] = b"\x1b[3~";
    pub const CTRL_G: &[u8] = b"\x07";
    pub const ESC: &[u8] = b"\x1b";
    pub const F4: &[u8] = b"\x1bOS";
}
