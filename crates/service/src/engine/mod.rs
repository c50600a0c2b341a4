//! Reply engines behind one trait: `builtin` (offline, deterministic), `local` (a GGUF model
//! run in-process by llama.cpp; the `local-model` feature) and `openai` (any
//! OpenAI-compatible `/v1/chat/completions` server).

pub mod builtin;
#[cfg(feature = "local-model")]
pub mod local;
pub mod local_options;
pub mod openai;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use convo_core::HistoryEntry;
pub use local_options::LocalOptions;

/// A filter for the process's log (the service's and the TUI's): everything but llama.cpp's
/// errors about a step the local engine stopped on purpose (`local/step_watch.rs`), which the
/// engine logs as what it is ("step abandoned").
pub fn log_filter() -> tracing_subscriber::filter::FilterFn<fn(&tracing::Metadata<'_>) -> bool> {
    fn keep(meta: &tracing::Metadata<'_>) -> bool {
        #[cfg(feature = "local-model")]
        return !local::is_abort_noise(meta);
        #[cfg(not(feature = "local-model"))]
        {
            let _ = meta;
            true
        }
    }
    tracing_subscriber::filter::filter_fn(keep as fn(&tracing::Metadata<'_>) -> bool)
}

/// What an engine is asked to answer.
#[derive(Debug, Clone)]
pub struct ReplyRequest {
    pub session_id: String,
    /// The whole conversation, oldest first, ending with the message to answer.
    pub history: Vec<HistoryEntry>,
    /// Tokens of `history`.
    pub context_tokens: u64,
    pub max_context_tokens: u64,
    /// Someone may watch the reply arrive: the send asked for a stream, or the session had a
    /// listener when the turn began. An engine that has the whole reply at once may send it
    /// in one piece when this is false (a listener that connects later still gets a snapshot
    /// and the following deltas).
    pub streamed: bool,
}

/// What an engine sends while it answers, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    /// The next piece of the reply's text.
    Text(String),
    /// The prompt is being read: `read` of its `total` tokens so far (engines that read a
    /// prompt for a noticeable time send these, at most every ~250 ms, before any text).
    Progress { read: u64, total: u64 },
}

impl From<String> for EngineEvent {
    fn from(text: String) -> Self {
        EngineEvent::Text(text)
    }
}

impl From<&str> for EngineEvent {
    fn from(text: &str) -> Self {
        EngineEvent::Text(text.to_string())
    }
}

/// How a reply the engine produced ended. (A reply stopped on request is the turn's doing, not
/// the engine's: the turn closes the channel and keeps the text so far.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model ended the reply itself.
    Complete,
    /// A limit cut the reply after `tokens` tokens (the reply cap, or what the context left).
    Length { tokens: u64 },
}

/// What an engine has done since it started, for `/metrics`. Counters only grow; an engine
/// without a figure leaves it 0.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineStats {
    /// Prompt tokens read (decoded), not counting those reused from a cached state.
    pub prompt_tokens: u64,
    /// Prompt tokens reused from a cached state instead of being read again.
    pub reused_tokens: u64,
    /// Reply tokens generated.
    pub generated_tokens: u64,
    /// Seconds spent reading prompts and generating replies (for tokens/s rates).
    pub prompt_seconds: f64,
    pub generation_seconds: f64,
    /// Replies waiting for a free slot.
    pub queue_depth: u64,
    /// Sequences (sessions) whose state the engine holds, and how many it can hold.
    pub kv_slots_used: u64,
    pub kv_slots_total: u64,
}

/// Why an engine could not produce a reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EngineError(pub String);

/// Which reply engine answers messages.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineConfig {
    /// Offline and deterministic, streamed word by word every `pace_ms` milliseconds.
    Builtin { pace_ms: u64 },
    /// A GGUF model run in-process by llama.cpp.
    Local(LocalOptions),
    /// Any OpenAI-compatible `/v1/chat/completions` server, streamed over SSE.
    OpenAi {
        url: String,
        model: String,
        api_key: Option<String>,
    },
}

pub use convo_wire::engine::LoadState;

/// Whether this build has the `local` engine (the `local-model` feature).
pub const LOCAL_MODELS: bool = cfg!(feature = "local-model");

/// Produces a reply as a sequence of text pieces.
pub trait ReplyEngine: Send + Sync + 'static {
    /// Short name for logs and docs.
    fn name(&self) -> &'static str;

    /// What answers, for people: `builtin`, `local · SmolLM2-135M-Instruct`, `openai · llama3.2`.
    fn label(&self) -> String {
        self.name().to_string()
    }

    /// Whether it is ready; engines with nothing to load are ready at once.
    fn load_state(&self) -> watch::Receiver<LoadState> {
        watch::channel(LoadState::Ready).1
    }

    /// The most tokens a conversation can have for this engine (the model's window), when
    /// the engine knows it. The service's context limit is the smaller of this and
    /// `--max-context-tokens`.
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// What the engine has done so far (`/metrics`).
    fn stats(&self) -> EngineStats {
        EngineStats::default()
    }

    /// The session was deleted: forget whatever the engine keeps for it (cached state, in
    /// memory and on disk).
    fn forget_session(&self, _session_id: &str) {}

    /// An exchange of the session was undone: of the state the engine keeps for it, keep only
    /// what `history` (the messages that remain, oldest first) begins with, so that nothing of
    /// the undone messages stays, in memory or on disk.
    fn trim_session(&self, _session_id: &str, _history: &[HistoryEntry]) {}

    /// Whether the engine keeps sessions' state beyond their replies (`forget_session` and
    /// `trim_session` do something): the service then looks for sessions deleted elsewhere
    /// before each reply and as it stops (`storage/deletions.rs`), and reads what an undo
    /// left for `trim_session`.
    fn keeps_sessions(&self) -> bool {
        false
    }

    /// Sends the reply's events to `out` in order and resolves, with how it ended, when the
    /// reply is complete. A closed `out` means nobody wants the rest: stop as soon as possible
    /// (within ~100 ms) and return Ok.
    fn reply<'a>(
        &'a self,
        request: ReplyRequest,
        out: mpsc::Sender<EngineEvent>,
    ) -> BoxFuture<'a, Result<Finish, EngineError>>;
}

/// Builds the configured engine (a local model starts loading in the background; its
/// `load_state` says when it is ready).
pub fn build(config: &EngineConfig) -> Result<Box<dyn ReplyEngine>, String> {
    match config {
        #[cfg(feature = "local-model")]
        EngineConfig::Local(options) => Ok(Box::new(
            local::LocalEngine::start(options.clone()).map_err(|e| e.0)?,
        )),
        #[cfg(not(feature = "local-model"))]
        EngineConfig::Local(_) => Err(WITHOUT_LOCAL_MODELS.into()),
        EngineConfig::Builtin { pace_ms } => Ok(Box::new(builtin::BuiltinEngine::new(*pace_ms))),
        EngineConfig::OpenAi {
            url,
            model,
            api_key,
        } => Ok(Box::new(openai::OpenAiEngine::new(
            url,
            model,
            api_key.clone(),
        )?)),
    }
}

/// What the `auto` engine runs, for `convo serve` and the TUI alike: the local model when this
/// build has local models and one is installed in `models_dir` (`model` if it names one, which
/// must then be there; else the default), `Ok(None)` for the builtin engine otherwise.
pub fn auto_model(
    models_dir: Option<&std::path::Path>,
    model: Option<&str>,
) -> Result<Option<std::path::PathBuf>, String> {
    if !LOCAL_MODELS {
        return match model {
            Some(_) => Err(WITHOUT_LOCAL_MODELS.into()),
            None => Ok(None),
        };
    }
    let resolved = match models_dir {
        Some(dir) => crate::models::resolve(dir, model, None),
        // No data dir: only a path can name a model.
        None => match model {
            Some(m) => crate::models::resolve(std::path::Path::new(""), Some(m), None),
            None => return Ok(None),
        },
    };
    match resolved {
        Ok(path) => Ok(Some(path)),
        // None installed: builtin, which says how to get one. A model asked for must be there,
        // and an installed default that is not a model is an error, not a silent builtin.
        Err(crate::models::ModelError::NoModels { .. }) if model.is_none() => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// When `config` runs the tiny default model and a better one fits this machine's memory: one
/// line naming the pull (`models::catalogue::tiny_model_hint`), for `convo serve` to print and
/// the TUI to show in an empty transcript.
pub fn better_model_hint(config: &EngineConfig) -> Option<String> {
    match config {
        EngineConfig::Local(options) => crate::models::catalogue::tiny_model_hint(
            &local_options::model_name(&options.model),
            crate::models::catalogue::total_memory(),
        ),
        _ => None,
    }
}

/// Why `--engine local` fails in a build without the `local-model` feature.
pub const WITHOUT_LOCAL_MODELS: &str = "this convo was built without local models (the \
     `local-model` feature, which needs cmake and libclang); rebuild with default features, or \
     use --engine builtin or --engine openai";
