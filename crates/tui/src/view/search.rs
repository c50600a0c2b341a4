//! Search: the search bar under the transcript with its matches highlighted in the text,
//! and the hits list of a search across sessions.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};

use super::{centered, theme, truncate};
use crate::app::{App, OpenSession};
use crate::render::wrap::str_width;
use crate::search::{HitsState, SessionSearch, TranscriptSearch};

/// The search bar: the query (with a cursor while typing), `match I/N` and the keys.
pub fn bar(app: &App, search: &TranscriptSearch, area: Rect, buf: &mut Buffer) {
    let k = app.keys();
    let status = search.status();
    let status_style = match status.as_deref() {
        Some("no match") => theme::warn(),
        _ => theme::hint(),
    };
    let keys = if search.editing {
        format!(
            " {} next · {} close ",
            k.search_next.typing_label(),
            k.back.first_label()
        )
    } else {
        format!(
            " {} next · {} previous · {} close ",
            k.search_next.label(),
            k.search_prev.first_label(),
            k.back.first_label()
        )
    };
    let status = status.map(|s| format!(" {s} ")).unwrap_or_default();
    let width = usize::from(area.width);
    let fixed = 2 + str_width(&status) + 1;
    let keys = if fixed + str_width(&keys) + 6 <= width {
        keys
    } else {
        String::new()
    };
    let room = width.saturating_sub(fixed + str_width(&keys));
    // A long query scrolls so that its cursor (its end, after Enter) stays in view.
    let mut spans = vec![Span::styled("/ ", theme::hint())];
    if search.editing {
        spans.extend(
            search
                .query
                .spans(room + 1, true, theme::bold(), theme::hint()),
        );
    } else {
        spans.extend(
            search
                .query
                .spans(room, false, theme::bold(), theme::hint()),
        );
        spans.push(Span::raw(" "));
    }
    let used: usize = spans.iter().map(Span::width).sum();
    let pad = width.saturating_sub(used + str_width(&status) + str_width(&keys));
    spans.push(Span::raw(" ".repeat(pad)));
    spans.push(Span::styled(status, status_style));
    spans.push(Span::styled(keys, theme::dim()));
    Line::from(spans).render(area, buf);
}

/// Colours the matches on the transcript rows drawn in `area` from line `top`; the current
/// one stands out.
pub fn highlight(
    open: &OpenSession,
    search: &TranscriptSearch,
    area: Rect,
    top: usize,
    buf: &mut Buffer,
) {
    if search.matches.is_empty() {
        return;
    }
    let width = area.width;
    for row in 0..area.height {
        let line = top + usize::from(row);
        let Some(entry) = open.transcript.entry_at_line(width, line) else {
            break;
        };
        let start = open.transcript.line_range_of(width, entry).start;
        let Some(body_line) = line.checked_sub(start + 1) else {
            continue;
        };
        for (m, current) in search.on_line(entry, body_line) {
            let from = m.start.min(width);
            let to = m.end.min(width);
            if from >= to {
                continue;
            }
            let cells = Rect::new(area.x + from, area.y + row, to - from, 1);
            buf.set_style(
                cells,
                if current {
                    theme::search_current()
                } else {
                    theme::search_match()
                },
            );
        }
    }
}

/// What the hits list says of the sessions it could not search (written on another device,
/// no message of theirs here), and of reading them (`tab`: the key that does).
fn unsearched_note(hits: &SessionSearch, tab: &str) -> Option<String> {
    let sessions = |n: usize| convo_client::format::counted(n as u64, "session");
    if hits.reading > 0 {
        return Some(format!(
            "reading {} from other devices…",
            sessions(hits.reading)
        ));
    }
    match hits.unsearched.len() {
        0 => None,
        n => Some(format!(
            "{} from other devices not searched: {tab} reads {}",
            sessions(n),
            if n == 1 { "it" } else { "them" }
        )),
    }
}

/// The hits list: the text searched, then per hit a line with the session, the time and
/// the role, and a line with the snippet (the matched words marked).
pub fn hits(app: &App, hits: &SessionSearch, screen: Rect, buf: &mut Buffer) {
    let k = app.keys();
    let area = centered(
        screen,
        screen.width.saturating_sub(4).min(110),
        screen.height.saturating_sub(2),
    );
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme::focused_border())
        .title(Line::from(Span::styled(
            " Search all sessions ",
            theme::bold(),
        )))
        .title_bottom(Line::from(Span::styled(
            format!(
                " {}/{} select · {} open · {} close ",
                k.move_up.first_label(),
                k.move_down.first_label(),
                k.open_session.first_label(),
                k.back.first_label()
            ),
            theme::dim(),
        )));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height < 3 {
        return;
    }
    let width = usize::from(inner.width);
    let mut query = vec![Span::styled("› ", theme::hint())];
    query.extend(
        hits.query
            .spans(width.saturating_sub(2), true, theme::bold(), theme::hint()),
    );
    Line::from(query).render(Rect::new(inner.x, inner.y, inner.width, 1), buf);
    let (summary, style) = match &hits.state {
        HitsState::Empty => ("type words to search for".to_string(), theme::dim()),
        HitsState::Searching if hits.hits.is_empty() => ("searching…".to_string(), theme::dim()),
        HitsState::Searching | HitsState::Done => match hits.hits.len() {
            0 => ("no matches".to_string(), theme::warn()),
            n => (
                convo_client::format::counted(n as u64, "message"),
                theme::dim(),
            ),
        },
        HitsState::Failed(e) => (format!("search failed: {e}"), theme::error()),
    };
    let mut line = vec![Span::styled(truncate(&summary, width), style)];
    if let Some(note) = unsearched_note(hits, &k.focus_next.first_label()) {
        let room = width.saturating_sub(str_width(&summary) + 3);
        line.push(Span::styled(" · ", theme::dim()));
        line.push(Span::styled(truncate(&note, room), theme::hint()));
    }
    Line::from(line).render(Rect::new(inner.x, inner.y + 1, inner.width, 1), buf);
    let list = Rect::new(inner.x, inner.y + 2, inner.width, inner.height - 2);
    let (first, per_page) = super::two_row_page(hits.cursor, list.height);
    for (row, (i, hit)) in hits
        .hits
        .iter()
        .enumerate()
        .skip(first)
        .take(per_page)
        .enumerate()
    {
        let y = list.y + (row as u16) * 2;
        if y >= list.bottom() {
            break;
        }
        let title = hit.session_title.as_deref().unwrap_or("(untitled)");
        let when = hit.created_at.format("%Y-%m-%d %H:%M").to_string();
        let tail = format!(" · {when} · {}", hit.role.as_str());
        let title = truncate(title, width.saturating_sub(str_width(&tail) + 1));
        Line::from(vec![
            Span::styled(title, theme::bold()),
            Span::styled(tail, theme::dim()),
        ])
        .render(Rect::new(list.x, y, list.width, 1), buf);
        if y + 1 < list.bottom() {
            let mut spans = vec![Span::raw("  ")];
            let mut left = width.saturating_sub(2);
            for part in &hit.snippet {
                if left == 0 {
                    break;
                }
                let text = truncate(&part.text, left);
                left = left.saturating_sub(str_width(&text));
                spans.push(if part.matched {
                    Span::styled(text, theme::search_match())
                } else {
                    Span::raw(text)
                });
            }
            Line::from(spans).render(Rect::new(list.x, y + 1, list.width, 1), buf);
        }
        if i == hits.cursor {
            let rows = if y + 1 < list.bottom() { 2 } else { 1 };
            buf.set_style(Rect::new(list.x, y, list.width, rows), theme::selected());
        }
    }
}
