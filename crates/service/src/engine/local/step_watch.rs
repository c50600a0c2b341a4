//! Stopping a step in the middle: llama.cpp asks, between the operations of the batch it
//! computes, whether to abort (its abort callback; `vendor/README.md`). The scheduler names
//! the replies a step computes before it starts the step; the step is aborted as soon as any
//! of them is stopped (nobody reads its pieces any more), so a long prompt can be read in
//! large steps and a stop still lands within one operation of the graph (a few milliseconds),
//! not at the end of the step.

use std::sync::{Arc, Mutex, PoisonError};

use llama_cpp_2::context::LlamaContext;
use tokio::sync::mpsc::UnboundedSender;

use super::Piece;

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
        ctx.set_abort_callback(Some(Box::new(move || asked.any_stopped())));
        watch
    }

    /// The next step computes these replies.
    pub fn watch(&self, replies: impl IntoIterator<Item = UnboundedSender<Piece>>) {
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
}
