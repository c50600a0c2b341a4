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
    /// ` 12/50k 0%`, or for a limit reached ` full` and, `with_reset`, when it resets.
    fn numbers(&self, with_reset: bool) -> String {
        match &self.reached {
            Some(reset) if with_reset => format!(" full{reset}"),
            Some(_) => " full".to_string(),
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

/// How much of a gauge the band shows, widest first: the row takes the widest form in which
/// all three fit, so that a number is never cut (`2/5` for `2/500` would misread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `req ━━── 12/50k 0%` (a limit reached: `req ━━━━ full · resets in 2h`).
    Bar,
    /// As `Bar`, a limit reached without its reset time (the second row says it).
    BarFull,
    /// `req 12/50k 0%`.
    Numbers,
    /// `req 0%` (`req full`).
    Percent,
    /// `0%` (`full`).
    Bare,
}

impl Form {
    const ALL: [Form; 5] = [
        Form::Bar,
        Form::BarFull,
        Form::Numbers,
        Form::Percent,
        Form::Bare,
    ];

    /// The gauge's text in this form, without the bar (`Bar` and `BarFull` add one of at
    /// least [`MIN_BAR`] cells after the label).
    fn text(self, short: &str, g: &UsageGauge) -> String {
        let alone = match g.reached {
            Some(_) => "full".to_string(),
            None => format!("{:.0}%", g.percent),
        };
        match self {
            Form::Bar => format!("{short}{}", g.numbers(true)),
            Form::BarFull | Form::Numbers => format!("{short}{}", g.numbers(false)),
            Form::Percent => format!("{short} {alone}"),
            Form::Bare => alone,
        }
    }

    fn has_bar(self) -> bool {
        matches!(self, Form::Bar | Form::BarFull)
    }

    /// Columns the gauge needs in this form, with the space after it (and with a bar, the
    /// bar and a space before it).
    fn need(self, short: &str, g: &UsageGauge) -> usize {
        let bar = if self.has_bar() { 1 + MIN_BAR } else { 0 };
        self.text(short, g).chars().count() + bar + 1
    }
}

/// The shortest bar drawn.
const MIN_BAR: usize = 2;

/// The form of the band's gauges in a row of `width` and each one's columns: the widest form
/// in which all three fit, each gauge what it needs and the rest shared among them (their bars,
/// in the forms with one, are then of one length). `None` when not even `Bare` fits.
fn band_cells(
    gauges: &[(&'static str, UsageGauge); 3],
    width: usize,
) -> Option<(Form, [usize; 3])> {
    Form::ALL.into_iter().find_map(|form| {
        let needs = gauges
            .each_ref()
            .map(|(label, g)| form.need(&label[..3], g));
        let extra = width.checked_sub(needs.iter().sum())?;
        let mut cells = needs.map(|n| n + extra / 3);
        for cell in cells.iter_mut().take(extra % 3) {
            *cell += 1;
        }
        Some((form, cells))
    })
}

/// One gauge of the band in `form`, in `cell` columns (the last of them a space).
fn draw_gauge(
    form: Form,
    short: &str,
    g: &UsageGauge,
    cell: usize,
    stale: bool,
) -> Vec<Span<'static>> {
    let text = form.text(short, g);
    let mut spans = if form.has_bar() {
        let numbers = text[short.len()..].to_string();
        let bar_w = cell.saturating_sub(text.chars().count() + 2);
        gauge_spans(short, g, numbers, bar_w, stale)
    } else {
        vec![Span::styled(text, g.style(stale))]
    };
    let used: usize = spans.iter().map(|s| s.width()).sum();
    spans.push(Span::raw(" ".repeat(cell.saturating_sub(used))));
    spans
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
                Some(_) => format!("{}{}", label.trim(), g.numbers(true)),
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
            let mut spans = Vec::new();
            if let Some((form, cells)) = band_cells(&gs, width) {
                for ((label, g), cell) in gs.iter().zip(cells) {
                    spans.extend(draw_gauge(form, &label[..3], g, cell, stale));
                }
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
