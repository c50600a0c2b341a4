//! The `local` engine: a GGUF model run in-process by llama.cpp (through `llama-cpp-2`).
//!
//! One model is loaded once, on its own thread, and shared by every session. That thread
//! (`scheduler.rs`) decodes the replies of several sessions together in one llama.cpp batch,
//! one sequence per session, and keeps the KV state of recently active sessions so that a
//! follow-up only computes what is new (`prompt.rs` builds the prompt from the session's
//! history with the model's own chat template). With a `kv_dir`, a session's state is saved
//! when it leaves memory and when the engine stops, and read back on its next turn
//! (`kv_store.rs`). The reply future here only forwards the thread's pieces; dropping it (the
//! client, a deletion or the shutdown stopped the turn) closes the channel the thread checks
//! before every step.

mod kv_store;
mod prompt;
mod scheduler;
mod step_cost;
mod step_watch;
mod utf8;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use convo_core::HistoryEntry;

pub use super::local_options::{LocalOptions, model_name};
use super::{EngineError, EngineEvent, EngineStats, Finish, LoadState, ReplyEngine, ReplyRequest};
pub use scheduler::backend;
pub use step_watch::is_abort_noise;

/// A reply for the model thread to compute.
struct Job {
    history: Vec<prompt::Turn>,
    out: mpsc::UnboundedSender<Piece>,
    session_id: String,
}

/// What the model thread is asked to do.
enum Msg {
    Reply(Job),
    /// The session was deleted: drop its state, in memory and on disk.
    Forget(String),
    /// An exchange of the session was undone: keep only what its state shares with the prompt
    /// of the messages that remain (`Scheduler::trim`).
    Trim {
        session_id: String,
        history: Vec<prompt::Turn>,
    },
    /// The engine is going away: finish, save the sessions' state and stop.
    Shutdown,
}

/// What the model thread sends back for one job.
enum Piece {
    Text(String),
    Progress { read: u64, total: u64 },
    Done(Finish),
    Failed(String),
}

/// What the model thread has computed since it started, for tests, measurements and
/// `stats()`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Tokens decoded (prompt and reply).
    pub decoded: AtomicU64,
    /// Prompt tokens that were already in the KV cache (or a saved state) and not decoded
    /// again.
    pub reused: AtomicU64,
    /// Prompt tokens decoded.
    pub prompt: AtomicU64,
    /// Reply tokens generated.
    pub generated: AtomicU64,
    /// Nanoseconds of steps that read prompt tokens, and of steps that only generated.
    pub prompt_ns: AtomicU64,
    pub generation_ns: AtomicU64,
    /// Replies waiting for a slot, and slots holding a session's state.
    pub queue: AtomicU64,
    pub slots_used: AtomicU64,
    pub slots_total: AtomicU64,
}

pub struct LocalEngine {
    jobs: std::sync::mpsc::Sender<Msg>,
    load: watch::Receiver<LoadState>,
    window: Arc<AtomicU64>,
    counters: Arc<Counters>,
    label: String,
    /// The model thread, joined on drop (it saves the sessions' state before it ends).
    thread: Option<std::thread::JoinHandle<()>>,
    /// Tells `convo model rm` that the model is loaded (`models::mark_in_use`).
    _in_use: Option<crate::models::InUse>,
}

impl LocalEngine {
    /// Starts loading the model on its own thread and returns at once; `load_state` tells
    /// when it is ready. Replies asked for meanwhile wait for it.
    pub fn start(options: LocalOptions) -> Result<LocalEngine, EngineError> {
        let (jobs, jobs_rx) = std::sync::mpsc::channel();
        let (load_tx, load) = watch::channel(LoadState::Loading { fraction: 0.0 });
        let window = Arc::new(AtomicU64::new(0));
        let label = format!("local · {}", model_name(&options.model));
        let in_use = crate::models::mark_in_use(&options.model);
        let counters = Arc::new(Counters::default());
        let (thread_window, thread_counters) = (window.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("convo-model".into())
            .spawn(move || {
                scheduler::run(options, jobs_rx, load_tx, thread_window, thread_counters)
            })
            .map_err(|e| EngineError(format!("cannot start the model thread: {e}")))?;
        Ok(LocalEngine {
            jobs,
            load,
            window,
            counters,
            label,
            thread: Some(thread),
            _in_use: in_use,
        })
    }

    /// Everything the model thread has counted so far.
    pub fn all_counters(&self) -> &Counters {
        &self.counters
    }

    /// Tokens decoded and reused so far.
    pub fn counters(&self) -> (u64, u64) {
        (
            self.counters.decoded.load(Ordering::Relaxed),
            self.counters.reused.load(Ordering::Relaxed),
        )
    }

    /// Waits until the model is loaded (or failed to load).
    pub async fn ready(&self) -> Result<(), EngineError> {
        let mut load = self.load.clone();
        let state = load
            .wait_for(|s| !matches!(s, LoadState::Loading { .. }))
            .await
            .map_err(|_| EngineError("the model thread stopped".into()))?;
        match &*state {
            LoadState::Failed(e) => Err(EngineError(e.clone())),
            _ => Ok(()),
        }
    }
}

impl ReplyEngine for LocalEngine {
    fn name(&self) -> &'static str {
        "local"
    }

    fn label(&self) -> String {
        self.label.clone()
    }

    fn load_state(&self) -> watch::Receiver<LoadState> {
        self.load.clone()
    }

    fn stats(&self) -> EngineStats {
        let c = &*self.counters;
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        EngineStats {
            prompt_tokens: get(&c.prompt),
            reused_tokens: get(&c.reused),
            generated_tokens: get(&c.generated),
            prompt_seconds: get(&c.prompt_ns) as f64 / 1e9,
            generation_seconds: get(&c.generation_ns) as f64 / 1e9,
            queue_depth: get(&c.queue),
            kv_slots_used: get(&c.slots_used),
            kv_slots_total: get(&c.slots_total),
        }
    }

    fn forget_session(&self, session_id: &str) {
        let _ = self.jobs.send(Msg::Forget(session_id.to_string()));
    }

    fn trim_session(&self, session_id: &str, history: &[HistoryEntry]) {
        let _ = self.jobs.send(Msg::Trim {
            session_id: session_id.to_string(),
            history: turns(history),
        });
    }

    fn keeps_sessions(&self) -> bool {
        true
    }

    fn context_window(&self) -> Option<u64> {
        match self.window.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    fn reply<'a>(
        &'a self,
        request: ReplyRequest,
        out: mpsc::Sender<EngineEvent>,
    ) -> BoxFuture<'a, Result<Finish, EngineError>> {
        async move {
            self.ready().await?;
            let (tx, mut pieces) = mpsc::unbounded_channel();
            let job = Job {
                history: turns(&request.history),
                out: tx,
                session_id: request.session_id,
            };
            self.jobs
                .send(Msg::Reply(job))
                .map_err(|_| EngineError("the model thread stopped".into()))?;
            // Returning (or being dropped) drops `pieces`: the thread sees it closed and
            // stops computing this reply before its next step.
            while let Some(piece) = pieces.recv().await {
                match piece {
                    Piece::Text(text) => {
                        if out.send(EngineEvent::Text(text)).await.is_err() {
                            return Ok(Finish::Complete);
                        }
                    }
                    Piece::Progress { read, total } => {
                        if out
                            .send(EngineEvent::Progress { read, total })
                            .await
                            .is_err()
                        {
                            return Ok(Finish::Complete);
                        }
                    }
                    Piece::Done(finish) => return Ok(finish),
                    Piece::Failed(e) => return Err(EngineError(e)),
                }
            }
            Err(EngineError("the model thread stopped".into()))
        }
        .boxed()
    }
}

/// The engine's copy of a history: what the prompt is made of.
fn turns(history: &[HistoryEntry]) -> Vec<prompt::Turn> {
    history
        .iter()
        .map(|m| prompt::Turn {
            role: m.role,
            content: m.content.clone(),
        })
        .collect()
}

impl Drop for LocalEngine {
    /// Lets the model thread save the sessions' state before the process goes on (or ends).
    fn drop(&mut self) {
        let _ = self.jobs.send(Msg::Shutdown);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
