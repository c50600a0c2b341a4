//! Proptest strategies for markdown histories: prose with inline markup and hostile bytes,
//! headings, nested lists, quotes, fenced code, tables, rules, reference links.
use proptest::prelude::*;

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z]{1,10}",
        1 => "[A-Za-z0-9]{11,40}",
        1 => "[a-z]{60,150}",
        1 => prop::sample::select(vec![
            "日本語", "👩‍💻", "café", "ﾃﾞｽﾄ", "e\u{301}", "x\u{200d}y", "a\u{a0}b", "한국어",
        ])
        .prop_map(str::to_owned),
        1 => prop::sample::select(vec![
            "`code span`", "**bold**", "*it*", "~~gone~~", "_under_", "***both***",
            "[link](https://example.com/x)", "<https://a.b/c>", "![img](i.png)", "[ref][r]",
            "\\", "<b>", "&amp;", "*", "`", "[", "]",
        ])
        .prop_map(str::to_owned),
        1 => prop::sample::select(vec![
            "\x1b[31m", "\x1b]0;t\x07", "\x1b]8;;u", "\t", "\u{202e}", "\r\n", "\r", "\u{9b}1m",
            "\u{200b}", "\x00",
        ])
        .prop_map(str::to_owned),
    ]
}

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(word(), 1..10).prop_map(|w| w.join(" "))
}

fn code_line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[ -~]{0,60}",
        1 => "[ -~]{100,200}",
        1 => Just("    let s = \"日本語\"; // 👩‍💻".to_owned()),
        1 => Just("\tindented\twith tabs".to_owned()),
    ]
}

fn block() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::collection::vec(line(), 1..4).prop_map(|l| l.join("\n")),
        1 => (1usize..=6, line()).prop_map(|(n, l)| format!("{} {l}", "#".repeat(n))),
        2 => (any::<bool>(), prop::collection::vec((0usize..3, line()), 1..6)).prop_map(
            |(ordered, items)| {
                let mut depth = 0;
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, (want, l))| {
                        depth = want.min(depth + 1);
                        let marker = if ordered { format!("{}.", i + 1) } else { "-".into() };
                        format!("{}{marker} {l}", "   ".repeat(depth))
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        ),
        1 => (1usize..4, prop::collection::vec(line(), 1..3))
            .prop_map(|(d, l)| l.iter().map(|l| format!("{} {l}", ">".repeat(d))).collect::<Vec<_>>().join("\n")),
        2 => (
            prop::sample::select(vec!["rust", "python", "", "nosuchlang", "json"]),
            prop::collection::vec(code_line(), 0..6),
            any::<bool>(),
        )
            .prop_map(|(lang, lines, closed)| {
                let mut s = format!("```{lang}\n{}", lines.join("\n"));
                if closed {
                    s.push_str("\n```");
                }
                s
            }),
        1 => prop::collection::vec(prop::collection::vec("[a-z]{0,8}", 2..4), 1..4).prop_map(|rows| {
            let cols = rows[0].len();
            let mut s = format!("| {} |\n|{}|", rows[0].join(" | "), vec!["---"; cols].join("|"));
            for r in &rows[1..] {
                s.push_str(&format!("\n| {} |", r.join(" | ")));
            }
            s
        }),
        1 => prop::sample::select(vec![
            "---", "***", "    indented code\n    more", "<div>\nhtml block\n</div>",
            "[r]: https://ref.example", "> - quoted\n>   - list", "- [ ] task\n- [x] done",
            "Setext\n===", "1) paren\n2) list", "- a\n\n  continued", "- \n-",
        ])
        .prop_map(str::to_owned),
    ]
}

/// A markdown message: a few blocks, separated by blank lines or just a newline.
pub fn message() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (block(), prop::sample::select(vec!["\n\n", "\n", "\n\n\n"])),
        0..6,
    )
    .prop_map(|blocks| blocks.into_iter().map(|(b, sep)| b + sep).collect())
}
