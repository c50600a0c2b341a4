//! Background work, one file per worker: the store thread (`store`), the network (`network`:
//! connecting or starting the embedded service, sends, deletes, the session stream), the account
//! feed (`usage_feed`: the account stream, or the adaptive usage poll), terminal input (`input`)
//! and the clock (`clock`); `spawn` runs a request as a watched task. Workers never touch `App`; they report through `AppEvent`s.

mod admin_feed;
mod clock;
mod forks;
mod input;
mod network;
mod spawn;
mod store_thread;
mod usage_feed;

pub use network::at_arrival;
pub use spawn::spawn_reporting;
pub use store_thread::DRAFT_SAVE_DELAY;
pub use usage_feed::{UsagePacing, next_poll_in, usage_changed};

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use super::command::Command;
use super::embedded::RunningService;
use super::event::{AppEvent, EventSender};
use admin_feed::admin_feed;
use clock::clock;
use convo_client::api::client::{Client, ClientOptions};
use convo_client::api::stream::SessionStream;
use convo_client::target::TargetId;
use input::terminal_input;
use network::connect;
use store_thread::{StoreJob, spawn_store};
use usage_feed::{Activity, account_feed};

/// Where to connect.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start the local service in-process with its database in this directory.
    Embedded {
        data_dir: PathBuf,
        engine: convo_client::config::Engine,
        pace_ms: u64,
    },
    /// A deployment (or a service a test started).
    Remote(ClientOptions),
}

impl Target {
    /// Which server and account this is, as the local store files sessions and metrics
    /// under it (`convo_client::target`, shared with the one-shot commands).
    pub fn target_id(&self) -> TargetId {
        match self {
            Target::Embedded { .. } => TargetId::embedded(),
            Target::Remote(options) => TargetId::remote(options),
        }
    }

    /// Whose metrics this target shows, as the local store files them: the id of
    /// [`Target::target_id`] (`embedded`, else a hash of the base URL and the API key, so
    /// that two keys or two deployments never share cached numbers and no key is written
    /// down).
    pub fn account(&self) -> String {
        self.target_id().id().to_string()
    }
}

/// What the workers need to know.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub target: Target,
    pub store_file: PathBuf,
    /// How often the usage is polled when the server has no account stream.
    pub usage: UsagePacing,
}

/// What connecting produced, shared with the tasks that need it.
#[derive(Default)]
struct Shared {
    client: OnceLock<Client>,
    /// Whose metrics the client sees ([`account_of`]), set with the client.
    account: OnceLock<String>,
    service: Mutex<Option<RunningService>>,
}

/// Handles to the running workers; `dispatch` hands them the app's commands.
pub struct Workers {
    events: EventSender,
    shared: Arc<Shared>,
    store_jobs: std::sync::mpsc::Sender<StoreJob>,
    stream: Option<(SessionStream, JoinHandle<()>)>,
    usage_kick: Arc<Notify>,
    /// Wakes the admin feed once connected.
    admin_kick: Arc<Notify>,
    /// When the user last typed, sent or saw a reply stream (the usage poll's pace).
    activity: Arc<Activity>,
    tasks: Vec<JoinHandle<()>>,
    /// Text for the terminal's clipboard (OSC 52), written by the loop that owns the terminal.
    pub clipboard: Vec<String>,
    /// A draft to edit in `$EDITOR`, run by the loop that owns the terminal.
    pub editor: Option<String>,
    /// The terminal input task, stopped while an editor has the terminal.
    input: Option<JoinHandle<()>>,
    /// Bells and desktop notifications, written by the loop that owns the terminal.
    pub notifications: Vec<super::notify::Notification>,
    /// The metrics view's load in flight and the wallet view's fetches.
    metrics: crate::metrics::worker::MetricsWorker,
    wallet: crate::wallet::worker::WalletWorker,
    /// The accounts view's loads and details (F4).
    accounts: crate::accounts_view::worker::AccountsWorker,
}

impl Workers {
    /// Starts connecting, opening the store, the usage poller and the clock. Returns at once.
    pub fn start(config: WorkerConfig, events: EventSender) -> Workers {
        let shared = Arc::new(Shared::default());
        let usage_kick = Arc::new(Notify::new());
        let admin_kick = Arc::new(Notify::new());
        let (activity, activity_rx) = tokio::sync::watch::channel(None);
        let tasks = vec![
            tokio::spawn(connect(
                config.target.clone(),
                shared.clone(),
                events.clone(),
            )),
            tokio::spawn(account_feed(
                shared.clone(),
                usage_kick.clone(),
                activity_rx,
                config.usage,
                events.clone(),
            )),
            tokio::spawn(clock(events.clone())),
            tokio::spawn(admin_feed(
                shared.clone(),
                admin_kick.clone(),
                events.clone(),
            )),
        ];
        let store_jobs = spawn_store(
            config.store_file.clone(),
            config.target.target_id(),
            events.clone(),
        );
        // Recent wallet ids live beside the store.
        let wallet = crate::wallet::worker::WalletWorker::new(
            config
                .store_file
                .parent()
                .map(crate::wallet::recent::path_in),
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
            admin_kick,
            activity: Arc::new(activity),
            tasks,
            clipboard: Vec::new(),
            notifications: Vec::new(),
            editor: None,
            input: None,
            metrics: Default::default(),
            wallet,
            accounts: Default::default(),
        }
    }

    /// Forwards terminal input to the app until it quits.
    pub fn spawn_terminal_input(&mut self) {
        if let Some(old) = self
            .input
            .replace(tokio::spawn(terminal_input(self.events.clone())))
        {
            old.abort();
        }
    }

    /// Stops forwarding terminal input and waits until nothing reads the terminal any more,
    /// so that a program given the terminal (`$EDITOR`) gets every key.
    pub async fn stop_terminal_input(&mut self) {
        let Some(task) = self.input.take() else {
            return;
        };
        task.abort();
        // Once the task is gone its event stream is dropped, which tells crossterm's reader
        // thread to stop polling the terminal.
        let _ = task.await;
        // That thread holds crossterm's event reader while it polls: taking the reader here
        // waits until the thread has let go of the terminal. (A key typed in this instant is
        // kept by crossterm and arrives when input starts again.)
        let _ =
            tokio::task::spawn_blocking(|| crossterm::event::poll(std::time::Duration::ZERO)).await;
    }

    /// The open session's stream, if it waits to reconnect, tries now: a server back up is
    /// found without waiting out a long backoff (`SessionStream::retry_now`).
    fn hurry_stream(&self) {
        if let Some((stream, _)) = &self.stream {
            stream.retry_now();
        }
    }

    /// The client of the connected service, once connected.
    pub fn client(&self) -> Option<&Client> {
        self.shared.client.get()
    }

    pub fn dispatch(&mut self, command: Command) {
        if matches!(
            command,
            Command::Send { .. } | Command::Persist(crate::command::StoreOp::DraftEdited { .. })
        ) {
            self.activity
                .send_replace(Some(tokio::time::Instant::now()));
            // Someone is at the keyboard (the account stream's feed hurries its stream on
            // this activity too).
            self.hurry_stream();
        }
        match command {
            Command::LoadTranscript {
                session_id,
                width,
                rows,
            } => self.store_job(StoreJob::Load(session_id, width, rows)),
            Command::Persist(op) => self.store_job(StoreJob::Op(op)),
            Command::Export { session_id, path } => {
                self.store_job(StoreJob::Export { session_id, path })
            }
            Command::Kept(request) => self.store_job(StoreJob::Kept(request)),
            Command::SearchSessions { seq, text, limit } => {
                self.store_job(StoreJob::Search { seq, text, limit })
            }
            Command::OpenStream { session_id } => self.open_stream(session_id),
            Command::Send {
                session_id,
                send_id,
                body,
                idempotency_key,
            } => self.send(session_id, send_id, body, idempotency_key),
            Command::FetchHistory { session_id } => self.fetch_history(session_id, None),
            Command::ReadUnsearched { session_ids } => self.read_for_search(session_ids),
            Command::FetchHistoryLater { session_id } => {
                self.fetch_history(session_id, Some(convo_client::follow::CONFIRM_AFTER))
            }
            Command::Delete { session_id } => self.delete(session_id),
            Command::Fork {
                source,
                new_session_id,
                at,
            } => self.fork(source, new_session_id, at),
            Command::Undo { session_id } => self.undo(session_id),
            Command::CancelReply {
                session_id,
                message_id,
            } => self.cancel(session_id, message_id),
            Command::ReplyTick { after } => {
                let events = self.events.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    events.send(AppEvent::ReplyTick);
                });
            }
            Command::WarmTokenCounter => {
                warm_token_counter_once();
            }
            Command::RefreshUsage => {
                self.usage_kick.notify_one();
                self.admin_kick.notify_one();
                // `r`, or a send or deletion answered (the account stream's feed hurries its
                // stream on this kick too).
                self.hurry_stream();
            }
            Command::LoadKnownBuckets => {
                if let Some(account) = self.shared.account.get() {
                    self.store_job(StoreJob::KnownBuckets(account.clone()));
                }
            }
            Command::CopyToClipboard(text) => self.clipboard.push(text),
            Command::Notify(notification) => self.notifications.push(notification),
            Command::EditInEditor { draft } => self.editor = Some(draft),
            // The metrics and wallet views' work goes to their own workers.
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
            Command::Accounts(request) => {
                let tx = self.events.clone();
                let sink = move |ev| {
                    tx.send(AppEvent::Accounts(ev));
                };
                self.accounts
                    .handle(request, self.shared.client.get(), sink);
            }
            Command::ListSessions => self.list_sessions(),
            Command::SendTitle { session_id, title } => self.send_title(session_id, title),
            Command::Quit => {}
        }
    }

    fn store_job(&self, job: StoreJob) {
        if self.store_jobs.send(job).is_err() {
            self.events
                .send(AppEvent::WorkerError("the local store is closed".into()));
        }
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
        for t in self.tasks.iter().chain(&self.input) {
            t.abort();
        }
        let service = self.shared.service.lock().ok().and_then(|mut s| s.take());
        if let Some(service) = service {
            crate::embedded::withdraw();
            let _ = tokio::time::timeout(crate::embedded::STOP_WITHIN, service.shutdown()).await;
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for t in self.tasks.iter().chain(&self.input) {
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
    tokio::task::spawn_blocking(convo_tokens::warm);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::StoreOp;
    use convo_client::api::ApiError;
    use convo_client::local_store::Store;

    fn send_failed(why: String) -> AppEvent {
        AppEvent::SendFailed {
            session_id: "session_abcdefgh12345678".into(),
            send_id: 7,
            failure: ApiError::Service {
                status: 0,
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
                failure: ApiError::Service { code, message, .. },
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
        let jobs = spawn_store(path.clone(), TargetId::embedded(), events);
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
