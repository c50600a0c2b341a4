//! The interactive client: terminal setup and restore, the event loop, and the modules it
//! wires together (state in `app`, events in `event`, panes in `view`, I/O in `workers`), the
//! render path from markdown to styled lines (`render`) and the key bindings (`keys`).
#![deny(unsafe_code)] // allowed in one module: render::cells

pub mod accounts_view;
pub mod app;
pub mod command;
pub mod component;
pub mod composer_pane;
pub mod dialogs;
pub mod editor;
pub mod embedded;
pub mod event;
pub mod frame;
pub mod full_view;
pub mod help;
pub mod instance;
pub mod kept_view;
pub mod key_result;
pub mod keys;
pub mod layout;
pub mod line_input;
pub mod metrics;
pub mod notify;
pub mod render;
pub mod runtime;
pub mod search;
pub mod sessions_pane;
pub mod signals;
pub mod slash;
pub mod transcript_pane;
pub mod view;
pub mod wallet;
pub mod workers;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use chrono::Utc;
use crossterm::event::{
    DisableBracketedPaste, DisableFocusChange, DisableMouseCapture, EnableBracketedPaste,
    EnableFocusChange, EnableMouseCapture,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;

use crate::keys::KeyBindings;
use app::{App, Settings};
use convo_client::config::{Config, GlobalArgs};
use convo_wire::exit;
use frame::FrameScheduler;
use runtime::Runtime;
use workers::{Target, WorkerConfig};

/// Pace of the embedded service's builtin engine: a word every 30 ms reads as streaming.
const EMBEDDED_PACE_MS: u64 = 30;

/// `convo` with no subcommand.
pub async fn run(global: GlobalArgs) -> ExitCode {
    let config = match Config::load(&global) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("convo: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    let keys = match KeyBindings::from_table(&config.keys) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("convo: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    let target = match &config.connection.base_url {
        None => Target::Embedded {
            data_dir: config.paths.data_dir.clone(),
            engine: config.engine.clone(),
            pace_ms: EMBEDDED_PACE_MS,
        },
        Some(_) => match convo_client::api::client::ClientOptions::from_config(&config) {
            Ok(o) => Target::Remote(o),
            Err(e) => {
                eprintln!("convo: {e}");
                return ExitCode::from(exit::USAGE_ERROR);
            }
        },
    };
    let _instance = match instance::lock(&config.paths.data_dir) {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("convo: {e}");
            return ExitCode::from(exit::SERVICE_ERROR);
        }
    };
    let _log = init_logging(&config.paths.data_dir);
    let worker_config = WorkerConfig {
        target,
        store_file: config.paths.store_file(),
        usage: crate::workers::UsagePacing::every(Duration::from_secs(
            config.ui.usage_refresh_secs.max(1),
        )),
    };
    let settings = Settings {
        usage_refresh_secs: config.ui.usage_refresh_secs,
        max_context_tokens: config.ui.max_context_tokens,
        mouse: config.ui.mouse,
        show_sessions: config.ui.show_sessions,
        notify: config.notify,
    };
    let mut terminal = match TerminalGuard::enter(settings.mouse) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("convo: cannot set up the terminal: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    let size = terminal
        .terminal
        .size()
        .map(|s| Rect::new(0, 0, s.width, s.height))
        .unwrap_or(Rect::new(0, 0, 80, 24));
    let mut app = App::new(keys, settings, size, Utc::now());
    for w in &config.warnings {
        app.update(event::AppEvent::WorkerError(w.clone()));
    }
    let mut rt = Runtime::start(app, worker_config);
    rt.workers.spawn_terminal_input();
    let mut signals = signals::Signals::take();
    let result = event_loop(&mut rt, &mut terminal, &mut signals, &config.paths.data_dir).await;
    rt.shutdown().await;
    drop(terminal);
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            tracing::error!(error = %e, "the TUI failed");
            eprintln!("convo: {e}");
            ExitCode::from(exit::USAGE_ERROR)
        }
    }
}

/// A frame slower than this is logged at debug level (`CONVO_LOG=debug`).
const SLOW_FRAME: std::time::Duration = std::time::Duration::from_millis(8);

/// Draws on demand and feeds events to the app until it quits.
async fn event_loop(
    rt: &mut Runtime,
    terminal: &mut TerminalGuard,
    signals: &mut signals::Signals,
    data_dir: &std::path::Path,
) -> std::io::Result<()> {
    let mut frames = FrameScheduler::default();
    loop {
        let now = Instant::now();
        let deadline = frames.deadline(now);
        tokio::select! {
            ev = rt.next() => {
                let Some(ev) = ev else { return Ok(()) };
                rt.handle(ev);
                // Take whatever else is waiting: one frame for the whole burst.
                while let Some(ev) = rt.try_next() {
                    rt.handle(ev);
                }
                frames.request();
            }
            name = signals.recv() => {
                tracing::info!(signal = name, "quitting on a signal");
                rt.handle(event::AppEvent::Signal(name));
                frames.request();
            }
            _ = sleep_until(deadline), if deadline.is_some() => {
                let start = Instant::now();
                terminal.terminal.draw(|f| view::draw(f, &rt.app))?;
                let drawn = Instant::now();
                if drawn - start > SLOW_FRAME {
                    tracing::debug!(micros = (drawn - start).as_micros() as u64, "slow frame");
                }
                frames.drawn(drawn);
            }
        }
        for text in rt.workers.clipboard.drain(..) {
            terminal.copy(&text)?;
        }
        for notification in rt.workers.notifications.drain(..) {
            terminal.write_raw(&notification.sequence())?;
        }
        if let Some(draft) = rt.workers.editor.take() {
            edit_in_editor(rt, terminal, data_dir, &draft).await?;
            // An interrupt typed in the editor was the editor's.
            signals.forget_typed();
            frames.request();
        }
        if rt.app.has_quit() {
            return Ok(());
        }
    }
}

/// Hands the terminal to `$VISUAL`/`$EDITOR` on `draft` and gives the app what it saved (or
/// why not). Nothing reads the terminal meanwhile; events from the workers wait in the
/// channel. The draft file lives in the data dir and is removed afterwards.
async fn edit_in_editor(
    rt: &mut Runtime,
    terminal: &mut TerminalGuard,
    data_dir: &std::path::Path,
    draft: &str,
) -> std::io::Result<()> {
    let editor = editor::from_env();
    let file = match editor::DraftFile::create(data_dir, draft) {
        Ok(file) => file,
        Err(e) => {
            rt.handle(event::AppEvent::EditorClosed(
                editor::EditorOutcome::Failed(format!(
                    "cannot write the draft for the editor: {e}: draft unchanged"
                )),
            ));
            return Ok(());
        }
    };
    tracing::debug!(editor = %editor, path = %file.path().display(), "editing the draft");
    rt.workers.stop_terminal_input().await;
    terminal.suspend();
    let status = editor::run(&editor, file.path()).await;
    let resumed = terminal.resume();
    rt.workers.spawn_terminal_input();
    // The draft reaches the app (and the store) even if the terminal could not be taken back.
    rt.handle(event::AppEvent::EditorClosed(editor::outcome(
        &editor, status, &file,
    )));
    drop(file);
    // The terminal may have been resized while the editor had it.
    if let Ok(size) = terminal.terminal.size() {
        rt.handle(event::AppEvent::Resize(size.width, size.height));
    }
    resumed
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(d) = deadline {
        tokio::time::sleep_until(d.into()).await;
    }
}

type Backend = CrosstermBackend<std::io::Stdout>;

/// The terminal in raw mode on the alternate screen; restored on drop, and by the panic hook.
struct TerminalGuard {
    terminal: Terminal<Backend>,
    mouse: bool,
}

impl TerminalGuard {
    fn enter(mouse: bool) -> std::io::Result<TerminalGuard> {
        install_panic_hook(mouse);
        set_up_terminal(mouse)?;
        // No `terminal.clear()`: it asks the terminal for the cursor position, which costs a
        // round trip; the screen was cleared above and the first frame draws every cell.
        let terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
        Ok(TerminalGuard { terminal, mouse })
    }

    /// OSC 52: the terminal puts `text` on the system clipboard. Inside tmux, tmux is asked
    /// first (`tmux load-buffer -w -`: its buffer, and the outer terminal's clipboard through
    /// its own OSC 52); if that fails, OSC 52 goes through tmux's passthrough
    /// (`app::clipboard_sequence`).
    fn copy(&mut self, text: &str) -> std::io::Result<()> {
        let in_tmux = std::env::var_os("TMUX").is_some_and(|v| !v.is_empty());
        if in_tmux && tmux_load_buffer(text) {
            return Ok(());
        }
        self.write_raw(&app::clipboard_sequence(text, in_tmux))
    }

    /// Writes `bytes` to the terminal as they are (a bell, an OSC sequence).
    fn write_raw(&mut self, bytes: &str) -> std::io::Result<()> {
        let out = self.terminal.backend_mut();
        out.write_all(bytes.as_bytes())?;
        out.flush()
    }

    /// Hands the terminal to another program: as it was before `convo` started.
    fn suspend(&mut self) {
        restore_terminal(self.mouse);
    }

    /// Takes the terminal back after [`TerminalGuard::suspend`]; the next frame draws every
    /// cell.
    fn resume(&mut self) -> std::io::Result<()> {
        set_up_terminal(self.mouse)?;
        // Forgets the last frame (at the size the terminal has now), so the next one is
        // drawn whole. Not `terminal.clear()`: it asks the terminal for the cursor position,
        // a round trip that a terminal may never answer.
        let size = self.terminal.size()?;
        self.terminal
            .resize(Rect::new(0, 0, size.width, size.height))
    }
}

/// Raw mode, the alternate screen (cleared), bracketed paste, focus reports and, if asked,
/// the mouse.
fn set_up_terminal(mouse: bool) -> std::io::Result<()> {
    enable_raw_mode()?;
    let mut out = std::io::stdout();
    crossterm::execute!(
        out,
        EnterAlternateScreen,
        EnableBracketedPaste,
        EnableFocusChange,
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
    )?;
    if mouse {
        crossterm::execute!(out, EnableMouseCapture)?;
    }
    Ok(())
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal(self.mouse);
        let _ = self.terminal.show_cursor();
    }
}

fn restore_terminal(mouse: bool) {
    let mut out = std::io::stdout();
    if mouse {
        let _ = crossterm::execute!(out, DisableMouseCapture);
    }
    let _ = crossterm::execute!(
        out,
        DisableFocusChange,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
}

fn install_panic_hook(mouse: bool) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal(mouse);
        previous(info);
    }));
}

/// Logs go to `convo.log` in the data dir (mode 0600), never to the screen.
fn init_logging(data_dir: &std::path::Path) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    std::fs::create_dir_all(data_dir).ok()?;
    let path = data_dir.join("convo.log");
    let file = convo_client::private_file::append_private(&path).ok()?;
    let (writer, guard) = tracing_appender::non_blocking(file);
    let filter = EnvFilter::try_from_env("CONVO_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .finish()
        .with(convo_service::engine::log_filter())
        .try_init()
        .ok()?;
    Some(guard)
}

/// `tmux load-buffer -w -` with `text` on its stdin: true when tmux took it.
fn tmux_load_buffer(text: &str) -> bool {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let Ok(mut child) = Command::new("tmux")
        .args(["load-buffer", "-w", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let written = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(text.as_bytes()).is_ok());
    child.wait().is_ok_and(|s| s.success()) && written
}
