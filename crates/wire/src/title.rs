//! Session titles, one rule for every side: the title taken from a session's first message
//! ([`plain_title`], used by the TUI, the local store and the service's `GET /v1/sessions`)
//! and the cleaning of a title the user typed ([`user_title`]).

/// Longest title kept, in characters.
pub const TITLE_CHARS: usize = 60;

/// The text of the first line of `content`'s first block (a paragraph, heading, list item,
/// quote or code block) with its markdown syntax removed (`**bold**` → `bold`, `` `code` `` → `code`,
/// `# `, `- `, `> ` and link targets dropped), whitespace collapsed to single spaces,
/// sanitised, and cut to `max_chars` characters (the last one `…` when cut). A first block
/// that is markup only (`***`) is kept as typed. `None` for blank content.
pub fn plain_title(content: &str, max_chars: usize) -> Option<String> {
    use pulldown_cmark::{Event, Parser, TagEnd};
    let mut text = String::new();
    let options =
        pulldown_cmark::Options::ENABLE_STRIKETHROUGH | pulldown_cmark::Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(content, options) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                text.push_str(&t);
                // A code block comes as text with its line breaks.
                let lead = text.len() - text.trim_start().len();
                if let Some(end) = text[lead..].find('\n') {
                    text.truncate(lead + end);
                    break;
                }
            }
            // The first line only.
            Event::SoftBreak | Event::HardBreak if !text.trim().is_empty() => break,
            Event::SoftBreak | Event::HardBreak => text.push(' '),
            Event::End(
                TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::CodeBlock | TagEnd::Item,
            ) if !text.trim().is_empty() => break,
            _ => {}
        }
    }
    let mut clean = collapse(&text);
    if clean.is_empty() {
        // Markup only: the first non-blank line as typed.
        clean = collapse(content.lines().find(|l| !l.trim().is_empty())?);
    }
    if clean.is_empty() || max_chars == 0 {
        return None;
    }
    if clean.chars().count() > max_chars {
        clean = clean.chars().take(max_chars - 1).collect();
        clean.push('…');
    }
    Some(clean)
}

/// A title the user typed: sanitised, whitespace collapsed, cut to [`TITLE_CHARS`] characters
/// (the last one `…` when cut); markdown is kept as typed. `None` for blank text.
pub fn user_title(text: &str) -> Option<String> {
    let mut clean = collapse(text);
    if clean.is_empty() {
        return None;
    }
    if clean.chars().count() > TITLE_CHARS {
        clean = clean.chars().take(TITLE_CHARS - 1).collect();
        clean.push('…');
    }
    Some(clean)
}

/// Sanitised, with runs of whitespace as one space and none at the ends.
fn collapse(text: &str) -> String {
    crate::sanitize::sanitize(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
