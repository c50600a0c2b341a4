//! Reply engines behind one trait: `builtin` (offline, deterministic) and `openai` (any
//! OpenAI-compatible `/v1/chat/completions` server).

pub mod builtin;
pub mod openai;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::config::EngineConfig;
use super::store::messages::HistoryEntry;

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

/// Why an engine could not produce a reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EngineError(pub String);

/// Produces a reply as a sequence of text pieces.
pub trait ReplyEngine: Send + Sync + 'static {
    /// Short name for logs and docs.
    fn name(&self) -> &'static str;

    /// Sends the reply's pieces to `out` in order and resolves when the reply is complete.
    /// A closed `out` means nobody wants the rest: stop and return Ok.
    fn reply<'a>(
        &'a self,
        request: ReplyRequest,
        out: mpsc::Sender<String>,
    ) -> BoxFuture<'a, Result<(), EngineError>>;
}

/// Builds the configured engine.
pub fn build(config: &EngineConfig) -> Result<Box<dyn ReplyEngine>, String> {
    match config {
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
