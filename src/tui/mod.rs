//! The interactive client: terminal setup and restore, the event loop, and the modules it
//! wires together (state in `app`, events in `event`, panes in `view`, I/O in `workers`).

pub mod app;
pub mod event;
pub mod frame;
pub mod metrics;
pub mod transcript;
pub mod view;
pub mod wallet;

use std::process::ExitCode;

pub async fn run(_global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo: the TUI is not built yet; see `convo --help`");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}

/// Removes what must not reach the terminal from server text: escape sequences, control
/// characters (newline and tab are kept), and bidi overrides.
pub fn sanitize_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // Skip a CSI/OSC sequence up to its final byte or terminator.
                match chars.peek() {
                    Some('[') => {
                        chars.next();
                        for c in chars.by_ref() {
                            if ('@'..='~').contains(&c) {
                                break;
                            }
                        }
                    }
                    Some(']') => {
                        chars.next();
                        while let Some(c) = chars.next() {
                            if c == '\u{7}' {
                                break;
                            }
                            if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                                chars.next();
                                break;
                            }
                        }
                    }
                    _ => {
                        chars.next();
                    }
                }
            }
            '\n' => out.push('\n'),
            '\t' => out.push_str("    "),
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod app_tests;
