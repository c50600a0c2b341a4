//! What a reply's header says besides who and when: while it waits for its first text (the
//! service reading the conversation, or just the time it has waited), and how it ended when
//! it did not end by itself (stopped, or cut by a limit with `/continue` to ask for the rest).

use std::time::Duration;

use convo_wire::FinishReason;

/// A reply still empty after this long shows how long it has waited.
pub const SHOW_ELAPSED_AFTER: Duration = Duration::from_secs(2);

/// The user message `/continue` sends: it asks for the rest of a reply cut by a limit.
pub const CONTINUE_PROMPT: &str = "Continue exactly where your last reply stopped.";

/// The note of a reply with no text yet: the service's prompt progress when it sends it
/// (`reading the conversation · 47 %`), else the time waited once it passes
/// [`SHOW_ELAPSED_AFTER`] (`waiting for the reply · 5 s`); nothing before.
pub fn waiting_note(progress: Option<(u64, u64)>, waited: Duration) -> Option<String> {
    let elapsed = (waited >= SHOW_ELAPSED_AFTER).then(|| format!("{} s", waited.as_secs()));
    match progress.filter(|&(_, total)| total > 0) {
        Some((read, total)) => {
            let percent = (read.min(total) * 100) / total;
            Some(match elapsed {
                Some(elapsed) => format!("reading the conversation · {percent} % · {elapsed}"),
                None => format!("reading the conversation · {percent} %"),
            })
        }
        None => elapsed.map(|elapsed| format!("waiting for the reply · {elapsed}")),
    }
}

/// The mark of a reply that did not end by itself: `stopped`, or `cut at N tokens ·
/// /continue`. Nothing for one the model ended, or when the server does not say.
pub fn finish_mark(reason: Option<FinishReason>, tokens: u64) -> Option<String> {
    match reason? {
        FinishReason::Stop => None,
        FinishReason::Stopped => Some("stopped".to_string()),
        FinishReason::Length => Some(format!("cut at {tokens} tokens · /continue")),
    }
}

/// `header`, then ` · note` when there is one.
pub fn with_note(header: String, note: Option<String>) -> String {
    match note {
        Some(note) => format!("{header} · {note}"),
        None => header,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_reply_shows_progress_then_the_time_waited() {
        assert_eq!(waiting_note(None, Duration::from_millis(1500)), None);
        assert_eq!(
            waiting_note(None, Duration::from_millis(5200)).as_deref(),
            Some("waiting for the reply · 5 s")
        );
        assert_eq!(
            waiting_note(Some((470, 1000)), Duration::from_millis(900)).as_deref(),
            Some("reading the conversation · 47 %")
        );
        assert_eq!(
            waiting_note(Some((1100, 1100)), Duration::from_secs(3)).as_deref(),
            Some("reading the conversation · 100 % · 3 s")
        );
        // A total of 0 says nothing about progress.
        assert_eq!(waiting_note(Some((0, 0)), Duration::ZERO), None);
    }

    #[test]
    fn replies_that_did_not_end_by_themselves_are_marked() {
        assert_eq!(finish_mark(None, 10), None);
        assert_eq!(finish_mark(Some(FinishReason::Stop), 10), None);
        assert_eq!(
            finish_mark(Some(FinishReason::Stopped), 10).as_deref(),
            Some("stopped")
        );
        assert_eq!(
            finish_mark(Some(FinishReason::Length), 512).as_deref(),
            Some("cut at 512 tokens · /continue")
        );
        assert_eq!(
            with_note("assistant · 12:00".into(), Some("stopped".into())),
            "assistant · 12:00 · stopped"
        );
    }
}
