//! What `convo send` shows on a terminal while it waits for a reply that comes whole (no
//! `--stream`): after a second, one line on stderr saying how long it has waited, redrawn
//! every second and erased when the answer comes. Nothing when stderr is not a terminal (a
//! script reads stderr as it always did) or with `--json`.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a send waits before the line appears: a quick reply shows none.
const FIRST_AFTER: Duration = Duration::from_secs(1);

/// The waiting line while it is shown; [`Waiting::finish`] erases it.
pub struct Waiting {
    task: Option<JoinHandle<()>>,
    drawn: Arc<AtomicBool>,
}

impl Waiting {
    /// Starts the line's clock; `shown` false (not a terminal, `--json`) shows nothing.
    pub fn start(shown: bool) -> Waiting {
        let drawn = Arc::new(AtomicBool::new(false));
        let task = shown.then(|| {
            let drawn = drawn.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let mut next = start + FIRST_AFTER;
                loop {
                    tokio::time::sleep_until(next).await;
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{}", line(start.elapsed()));
                    let _ = err.flush();
                    drawn.store(true, Ordering::Relaxed);
                    next += Duration::from_secs(1);
                }
            })
        });
        Waiting { task, drawn }
    }

    /// The answer came (or the send failed): the line, if it was drawn, is erased before
    /// anything else is printed.
    pub async fn finish(self) {
        let Some(task) = self.task else { return };
        task.abort();
        let _ = task.await;
        if !self.drawn.load(Ordering::Relaxed) {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

/// The line after `waited`: whole seconds, and the way out.
fn line(waited: Duration) -> String {
    format!(
        "waiting for the reply… {} s (Ctrl-C stops waiting)",
        waited.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_counts_whole_seconds() {
        assert_eq!(
            line(Duration::from_millis(12_900)),
            "waiting for the reply… 12 s (Ctrl-C stops waiting)"
        );
    }
}
