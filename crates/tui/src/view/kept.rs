//! The kept view (`/kept`, `tui::kept_view`): the sessions the local store keeps aside, one
//! row each, and one of them read.

use chrono::{DateTime, Utc};
use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{theme, truncate};
use crate::command::Command;
use crate::full_view::{FullView, HelpSection, KeyResult};
use crate::kept_view::{KeptAction, KeptList, KeptState, Reading};
use crate::keys::KeyBindings;
use crate::render::wrap::str_width;
use convo_client::sanitize::sanitize_owned;

impl FullView for KeptState {
    fn key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        _now: DateTime<Utc>,
        out: &mut Vec<Command>,
    ) -> KeyResult {
        let mut actions = Vec::new();
        let result = self.handle_key(keys, key, &mut actions);
        out.extend(actions.into_iter().map(|action| match action {
            KeptAction::Store(request) => Command::Kept(request),
            KeptAction::Export(session_id) => Command::Export {
                session_id,
                path: None,
            },
        }));
        result
    }

    fn paste(&mut self, _text: &str) {}

    fn scroll(&mut self, delta: isize) {
        KeptState::scroll(self, delta);
    }

    fn hints(&self, k: &KeyBindings) -> Vec<(String, &'static str)> {
        if self.confirm_erase {
            return vec![
                (k.confirm.first_label(), "erase"),
                (k.cancel.first_label(), "keep"),
            ];
        }
        let mut out = vec![(k.back.first_label(), "back")];
        if self.reading.is_some() {
            out.push((k.move_up.first_label(), "scroll"));
        } else {
            out.push((k.open_session.first_label(), "read"));
        }
        if self.selected().is_some() {
            out.push(("x".into(), "export"));
            out.push((k.delete_session.first_label(), "erase"));
        }
        out.push(("F1".into(), "help"));
        out
    }

    fn help(keys: &KeyBindings) -> HelpSection {
        (
            "Kept sessions (/kept)".into(),
            vec![
                (keys.open_session.first_label(), "read the session".into()),
                ("↑ ↓ PgUp PgDn".into(), "choose; scroll".into()),
                ("x".into(), "export to a Markdown file".into()),
                (
                    keys.delete_session.first_label(),
                    "erase from this device".into(),
                ),
                (keys.back.first_label(), "back: list, then chat".into()),
            ],
        )
    }

    fn render(&self, keys: &KeyBindings, area: Rect, buf: &mut Buffer) {
        let said = said(self, keys);
        match &self.reading {
            Some(reading) => render_reading(reading, said, area, buf),
            None => render_list(self, said, area, buf),
        }
    }
}

/// The question before an erase, or what the last erase did: said on the line under the
/// title, in place of what that line says otherwise.
fn said(s: &KeptState, keys: &KeyBindings) -> Option<(String, Style)> {
    if s.confirm_erase {
        return s.selected().map(|k| {
            let title = k
                .title
                .as_deref()
                .map_or_else(|| k.id.clone(), sanitize_owned);
            (
                format!(
                    "{} erases “{title}” from this device · {} keeps it",
                    keys.confirm.first_label(),
                    keys.cancel.first_label()
                ),
                theme::warn(),
            )
        });
    }
    s.note.as_ref().map(|(done, text)| {
        let style = if *done {
            theme::success()
        } else {
            theme::error()
        };
        (sanitize_owned(text), style)
    })
}

fn line(area: Rect, y: u16, spans: Vec<Span<'_>>, buf: &mut Buffer) {
    if y < area.bottom() {
        Line::from(spans).render(Rect::new(area.x, y, area.width, 1), buf);
    }
}

/// The view's first two rows, a bold title and a line under it (`said`, else `under` dimmed);
/// the area below them and a blank row, and its width in columns.
fn heading(
    area: Rect,
    title: &str,
    under: &str,
    said: Option<(String, Style)>,
    buf: &mut Buffer,
) -> (Rect, usize) {
    let inner = Rect::new(
        area.x + 1,
        area.y,
        area.width.saturating_sub(2),
        area.height,
    );
    let width = usize::from(inner.width);
    line(
        inner,
        inner.y,
        vec![Span::styled(truncate(title, width), theme::bold())],
        buf,
    );
    line(
        inner,
        inner.y + 1,
        vec![match said {
            Some((text, style)) => Span::styled(truncate(&text, width), style),
            None => Span::styled(truncate(under, width), theme::dim()),
        }],
        buf,
    );
    (inner, width)
}

fn render_list(s: &KeptState, said: Option<(String, Style)>, area: Rect, buf: &mut Buffer) {
    let (inner, width) = heading(
        area,
        "Kept on this device",
        "The server no longer has these sessions: Enter reads one, x exports it.",
        said,
        buf,
    );
    let sessions = match &s.list {
        KeptList::Loading => {
            return line(
                inner,
                inner.y + 3,
                vec![Span::styled("reading the local store…", theme::dim())],
                buf,
            );
        }
        KeptList::Failed(e) => {
            return line(
                inner,
                inner.y + 3,
                vec![Span::styled(
                    truncate(&format!("cannot read the local store: {e}"), width),
                    theme::error(),
                )],
                buf,
            );
        }
        KeptList::Loaded(sessions) if sessions.is_empty() => {
            return line(
                inner,
                inner.y + 3,
                vec![Span::styled(
                    "Nothing is kept aside: every session here is on the server.",
                    theme::dim(),
                )],
                buf,
            );
        }
        KeptList::Loaded(sessions) => sessions,
    };
    let list = Rect::new(
        inner.x,
        inner.y + 3,
        inner.width,
        inner.height.saturating_sub(3),
    );
    let (first, per_page) = super::two_row_page(s.cursor, list.height);
    for (row, (i, session)) in sessions
        .iter()
        .enumerate()
        .skip(first)
        .take(per_page)
        .enumerate()
    {
        let y = list.y + (row as u16) * 2;
        let title = session
            .title
            .as_deref()
            .map_or_else(|| "(untitled)".to_string(), sanitize_owned);
        let tail = format!(
            " · {} · {}",
            session.last_activity.format("%Y-%m-%d %H:%M"),
            convo_client::format::counted(session.tokens, "token")
        );
        let title = truncate(&title, width.saturating_sub(str_width(&tail) + 1));
        line(
            list,
            y,
            vec![
                Span::styled(title, theme::bold()),
                Span::styled(tail, theme::dim()),
            ],
            buf,
        );
        line(
            list,
            y + 1,
            vec![Span::styled(
                truncate(&format!("  {}", sanitize_owned(&session.label)), width),
                theme::dim(),
            )],
            buf,
        );
        if i == s.cursor {
            let rows = if y + 1 < list.bottom() { 2 } else { 1 };
            buf.set_style(Rect::new(list.x, y, list.width, rows), theme::selected());
        }
    }
}

fn render_reading(r: &Reading, said: Option<(String, Style)>, area: Rect, buf: &mut Buffer) {
    let title = r
        .session
        .title
        .as_deref()
        .map_or_else(|| "(untitled)".to_string(), sanitize_owned);
    let (inner, width) = heading(
        area,
        &title,
        &format!(
            "{} · kept in {}",
            r.session.id,
            sanitize_owned(&r.session.label)
        ),
        said,
        buf,
    );
    let body = Rect::new(
        inner.x,
        inner.y + 3,
        inner.width,
        inner.height.saturating_sub(3),
    );
    match &r.transcript {
        None => line(
            body,
            body.y,
            vec![Span::styled("reading the local store…", theme::dim())],
            buf,
        ),
        Some(Err(e)) => line(
            body,
            body.y,
            vec![Span::styled(
                truncate(&format!("cannot read the local store: {e}"), width),
                theme::error(),
            )],
            buf,
        ),
        Some(Ok(transcript)) if body.height > 0 && body.width > 0 => {
            let max = transcript.tail_top(body.width, body.height);
            r.max_top.set(max);
            transcript.render(body, buf, r.top.min(max), None);
        }
        Some(Ok(_)) => {}
    }
}
