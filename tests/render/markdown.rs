//! Markdown rendering: widths, bounded cost on hostile input, sanitising.
use convo_tui::render::markdown::{Document, render_markdown};
use proptest::prelude::*;
use ratatui::text::Line;

use crate::generate;

fn text(lines: &[Line<'_>]) -> Vec<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(128)))]

    /// Every line fits, and the line count without building lines is the number built.
    #[test]
    fn lines_fit_and_heights_agree(md in generate::message(), width in 20u16..=200) {
        let doc = Document::parse(&md);
        let lines = doc.lines(width);
        prop_assert_eq!(lines.len(), doc.height(width));
        for line in &lines {
            prop_assert!(line.width() <= usize::from(width), "{:?} wider than {}", line, width);
            for span in &line.spans {
                prop_assert!(!span.content.chars().any(|c| c.is_control()), "{:?}", span);
            }
        }
    }
}

#[test]
fn escape_sequences_never_reach_the_lines() {
    let lines = render_markdown("# \x1b[2JTitle\u{202e}\n\n```\n\x1b]0;x\x07code\n```", 40);
    assert_eq!(text(&lines), ["# Title", "", "▎ code"]);
}

#[test]
fn ten_thousand_levels_of_nesting() {
    for md in [
        ">".repeat(10_000) + " deep",
        "- ".repeat(10_000) + "deep",
        "1. ".repeat(10_000) + "deep",
        "> - ".repeat(5_000) + "deep",
        (0..10_000).map(|_| ">").collect::<Vec<_>>().join("\n") + "\n\ndeep",
    ] {
        let doc = Document::parse(&md);
        for width in [20, 80] {
            let lines = doc.lines(width);
            assert_eq!(lines.len(), doc.height(width));
            assert!(lines.iter().all(|l| l.width() <= usize::from(width)));
            assert!(text(&lines).concat().contains("deep"));
        }
    }
}

#[test]
fn one_megabyte_lines() {
    let word = "x".repeat(1 << 20);
    let prose = "word ".repeat(1 << 18);
    let wide = "語".repeat(1 << 18);
    for md in [
        word.clone(),
        prose,
        wide.clone(),
        format!("```rust\n{word}\n```"),
        format!("```\n{wide}\n```"),
        format!("| {word} |\n|---|\n| x |"),
    ] {
        let doc = Document::parse(&md);
        let lines = doc.lines(120);
        assert_eq!(lines.len(), doc.height(120));
        assert!(lines.len() > 1000);
    }
}

#[test]
fn code_lines_break_with_a_marker() {
    let lines = render_markdown("```\n0123456789abcdefghij\n```", 12);
    assert_eq!(text(&lines), ["▎ 012345678↩", "▎ 9abcdefgh↩", "▎ ij"]);
}

#[test]
fn nested_lists_hang() {
    let md =
        "1. first item that wraps\n2. second\n   - inner one\n   - inner two\n\n     continued";
    assert_eq!(
        text(&render_markdown(md, 20)),
        [
            "1. first item that",
            "   wraps",
            "2. second",
            "   • inner one",
            "",
            "   • inner two",
            "",
            "     continued",
        ]
    );
}
