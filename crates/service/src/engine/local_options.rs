//! How the `local` engine runs its model: kept apart from the engine so that a build without
//! the `local-model` feature still parses and reports `--engine local`.

use std::path::{Path, PathBuf};

/// How the local engine runs its model.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// The GGUF file.
    pub model: PathBuf,
    /// The most tokens one reply may have. `None`: what the context window leaves after the
    /// prompt (a reply cut by either ends with `Finish::Length`).
    pub max_reply_tokens: Option<u32>,
    /// KV cache cells shared by all sessions: the memory for context (about 23 KB per cell
    /// for SmolLM2-135M). A session's window is the smaller of this and the model's own.
    pub kv_tokens: u32,
    /// Sessions whose KV state is kept between turns (and replies computed at once).
    pub sessions: u32,
    /// Sampling temperature; 0 picks the most likely token every time (deterministic).
    pub temperature: f32,
    /// Nucleus sampling: the next token comes from the likeliest ones holding this much of
    /// the probability (1: all of them).
    pub top_p: f32,
    /// Seed of the sampler when the temperature is above 0. `None`: a fresh one for every
    /// reply, so that asking again (`/retry`) gets another answer; a fixed seed makes the
    /// reply to the same conversation repeat.
    pub seed: Option<u32>,
    /// CPU threads for llama.cpp (0: one per core).
    pub threads: u32,
    /// Where sessions' KV state is saved when it leaves memory and at shutdown, so that a
    /// conversation continues without being read again after a restart (`<data dir>/kv`).
    /// `None`: nothing is saved (e.g. a `:memory:` service).
    pub kv_dir: Option<PathBuf>,
    /// The most bytes the saved states may take on disk; the least recently used go first.
    pub kv_disk_bytes: u64,
}

impl LocalOptions {
    pub const DEFAULT_KV_DISK_BYTES: u64 = 1 << 30;
    pub const DEFAULT_KV_TOKENS: u32 = 8192;
    pub const DEFAULT_SESSIONS: u32 = 8;
    pub const DEFAULT_TEMPERATURE: f32 = convo_wire::engine::sampling::DEFAULT_TEMPERATURE;
    pub const DEFAULT_TOP_P: f32 = convo_wire::engine::sampling::DEFAULT_TOP_P;

    pub fn new(model: PathBuf) -> LocalOptions {
        LocalOptions {
            model,
            max_reply_tokens: None,
            kv_tokens: Self::DEFAULT_KV_TOKENS,
            sessions: Self::DEFAULT_SESSIONS,
            temperature: Self::DEFAULT_TEMPERATURE,
            top_p: Self::DEFAULT_TOP_P,
            seed: None,
            threads: 0,
            kv_dir: None,
            kv_disk_bytes: Self::DEFAULT_KV_DISK_BYTES,
        }
    }
}

/// The model's name as people say it: the file name without `.gguf`.
pub fn model_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
