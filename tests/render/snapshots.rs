//! Snapshots of rendered samples drawn through a `TestBackend`.
use convo_tui::render::transcript::{Entry, EntryState, Transcript, TranscriptView};
use convo_wire::types::Role;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

fn draw(t: &Transcript, width: u16, height: u16, top: usize) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal
        .draw(|frame| {
            frame.render_widget(TranscriptView::new(t).top(top), frame.area());
        })
        .expect("draw");
    terminal
}

fn sample() -> Transcript {
    let mut t = Transcript::new();
    for (i, part) in include_str!("sample.md").split("\n\n\n").enumerate() {
        let role = if i % 2 == 0 {
            Role::Assistant
        } else {
            Role::User
        };
        t.push(Entry::new(role, part, format!("{role} · 12:0{i}")));
    }
    t
}

#[test]
fn sample_at_60_columns() {
    let t = sample();
    let height = t.height(60) as u16;
    insta::assert_snapshot!(draw(&t, 60, height, 0).backend());
}

#[test]
fn sample_at_32_columns_scrolled() {
    let t = sample();
    insta::assert_snapshot!(draw(&t, 32, 30, 10).backend());
}

#[test]
fn entry_states_on_the_header() {
    let mut t = Transcript::new();
    t.push(Entry::new(Role::User, "Explain `ls -la`.", "user · 12:00"));
    let streaming = t.push(Entry::streaming(Role::Assistant, "assistant · 12:00"));
    t.append_delta(streaming, "It lists **all** files");
    let interrupted = t.push(Entry::new(Role::Assistant, "Partial", "assistant · 12:01"));
    t.set_state(interrupted, EntryState::Interrupted);
    let failed = t.push(Entry::new(Role::Assistant, "", "assistant · 12:02"));
    t.set_state(
        failed,
        EntryState::Failed("context_overflow: 9001 / 8192 tokens".into()),
    );
    t.push(Entry::new(Role::System, "Be terse.", "system · 12:03"));
    insta::assert_snapshot!(draw(&t, 70, 14, 0).backend());
}

/// Styles too: the colour roles of a small sample, cell by cell.
#[test]
fn styles_of_a_small_sample() {
    let mut t = Transcript::new();
    let id = t.push(Entry::new(
        Role::Assistant,
        "## Hi\n\n**b** *i* `c` [l](u)\n\n> q\n\n```rust\nlet x = 1;\n```",
        "assistant · 12:00",
    ));
    let area = Rect::new(0, 0, 24, t.height(24) as u16);
    let mut buf = Buffer::empty(area);
    t.render(area, &mut buf, 0, Some(id));
    insta::assert_debug_snapshot!(buf);
}

/// A table wider than the pane: its columns shrink to the width and the cells wrap in them;
/// the paragraph after it wraps as prose.
fn wide_table() -> Transcript {
    let mut t = Transcript::new();
    t.push(Entry::new(
        Role::Assistant,
        "| command | what it does | docs |\n\
         |:--------|:------------:|-----:|\n\
         | `convo serve` | runs the local service alone, with its own database and API keys | https://example.com/docs/service#serve |\n\
         | `convo usage` | prints the plan's usage | |\n\
         | `convo 東京` | 日本語のセルも幅で数えます | — |\n\
         \n\
         See https://example.com/docs/a/very/long/path/that/does/not/fit/on/one/line/at/all for more.",
        "assistant · 12:00",
    ));
    t
}

#[test]
fn a_wide_table_at_40_columns() {
    let t = wide_table();
    let height = t.height(40) as u16;
    insta::assert_snapshot!(draw(&t, 40, height, 0).backend());
}

#[test]
fn a_wide_table_at_80_columns() {
    let t = wide_table();
    let height = t.height(80) as u16;
    insta::assert_snapshot!(draw(&t, 80, height, 0).backend());
}
