//! Background work: connecting (or starting the embedded service), the local store, sends,
//! the session stream, the usage poller, the clock and terminal input. Workers never touch
//! `App`; they report through `AppEvent`s.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::Utc;
use futures_util::StreamExt;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::embedded::{self, RunningService};
use crate::api::client::{Client, ClientOptions};
use crate::api::error::ApiError;
use crate::api::stream::{SessionStream, StreamUpdate};
use crate::store::{self, Store};

use super::app::{Command, StoreOp};
use super::event::{
    AppEvent, Endpoint, EventSender, Failure, HistoryFetch, SessionSummary, StreamStatus,
};

/// Where to connect.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start the local service in-process with its database in this directory.
    Embedded { data_dir: PathBuf, pace_ms: u64 },
    /// A deployment (or a service a test started).
    Remote(ClientOptions),
}

/// What the workers need to know.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub target: Target,
    pub store_file: PathBuf,
    pub usage_refresh: Duration,
}

/// What connecting produced, shared with the tasks that need it.
#[derive(Default)]
struct Shared {
    client: OnceLock<Client>,
    service: Mutex<Option<RunningService>>,
}

enum StoreJob {
    Op(StoreOp),
    /// A session's transcript and draft, laid out for a pane of this width and height.
    Load(String, u16, u16),
    /// Writes the drafts still waiting, then closes the database, so that SQLite folds its WAL
    /// into the file and removes it; answers after that. Jobs sent later are not run.
    Close(oneshot::Sender<()>),
}

/// Handles to the running workers; `dispatch` hands them the app's commands.
pub struct Workers {
    events: EventSender,
    shared: Arc<Shared>,
    store_jobs: std::sync::mpsc::Sender<StoreJob>,
    stream: Option<(SessionStream, JoinHandle<()>)>,
    usage_kick: Arc<Notify>,
    tasks: Vec<JoinHandle<()>>,
    /// Text for the terminal's clipboard (OSC 52), written by the loop that owns the terminal.
    pub clipboard: Vec<String>,
    /// views: the metrics view's load in flight and the wallet view's fetches.
    metrics: crate::tui::metrics::worker::MetricsWorker,
    wallet: crate::tui::wallet::worker::WalletWorker,
}

impl Workers {
    /// Starts connecting, opening the store, the usage poller and the clock. Returns at once.
    pub fn start(config: WorkerConfig, events: EventSender) -> Workers {
        let shared = Arc::new(Shared::default());
        let usage_kick = Arc::new(Notify::new());
        let tasks = vec![
            tokio::spawn(connect(
                config.target.clone(),
                shared.clone(),
                events.clone(),
            )),
            tokio::spawn(poll_usage(
                shared.clone(),
                usage_kick.clone(),
                config.usage_refresh,
                events.clone(),
            )),
            tokio::spawn(clock(events.clone())),
        ];
        let store_jobs = spawn_store(config.store_file.clone(), events.clone());
        // views: recent wallet ids live beside the store.
        let wallet = crate::tui::wallet::worker::WalletWorker::new(
            config
                .store_file
                .parent()
                .map(crate::tui::wallet::recent::path_in),
        );
        let tx = events.clone();
        wallet.load_recent(move |ev| {
            tx.send(AppEvent::Wallet(ev));
        });
        Workers {
            events,
            shared,
            store_jobs,
            stream: None,
            usage_kick,
            tasks,
            clipboard: Vec::new(),
            metrics: Default::default(),
            wallet,
        }
    }

    /// Forwards terminal input to the app until it quits.
    pub fn spawn_terminal_input(&mut self) {
        self.tasks
            .push(tokio::spawn(terminal_input(self.events.clone())));
    }

    /// The client of the connected service, once connected.
    pub fn client(&self) -> Option<&Client> {
        self.shared.client.get()
    }

    pub fn dispatch(&mut self, command: Command) {
        match command {
            Command::LoadTranscript {
                session_id,
                width,
                rows,
            } => self.store_job(StoreJob::Load(session_id, width, rows)),
            Command::Persist(op) => self.store_job(StoreJob::Op(op)),
            Command::OpenStream { session_id } => self.open_stream(session_id),
            Command::Send {
                session_id,
                send_id,
                body,
                idempotency_key,
            } => {
                let Some(client) = self.client().cloned() else {
                    self.events.send(AppEvent::SendFailed {
                        session_id,
                        send_id,
                        failure: Failure::Network("not connected".into()),
                    });
                    return;
                };
                let events = self.events.clone();
                self.tasks.retain(|t| !t.is_finished());
                let failed = {
                    let session_id = session_id.clone();
                    move |why: String| AppEvent::SendFailed {
                        session_id,
                        send_id,
                        failure: Failure::Other {
                            code: "internal".into(),
                            message: why,
                        },
                    }
                };
                self.spawn_reporting(failed, async move {
                    let content = body.content.clone();
                    let prompt_tokens =
                        tokio::task::spawn_blocking(move || store::estimate_tokens(&content))
                            .await
                            .unwrap_or(0);
                    let ev = match client
                        .post_message(&session_id, &body, &idempotency_key)
                        .await
                    {
                        Ok(reply) => AppEvent::SendAccepted {
                            session_id,
                            send_id,
                            reply: reply.message,
                            prompt_tokens,
                        },
                        Err(e) => AppEvent::SendFailed {
                            session_id,
                            send_id,
                            failure: failure(e),
                        },
                    };
                    events.send(ev);
                });
            }
            Command::FetchHistory { session_id } => {
                let Some(client) = self.client().cloned() else {
                    return;
                };
                let events = self.events.clone();
                self.tasks.retain(|t| !t.is_finished());
                self.tasks.push(tokio::spawn(async move {
                    let fetch = match client.session_messages(&session_id).await {
                        Ok(Some(messages)) => HistoryFetch::Messages(messages),
                        Ok(None) => HistoryFetch::Unsupported,
                        Err(e) => HistoryFetch::Failed(e.to_string()),
                    };
                    events.send(AppEvent::History { session_id, fetch });
                }));
            }
            Command::Delete { session_id } => {
                let Some(client) = self.client().cloned() else {
                    self.events.send(AppEvent::DeleteFailed {
                        session_id,
                        failure: Failure::Network("not connected".into()),
                    });
                    return;
                };
                let events = self.events.clone();
                self.tasks.retain(|t| !t.is_finished());
                let failed = {
                    let session_id = session_id.clone();
                    move |why: String| AppEvent::DeleteFailed {
                        session_id,
                        failure: Failure::Other {
                            code: "internal".into(),
                            message: why,
                        },
                    }
                };
                self.spawn_reporting(failed, async move {
                    let ev = match client.delete_session(&session_id).await {
                        Ok(_) => AppEvent::Deleted { session_id },
                        Err(e) => AppEvent::DeleteFailed {
                            session_id,
                            failure: failure(e),
                        },
                    };
                    events.send(ev);
                });
            }
            Command::WarmTokenCounter => {
                warm_token_counter_once();
            }
            Command::RefreshUsage => self.usage_kick.notify_one(),
            Command::CopyToClipboard(text) => self.clipboard.push(text),
            // views: the metrics and wallet views' work goes to their own workers.
            Command::Metrics(request) => {
                let tx = self.events.clone();
                let sink = move |ev| {
                    tx.send(AppEvent::Metrics(ev));
                };
                // The load's task handle is for tests; cancelling goes through the worker.
                let _ = self.metrics.handle(request, self.shared.client.get(), sink);
            }
            Command::Wallet(request) => {
                let tx = self.events.clone();
                let sink = move |ev| {
                    tx.send(AppEvent::Wallet(ev));
                };
                self.wallet.handle(request, self.shared.client.get(), sink);
            }
            Command::Quit => {}
        }
    }

    /// Runs `work` as a task watched by a second one: if it panics (or is aborted while the
    /// app runs), the app gets `failed(why)` instead of waiting for its answer forever.
    fn spawn_reporting<W, F>(&mut self, failed: F, work: W)
    where
        W: std::future::Future<Output = ()> + Send + 'static,
        F: FnOnce(String) -> AppEvent + Send + 'static,
    {
        self.tasks
            .push(spawn_reporting(self.events.clone(), failed, work));
    }

    fn store_job(&self, job: StoreJob) {
        if self.store_jobs.send(job).is_err() {
            self.events
                .send(AppEvent::WorkerError("the local store is closed".into()));
        }
    }

    fn open_stream(&mut self, session_id: String) {
        if let Some((s, _)) = &self.stream
            && s.session_id() == session_id
        {
            return;
        }
        // Dropping the handle closes the previous session's stream.
        if let Some((old, task)) = self.stream.take() {
            drop(old);
            task.abort();
        }
        let Some(client) = self.client() else { return };
        let (handle, mut rx) = SessionStream::connect(client.options().clone(), &session_id);
        let events = self.events.clone();
        let task = tokio::spawn(async move {
            while let Some(update) = rx.recv().await {
                let update = match update {
                    StreamUpdate::Event(ev) => StreamStatus::Event(ev),
                    StreamUpdate::Connected => StreamStatus::Connected,
                    StreamUpdate::Disconnected { error, .. } => {
                        StreamStatus::Disconnected(error.to_string())
                    }
                    StreamUpdate::Unsupported => StreamStatus::Unsupported,
                };
                if !events.send(AppEvent::Stream {
                    session_id: session_id.clone(),
                    update,
                }) {
                    break;
                }
            }
        });
        self.stream = Some((handle, task));
    }

    /// Writes what is queued to the store and closes it, closes the stream and stops the
    /// embedded service.
    pub async fn shutdown(mut self) {
        let (tx, rx) = oneshot::channel();
        if self.store_jobs.send(StoreJob::Close(tx)).is_ok() {
            // A guard, not a timing assumption: a wedged disk must not keep the terminal hostage.
            let _ = tokio::time::timeout(Duration::from_secs(10), rx).await;
        }
        self.stream = None;
        for t in &self.tasks {
            t.abort();
        }
        let service = self.shared.service.lock().ok().and_then(|mut s| s.take());
        if let Some(service) = service {
            let _ = tokio::time::timeout(Duration::from_secs(10), service.shutdown()).await;
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Readies o200k token counting (compiles its pattern, a few milliseconds) on a blocking
/// thread, once per process. Returns whether this call started it.
pub fn warm_token_counter_once() -> bool {
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if STARTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return false;
    }
    tokio::task::spawn_blocking(crate::service::tokens::warm);
    true
}

/// Spawns `work` and a watcher that reports `failed(why)` when it panics or is aborted.
/// The returned handle is the watcher's; aborting it aborts the work too.
fn spawn_reporting<W, F>(events: EventSender, failed: F, work: W) -> JoinHandle<()>
where
    W: std::future::Future<Output = ()> + Send + 'static,
    F: FnOnce(String) -> AppEvent + Send + 'static,
{
    let task = tokio::spawn(work);
    tokio::spawn(async move {
        // Aborting the watcher drops this guard, which aborts the work with it.
        let abort = task.abort_handle();
        let _guard = AbortOnDrop(abort);
        if let Err(e) = task.await {
            let why = if e.is_panic() {
                let panic = e.into_panic();
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                tracing::error!(panic = %text, "a worker task panicked");
                format!("the request failed inside convo (a bug: {text})")
            } else {
                "the request was cancelled".to_string()
            };
            events.send(failed(why));
        }
    })
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The app's view of a client error.
pub fn failure(e: ApiError) -> Failure {
    match e {
        ApiError::ContextOverflow { current, max, .. } => Failure::ContextOverflow { current, max },
        ApiError::SessionNotFound { .. } => Failure::SessionNotFound,
        ApiError::Unauthorized { message } => Failure::Unauthorized(message),
        ApiError::QuotaExceeded {
            limit,
            reset_at,
            retry_after,
            ..
        } => Failure::QuotaExceeded {
            limit,
            reset_at: reset_at
                .and_then(|r| chrono::DateTime::parse_from_rfc3339(&r).ok())
                .map(|r| r.with_timezone(&Utc))
                .or_else(|| {
                    retry_after
                        .and_then(|d| chrono::Duration::from_std(d).ok())
                        .map(|d| Utc::now() + d)
                }),
        },
        ApiError::InvalidRequest { message } => Failure::InvalidRequest(message),
        ApiError::Network(m) => Failure::Network(m),
        ApiError::Service { code, message, .. } => Failure::Other { code, message },
        ApiError::Protocol(m) => Failure::Other {
            code: "protocol".into(),
            message: m,
        },
        ApiError::Config(m) => Failure::Other {
            code: "config".into(),
            message: m,
        },
    }
}

async fn connect(target: Target, shared: Arc<Shared>, events: EventSender) {
    let result = match target {
        Target::Remote(options) => {
            let endpoint = Endpoint::Remote {
                base_url: options.base_url.to_string(),
            };
            Client::new(options)
                .map(|c| (c, endpoint))
                .map_err(|e| e.to_string())
        }
        Target::Embedded { data_dir, pace_ms } => {
            embedded::start(&data_dir, pace_ms, &shared.service).await
        }
    };
    match result {
        Ok((client, endpoint)) => {
            // views: the wallet view says how to get a token when there is none.
            events.send(AppEvent::Wallet(crate::tui::wallet::WalletEvent::Token(
                crate::tui::wallet::worker::token_status(&client),
            )));
            let _ = shared.client.set(client);
            events.send(AppEvent::Connected(endpoint));
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot connect");
            events.send(AppEvent::ConnectFailed(e));
        }
    }
}

async fn poll_usage(shared: Arc<Shared>, kick: Arc<Notify>, every: Duration, events: EventSender) {
    let every = every.max(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = kick.notified() => {}
        }
        let Some(client) = shared.client.get() else {
            continue;
        };
        let ev = match client.usage().await {
            Ok(u) => AppEvent::UsageFetched(u),
            Err(e) => AppEvent::UsageFailed(e.to_string()),
        };
        if !events.send(ev) {
            return;
        }
    }
}

/// The wall clock for relative times; minute resolution is what the panes show.
async fn clock(events: EventSender) {
    let mut tick = tokio::time::interval(Duration::from_secs(15));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !events.send(AppEvent::Clock(Utc::now())) {
            return;
        }
    }
}

async fn terminal_input(events: EventSender) {
    use crossterm::event::{Event, EventStream, KeyEventKind};
    // A read error is usually passing (an interrupted poll); giving up would leave the user
    // with no way to quit, so only a run of them ends the task.
    const MAX_ERRORS_IN_A_ROW: u32 = 20;
    let mut stream = EventStream::new();
    let mut errors = 0;
    while let Some(ev) = stream.next().await {
        tracing::trace!(?ev, "terminal event");
        let ev = match ev {
            Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => AppEvent::Key(k),
            Ok(Event::Mouse(m)) => AppEvent::Mouse(m),
            Ok(Event::Paste(p)) => AppEvent::Paste(p),
            Ok(Event::Resize(w, h)) => AppEvent::Resize(w, h),
            Ok(_) => continue,
            Err(e) => {
                errors += 1;
                tracing::warn!(error = %e, errors, "terminal input failed");
                if errors >= MAX_ERRORS_IN_A_ROW {
                    events.send(AppEvent::WorkerError(format!(
                        "the terminal stopped sending keys ({e})"
                    )));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        errors = 0;
        if !events.send(ev) {
            break;
        }
    }
}

/// The store lives on its own thread: its API blocks, and jobs must stay in order
/// (a reply is written after its message; a transcript is read after its writes).
fn spawn_store(path: PathBuf, events: EventSender) -> std::sync::mpsc::Sender<StoreJob> {
    let (tx, rx) = std::sync::mpsc::channel::<StoreJob>();
    let spawned = std::thread::Builder::new()
        .name("convo-store".into())
        .spawn(move || {
            let store = match Store::open(&path) {
                Ok(s) => s,
                Err(e) => {
                    events.send(AppEvent::WorkerError(format!(
                        "local store unavailable: {e}"
                    )));
                    events.send(AppEvent::StoreLoaded {
                        sessions: Vec::new(),
                        last_open: None,
                    });
                    // Keep answering so that quitting does not wait.
                    for job in rx {
                        if let StoreJob::Close(done) = job {
                            let _ = done.send(());
                        }
                    }
                    return;
                }
            };
            let loaded = store
                .list_sessions()
                .and_then(|list| Ok((list, store.last_open_session()?)));
            match loaded {
                Ok((list, last_open)) => {
                    let sessions = list
                        .into_iter()
                        .map(|r| SessionSummary {
                            id: r.id,
                            title: r
                                .title
                                .unwrap_or_else(|| super::app::NEW_SESSION_TITLE.to_string()),
                            last_activity: r.last_activity,
                            tokens: r.tokens,
                        })
                        .collect();
                    events.send(AppEvent::StoreLoaded {
                        sessions,
                        last_open,
                    });
                }
                Err(e) => {
                    events.send(AppEvent::WorkerError(format!(
                        "cannot read the local store: {e}"
                    )));
                    events.send(AppEvent::StoreLoaded {
                        sessions: Vec::new(),
                        last_open: None,
                    });
                }
            }
            let mut drafts = PendingDrafts::default();
            loop {
                let job = match drafts.deadline {
                    None => match rx.recv() {
                        Ok(job) => job,
                        Err(_) => break,
                    },
                    Some(deadline) => {
                        let wait = deadline.saturating_duration_since(std::time::Instant::now());
                        match rx.recv_timeout(wait) {
                            Ok(job) => job,
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                                drafts.write_all(&store, &events);
                                continue;
                            }
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                        }
                    }
                };
                let result = match job {
                    StoreJob::Close(done) => {
                        drafts.write_all(&store, &events);
                        drop(store);
                        let _ = done.send(());
                        return;
                    }
                    StoreJob::Op(StoreOp::DraftEdited { session_id, text }) => {
                        drafts.edited(session_id, text);
                        Ok(())
                    }
                    StoreJob::Load(session_id, width, rows) => {
                        drafts.write_one(&store, &session_id, &events);
                        match store
                            .transcript(&session_id)
                            .and_then(|t| Ok((t, store.draft(&session_id)?)))
                        {
                            Ok((messages, draft)) => {
                                // The parsing and the heights at the pane's width are
                                // done here: the UI task only adopts the result.
                                let started = std::time::Instant::now();
                                let transcript = super::app::render_stored(&messages);
                                // Drawing the tail once builds the lines of what the first
                                // frame shows (and loads the highlighter) here as well.
                                let area = ratatui::layout::Rect::new(0, 0, width, rows);
                                let mut scratch = ratatui::buffer::Buffer::empty(area);
                                let top = transcript.tail_top(width, rows);
                                transcript.render(area, &mut scratch, top, None);
                                tracing::debug!(
                                    messages = messages.len(),
                                    micros = started.elapsed().as_micros() as u64,
                                    "transcript rendered on the store thread"
                                );
                                let rendered = Some(super::event::Rendered::new(transcript));
                                events.send(AppEvent::TranscriptLoaded {
                                    session_id,
                                    messages,
                                    draft,
                                    rendered,
                                });
                                Ok(())
                            }
                            Err(e) => {
                                events.send(AppEvent::TranscriptLoaded {
                                    session_id,
                                    messages: Vec::new(),
                                    draft: None,
                                    rendered: None,
                                });
                                Err(e)
                            }
                        }
                    }
                    StoreJob::Op(op) => {
                        // A save now or a delete supersedes the session's edit still waiting.
                        if let StoreOp::SaveDraft { session_id, .. }
                        | StoreOp::DeleteSession(session_id) = &op
                        {
                            drafts.forget(session_id);
                        }
                        apply(&store, op)
                    }
                };
                if let Err(e) = result {
                    tracing::error!(error = %e, "store write failed");
                    events.send(AppEvent::WorkerError(format!("local store: {e}")));
                }
            }
            // The app is gone: what was typed last still reaches the disk.
            drafts.write_all(&store, &events);
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the store thread");
    }
    tx
}

/// How long the composer must stay unchanged before its draft is written: typing does not
/// write on every key, and a crash loses at most this much of it.
pub const DRAFT_SAVE_DELAY: Duration = Duration::from_millis(500);

/// Drafts edited but not yet written, per session, and when to write them.
#[derive(Default)]
struct PendingDrafts {
    texts: std::collections::HashMap<String, String>,
    deadline: Option<std::time::Instant>,
}

impl PendingDrafts {
    fn edited(&mut self, session_id: String, text: String) {
        self.texts.insert(session_id, text);
        self.deadline = Some(std::time::Instant::now() + DRAFT_SAVE_DELAY);
    }

    /// Drops the waiting edit of a session.
    fn forget(&mut self, session_id: &str) {
        self.texts.remove(session_id);
        if self.texts.is_empty() {
            self.deadline = None;
        }
    }

    fn write_one(&mut self, store: &Store, session_id: &str, events: &EventSender) {
        if let Some(text) = self.texts.remove(session_id) {
            report(store.save_draft(session_id, &text), events);
        }
        if self.texts.is_empty() {
            self.deadline = None;
        }
    }

    fn write_all(&mut self, store: &Store, events: &EventSender) {
        for (session_id, text) in self.texts.drain() {
            report(store.save_draft(&session_id, &text), events);
        }
        self.deadline = None;
    }
}

fn report(result: Result<(), store::StoreError>, events: &EventSender) {
    if let Err(e) = result {
        tracing::error!(error = %e, "store write failed");
        events.send(AppEvent::WorkerError(format!("local store: {e}")));
    }
}

fn apply(store: &Store, op: StoreOp) -> Result<(), store::StoreError> {
    match op {
        StoreOp::UpsertSession(s) => store.upsert_session(&s.id, s.last_activity),
        StoreOp::AppendMessage {
            session_id,
            message,
        } => store.append_message(&session_id, &message).map(|_| ()),
        StoreOp::SaveDraft { session_id, text } | StoreOp::DraftEdited { session_id, text } => {
            store.save_draft(&session_id, &text)
        }
        StoreOp::SetLastOpen(id) => store.set_last_open_session(&id),
        StoreOp::DeleteSession(id) => store.mark_deleted(&id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_failed(why: String) -> AppEvent {
        AppEvent::SendFailed {
            session_id: "session_abcdefgh12345678".into(),
            send_id: 7,
            failure: Failure::Other {
                code: "internal".into(),
                message: why,
            },
        }
    }

    #[tokio::test]
    async fn a_panicking_send_task_becomes_a_failure_event() {
        let (events, mut rx) = EventSender::new();
        let watcher = spawn_reporting(events, send_failed, async {
            panic!("boom in the reply task");
        });
        watcher.await.expect("the watcher itself does not panic");
        match rx.recv().await {
            Some(AppEvent::SendFailed {
                send_id: 7,
                failure: Failure::Other { code, message },
                ..
            }) => {
                assert_eq!(code, "internal");
                assert!(message.contains("boom in the reply task"), "{message}");
            }
            other => panic!("expected a SendFailed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_token_counter_is_warmed_once_per_process() {
        let _ = warm_token_counter_once();
        assert!(!warm_token_counter_once(), "the second ask starts nothing");
        assert!(!warm_token_counter_once());
    }

    #[tokio::test]
    async fn closing_the_store_writes_waiting_drafts_and_removes_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        let (events, _rx) = EventSender::new();
        let jobs = spawn_store(path.clone(), events);
        jobs.send(StoreJob::Op(StoreOp::DraftEdited {
            session_id: "session_abcdefgh12345678".into(),
            text: "half a thought".into(),
        }))
        .unwrap();
        let wal = dir.path().join("convo.db-wal");
        let (tx, rx) = oneshot::channel();
        jobs.send(StoreJob::Close(tx)).unwrap();
        tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .expect("the store answers the close")
            .unwrap();
        assert!(!wal.exists(), "the WAL is folded in and removed");
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.draft("session_abcdefgh12345678").unwrap().as_deref(),
            Some("half a thought"),
            "the draft still waiting for its pause was written"
        );
    }

    #[tokio::test]
    async fn a_task_that_ends_normally_reports_nothing_more() {
        let (events, mut rx) = EventSender::new();
        let tx = events.clone();
        let watcher = spawn_reporting(events, send_failed, async move {
            tx.send(AppEvent::WorkerError("its own answer".into()));
        });
        watcher.await.unwrap();
        assert!(matches!(rx.recv().await, Some(AppEvent::WorkerError(_))));
        assert!(rx.try_recv().is_err(), "no failure after a normal end");
    }

    #[tokio::test]
    async fn aborting_the_watcher_aborts_the_work() {
        let (events, _rx) = EventSender::new();
        let (started_tx, started) = oneshot::channel::<()>();
        let (_never_tx, never) = oneshot::channel::<()>();
        let (dropped_tx, dropped) = oneshot::channel::<()>();
        struct OnDrop(Option<oneshot::Sender<()>>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(());
                }
            }
        }
        let watcher = spawn_reporting(events, send_failed, async move {
            let _guard = OnDrop(Some(dropped_tx));
            let _ = started_tx.send(());
            let _ = never.await;
        });
        started.await.unwrap();
        watcher.abort();
        // The work's future is dropped (its guard fires) rather than left running.
        tokio::time::timeout(Duration::from_secs(30), dropped)
            .await
            .expect("the work is aborted with its watcher")
            .unwrap();
    }
}
