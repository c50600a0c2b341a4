//! The metrics view (F2): range and granularity selectors, the totals of the range, and
//! charts (or a table) of messages, tokens and active sessions per bucket.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Bar, BarChart, BarGroup, Cell, Paragraph, Row, StatefulWidget, Table, TableState, Widget,
};

use super::{theme, truncate};
use chrono::{DateTime, Datelike, Utc};
use crossterm::event::KeyEvent;

use crate::command::Command;
use crate::full_view::{FullView, HelpSection, KeyResult};
use crate::keys::KeyBindings;
use crate::metrics::{
    CUSTOM_SLOT, Load, MetricsState, RangeChoice, Section, Series, Slot, areas, first_visible, fit,
    pad,
};
use convo_client::api::{Granularity, Metrics};
use convo_client::format::{counted, group_digits, human_duration};
use convo_client::series::buckets::{self, RangePreset, bucket_label};

/// Bars of the charts; the selected bucket is drawn in the focus colour.
fn bar_style() -> Style {
    Style::default().fg(Color::Blue)
}

/// A bucket start under the x axis.
fn axis_label(t: chrono::DateTime<chrono::Utc>, g: Granularity) -> String {
    match g {
        Granularity::Hour => t.format("%a %H:%M").to_string(),
        Granularity::Day => t.format("%a %d %b").to_string(),
        Granularity::Week => format!("W{:02} {}", t.iso_week().week(), t.format("%d %b")),
        Granularity::Month => t.format("%b %Y").to_string(),
    }
}

impl FullView for MetricsState {
    fn key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<Command>,
    ) -> KeyResult {
        let mut reqs = Vec::new();
        let result = self.handle_key(keys, key, now, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Metrics));
        result
    }

    fn paste(&mut self, text: &str) {
        MetricsState::paste(self, text);
    }

    fn scroll(&mut self, delta: isize) {
        MetricsState::scroll(self, delta);
    }

    fn hints(&self, keys: &KeyBindings) -> Vec<(String, &'static str)> {
        hints(self, keys)
    }

    fn help(keys: &KeyBindings) -> HelpSection {
        (
            format!("Metrics view ({})", keys.metrics_view.first_label()),
            vec![
                ("1 2 3 4".into(), "last 24h / 7d / 30d / 90d".into()),
                ("← →".into(), "range, granularity, bucket".into()),
                (keys.focus_next.first_label(), "next section".into()),
                ("Enter".into(), "load the range (custom: type it)".into()),
                (keys.refresh.first_label(), "reload (fresh clock)".into()),
                (keys.stop_or_quit.first_label(), "cancel loading".into()),
                (keys.back.first_label(), "back to the chat".into()),
            ],
        )
    }

    fn render(&self, keys: &KeyBindings, area: Rect, buf: &mut Buffer) {
        render(self, keys, area, buf);
    }
}

/// Key hints for the status bar while the view is shown.
fn hints(s: &MetricsState, k: &KeyBindings) -> Vec<(String, &'static str)> {
    if s.custom.editing {
        return vec![
            ("Enter".into(), "apply"),
            ("Esc".into(), "cancel"),
            (k.focus_next.first_label(), "next"),
        ];
    }
    if s.asking.is_some() {
        return vec![
            ("Enter".into(), "load"),
            (k.back.first_label(), "keep the chart"),
        ];
    }
    let mut out = vec![(k.back.first_label(), "back")];
    if s.is_loading() {
        out.push((k.stop_or_quit.first_label(), "cancel"));
    }
    out.push((k.focus_next.first_label(), "section"));
    out.push(match s.section {
        Section::Range | Section::Granularity => ("←→".to_string(), "choose"),
        Section::Charts => ("←→".to_string(), "bucket"),
        Section::Table => (k.move_up.first_label(), "row"),
    });
    out.push((k.refresh.first_label(), "refresh"));
    out.push(("1-4".into(), "range"));
    out.push((k.help.first_label(), "help"));
    out
}

fn render(s: &MetricsState, keys: &KeyBindings, area: Rect, buf: &mut Buffer) {
    let [title, controls, info, totals, tabs, body, detail] = areas(area);
    render_title(s, title, buf);
    render_controls(s, controls, buf);
    render_info(s, info, buf);
    match &s.current {
        Some(load) => {
            render_totals(load, totals, buf);
            render_tabs(s, keys, load, tabs, buf);
            if s.section == Section::Table {
                render_table(s, load, body, buf);
            } else {
                render_charts(s, load, body, buf);
            }
            render_detail(s, load, detail, buf);
        }
        None => {
            render_tabs_bare(s, tabs, buf);
            let text = match &s.problem {
                Some(_) => vec![
                    Line::from(Span::styled(
                        "Nothing to chart for this choice.",
                        theme::error(),
                    )),
                    Line::from(Span::styled(
                        format!(
                            "Choose a coarser granularity ({} then ←→) or a shorter range (1-4).",
                            keys.focus_next.first_label()
                        ),
                        theme::dim(),
                    )),
                ],
                None => vec![Line::from(Span::styled(
                    format!(
                        "Nothing loaded yet: press {} to load.",
                        keys.refresh.first_label()
                    ),
                    theme::dim(),
                ))],
            };
            Paragraph::new(text)
                .wrap(ratatui::widgets::Wrap { trim: true })
                .render(pad(body), buf);
        }
    }
}

fn render_title(s: &MetricsState, area: Rect, buf: &mut Buffer) {
    let range = match &s.current {
        Some(l) => buckets::describe_span(l.range.start, l.range.end),
        None => s.range.describe(),
    };
    // While a costly load waits for a yes, the title names the chart still shown.
    let (choice, granularity) = match (&s.asking, &s.current) {
        (Some(_), Some(l)) => (l.key.range, l.key.granularity),
        _ => (s.range, s.granularity),
    };
    let what = format!(" Metrics · {} by {} ", choice.describe(), granularity);
    let mut spans = vec![Span::styled(
        what.clone(),
        theme::bold().add_modifier(Modifier::REVERSED),
    )];
    let room = (area.width as usize).saturating_sub(what.chars().count() + 1);
    if s.current.is_some() {
        spans.push(Span::styled(
            format!(" {}", truncate(&range, room)),
            theme::dim(),
        ));
    }
    Line::from(spans).render(area, buf);
}

fn choice<'a>(label: &'a str, chosen: bool, cursor: bool, focused: bool) -> Span<'a> {
    let mut style = Style::default();
    if chosen {
        style = style.add_modifier(Modifier::REVERSED);
        if focused {
            style = style.fg(Color::Cyan);
        }
    } else if cursor && focused {
        style = theme::hint().add_modifier(Modifier::UNDERLINED);
    }
    Span::styled(format!(" {label} "), style)
}

fn section_label(label: &str, focused: bool) -> Span<'_> {
    if focused {
        Span::styled(
            format!(" {label} "),
            theme::hint().add_modifier(Modifier::BOLD),
        )
    } else {
        Span::styled(format!(" {label} "), theme::dim())
    }
}

fn render_controls(s: &MetricsState, area: Rect, buf: &mut Buffer) {
    let range_focus = s.section == Section::Range;
    let mut range = vec![section_label("Range", range_focus)];
    for (i, p) in RangePreset::ALL.iter().enumerate() {
        let chosen = s.range == RangeChoice::Preset(*p);
        range.push(choice(p.label(), chosen, s.range_cursor == i, range_focus));
    }
    let custom_chosen = matches!(s.range, RangeChoice::Custom(_));
    range.push(choice(
        "custom",
        custom_chosen,
        s.range_cursor == CUSTOM_SLOT,
        range_focus,
    ));
    let g_focus = s.section == Section::Granularity;
    let mut by = vec![section_label("By", g_focus)];
    for g in [
        Granularity::Hour,
        Granularity::Day,
        Granularity::Week,
        Granularity::Month,
    ] {
        by.push(choice(g.as_str(), s.granularity == g, false, g_focus));
    }
    let width = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
    let spans = if width(&range) + 2 + width(&by) <= area.width as usize {
        range.push(Span::raw("  "));
        range.extend(by);
        range
    } else if g_focus {
        // Too narrow for both: the focused selector (the title names both choices).
        by
    } else {
        range
    };
    Line::from(spans).render(area, buf);
}

fn render_info(s: &MetricsState, area: Rect, buf: &mut Buffer) {
    let width = area.width as usize;
    let line = if s.custom.editing {
        let mut spans = vec![Span::styled(" custom › ", theme::hint())];
        spans.extend(s.custom.text.spans(
            width.saturating_sub(10),
            true,
            Style::default(),
            theme::hint(),
        ));
        let used: usize = spans.iter().map(Span::width).sum();
        let room = width.saturating_sub(used + 2);
        match &s.custom.error {
            Some(e) => spans.push(Span::styled(
                format!("  ✗ {}", truncate(e, room.saturating_sub(3))),
                theme::error(),
            )),
            None => spans.push(Span::styled(
                truncate("  ✓ Enter applies", room),
                theme::success(),
            )),
        }
        Line::from(spans)
    } else if let Some(q) = &s.asking {
        Line::from(vec![
            Span::styled(format!(" {}: ", q.describe()), theme::warn()),
            Span::styled("Enter loads, Esc keeps this chart", theme::hint()),
        ])
    } else if let Some(p) = &s.problem {
        Line::from(Span::styled(
            format!(" ✗ {}", truncate(p, width.saturating_sub(3))),
            theme::error(),
        ))
    } else if let Some(n) = &s.note {
        Line::from(Span::styled(
            format!(" {}", truncate(n, width.saturating_sub(1))),
            theme::warn(),
        ))
    } else if s.section == Section::Range
        && s.range_cursor < CUSTOM_SLOT
        && s.range != RangeChoice::Preset(RangePreset::ALL[s.range_cursor])
    {
        Line::from(Span::styled(
            format!(
                " Enter loads {} (nothing is asked of the service before)",
                RangePreset::ALL[s.range_cursor].describe()
            ),
            theme::hint(),
        ))
    } else if s.range_cursor == CUSTOM_SLOT && s.section == Section::Range {
        Line::from(Span::styled(
            " Enter: type a range like 2026-11-01..2026-11-22 (UTC, end exclusive)",
            theme::dim(),
        ))
    } else {
        Line::from(Span::styled(
            truncate(
                " Totals of the range, then one query per bucket shown · weeks start Monday · UTC",
                width,
            ),
            theme::dim(),
        ))
    };
    line.render(area, buf);
}

fn render_totals(load: &Load, area: Rect, buf: &mut Buffer) {
    let name = |n: &'static str| Span::styled(format!(" {n:<9}"), theme::bold());
    let lines: Vec<Line> = match &load.totals {
        Slot::Loaded(m) | Slot::Kept(m) => totals_lines(m)
            .into_iter()
            .map(|(n, v)| Line::from(vec![name(n), Span::raw(v)]))
            .collect(),
        Slot::Pending | Slot::NotAsked => ["Sessions", "Messages", "Tokens"]
            .into_iter()
            .map(|n| Line::from(vec![name(n), Span::styled("…", theme::dim())]))
            .collect(),
        Slot::Failed(e) => vec![Line::from(Span::styled(
            format!(" ✗ totals failed: {e}"),
            theme::error(),
        ))],
        Slot::Cancelled => vec![Line::from(Span::styled(" totals: cancelled", theme::dim()))],
    };
    Paragraph::new(lines).render(area, buf);
}

/// The totals of a range as (name, text) rows: what the view and `convo metrics` show.
pub fn totals_lines(m: &Metrics) -> [(&'static str, String); 3] {
    [
        (
            "Sessions",
            format!(
                "{} total · {} active · {} average duration",
                group_digits(m.sessions.total),
                group_digits(m.sessions.active),
                human_duration(m.sessions.average_duration)
            ),
        ),
        (
            "Messages",
            format!(
                "{} total · {:.1} per session · {} user · {} assistant",
                group_digits(m.messages.total),
                m.messages.average_per_session,
                group_digits(m.messages.user_messages),
                group_digits(m.messages.assistant_messages)
            ),
        ),
        (
            "Tokens",
            format!(
                "{} total · {} prompt · {} completion · {:.1} per message",
                group_digits(m.tokens.total),
                group_digits(m.tokens.prompt),
                group_digits(m.tokens.completion),
                m.tokens.average_per_message
            ),
        ),
    ]
}

fn tab_spans(s: &MetricsState) -> Vec<Span<'static>> {
    let tab = |label: &'static str, on: bool, focused: bool| {
        let style = if on && focused {
            theme::hint().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else if on {
            theme::bold().add_modifier(Modifier::UNDERLINED)
        } else {
            theme::dim()
        };
        Span::styled(label, style)
    };
    let table = s.section == Section::Table;
    let focused = matches!(s.section, Section::Charts | Section::Table);
    vec![
        Span::raw(" "),
        tab("Charts", !table, focused),
        Span::styled(" │ ", theme::dim()),
        tab("Table", table, focused),
        Span::raw("  "),
    ]
}

fn render_tabs_bare(s: &MetricsState, area: Rect, buf: &mut Buffer) {
    Line::from(tab_spans(s)).render(area, buf);
}

fn render_tabs(s: &MetricsState, keys: &KeyBindings, load: &Load, area: Rect, buf: &mut Buffer) {
    let mut spans = tab_spans(s);
    let used: usize = spans.iter().map(|s| s.width()).sum();
    let room = (area.width as usize).saturating_sub(used);
    let answered = load.answered();
    let total = load.total_queries();
    let status: Vec<Span> = if load.is_loading() {
        let bar_w = 10.min(room.saturating_sub(30));
        let filled = (answered * bar_w).checked_div(total).unwrap_or(0);
        vec![
            Span::styled(format!("loading {answered}/{total} "), theme::warn()),
            Span::styled("▰".repeat(filled), theme::warn()),
            Span::styled("▱".repeat(bar_w - filled), theme::dim()),
            Span::styled(
                format!(" {} cancels", keys.stop_or_quit.first_label()),
                theme::dim(),
            ),
        ]
    } else if load.was_cancelled() {
        vec![Span::styled(
            format!(
                "cancelled at {answered}/{total} · {} reloads",
                keys.refresh.first_label()
            ),
            theme::warn(),
        )]
    } else if load.failed_buckets() > 0 {
        let n = load.failed_buckets();
        vec![Span::styled(
            format!(
                "{} failed · {} retries",
                counted(n as u64, "bucket"),
                keys.refresh.first_label()
            ),
            theme::error(),
        )]
    } else {
        let kept = match load.kept() {
            0 => String::new(),
            n => format!(" · {n} kept"),
        };
        vec![Span::styled(
            format!(
                "{total} quer{}{kept} · as of {}",
                if total == 1 { "y" } else { "ies" },
                load.range.end.format("%H:%M UTC")
            ),
            theme::dim(),
        )]
    };
    let status_w: usize = status.iter().map(|s| s.width()).sum();
    if status_w <= room {
        spans.push(Span::raw(" ".repeat(room - status_w)));
        spans.extend(status);
    }
    Line::from(spans).render(area, buf);
}

fn render_charts(s: &MetricsState, load: &Load, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    let inner = pad(area);
    let n = load.buckets.len();
    let empty = !load.is_loading()
        && load.failed_buckets() == 0
        && !load.was_cancelled()
        && Series::ALL.iter().all(|series| load.max(*series) == 0);
    let (bar_w, gap, visible) = fit(n, inner.width);
    let first = first_visible(s.cursor, visible, n);
    let shown = &load.buckets[first..(first + visible).min(n)];
    // An axis row under the charts when there is room for it.
    let (inner, axis) = if inner.height >= 13 {
        let [charts, axis] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
        (charts, Some(axis))
    } else {
        (inner, None)
    };
    if let (Some(axis), Some((b0, _)), Some((b1, _))) = (axis, shown.first(), shown.last()) {
        let left = axis_label(b0.start, s.granularity);
        let right = axis_label(b1.start, s.granularity);
        let span_w = (shown.len() * (bar_w + gap) as usize).saturating_sub(gap as usize);
        let pad = span_w.saturating_sub(left.chars().count() + right.chars().count());
        let text = if pad >= 2 && shown.len() > 1 {
            format!("{left}{}{right}", " ".repeat(pad))
        } else {
            left
        };
        Line::from(Span::styled(
            truncate(&text, axis.width as usize),
            theme::dim(),
        ))
        .render(axis, buf);
    }
    let chart_areas = Layout::vertical([Constraint::Fill(1); 3]).split(inner);
    for (series, chart_area) in Series::ALL.iter().zip(chart_areas.iter()) {
        let [head, bars_area] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(*chart_area);
        let sum: u64 = load
            .buckets
            .iter()
            .filter_map(|(_, slot)| slot.metrics().map(|m| series.value(m)))
            .sum();
        let max = load.max(*series);
        // Buckets never on screen were not asked for: the sum says what it covers.
        let covers = match load.has_unasked() {
            true => format!(
                " ({} loaded)",
                load.buckets
                    .iter()
                    .filter(|(_, s)| s.metrics().is_some())
                    .count()
            ),
            false => String::new(),
        };
        let mut head_spans = vec![
            Span::styled(
                format!("{} per {}", series.title(), s.granularity),
                theme::bold(),
            ),
            Span::styled(
                format!(
                    " · peak {} · sum {}{covers}",
                    group_digits(max),
                    group_digits(sum)
                ),
                theme::dim(),
            ),
        ];
        if n > visible {
            head_spans.push(Span::styled(
                format!(" · {}–{} of {n}", first + 1, first + shown.len()),
                theme::dim(),
            ));
        }
        Line::from(head_spans).render(head, buf);
        if bars_area.height == 0 {
            continue;
        }
        let bars: Vec<Bar> = shown
            .iter()
            .enumerate()
            .map(|(i, (_, slot))| {
                let selected = first + i == s.cursor;
                let (value, mark, mark_style) = match slot {
                    Slot::Loaded(m) | Slot::Kept(m) => (
                        series.value(m),
                        if selected { "▲" } else { " " },
                        theme::hint(),
                    ),
                    Slot::Pending => (0, "·", theme::dim()),
                    Slot::NotAsked => (0, " ", theme::dim()),
                    Slot::Failed(_) => (0, "✗", theme::error()),
                    Slot::Cancelled => (0, "-", theme::dim()),
                };
                let mark_style = if selected {
                    mark_style.add_modifier(Modifier::REVERSED)
                } else {
                    mark_style
                };
                let mark = if selected && mark == " " { "▲" } else { mark };
                Bar::default()
                    .value(value)
                    .text_value(String::new())
                    .label(Line::from(Span::styled(
                        mark.repeat(bar_w as usize),
                        mark_style,
                    )))
                    .style(if selected { theme::hint() } else { bar_style() })
            })
            .collect();
        BarChart::default()
            .data(BarGroup::default().bars(&bars))
            .bar_width(bar_w)
            .bar_gap(gap)
            .max(max.max(1))
            .render(bars_area, buf);
    }
    if empty {
        let msg = " No activity in this range: chat a while, then press r ";
        let w = (msg.chars().count() as u16).min(inner.width);
        let r = Rect::new(
            inner.x + (inner.width - w) / 2,
            inner.y + inner.height / 2,
            w,
            1,
        );
        Line::from(Span::styled(
            truncate(msg, w as usize),
            theme::warn().add_modifier(Modifier::REVERSED),
        ))
        .render(r, buf);
    }
}

fn slot_cells(slot: &Slot) -> Vec<Cell<'static>> {
    match slot {
        Slot::Loaded(m) | Slot::Kept(m) => [
            m.messages.total,
            m.messages.user_messages,
            m.messages.assistant_messages,
            m.tokens.total,
            m.tokens.prompt,
            m.tokens.completion,
            m.sessions.active,
        ]
        .into_iter()
        .map(|v| Cell::from(Line::from(group_digits(v)).right_aligned()))
        .collect(),
        Slot::Pending => vec![Cell::from(Span::styled("loading…", theme::dim()))],
        Slot::NotAsked => vec![Cell::from(Span::styled("not asked yet", theme::dim()))],
        Slot::Failed(e) => vec![Cell::from(Span::styled(format!("✗ {e}"), theme::error()))],
        Slot::Cancelled => vec![Cell::from(Span::styled("cancelled", theme::dim()))],
    }
}

fn render_table(s: &MetricsState, load: &Load, area: Rect, buf: &mut Buffer) {
    let g = s.granularity;
    let label_w = match g {
        Granularity::Hour => 16,
        Granularity::Day => 15,
        Granularity::Week => 15,
        Granularity::Month => 8,
    };
    let header = Row::new(
        [
            "Bucket", "Msgs", "User", "Asst", "Tokens", "Prompt", "Compl", "Active",
        ]
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            let line = if i == 0 {
                Line::from(h)
            } else {
                Line::from(h).right_aligned()
            };
            Cell::from(line)
        }),
    )
    .style(theme::bold());
    let rows: Vec<Row> = load
        .buckets
        .iter()
        .map(|(b, slot)| {
            let mut label = bucket_label(*b, g);
            if b.is_partial(g) {
                label.push('*');
            }
            let mut cells = vec![Cell::from(label)];
            cells.extend(slot_cells(slot));
            Row::new(cells)
        })
        .collect();
    let widths = [
        Constraint::Length(label_w + 1),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(6),
    ];
    let highlight = if s.section == Section::Table {
        theme::selected()
    } else {
        Style::default().add_modifier(Modifier::BOLD)
    };
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(highlight);
    let mut state = TableState::default().with_selected(Some(s.cursor));
    StatefulWidget::render(table, pad(area), buf, &mut state);
}

fn render_detail(s: &MetricsState, load: &Load, area: Rect, buf: &mut Buffer) {
    let n = load.buckets.len();
    let Some((b, slot)) = load.buckets.get(s.cursor) else {
        return;
    };
    let mut spans = vec![
        Span::styled(format!(" ◀ {}/{n} ▶ ", s.cursor + 1), theme::hint()),
        Span::styled(buckets::describe_bucket(*b, s.granularity), theme::bold()),
    ];
    match slot {
        Slot::Loaded(m) | Slot::Kept(m) => spans.push(Span::raw(format!(
            " · {} · {} · {} active",
            counted(m.messages.total, "message"),
            counted(m.tokens.total, "token"),
            group_digits(m.sessions.active)
        ))),
        Slot::Pending => spans.push(Span::styled(" · loading…", theme::dim())),
        Slot::NotAsked => spans.push(Span::styled(" · not asked yet", theme::dim())),
        Slot::Failed(e) => spans.push(Span::styled(format!(" · ✗ failed: {e}"), theme::error())),
        Slot::Cancelled => spans.push(Span::styled(" · cancelled", theme::dim())),
    }
    Line::from(spans).render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_the_width_or_scroll() {
        assert_eq!(fit(24, 78), (2, 1, 24));
        assert_eq!(fit(7, 78), (9, 1, 7));
        assert_eq!(fit(90, 78), (1, 0, 78));
        assert_eq!(fit(39, 78), (1, 1, 39));
        assert_eq!(fit(0, 78), (1, 0, 0));
        assert_eq!(first_visible(89, 78, 90), 12);
        assert_eq!(first_visible(5, 78, 90), 0);
        assert_eq!(first_visible(80, 78, 90), 3);
        assert_eq!(first_visible(3, 24, 24), 0);
    }
}
