//! Announcing a finished reply (`[notify]`): whether to, from the terminal's focus and how
//! long the reply took, and the bytes that do it: BEL, or an OSC 9 desktop notification
//! followed by BEL. `App` decides; the loop that owns the terminal writes the bytes.

use std::time::Duration;

use convo_client::config::{Notify, NotifyMode};

/// At most this many characters of the notification's text reach the terminal.
const MAX_TEXT_CHARS: usize = 120;

/// A notification for the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub mode: NotifyMode,
    pub text: String,
}

impl Notification {
    /// The notification for a reply finished in the session titled `title`.
    pub fn reply_finished(mode: NotifyMode, title: &str) -> Notification {
        Notification {
            mode,
            text: format!("convo: reply finished in {title}"),
        }
    }

    /// The bytes written to the terminal: nothing for `off`, BEL for `bell`, OSC 9 with the
    /// text (control characters and escape sequences removed, shortened) then BEL for `osc9`.
    pub fn sequence(&self) -> String {
        match self.mode {
            NotifyMode::Off => String::new(),
            NotifyMode::Bell => "\x07".to_string(),
            NotifyMode::Osc9 => format!("\x1b]9;{}\x07\x07", clean(&self.text)),
        }
    }
}

/// Whether a reply that finished now notifies: never with mode `off`; always while the
/// terminal does not have focus; with focus, when it took at least `after_seconds` (not 0).
/// `took` is unknown for a reply this run did not send.
pub fn should_notify(settings: &Notify, focused: bool, took: Option<Duration>) -> bool {
    if settings.mode == NotifyMode::Off {
        return false;
    }
    let long = settings.after_seconds > 0
        && took.is_some_and(|t| t >= Duration::from_secs(settings.after_seconds));
    !focused || long
}

/// `text` safe inside an OSC string: one line, no control characters (a BEL or ESC would end
/// the sequence early), no bidi overrides, at most [`MAX_TEXT_CHARS`] characters.
fn clean(text: &str) -> String {
    let text = convo_client::sanitize::sanitize(text);
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_TEXT_CHARS)
        .collect();
    if text.chars().count() > MAX_TEXT_CHARS {
        out.pop();
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: NotifyMode, after_seconds: u64) -> Notify {
        Notify {
            mode,
            after_seconds,
        }
    }

    #[test]
    fn an_unfocused_terminal_is_told_and_a_focused_one_only_after_a_long_reply() {
        let s = settings(NotifyMode::Bell, 30);
        let secs = |n| Some(Duration::from_secs(n));
        assert!(should_notify(&s, false, secs(1)), "unfocused");
        assert!(should_notify(&s, false, None), "unfocused, time unknown");
        assert!(!should_notify(&s, true, secs(29)), "focused, quick");
        assert!(should_notify(&s, true, secs(30)), "focused, long");
        assert!(!should_notify(&s, true, None), "focused, time unknown");
        let never_on_time = settings(NotifyMode::Osc9, 0);
        assert!(!should_notify(&never_on_time, true, secs(3600)));
        assert!(should_notify(&never_on_time, false, secs(0)));
        let off = settings(NotifyMode::Off, 1);
        assert!(!should_notify(&off, false, secs(100)));
        assert!(!should_notify(&off, true, secs(100)));
    }

    #[test]
    fn the_bytes_are_a_bell_or_an_osc_9_and_a_bell() {
        let n = |mode| Notification::reply_finished(mode, "Rust lifetimes");
        assert_eq!(n(NotifyMode::Bell).sequence(), "\x07");
        assert_eq!(
            n(NotifyMode::Osc9).sequence(),
            "\x1b]9;convo: reply finished in Rust lifetimes\x07\x07"
        );
        assert_eq!(n(NotifyMode::Off).sequence(), "");
    }

    #[test]
    fn a_title_cannot_end_the_sequence_or_inject_one() {
        let n =
            Notification::reply_finished(NotifyMode::Osc9, "a\x07b\x1b]52;c;evil\x07c\nd\u{202e}e");
        let seq = n.sequence();
        let body = seq
            .strip_prefix("\x1b]9;")
            .and_then(|s| s.strip_suffix("\x07\x07"))
            .expect("one OSC 9 and a bell");
        assert!(!body.chars().any(|c| c.is_control()), "{body:?}");
        assert!(!body.contains("52;"), "{body:?}");
        assert!(!body.contains('\u{202e}'), "{body:?}");
        assert!(body.starts_with("convo: reply finished in ab"), "{body:?}");
        let long = Notification::reply_finished(NotifyMode::Osc9, &"x".repeat(500)).sequence();
        assert!(long.chars().count() <= MAX_TEXT_CHARS + 6, "{}", long.len());
        assert!(long.ends_with("…\x07\x07"));
    }
}
