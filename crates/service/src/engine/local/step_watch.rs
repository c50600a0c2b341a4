//! Stopping a step in the middle: llama.cpp asks, between the operations of the batch it
//! computes, whether to abort (its abort callback; `vendor/README.md`). The scheduler names
//! the replies a step computes before it starts the step; the step is aborted as soon as any
//! of them is stopped (nobody reads its pieces any more), so a long prompt can be read in
//! large steps and a stop still lands within one operation of the graph (a few milliseconds),
//! not at the end of the step.
//!
//! llama.cpp logs such an abort as errors ("failed to compute graph", "failed to decode,
//! ret = 2"); [`is_abort_noise`] tells the process's log to leave them out
//! (`engine::log_filter`), and the scheduler logs the abort as what it is.

use std::cell::Cell;
use std::sync::{Arc, Mutex, PoisonError};

use llama_cpp_2::context::LlamaContext;
use tokio::sync::mpsc::UnboundedSender;

use super::Piece;

/// The target of llama.cpp's log events (`llama_cpp_2::send_logs_to_tracing`).
const LLAMA_TARGET: &str = "llama-cpp-2";

thread_local! {
    /// On the thread computing a step: true from the moment the abort callback stops it until
    /// the decode is over (`StepWatch::watch` is called after each one).
    static STOPPING: Cell<bool> = const { Cell::new(false) };
}

/// Whether a log event is llama.cpp telling of a step this thread stopped on purpose.
pub fn is_abort_noise(meta: &tracing::Metadata<'_>) -> bool {
    meta.target() == LLAMA_TARGET && STOPPING.with(Cell::get)
}

/// The replies of the step being computed.
#[derive(Default)]
pub struct StepWatch {
    replies: Mutex<Vec<UnboundedSender<Piece>>>,
}

impl StepWatch {
    /// A watch asked by `ctx` during every decode from now on.
    pub fn install(ctx: &mut LlamaContext<'_>) -> Arc<StepWatch> {
        let watch = Arc::new(StepWatch::default());
        let asked = watch.clone();
        ctx.set_abort_callback(Some(Box::new(move || {
            let stop = asked.any_stopped();
            if stop {
                STOPPING.with(|s| s.set(true));
            }
            stop
        })));
        watch
    }

    /// The next step computes these replies (none: the last step is over).
    pub fn watch(&self, replies: impl IntoIterator<Item = UnboundedSender<Piece>>) {
        STOPPING.with(|s| s.set(false));
        let mut held = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        held.clear();
        held.extend(replies);
    }

    /// True when a reply of the step is stopped: the step is not worth finishing.
    pub fn any_stopped(&self) -> bool {
        self.replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(UnboundedSender::is_closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc::unbounded_channel;

    #[test]
    fn a_step_is_stopped_when_one_of_its_replies_is() {
        let watch = StepWatch::default();
        let (a, a_rx) = unbounded_channel();
        let (b, b_rx) = unbounded_channel();
        watch.watch([a, b]);
        assert!(!watch.any_stopped());
        drop(b_rx);
        assert!(watch.any_stopped());
        // The next step without that reply goes on.
        let (c, _c_rx) = unbounded_channel();
        watch.watch([c]);
        assert!(!watch.any_stopped());
        drop(a_rx);
    }

    #[test]
    fn only_llamas_messages_while_a_step_is_stopped_are_noise() {
        use tracing::Level;
        use tracing::callsite::DefaultCallsite;
        use tracing::field::FieldSet;
        use tracing::metadata::Kind;
        static FIELDS: &[&str] = &["message"];
        static LLAMA: DefaultCallsite = DefaultCallsite::new(&LLAMA_META);
        static LLAMA_META: tracing::Metadata<'static> = tracing::Metadata::new(
            "log event",
            LLAMA_TARGET,
            Level::ERROR,
            None,
            None,
            None,
            FieldSet::new(FIELDS, tracing::callsite::Identifier(&LLAMA)),
            Kind::EVENT,
        );
        static OURS: DefaultCallsite = DefaultCallsite::new(&OURS_META);
        static OURS_META: tracing::Metadata<'static> = tracing::Metadata::new(
            "log event",
            "convo_service::engine::local::scheduler",
            Level::ERROR,
            None,
            None,
            None,
            FieldSet::new(FIELDS, tracing::callsite::Identifier(&OURS)),
            Kind::EVENT,
        );
        assert!(!is_abort_noise(&LLAMA_META), "no step stopped");
        STOPPING.with(|s| s.set(true));
        assert!(is_abort_noise(&LLAMA_META));
        assert!(!is_abort_noise(&OURS_META), "the service's own errors stay");
        let on_another_thread = std::thread::spawn(|| is_abort_noise(&LLAMA_META));
        assert!(
            !on_another_thread.join().unwrap(),
            "another thread's step goes on"
        );
        StepWatch::default().watch([]);
        assert!(!is_abort_noise(&LLAMA_META), "the step is over");
    }
}
