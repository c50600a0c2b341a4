//! The model thread: loads the model, then computes replies, several sessions at once in one
//! llama.cpp batch.
//!
//! Each of `sessions` slots is a llama.cpp sequence in one shared ("unified") KV cache. A
//! slot remembers which session's tokens it holds, so a session's next turn continues from
//! the longest prefix already computed: only the new messages are decoded. A new session
//! takes a free slot, or the one used least recently. Every step decodes one token for each
//! reply being generated, plus prompt tokens of replies still reading their prompt: while no
//! reply is generating, a whole batch of `STEP_TOKENS` (the size llama.cpp reads fastest);
//! beside replies being generated, as many as fit in about `STEP_MS` (the cost of steps is
//! measured as they go: `step_cost.rs`), so that their next tokens keep coming. A reply
//! nobody waits for any more stops its step in the middle (`step_watch.rs`: llama.cpp's
//! abort callback), and is dropped before the next one. A prompt read for longer than
//! `PROGRESS_MS` reports how far it got, at most every `PROGRESS_MS`.
//!
//! With a KV store (`kv_store.rs`), a session's state is saved when its slot goes to another
//! session or the cache needs its cells, and when the engine stops; a session new to its slot
//! starts from its saved state (up to the prefix it shares with the prompt).

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use llama_cpp_2::DecodeError;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::watch;

use super::kv_store::KvStore;
use super::step_cost::StepCost;
use super::step_watch::StepWatch;
use super::utf8::Utf8Pieces;
use super::{Counters, Job, LocalOptions, Msg, Piece, prompt};
use crate::engine::{Finish, LoadState};

/// The most prompt tokens decoded in one step, over all replies (the batch's size).
const STEP_TOKENS: usize = 512;

/// The tokens llama.cpp computes at once within a step (its micro-batch). Without flash
/// attention a micro-batch holds a matrix of its tokens against every cell in use (f32, per
/// head: 40 MB at 8,192 cells for 128 tokens), and reads a prompt about as fast as 512 do.
const UBATCH_TOKENS: usize = 128;

/// llama.cpp's `llama_flash_attn_type` for "disabled".
const FLASH_ATTENTION_OFF: i32 = 0;

/// The fewest prompt tokens a step takes when a prompt is waiting.
const MIN_STEP_TOKENS: usize = 8;

/// How long a step beside replies being generated should take: short enough that their next
/// tokens come within about this.
const STEP_MS: f64 = 80.0;

/// A prompt read for longer than this reports its progress, at most this often.
const PROGRESS_MS: u64 = 250;

/// Without a reply cap, the prompt leaves at least this many tokens of the window for the
/// reply (older messages are left out to make room).
const MIN_REPLY_ROOM: usize = 256;

/// llama.cpp's backend may be started once per process.
static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

/// The process's llama.cpp backend, started on first use (its log goes to tracing).
pub fn backend() -> Result<&'static LlamaBackend, String> {
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own messages go to tracing (the TUI's screen must stay clean).
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| format!("cannot start llama.cpp: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A sequence of the KV cache and what it holds.
/// The shortest prefix shared from another slot (`share_prefix`). Any shared prefix is right
/// (the same tokens at the same positions have the same cells); below this, only the chat
/// template's opening would match, not worth a copy.
const MIN_SHARED_PREFIX: usize = 8;

struct Slot {
    session: Option<String>,
    /// The tokens in the KV cache for this sequence, in position order.
    tokens: Vec<LlamaToken>,
    used_at: u64,
    busy: bool,
}

/// How many tokens `a` and `b` begin with in common.
fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
}

/// What `llama_decode` returns when the abort callback stopped it.
const ABORTED: i32 = 2;

/// A reply as it was before a step (`Scheduler::take_back`).
struct Before {
    cells: usize,
    next: Option<LlamaToken>,
    prompt_read: usize,
}

/// A reply being computed.
struct Active {
    job: Job,
    slot: usize,
    /// Prompt tokens not decoded yet.
    prompt: VecDeque<LlamaToken>,
    /// The token sampled last, to be decoded in the next step.
    next: Option<LlamaToken>,
    sampler: LlamaSampler,
    generated: u32,
    text: Utf8Pieces,
    /// Where this reply's logits are in the batch just decoded.
    logits_at: Option<i32>,
    /// Tokens of the whole prompt, and how many of them are in the cache so far.
    prompt_total: usize,
    prompt_read: usize,
    last_progress: Option<Instant>,
    started: Instant,
    first_token: Option<Instant>,
}

pub(super) fn run(
    options: LocalOptions,
    jobs: Receiver<Msg>,
    load: watch::Sender<LoadState>,
    window: Arc<AtomicU64>,
    counters: Arc<Counters>,
) {
    let load = Arc::new(load);
    let loaded = load_model(&options, load.clone());
    let model = match loaded {
        Ok(model) => model,
        Err(e) => return fail_everything(&load, jobs, e),
    };
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get() as i32),
        n => n as i32,
    };
    let sessions = options.sessions.clamp(1, 64);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(options.kv_tokens.max(256)))
        .with_n_batch(STEP_TOKENS as u32 + sessions)
        .with_n_ubatch(UBATCH_TOKENS as u32 + sessions)
        .with_n_seq_max(sessions)
        .with_kv_unified(true)
        // f16 cells (llama.cpp's default; 8-bit cells read prompts slower) and no flash
        // attention: on CPUs llama.cpp's flash attention walks the cells one by one, so a
        // token late in a long conversation costs several times what it costs at its start
        // (docs/performance.md: 16 against 45 tokens/s after 2,000 tokens).
        .with_flash_attention_policy(FLASH_ATTENTION_OFF)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let backend = match backend() {
        Ok(b) => b,
        Err(e) => return fail_everything(&load, jobs, e),
    };
    let mut ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let e = format!("cannot create the model's context: {e}");
            return fail_everything(&load, jobs, e);
        }
    };
    let watch = StepWatch::install(&mut ctx);
    warm_up(&model, &mut ctx);
    let n_ctx = ctx.n_ctx() as usize;
    let model_window = (model.n_ctx_train() as usize).min(n_ctx);
    window.store(model_window as u64, Ordering::Relaxed);
    tracing::info!(
        model = %options.model.display(),
        window = model_window,
        kv_tokens = n_ctx,
        sessions,
        threads,
        "model loaded"
    );
    let store = options.kv_dir.as_ref().and_then(|dir| {
        KvStore::open(dir, &options.model, options.kv_disk_bytes)
            .inspect_err(|e| tracing::warn!(error = %e, "sessions' state will not be saved"))
            .ok()
    });
    counters
        .slots_total
        .store(sessions as u64, Ordering::Relaxed);
    load.send_replace(LoadState::Ready);
    let template = prompt::template(&model);
    let mut scheduler = Scheduler {
        model: &model,
        ctx,
        watch,
        template,
        options: &options,
        window: model_window,
        kv_tokens: n_ctx,
        slots: (0..sessions)
            .map(|_| Slot {
                session: None,
                tokens: Vec::new(),
                used_at: 0,
                busy: false,
            })
            .collect(),
        clock: 0,
        cost: StepCost::new(0.5),
        counters,
        batch: LlamaBatch::new(STEP_TOKENS + sessions as usize, sessions as i32),
        store,
    };
    scheduler.serve(jobs);
    scheduler.save_all();
}

fn load_model(
    options: &LocalOptions,
    load: Arc<watch::Sender<LoadState>>,
) -> Result<LlamaModel, String> {
    let backend = backend()?;
    let path = &options.model;
    if !path.is_file() {
        return Err(format!("model file {} does not exist", path.display()));
    }
    let started = Instant::now();
    let params = LlamaModelParams::default().with_progress_callback(move |fraction| {
        load.send_replace(LoadState::Loading { fraction });
        true
    });
    let model = LlamaModel::load_from_file(backend, path, &params).map_err(|e| {
        tracing::debug!(error = %e, "llama.cpp refused the model");
        format!(
            "llama.cpp cannot load the model {}: the file is damaged, incomplete or of an \
             architecture it does not know (scripts/fetch-model.sh or `convo model pull` gets \
             a working one)",
            path.display()
        )
    })?;
    tracing::debug!(elapsed = ?started.elapsed(), "model file read");
    Ok(model)
}

/// Computes one token and forgets it, before the engine says it is ready: the first batch
/// pays for reading the weights in from the mapped file and for llama.cpp's first-use set-up
/// (hundreds of milliseconds), which would otherwise fall on the first reply after a start
/// (llama.cpp's own tools warm up the same way).
fn warm_up(model: &LlamaModel, ctx: &mut LlamaContext<'_>) {
    let started = Instant::now();
    let mut batch = LlamaBatch::new(1, 1);
    // A model without a beginning-of-text token (-1) computes token 0 instead.
    let token = Some(model.vocab().bos())
        .filter(|t| t.0 >= 0)
        .unwrap_or(LlamaToken(0));
    let warmed = batch
        .add(token, 0, &[0], true)
        .map_err(|e| e.to_string())
        .and_then(|()| ctx.decode(&mut batch).map_err(|e| e.to_string()));
    ctx.clear_kv_cache();
    match warmed {
        Ok(()) => tracing::debug!(elapsed = ?started.elapsed(), "model warmed up"),
        Err(e) => tracing::debug!(error = %e, "the model's warm-up failed"),
    }
}

/// The model could not be loaded: say so to whoever waits, and to every job that comes.
fn fail_everything(load: &watch::Sender<LoadState>, jobs: Receiver<Msg>, error: String) {
    tracing::error!(error = %error, "the local model is not available");
    load.send_replace(LoadState::Failed(error.clone()));
    while let Ok(msg) = jobs.recv() {
        match msg {
            Msg::Reply(job) => {
                let _ = job.out.send(Piece::Failed(error.clone()));
            }
            Msg::Forget(_) | Msg::Trim { .. } => {}
            Msg::Shutdown => return,
        }
    }
}

struct Scheduler<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    /// The replies of the step being computed, which llama.cpp asks about during it.
    watch: Arc<StepWatch>,
    template: LlamaChatTemplate,
    options: &'m LocalOptions,
    /// A session's window: the model's, or the KV cache's when that is smaller.
    window: usize,
    kv_tokens: usize,
    slots: Vec<Slot>,
    clock: u64,
    /// What steps cost, measured as they go.
    cost: StepCost,
    counters: Arc<Counters>,
    batch: LlamaBatch<'static>,
    store: Option<KvStore>,
}

impl Scheduler<'_> {
    fn serve(&mut self, jobs: Receiver<Msg>) {
        let mut waiting: VecDeque<Job> = VecDeque::new();
        let mut active: Vec<Active> = Vec::new();
        let mut open = true;
        loop {
            if active.is_empty() && waiting.is_empty() {
                if !open {
                    return;
                }
                // Idle: block until there is work (no CPU while nobody asks).
                match jobs.recv() {
                    Ok(msg) => open &= self.take(msg, &mut waiting),
                    Err(_) => return,
                }
            }
            loop {
                match jobs.try_recv() {
                    Ok(msg) => open &= self.take(msg, &mut waiting),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            // Replies nobody waits for any more stop here.
            waiting.retain(|job| !job.out.is_closed());
            let mut i = 0;
            while i < active.len() {
                if active[i].job.out.is_closed() {
                    let gone = active.swap_remove(i);
                    tracing::debug!(session = %gone.job.session_id, "reply stopped");
                    self.release(&gone);
                } else {
                    i += 1;
                }
            }
            while !waiting.is_empty() {
                let Some(slot) = self.free_slot(&waiting[0].session_id) else {
                    break;
                };
                let job = waiting.pop_front().expect("not empty");
                if let Some(a) = self.admit(job, slot) {
                    active.push(a);
                }
            }
            self.counters
                .queue
                .store(waiting.len() as u64, Ordering::Relaxed);
            if active.is_empty() {
                continue;
            }
            self.step(&mut active);
        }
    }

    /// Takes in one message; false when it asks the thread to stop.
    fn take(&mut self, msg: Msg, waiting: &mut VecDeque<Job>) -> bool {
        match msg {
            Msg::Reply(job) => waiting.push_back(job),
            Msg::Forget(session) => {
                // A reply of the session still running (its turn is being stopped) keeps its
                // slot until it ends, as nobody's.
                for i in 0..self.slots.len() {
                    if self.slots[i].session.as_deref() == Some(session.as_str()) {
                        if self.slots[i].busy {
                            self.slots[i].session = None;
                        } else {
                            self.clear(i);
                        }
                    }
                }
                if let Some(store) = &self.store {
                    store.forget(&session);
                }
                self.count_slots();
            }
            Msg::Trim {
                session_id,
                history,
            } => self.trim(&session_id, &history),
            Msg::Shutdown => return false,
        }
        true
    }

    fn count_slots(&self) {
        let used = self.slots.iter().filter(|s| s.session.is_some()).count();
        self.counters
            .slots_used
            .store(used as u64, Ordering::Relaxed);
    }

    /// Saves every session's state (the engine stops).
    fn save_all(&mut self) {
        for i in 0..self.slots.len() {
            self.save(i);
        }
    }

    /// Saves the state of the session in `slot` to the store, if there is one.
    fn save(&self, slot: usize) {
        let (Some(store), Some(session)) = (&self.store, &self.slots[slot].session) else {
            return;
        };
        let tokens = &self.slots[slot].tokens;
        if tokens.len() < MIN_SHARED_PREFIX {
            return;
        }
        let started = Instant::now();
        let saved = self
            .ctx
            .state_seq_save_file(store.temp_path(session), slot as i32, tokens)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                store.commit(session).map_err(|e| e.to_string())?;
                Ok(bytes)
            });
        match saved {
            Ok(bytes) => tracing::debug!(
                session = %session,
                tokens = tokens.len(),
                bytes,
                elapsed = ?started.elapsed(),
                "session state saved"
            ),
            Err(e) => {
                tracing::warn!(session = %session, error = %e, "cannot save the session's state")
            }
        }
    }

    /// Reads `session`'s saved state into `slot` (empty) when it shares at least
    /// `MIN_SHARED_PREFIX` tokens with `prompt`; the admission then keeps that common prefix.
    fn load(&mut self, slot: usize, session: &str, prompt: &[LlamaToken]) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        let path = store.path(session);
        if !path.is_file() {
            return false;
        }
        let started = Instant::now();
        match self
            .ctx
            .state_seq_load_file(&path, slot as i32, self.kv_tokens)
        {
            Ok((tokens, bytes)) => {
                let common = common_prefix(&tokens, prompt);
                if common < MIN_SHARED_PREFIX {
                    tracing::debug!(session, "saved state does not match the conversation");
                    let _ = self.ctx.clear_kv_cache_seq(Some(slot as u32), None, None);
                    return false;
                }
                store.touch(session);
                tracing::debug!(
                    session,
                    tokens = tokens.len(),
                    common,
                    bytes,
                    elapsed = ?started.elapsed(),
                    "session state loaded"
                );
                self.slots[slot].tokens = tokens;
                true
            }
            Err(e) => {
                // Not enough free cells, or a file llama.cpp refuses (another cache layout,
                // damaged): read the conversation afresh.
                tracing::debug!(session, error = %e, "saved state not used");
                let _ = self.ctx.clear_kv_cache_seq(Some(slot as u32), None, None);
                false
            }
        }
    }

    /// Whether the store holds a saved state of `session`.
    fn saved(&self, session: &str) -> bool {
        self.store
            .as_ref()
            .is_some_and(|store| store.path(session).is_file())
    }

    /// With a store, idle sessions other than `slot`'s leave the cache (saved, then dropped);
    /// true when any did. A token being computed attends to every cell below the highest one
    /// in use in llama.cpp's unified cache, whichever sequence holds it, so idle sessions'
    /// cells slow everyone else's replies (92 against 70 tokens/s beside three idle sessions of
    /// 224 tokens, `docs/perf-log.md`); saving and reading a state back costs far less than that
    /// over one reply. The freed cells are the lowest, so the reply's new cells go there.
    fn park_idle(&mut self, slot: usize) -> bool {
        if self.store.is_none() {
            return false;
        }
        let idle: Vec<usize> = (0..self.slots.len())
            .filter(|&i| i != slot && !self.slots[i].busy && !self.slots[i].tokens.is_empty())
            .collect();
        for &i in &idle {
            self.forget(i);
        }
        if !idle.is_empty() {
            tracing::debug!(sessions = idle.len(), "idle sessions parked");
        }
        !idle.is_empty()
    }

    /// An idle slot for `session`: the one holding its tokens, else an empty one, else the
    /// one used least recently.
    fn free_slot(&self, session: &str) -> Option<usize> {
        let idle = self.slots.iter().enumerate().filter(|(_, s)| !s.busy);
        if let Some((i, _)) = idle
            .clone()
            .find(|(_, s)| s.session.as_deref() == Some(session))
        {
            return Some(i);
        }
        idle.min_by_key(|(_, s)| (s.session.is_some(), s.used_at))
            .map(|(i, _)| i)
    }

    /// The slot's session leaves memory: its state is saved, then dropped.
    fn forget(&mut self, slot: usize) {
        self.save(slot);
        self.clear(slot);
    }

    /// Drops the slot's state (not saved).
    fn clear(&mut self, slot: usize) {
        let _ = self.ctx.clear_kv_cache_seq(Some(slot as u32), None, None);
        self.slots[slot].tokens.clear();
        self.slots[slot].session = None;
    }

    /// The slot keeps its first `keep` tokens' cells and drops the rest. False when the model's
    /// cache cannot be cut in the middle: the slot is then cleared (and its session with it).
    fn keep_prefix(&mut self, slot: usize, keep: usize) -> bool {
        if keep >= self.slots[slot].tokens.len() {
            return true;
        }
        let cut = self
            .ctx
            .clear_kv_cache_seq(Some(slot as u32), Some(keep as u32), None);
        if matches!(cut, Ok(true)) {
            self.slots[slot].tokens.truncate(keep);
            true
        } else {
            self.clear(slot);
            false
        }
    }

    /// A session new to `slot` (a fork, or a session whose history begins like another's)
    /// starts from the longest prefix of `tokens` that another slot holds: those cells are
    /// shared into this slot's sequence (llama.cpp's sequence copy, which copies no memory
    /// in the unified cache) instead of being computed again. Between steps every slot's
    /// `tokens` are exactly its cells, so any slot may be the source.
    fn share_prefix(&mut self, slot: usize, tokens: &[LlamaToken]) {
        let best = (0..self.slots.len())
            .filter(|&i| i != slot)
            .map(|i| {
                let held = &self.slots[i].tokens;
                (i, common_prefix(held, tokens))
            })
            .max_by_key(|&(_, n)| n);
        let Some((src, n)) = best.filter(|&(_, n)| n >= MIN_SHARED_PREFIX) else {
            return;
        };
        let copied = self
            .ctx
            .copy_kv_cache_seq(src as i32, slot as i32, Some(0), Some(n as u32));
        if copied.is_ok() {
            self.slots[slot].tokens = tokens[..n].to_vec();
            tracing::debug!(from = src, to = slot, tokens = n, "prompt prefix shared");
        }
    }

    /// The prompt of `history`: its tokens, leaving room for the reply in the window.
    fn prompt(&self, history: &[prompt::Turn]) -> Result<Vec<LlamaToken>, String> {
        let reserve = self
            .options
            .max_reply_tokens
            .map_or(MIN_REPLY_ROOM, |cap| cap as usize);
        prompt::tokens(self.model, &self.template, history, self.window, reserve)
    }

    /// An exchange of `session` was undone and `history` is what remains: its state in memory
    /// keeps only the prefix it shares with the prompt of `history` (the undone messages come
    /// after that prefix), and a saved state is removed (its next reply reads the
    /// conversation afresh). A slot whose reply is still ending is left to nobody, as for a
    /// deleted session.
    fn trim(&mut self, session: &str, history: &[prompt::Turn]) {
        if let Some(store) = &self.store {
            store.forget(session);
        }
        let Some(slot) =
            (0..self.slots.len()).find(|&i| self.slots[i].session.as_deref() == Some(session))
        else {
            return;
        };
        let kept = match self.prompt(history) {
            Ok(prompt) if !self.slots[slot].busy => {
                common_prefix(&self.slots[slot].tokens, &prompt)
            }
            _ => 0,
        };
        if kept == 0 {
            if self.slots[slot].busy {
                self.slots[slot].session = None;
            } else {
                self.clear(slot);
            }
        } else {
            self.keep_prefix(slot, kept);
        }
        tracing::debug!(
            session,
            kept,
            "undone exchange trimmed from the session's state"
        );
        self.count_slots();
    }

    fn admit(&mut self, job: Job, slot: usize) -> Option<Active> {
        let tokens = match self.prompt(&job.history) {
            Ok(t) if !t.is_empty() => t,
            Ok(_) => {
                let _ = job.out.send(Piece::Failed("the prompt is empty".into()));
                return None;
            }
            Err(e) => {
                let _ = job.out.send(Piece::Failed(e));
                return None;
            }
        };
        // A session already in its slot stays there unless others were parked: its cells may
        // then lie above the ones just freed, and saved and read back they come first.
        let resident = self.slots[slot].session.as_deref() == Some(job.session_id.as_str())
            && !self.park_idle(slot);
        if !resident {
            self.forget(slot);
            self.slots[slot].session = Some(job.session_id.clone());
            if self.saved(&job.session_id) {
                self.park_idle(slot);
                if !self.load(slot, &job.session_id, &tokens) {
                    self.share_prefix(slot, &tokens);
                }
            } else {
                // A fork shares its source's cells before the source is parked.
                self.share_prefix(slot, &tokens);
                self.park_idle(slot);
            }
            self.count_slots();
        }
        // Keep what the cache already holds of this prompt; at least the last token is
        // decoded again, for its logits.
        let mut common = common_prefix(&self.slots[slot].tokens, &tokens).min(tokens.len() - 1);
        if !self.keep_prefix(slot, common) {
            // Start over.
            self.slots[slot].session = Some(job.session_id.clone());
            common = 0;
        }
        tracing::debug!(
            session = %job.session_id,
            prompt = tokens.len(),
            reused = common,
            "reply admitted"
        );
        self.counters
            .reused
            .fetch_add(common as u64, Ordering::Relaxed);
        self.clock += 1;
        let s = &mut self.slots[slot];
        s.busy = true;
        s.used_at = self.clock;
        Some(Active {
            sampler: self.sampler(),
            job,
            slot,
            prompt: tokens[common..].iter().copied().collect(),
            next: None,
            generated: 0,
            text: Utf8Pieces::default(),
            logits_at: None,
            prompt_total: tokens.len(),
            prompt_read: common,
            last_progress: None,
            started: Instant::now(),
            first_token: None,
        })
    }

    /// A reply's sampler: greedy at temperature 0; else drawn with the configured temperature
    /// and top-p, from the configured seed or, without one, a fresh seed for every reply.
    fn sampler(&self) -> LlamaSampler {
        let penalties = LlamaSampler::penalties(self.model.n_vocab(), 64, 1.1, 0.0, 0.0);
        let t = self.options.temperature;
        if t <= 0.0 {
            LlamaSampler::chain_simple([penalties, LlamaSampler::greedy()])
        } else {
            let seed = self.options.seed.unwrap_or_else(rand::random);
            tracing::debug!(seed, temperature = t, top_p = self.options.top_p, "sampler");
            LlamaSampler::chain_simple([
                penalties,
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(self.options.top_p, 1),
                LlamaSampler::min_p(0.05, 1),
                LlamaSampler::temp(t),
                LlamaSampler::dist(seed),
            ])
        }
    }

    /// The reply is over (finished, failed or stopped): its slot keeps its tokens for the
    /// session's next turn.
    fn release(&mut self, reply: &Active) {
        self.clock += 1;
        let s = &mut self.slots[reply.slot];
        s.busy = false;
        s.used_at = self.clock;
    }

    /// Prompt tokens the next step takes: a whole batch while no reply is generating (a stop
    /// aborts the step in the middle); else about `STEP_MS` of work at the measured cost.
    fn step_tokens(&self, active: &[Active]) -> usize {
        if active.iter().any(|a| a.prompt.is_empty()) {
            self.cost.tokens(STEP_MS, MIN_STEP_TOKENS, STEP_TOKENS)
        } else {
            STEP_TOKENS
        }
    }

    /// Cells of the KV cache in use.
    fn used(&self) -> usize {
        self.slots.iter().map(|s| s.tokens.len()).sum()
    }

    /// Makes room for `needed` more cells by dropping idle sessions' state, least recently
    /// used first. False when even that is not enough.
    fn make_room(&mut self, needed: usize) -> bool {
        while self.used() + needed > self.kv_tokens {
            let victim = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.busy && !s.tokens.is_empty())
                .min_by_key(|(_, s)| s.used_at)
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    self.forget(i);
                    self.count_slots();
                }
                None => return false,
            }
        }
        true
    }

    /// Decodes one batch: a token for each reply being generated, then prompt tokens; then
    /// samples each reply whose logits are ready.
    fn step(&mut self, active: &mut Vec<Active>) {
        let step_tokens = self.step_tokens(active);
        let needed = active
            .iter()
            .map(|a| {
                if a.prompt.is_empty() {
                    1
                } else {
                    a.prompt.len().min(step_tokens)
                }
            })
            .sum::<usize>()
            .min(step_tokens + active.len());
        if !self.make_room(needed) {
            // Every cell holds a reply in progress: the longest one ends here.
            if let Some(i) =
                (0..active.len()).max_by_key(|&i| self.slots[active[i].slot].tokens.len())
            {
                let a = active.swap_remove(i);
                let tokens = a.generated as u64;
                self.finish(a, Finish::Length { tokens });
            }
            return;
        }
        self.batch.clear();
        let mut budget = step_tokens;
        // What each reply was before the step, to take the step back if it is aborted.
        let before: Vec<Before> = active
            .iter()
            .map(|a| Before {
                cells: self.slots[a.slot].tokens.len(),
                next: a.next,
                prompt_read: a.prompt_read,
            })
            .collect();
        for a in active.iter_mut() {
            a.logits_at = None;
            let slot = &mut self.slots[a.slot];
            if let Some(token) = a.next.take() {
                let at = self.batch.n_tokens();
                let pos = slot.tokens.len() as i32;
                if self.batch.add(token, pos, &[a.slot as i32], true).is_ok() {
                    slot.tokens.push(token);
                    a.logits_at = Some(at);
                }
            }
        }
        let generating = self.batch.n_tokens() as usize;
        for a in active.iter_mut() {
            if a.prompt.is_empty() || budget == 0 {
                continue;
            }
            let slot = &mut self.slots[a.slot];
            let take = a.prompt.len().min(budget);
            for k in 0..take {
                let token = a.prompt.pop_front().expect("counted");
                let last = k + 1 == take && a.prompt.is_empty();
                let at = self.batch.n_tokens();
                let pos = slot.tokens.len() as i32;
                if self.batch.add(token, pos, &[a.slot as i32], last).is_err() {
                    a.prompt.push_front(token);
                    break;
                }
                slot.tokens.push(token);
                a.prompt_read += 1;
                if last {
                    a.logits_at = Some(at);
                }
            }
            budget -= take;
        }
        self.watch.watch(active.iter().map(|a| a.job.out.clone()));
        let started = Instant::now();
        let decoded = self.ctx.decode(&mut self.batch);
        // The watch holds the replies' senders only while llama.cpp may ask about them.
        self.watch.watch([]);
        if matches!(decoded, Err(DecodeError::Unknown(ABORTED))) {
            // A reply of the step was stopped: the step is taken back (its cells removed,
            // its tokens read again next time) and the stopped reply is dropped before it.
            self.take_back(active, &before);
            return;
        }
        // Every step tells the cost model something: steps of a few tokens its fixed part,
        // steps that read a prompt its part per token.
        let prompt_tokens = self.batch.n_tokens() as usize - generating;
        self.cost.record(
            self.batch.n_tokens() as usize,
            started.elapsed().as_secs_f64() * 1e3,
        );
        // Counted once computed: a stopped reply's last step shows when it ends.
        let c = &self.counters;
        c.decoded
            .fetch_add(self.batch.n_tokens() as u64, Ordering::Relaxed);
        c.prompt.fetch_add(prompt_tokens as u64, Ordering::Relaxed);
        let ns = started.elapsed().as_nanos() as u64;
        match prompt_tokens {
            0 => c.generation_ns.fetch_add(ns, Ordering::Relaxed),
            _ => c.prompt_ns.fetch_add(ns, Ordering::Relaxed),
        };
        if let Err(e) = decoded {
            // The batch's tokens are not in the cache: forget those slots, fail the replies.
            let error = format!("the model failed to compute the reply: {e}");
            for a in active.drain(..) {
                self.clear(a.slot);
                let _ = a.job.out.send(Piece::Failed(error.clone()));
                self.release(&a);
            }
            return;
        }
        for a in active.iter_mut() {
            if !a.prompt.is_empty() {
                progress(a);
            }
        }
        let mut i = 0;
        while i < active.len() {
            let Some(at) = active[i].logits_at else {
                i += 1;
                continue;
            };
            let token = active[i].sampler.sample(&self.ctx, at);
            let a = &mut active[i];
            if a.first_token.is_none() {
                a.first_token = Some(Instant::now());
            }
            let vocab = self.model.vocab();
            if vocab.is_eog(token) {
                let a = active.swap_remove(i);
                self.finish(a, Finish::Complete);
                continue;
            }
            a.generated += 1;
            self.counters.generated.fetch_add(1, Ordering::Relaxed);
            let bytes = vocab.token_to_piece(token, false, None);
            let text = a.text.push(&bytes);
            if !text.is_empty() {
                let _ = a.job.out.send(Piece::Text(text));
            }
            let full = self.slots[a.slot].tokens.len() + 1 >= self.window;
            let capped = a.generated >= self.options.reply_cap();
            if capped || full {
                let a = active.swap_remove(i);
                let tokens = a.generated as u64;
                self.finish(a, Finish::Length { tokens });
                continue;
            }
            a.next = Some(token);
            i += 1;
        }
    }

    /// Undoes an aborted step: every reply's cells and tokens are as they were before it.
    fn take_back(&mut self, active: &mut [Active], before: &[Before]) {
        for (a, b) in active.iter_mut().zip(before) {
            let slot = &mut self.slots[a.slot];
            let added = slot.tokens.split_off(b.cells);
            let _ = self
                .ctx
                .clear_kv_cache_seq(Some(a.slot as u32), Some(b.cells as u32), None);
            if b.next.is_some() {
                a.next = b.next;
            } else {
                for token in added.into_iter().rev() {
                    a.prompt.push_front(token);
                }
            }
            a.prompt_read = b.prompt_read;
            a.logits_at = None;
        }
        // llama.cpp's own errors about the abort are left out of the log (`step_watch.rs`).
        tracing::info!("step abandoned: a reply of it was stopped");
    }

    fn finish(&mut self, mut a: Active, finish: Finish) {
        let rest = a.text.finish();
        if !rest.is_empty() {
            let _ = a.job.out.send(Piece::Text(rest));
        }
        let _ = a.job.out.send(Piece::Done(finish));
        if let Some(first) = a.first_token {
            let secs = first.elapsed().as_secs_f64();
            tracing::debug!(
                session = %a.job.session_id,
                first_token_ms = (first - a.started).as_millis() as u64,
                tokens = a.generated,
                tokens_per_s = if secs > 0.0 { a.generated as f64 / secs } else { 0.0 },
                "reply computed"
            );
        }
        self.release(&a);
    }
}

/// Tells how far the reply's prompt is read, when it has been read for `PROGRESS_MS` and the
/// last report is that old.
fn progress(a: &mut Active) {
    let every = Duration::from_millis(PROGRESS_MS);
    let since = a.last_progress.unwrap_or(a.started);
    if since.elapsed() < every {
        return;
    }
    a.last_progress = Some(Instant::now());
    let _ = a.job.out.send(Piece::Progress {
        read: a.prompt_read as u64,
        total: a.prompt_total as u64,
    });
}
