//! Usage gauges: requests, tokens and sessions against the plan's limits, tier, time left in
//! the billing period, last refresh, and a stale mark with the last error when polling fails.

use chrono::{DateTime, Utc};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use super::{theme, truncate};
use crate::app::App;
use crate::layout::AppLayout;
use convo_client::format;

/// One gauge's numbers.
#[derive(Debug, Clone)]
pub struct UsageGauge {
    pub used: u64,
    pub limit: u64,
    pub percent: f64,
    /// The service refused a request on this limit: `Some(when it resets)`, shown in place of
    /// the numbers (`full · resets in 2h 5m`), the bar full in the error colour.
    pub reached: Option<String>,
}

impl UsageGauge {
    fn numbers(&self) -> String {
        match &self.reached {
            Some(reset) => format!(" full{reset}"),
            None => format!(
                " {}/{} {:.0}%",
                format::count(self.used),
                format::count(self.limit),
                self.percent
            ),
        }
    }

    fn style(&self, stale: bool) -> Style {
        if self.reached.is_some() {
            theme::error()
        } else if stale {
            theme::dim()
        } else {
            theme::gauge(self.percent)
        }
    }
}

/// The columns of each gauge of the band in a row of `width`: each what its numbers need with
/// a bar of two cells (a limit reached with its reset time, else without), the rest shared
/// among the bars; a row too narrow for that gives each a third (and [`fit_gauge`] drops
/// what does not fit).
fn cell_widths(gauges: &[(&'static str, UsageGauge); 3], width: usize) -> [usize; 3] {
    let need = |numbers: &dyn Fn(&UsageGauge) -> String| {
        gauges
            .each_ref()
            .map(|(_, g)| 3 + 1 + 2 + numbers(g).chars().count() + 1)
    };
    let short = |g: &UsageGauge| match g.reached {
        Some(_) => " full".to_string(),
        None => g.numbers(),
    };
    for needs in [need(&UsageGauge::numbers), need(&short)] {
        let total: usize = needs.iter().sum();
        if total <= width {
            let extra = width - total;
            let mut cells = needs.map(|n| n + extra / 3);
            for cell in cells.iter_mut().take(extra % 3) {
                *cell += 1;
            }
            return cells;
        }
    }
    [width / 3; 3]
}

/// One gauge of the band in at most `cell - 1` columns (a space parts it from the next): the
/// first of these that fits, so that a number is never cut, which would misread (`2/5` for
/// `2/500`): the label, a bar of at least two cells and the numbers; without the bar; without
/// the label; the percentage (or `full`) alone; nothing.
fn fit_gauge(short: &str, g: &UsageGauge, cell: usize, stale: bool) -> Vec<Span<'static>> {
    let room = cell.saturating_sub(1);
    // A limit reached says so, with its reset time where it fits (the second row says it too).
    let mut numbers = vec![g.numbers()];
    if g.reached.is_some() {
        numbers.push(" full".to_string());
    }
    for n in &numbers {
        let bar_w = room.saturating_sub(short.len() + 1 + n.chars().count());
        if bar_w >= 2 {
            let mut s = gauge_spans(short, g, n.clone(), bar_w, stale);
            s.push(Span::raw(" "));
            return s;
        }
    }
    let n = numbers.pop().unwrap_or_default();
    let alone = match g.reached {
        Some(_) => "full".to_string(),
        None => format!("{:.0}%", g.percent),
    };
    [format!("{short}{n}"), n.trim_start().to_string(), alone]
        .into_iter()
        .find(|text| text.chars().count() <= room)
        .map(|text| vec![Span::styled(text, g.style(stale)), Span::raw(" ")])
        .unwrap_or_default()
}

/// `━━━━────` of `width` cells filled to `percent`.
pub fn bar(percent: f64, width: usize) -> String {
    let filled = ((percent.clamp(0.0, 100.0) / 100.0) * width as f64).round() as usize;
    let filled = filled.min(width);
    format!("{}{}", "━".repeat(filled), "─".repeat(width - filled))
}

fn gauge_spans(
    label: &str,
    g: &UsageGauge,
    numbers: String,
    bar_width: usize,
    stale: bool,
) -> Vec<Span<'static>> {
    let style = g.style(stale);
    vec![
        Span::raw(format!("{label} ")),
        Span::styled(bar(g.percent, bar_width), style),
        Span::styled(numbers, style),
    ]
}

fn period_end(app: &App) -> Option<DateTime<Utc>> {
    let u = app.usage().usage.as_ref()?;
    DateTime::parse_from_rfc3339(&u.billing_period.end)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

fn gauges(app: &App) -> Option<[(&'static str, UsageGauge); 3]> {
    let u = app.usage().usage.as_ref()?;
    let gauge = |name: &str, used: u64, limit: u64, percent: f64| {
        let reached = app.usage().reached.as_ref().filter(|r| r.limit == name);
        match reached {
            Some(r) => UsageGauge {
                used: used.max(limit),
                limit,
                percent: 100.0,
                reached: Some(match r.reset_at {
                    Some(at) => format!(" · resets {}", format::time_until(app.now(), at)),
                    None => String::new(),
                }),
            },
            None => UsageGauge {
                used,
                limit,
                percent,
                reached: None,
            },
        }
    };
    Some([
        (
            "requests",
            gauge(
                "requests",
                u.requests.used,
                u.requests.limit,
                u.requests.percentage,
            ),
        ),
        (
            "tokens  ",
            gauge("tokens", u.tokens.used, u.tokens.limit, u.tokens.percentage),
        ),
        (
            "sessions",
            gauge(
                "sessions",
                u.sessions.active,
                u.sessions.limit,
                u.sessions.percentage,
            ),
        ),
    ])
}

fn freshness(app: &App) -> Span<'static> {
    if let Some(r) = &app.usage().reached {
        let when = match r.reset_at {
            Some(at) => format!(
                ": resets {} ({})",
                format::time_until(app.now(), at),
                at.format("%Y-%m-%d %H:%M UTC")
            ),
            None => String::new(),
        };
        return Span::styled(format!("{} limit reached{when}", r.limit), theme::error());
    }
    match (&app.usage().error, app.usage().fetched_at) {
        (Some(e), _) => Span::styled(format!("STALE: {e}"), theme::error()),
        (None, Some(at)) => Span::styled(
            format!("updated {}", format::relative(app.now(), at)),
            theme::dim(),
        ),
        (None, None) => Span::styled("waiting for usage…", theme::dim()),
    }
}

/// What the gauges measure against: the plan, and on the embedded service whose plan it is
/// (`embedded service · pro plan of the local account`), so an offline user does not take it
/// for a subscription.
pub fn plan_label(app: &App, tier: &str) -> String {
    let tier = convo_client::sanitize::sanitize(tier);
    if embedded(app) {
        crate::embedded::plan_label(&tier)
    } else {
        tier.into_owned()
    }
}

fn embedded(app: &App) -> bool {
    matches!(
        app.connection(),
        crate::app::Connection::Connected(crate::event::Endpoint::Embedded { .. })
    )
}

pub fn render(app: &App, layout: &AppLayout, buf: &mut Buffer) {
    if layout.usage_is_column {
        column(app, layout.usage, buf);
    } else {
        band(app, layout.usage, buf);
    }
}

fn column(app: &App, area: Rect, buf: &mut Buffer) {
    let tier = app
        .usage()
        .usage
        .as_ref()
        .map(|u| convo_client::sanitize::sanitize_owned(&u.tier))
        .unwrap_or_else(|| "…".into());
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme::border())
        .title(Line::from(vec![
            Span::styled(" Usage ", theme::bold()),
            Span::styled(format!("{tier} "), theme::hint()),
        ]));
    let inner = block.inner(area);
    block.render(area, buf);
    let stale = app.usage().error.is_some();
    let bar_w = (inner.width as usize).saturating_sub(2).max(4);
    let mut lines: Vec<Line> = Vec::new();
    if let Some(gs) = gauges(app) {
        for (label, g) in gs {
            let text = match &g.reached {
                Some(_) => format!("{}{}", label.trim(), g.numbers()),
                None => format!(
                    "{} {}/{} {:.1}%",
                    label.trim(),
                    format::count(g.used),
                    format::count(g.limit),
                    g.percent
                ),
            };
            let style = if g.reached.is_some() {
                theme::error()
            } else if stale {
                theme::dim()
            } else {
                Style::default()
            };
            lines.push(Line::from(Span::styled(text, style)));
            lines.push(Line::from(Span::styled(
                bar(g.percent, bar_w),
                g.style(stale),
            )));
        }
        // The embedded service's plan is the local account's own: no period to watch.
        if embedded(app)
            && let Some(u) = &app.usage().usage
        {
            lines.push(Line::from(Span::styled(
                plan_label(app, &u.tier),
                theme::dim(),
            )));
        } else if let Some(end) = period_end(app) {
            lines.push(Line::from(Span::styled(
                format!("period ends {}", format::time_until(app.now(), end)),
                theme::dim(),
            )));
        }
    }
    lines.push(Line::from(""));
    lines.push(Line::from(freshness(app)));
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

fn band(app: &App, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let stale = app.usage().error.is_some();
    let width = area.width as usize;
    let row1 = match gauges(app) {
        Some(gs) => {
            // Three gauges share the row: "req ━━── 1/1k 0%".
            let cells = cell_widths(&gs, width);
            let mut spans = Vec::new();
            for ((label, g), cell) in gs.into_iter().zip(cells) {
                let mut s = fit_gauge(&label[..3], &g, cell, stale);
                let used: usize = s.iter().map(|s| s.width()).sum();
                if used < cell {
                    s.push(Span::raw(" ".repeat(cell - used)));
                }
                spans.extend(s);
            }
            Line::from(spans)
        }
        None => Line::from(freshness(app)),
    };
    row1.render(Rect::new(area.x, area.y, area.width, 1), buf);
    if area.height < 2 {
        return;
    }
    let mut spans = Vec::new();
    if app.usage().reached.is_some() {
        // What is refused and until when comes first, where a narrow row cannot cut it.
        spans.push(freshness(app));
        spans.push(Span::raw(" "));
    }
    if let Some(u) = &app.usage().usage {
        spans.push(Span::styled(
            format!("{} ", plan_label(app, &u.tier)),
            theme::hint(),
        ));
        // The embedded service's plan is the local account's own: no period to watch.
        if let Some(end) = period_end(app).filter(|_| !embedded(app)) {
            spans.push(Span::styled(
                format!("· period ends {} ", format::time_until(app.now(), end)),
                theme::dim(),
            ));
        }
        if app.usage().reached.is_none() {
            spans.push(Span::raw("· "));
            spans.push(freshness(app));
        }
    }
    let line = Line::from(spans);
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    if text.chars().count() > width {
        Line::from(Span::raw(truncate(&text, width)))
            .render(Rect::new(area.x, area.y + 1, area.width, 1), buf);
    } else {
        line.render(Rect::new(area.x, area.y + 1, area.width, 1), buf);
    }
}
