//! Syntax highlighting of fenced code blocks with syntect.
//!
//! The syntax set and theme load once, on first use. An unknown language, a block over
//! [`MAX_BLOCK_BYTES`] or a line over [`MAX_LINE_BYTES`] is shown plain: highlighting time stays
//! bounded whatever the server sends. A [`HighlightMemo`] lets a block that is still streaming
//! re-highlight only its changed last line.
use std::sync::LazyLock;

use ratatui::style::{Color, Modifier, Style};
use syntect::highlighting::{
    FontStyle, HighlightIterator, HighlightState, Highlighter, Theme, ThemeSet,
};
use syntect::parsing::{ParseState, ScopeStack, SyntaxReference, SyntaxSet};

use super::style;
use super::wrap::Styled;

/// Longest line (bytes) that is highlighted; a block holding a longer one is plain.
pub const MAX_LINE_BYTES: usize = 4096;
/// Largest block (bytes) that is highlighted.
pub const MAX_BLOCK_BYTES: usize = 256 * 1024;

const THEME: &str = "base16-ocean.dark";

struct Assets {
    syntaxes: SyntaxSet,
    theme: Theme,
}

static ASSETS: LazyLock<Assets> = LazyLock::new(|| {
    let mut themes = ThemeSet::load_defaults();
    let theme = themes.themes.remove(THEME).unwrap_or_default();
    Assets {
        syntaxes: SyntaxSet::load_defaults_newlines(),
        theme,
    }
});

/// Load the syntax set and theme now rather than on the first code block drawn.
pub fn preload() {
    LazyLock::force(&ASSETS);
}

/// The language named by a fence's info string (`rust,ignore` → `rust`), if any.
pub fn language_of(info: &str) -> Option<String> {
    let lang = info
        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("")
        .trim();
    (!lang.is_empty()).then(|| lang.to_owned())
}

fn syntax_for(lang: &str) -> Option<&'static SyntaxReference> {
    let syntaxes = &ASSETS.syntaxes;
    syntaxes
        .find_syntax_by_token(lang)
        .or_else(|| syntaxes.find_syntax_by_token(&lang.to_ascii_lowercase()))
}

/// Highlighting state after a line, kept so that a growing block resumes where it was.
#[derive(Clone, Debug)]
struct MemoLine {
    text: String,
    styled: Styled,
    parse: ParseState,
    highlight: HighlightState,
}

/// Remembers how the lines of one code block were highlighted.
#[derive(Clone, Debug, Default)]
pub struct HighlightMemo {
    lang: String,
    lines: Vec<MemoLine>,
}

/// Plain (unhighlighted) lines of a code block.
pub fn plain(lines: &[String]) -> Vec<Styled> {
    lines
        .iter()
        .map(|line| Styled::plain(line.clone(), style::code()))
        .collect()
}

/// Highlight the lines of a code block in `lang`. Plain when the language is unknown or the
/// block too large. With a memo, lines identical to the memo's are reused.
pub fn highlight(
    lang: Option<&str>,
    lines: &[String],
    memo: Option<&mut HighlightMemo>,
) -> Vec<Styled> {
    let Some(lang) = lang else {
        return plain(lines);
    };
    let too_big = lines.iter().any(|l| l.len() > MAX_LINE_BYTES)
        || lines.iter().map(|l| l.len() + 1).sum::<usize>() > MAX_BLOCK_BYTES;
    let Some(syntax) = syntax_for(lang).filter(|_| !too_big) else {
        return plain(lines);
    };
    let mut scratch = HighlightMemo::default();
    let memo = memo.unwrap_or(&mut scratch);
    if memo.lang != lang {
        memo.lang = lang.to_owned();
        memo.lines.clear();
    }
    let reused = memo
        .lines
        .iter()
        .zip(lines)
        .take_while(|(m, l)| m.text == **l)
        .count();
    memo.lines.truncate(reused);

    let assets = &*ASSETS;
    let highlighter = Highlighter::new(&assets.theme);
    let (mut parse, mut state) = match memo.lines.last() {
        Some(m) => (m.parse.clone(), m.highlight.clone()),
        None => (
            ParseState::new(syntax),
            HighlightState::new(&highlighter, ScopeStack::new()),
        ),
    };
    let mut buf = String::new();
    for line in &lines[reused..] {
        buf.clear();
        buf.push_str(line);
        buf.push('\n');
        let styled = match parse.parse_line(&buf, &assets.syntaxes) {
            Ok(ops) => {
                let mut styled = Styled::default();
                for (s, piece) in HighlightIterator::new(&mut state, &ops, &buf, &highlighter) {
                    styled.push(piece.trim_end_matches('\n'), convert(s));
                }
                styled
            }
            // a grammar error: show this line plain rather than fail the block
            Err(_) => Styled::plain(line.clone(), style::code()),
        };
        memo.lines.push(MemoLine {
            text: line.clone(),
            styled,
            parse: parse.clone(),
            highlight: state.clone(),
        });
    }
    memo.lines.iter().map(|m| m.styled.clone()).collect()
}

fn convert(s: syntect::highlighting::Style) -> Style {
    let fg = s.foreground;
    let mut out = Style::new().fg(Color::Rgb(fg.r, fg.g, fg.b));
    if s.font_style.contains(FontStyle::BOLD) {
        out = out.add_modifier(Modifier::BOLD);
    }
    if s.font_style.contains(FontStyle::ITALIC) {
        out = out.add_modifier(Modifier::ITALIC);
    }
    if s.font_style.contains(FontStyle::UNDERLINE) {
        out = out.add_modifier(Modifier::UNDERLINED);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_owned).collect()
    }

    #[test]
    fn known_language_gets_colours() {
        let out = highlight(Some("rust"), &lines("fn main() {}\nlet x = 1;"), None);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].text, "fn main() {}");
        assert!(out[0].runs.len() > 1);
    }

    #[test]
    fn unknown_language_is_plain() {
        let out = highlight(Some("no-such-lang"), &lines("a b"), None);
        assert_eq!(out, plain(&lines("a b")));
        assert_eq!(language_of("rust,ignore"), Some("rust".into()));
        assert_eq!(language_of("  "), None);
    }

    #[test]
    fn memo_gives_the_same_result() {
        let code = lines("fn a() {\n    let s = \"x\";\n}\n/* open\ncomment */");
        let mut memo = HighlightMemo::default();
        for n in 1..=code.len() {
            let mut partial = code[..n].to_vec();
            partial.last_mut().unwrap().truncate(2);
            highlight(Some("rust"), &partial, Some(&mut memo));
            let with = highlight(Some("rust"), &code[..n], Some(&mut memo));
            assert_eq!(with, highlight(Some("rust"), &code[..n], None));
        }
    }
}
