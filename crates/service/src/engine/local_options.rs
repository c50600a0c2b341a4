//! How the `local` engine runs its model: kept apart from the engine so that a build without
//! the `local-model` feature still parses and reports `--engine local`.

use std::path::{Path, PathBuf};

/// How the local engine runs its model.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// The GGUF file.
    pub model: PathBuf,
    /// The most tokens one reply may have. `None`: [`Self::DEFAULT_MAX_REPLY_TOKENS`]. A
    /// reply also ends where the context window is full; cut by either, it ends with
    /// `Finish::Length`. Only a cap given here keeps its room in the window free of history
    /// when the prompt is built.
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
    /// The cap of a reply when none is given: room for any answer a chat model means to give
    /// (about 1,500 words), and an end to a small model caught in a loop longer than the
    /// sampler's repetition window, which would otherwise write until the context window is
    /// full. `/continue` asks for the rest of a cut reply.
    pub const DEFAULT_MAX_REPLY_TOKENS: u32 = 2048;
    pub const DEFAULT_KV_DISK_BYTES: u64 = 1 << 30;
    pub const DEFAULT_KV_TOKENS: u32 = 8192;
    pub const DEFAULT_SESSIONS: u32 = 8;
    pub const DEFAULT_TEMPERATURE: f32 = convo_wire::engine::sampling::DEFAULT_TEMPERATURE;
    pub const DEFAULT_TOP_P: f32 = convo_wire::engine::sampling::DEFAULT_TOP_P;

    /// The most tokens one reply may have.
    pub fn reply_cap(&self) -> u32 {
        self.max_reply_tokens
            .unwrap_or(Self::DEFAULT_MAX_REPLY_TOKENS)
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_capped_by_default_and_a_given_cap_replaces_the_default() {
        let mut options = LocalOptions::new("m.gguf".into());
        assert_eq!(options.reply_cap(), LocalOptions::DEFAULT_MAX_REPLY_TOKENS);
        options.max_reply_tokens = Some(100_000);
        assert_eq!(options.reply_cap(), 100_000);
        options.max_reply_tokens = Some(96);
        assert_eq!(options.reply_cap(), 96);
    }
}
