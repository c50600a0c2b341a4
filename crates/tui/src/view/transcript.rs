//! The transcript pane: only the visible lines are built, from the per-message cache.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::{theme, truncate};
use crate::app::{App, Connection, Focus, OpenSession, StreamState};
use crate::render::transcript::EntryId;
use convo_client::format;

pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let focused = app.focus() == Focus::Transcript;
    let open = app.session();
    let title = open
        .and_then(|o| app.sessions_pane().get(&o.id))
        .map(|s| s.title.clone())
        .unwrap_or_else(|| "convo".to_string());
    let mut top = vec![Span::styled(
        format!(
            " {} ",
            truncate(&title, area.width.saturating_sub(24) as usize)
        ),
        theme::bold(),
    )];
    if let Some(o) = open
        && matches!(app.connection(), Connection::Connected(_))
    {
        top.push(match &o.stream {
            StreamState::Open => Span::styled("● live ", theme::success()),
            StreamState::Connecting => Span::styled("◌ stream… ", theme::dim()),
            StreamState::Down(_) => Span::styled("○ stream down ", theme::warn()),
            StreamState::Unsupported => Span::styled("plain replies ", theme::dim()),
        });
    }
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(if focused {
            theme::focused_border()
        } else {
            theme::border()
        })
        .title(Line::from(top));
    if let Some(o) = open {
        let follow = (!o.follow).then(|| app.follow_hint());
        let bottom = bottom_title(
            o.context_tokens(),
            o.context_max,
            follow.as_deref(),
            area.width.saturating_sub(2),
        );
        block = block.title_bottom(bottom);
    }
    let mut inner = block.inner(area);
    block.render(area, buf);
    if let Some(search) = app.transcript_pane().search()
        && let Some(bar) = crate::layout::take_search_bar(&mut inner)
    {
        super::search::bar(app, search, bar, buf);
    }
    let Some(o) = open else {
        Paragraph::new(Span::styled("connecting…", theme::dim())).render(inner, buf);
        return;
    };
    if !o.loaded {
        Paragraph::new(Span::styled("loading…", theme::dim())).render(inner, buf);
        return;
    }
    if o.items.is_empty() {
        let k = app.keys();
        let mut lines = vec![
            Line::from(Span::styled("A new session.", theme::bold())),
            Line::from(""),
            Line::from(format!(
                "Type below and press {} to send; {} adds a line.",
                k.send.first_label(),
                k.newline.first_label()
            )),
            Line::from(format!(
                "{} new session · {} switch panes · {} help",
                k.new_session.first_label(),
                k.focus_next.first_label(),
                k.help.typing_label()
            )),
        ];
        if let Some(hint) = app.engine().and_then(|e| e.hint.as_deref()) {
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled(hint.to_string(), theme::warn())));
        }
        Paragraph::new(lines)
            .style(theme::dim())
            .wrap(Wrap { trim: false })
            .render(inner, buf);
        return;
    }
    let top_line = o.effective_top(inner.width, inner.height);
    let selected = o.selected.and_then(|i| o.items.get(i)).map(|i| i.entry);
    // the pane's block styles only its border: its inner cells are as the frame reset them
    o.transcript.render_on_reset(inner, buf, top_line, selected);
    if let Some(search) = app.transcript_pane().search() {
        super::search::highlight(o, search, inner, top_line, buf);
    }
    if let Some(choice) = app.code_choice() {
        number_code_blocks(o, choice.entry, inner, top_line, buf);
    }
}

/// While a code block is being chosen: `[1]`, `[2]`, … at the right end of each block's first
/// line in view, over the code.
fn number_code_blocks(o: &OpenSession, entry: EntryId, inner: Rect, top: usize, buf: &mut Buffer) {
    let shown = top..top + usize::from(inner.height);
    for (i, lines) in o
        .transcript
        .code_block_lines(inner.width, entry)
        .into_iter()
        .enumerate()
    {
        let first = lines.start.max(shown.start);
        if first >= lines.end.min(shown.end) {
            continue;
        }
        let label = format!("[{}]", i + 1);
        let width = label.chars().count() as u16;
        if width > inner.width {
            continue;
        }
        let x = inner.right() - width;
        let y = inner.y + (first - top) as u16;
        buf.set_string(x, y, label, theme::code_label());
    }
}

/// The bottom border: the context gauge and, when the view does not follow the end, how to
/// get back there. The first of these that fits `room` columns: the gauge with its bar and
/// the whole hint; without the bar; the numbers and a short hint; the short hint alone. The
/// hint matters more than the bar: without it, new text below goes unnoticed.
fn bottom_title(used: u64, max: u64, follow: Option<&str>, room: u16) -> Line<'static> {
    let pct = used as f64 * 100.0 / max.max(1) as f64;
    let numbers = format!(
        " {}/{} {:.0}% ",
        format::count(used),
        format::count(max),
        pct
    );
    let label = Span::styled(" context ", theme::dim());
    let bar = Span::styled(super::usage::bar(pct, 10), theme::gauge(pct));
    let numbers = Span::styled(numbers, theme::gauge(pct));
    let Some(key) = follow else {
        return Line::from(vec![label, bar, numbers]);
    };
    let long = Span::styled(format!(" ↓ more below: {key} follows "), theme::hint());
    let short = Span::styled(format!(" ↓ {key} "), theme::hint());
    let candidates = [
        vec![label.clone(), bar, numbers.clone(), long.clone()],
        vec![label, numbers.clone(), long],
        vec![numbers, short.clone()],
    ];
    candidates
        .into_iter()
        .map(Line::from)
        .find(|line| line.width() <= usize::from(room))
        .unwrap_or_else(|| Line::from(short))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &Line<'_>) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn the_follow_hint_is_never_cut_off() {
        // Wide: everything.
        let wide = bottom_title(8_200, 8_192, Some("End"), 100);
        assert!(text(&wide).contains("━━") && text(&wide).contains("↓ more below: End follows"));
        // 80 columns with the sessions pane: the bar gives way to the hint.
        let mid = bottom_title(8_200, 8_192, Some("End"), 54);
        assert_eq!(
            text(&mid),
            " context  8.2k/8.2k 100%  ↓ more below: End follows "
        );
        let narrow = bottom_title(8_200, 8_192, Some("End"), 30);
        assert_eq!(text(&narrow), " 8.2k/8.2k 100%  ↓ End ");
        assert_eq!(text(&bottom_title(1, 2, Some("End"), 10)), " ↓ End ");
        for room in 0..120 {
            let line = bottom_title(8_200, 8_192, Some("End"), room);
            assert!(text(&line).contains("↓"), "{room}");
            assert!(
                line.width() <= usize::from(room).max(7),
                "{room}: {}",
                text(&line)
            );
        }
        // Following the end: the gauge alone.
        assert!(!text(&bottom_title(10, 8_192, None, 40)).contains('↓'));
    }
}
