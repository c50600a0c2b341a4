//! The accounts view (F4): a title line (count, sort, filter, live or polled, alerts), then a
//! table of accounts — name, tier, key hints and a gauge per limit coloured by share (≥ 80 %
//! warn, ≥ 100 % reached) — of which only the rows on screen are drawn; or one account's
//! details: its gauges and its usage day by day. Where the view is not available it says how
//! to make it so.

use chrono::{DateTime, Utc};
use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};
use unicode_width::UnicodeWidthStr;

use super::{theme, truncate};
use crate::accounts_view::window::{clamp_offset, visible};
use crate::accounts_view::{AccountsState, AdminFailure, Availability, Details, Limit, ShareLevel};
use crate::command::Command;
use crate::full_view::{FullView, HelpSection, KeyResult};
use crate::keys::KeyBindings;
use convo_client::api::{AccountSort, AdminAccount};
use convo_client::format::{count, gauge_bar, group_digits};

/// What to do when no admin key is configured, one line each.
pub const NO_ADMIN_KEY_HELP: [&str; 6] = [
    "The accounts view needs the deployment's admin key:",
    "the key `convo serve --admin-key` was started with. Set one of:",
    "  • the CONVO_ADMIN_KEY environment variable",
    "  • admin_key under [connection] in the config file",
    "    (`convo config` prints its path)",
    "The embedded local service (no base URL) sets one up by itself.",
];

/// The colour of a share: ≥ 100 % reached, ≥ 80 % warn, else fine.
pub fn share_style(share: f64) -> Style {
    match ShareLevel::of(share) {
        ShareLevel::Reached => theme::error(),
        ShareLevel::Warn => theme::warn(),
        ShareLevel::Below => theme::success(),
    }
}

impl FullView for AccountsState {
    fn key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<Command>,
    ) -> KeyResult {
        let mut reqs = Vec::new();
        let result = self.handle_key(keys, key, now, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Accounts));
        result
    }

    fn paste(&mut self, text: &str) {
        // Its load goes out when `App` flushes the view after the event.
        AccountsState::paste(self, text);
    }

    fn scroll(&mut self, delta: isize) {
        AccountsState::scroll(self, delta);
    }

    fn hints(&self, keys: &KeyBindings) -> Vec<(String, &'static str)> {
        if self.details.is_some() {
            return vec![
                (keys.back.first_label(), "back"),
                (keys.refresh.first_label(), "refresh"),
                ("F1".into(), "help"),
            ];
        }
        if self.filtering {
            return vec![("Enter".into(), "keep filter"), ("Esc".into(), "clear")];
        }
        if self.availability != Availability::Available {
            return vec![(keys.back.first_label(), "back"), ("F1".into(), "help")];
        }
        vec![
            (keys.back.first_label(), "back"),
            ("s".into(), sort_hint(self.sort)),
            (keys.filter_sessions.first_label(), "filter"),
            ("Enter".into(), "details"),
            (keys.refresh.first_label(), "reload"),
            ("F1".into(), "help"),
        ]
    }

    fn help(keys: &KeyBindings) -> HelpSection {
        (
            format!("Accounts view ({})", keys.accounts_view.first_label()),
            vec![
                ("s".into(), "sort: share, requests, tokens…".into()),
                (
                    keys.filter_sessions.first_label(),
                    "filter; Enter: one account".into(),
                ),
            ],
        )
    }

    fn render(&self, keys: &KeyBindings, area: Rect, buf: &mut Buffer) {
        render(self, keys, area, buf);
    }
}

/// The sort hint: what `s` sorts by next.
fn sort_hint(sort: AccountSort) -> &'static str {
    match crate::accounts_view::next_sort(sort) {
        AccountSort::Share => "sort by share",
        AccountSort::Requests => "sort by requests",
        AccountSort::Tokens => "sort by tokens",
        AccountSort::Name => "sort by name",
    }
}

pub fn render(s: &AccountsState, keys: &KeyBindings, area: Rect, buf: &mut Buffer) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let title = Rect::new(area.x, area.y, area.width, 1);
    title_line(s, keys, usize::from(title.width)).render(title, buf);
    let body = Rect::new(
        area.x,
        area.y + 1,
        area.width,
        area.height.saturating_sub(1),
    );
    match (&s.availability, &s.details) {
        (Availability::Available, Some(d)) => details(d, body, buf),
        (Availability::Available, None) => table(s, body, buf),
        (other, _) => unavailable(other, s.error.as_ref(), body, buf),
    }
}

fn title_line(s: &AccountsState, keys: &KeyBindings, width: usize) -> Line<'static> {
    let mut spans = vec![Span::styled(
        format!("Accounts ({})", keys.accounts_view.first_label()),
        theme::bold(),
    )];
    if s.availability == Availability::Available {
        let n = if s.loaded {
            format!(" · {}", convo_client::format::counted(s.total, "account"))
        } else {
            " · loading…".into()
        };
        spans.push(Span::raw(n));
        spans.push(Span::styled(
            format!(" · by {}", s.sort.as_str()),
            theme::dim(),
        ));
        if s.filtering || !s.filter.is_empty() {
            spans.push(Span::styled(" · filter: ", theme::hint()));
            // A long filter scrolls within 30 columns, fewer if the line has less room left,
            // so that what follows it stays in view.
            let used: usize = spans.iter().map(Span::width).sum();
            let room = width.saturating_sub(used + 20).clamp(12, 30);
            spans.extend(
                s.filter
                    .spans(room, s.filtering, theme::hint(), theme::hint()),
            );
        }
        if s.loading.is_some() && s.loaded {
            spans.push(Span::styled(" · loading…", theme::dim()));
        }
        spans.push(if s.live {
            Span::styled(" · live", theme::success())
        } else {
            Span::styled(" · polled", theme::dim())
        });
    }
    if let Some(a) = &s.last_alert {
        spans.push(Span::styled(
            format!(" · ⚠ {}", a.describe()),
            theme::warn(),
        ));
    }
    Line::from(spans)
}

/// Column widths for a width: name, tier, keys, and each gauge.
fn columns(width: u16) -> (usize, usize, usize, usize) {
    let width = width as usize;
    let (name, tier, keys) = if width >= 160 {
        (24, 10, 14)
    } else if width >= 110 {
        (18, 10, 14)
    } else {
        (12, 8, 8)
    };
    let gauge = width.saturating_sub(name + tier + keys + 5) / 3;
    (name, tier, keys, gauge)
}

fn pad(text: &str, width: usize) -> String {
    let t = truncate(text, width);
    let w = t.width();
    format!("{t}{}", " ".repeat(width.saturating_sub(w)))
}

fn table(s: &AccountsState, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    if let Some(e) = &s.error {
        let line = Line::styled(failure_text(e), theme::error());
        line.render(Rect::new(area.x, area.y, area.width, 1), buf);
        return;
    }
    if s.loaded && s.rows.is_empty() {
        let text = if s.filter.is_empty() {
            "No accounts yet.".to_string()
        } else {
            format!("No account matches “{}”.", s.filter.text())
        };
        Line::styled(text, theme::dim()).render(Rect::new(area.x, area.y, area.width, 1), buf);
        return;
    }
    let (name_w, tier_w, keys_w, gauge_w) = columns(area.width);
    let header = format!(
        "{} {} {} {} {} {}",
        pad("account", name_w),
        pad("tier", tier_w),
        pad("keys", keys_w),
        pad("requests", gauge_w),
        pad("tokens", gauge_w),
        pad("sessions", gauge_w),
    );
    Line::styled(header, theme::dim()).render(Rect::new(area.x, area.y, area.width, 1), buf);
    let rows_h = area.height.saturating_sub(1) as usize;
    let offset = clamp_offset(s.offset, s.selected, rows_h, s.rows.len());
    for (i, index) in visible(offset, rows_h, s.rows.len()).enumerate() {
        let a = &s.rows[index];
        let y = area.y + 1 + i as u16;
        let mut spans = vec![
            Span::raw(pad(&a.name, name_w)),
            Span::raw(" "),
            Span::styled(pad(&a.tier, tier_w), theme::dim()),
            Span::raw(" "),
            Span::styled(pad(&key_hints(a), keys_w), theme::dim()),
        ];
        for limit in Limit::ALL {
            spans.push(Span::raw(" "));
            spans.extend(gauge(a, limit, gauge_w));
        }
        let mut line = Line::from(spans);
        if index == s.selected {
            line = line.patch_style(theme::selected());
        }
        line.render(Rect::new(area.x, y, area.width, 1), buf);
    }
}

/// `…abcd`, and `+2` when the account has more keys.
fn key_hints(a: &AdminAccount) -> String {
    match a.key_hints.as_slice() {
        [] => "–".into(),
        [one] => format!("…{one}"),
        [first, rest @ ..] => format!("…{first} +{}", rest.len()),
    }
}

/// A gauge of `width` cells: the bar, then the share in per cent.
fn gauge(a: &AdminAccount, limit: Limit, width: usize) -> Vec<Span<'static>> {
    let share = limit.share(a);
    let label = format!(" {:>3.0}%", (share * 100.0).min(999.0));
    let bar_w = width.saturating_sub(label.len());
    let (filled, empty) = gauge_bar(share, bar_w);
    let style = share_style(share);
    vec![
        Span::styled(filled, style),
        Span::styled(empty, theme::dim()),
        Span::styled(label, style),
    ]
}

fn failure_text(e: &AdminFailure) -> String {
    match e {
        AdminFailure::NoAdminKey => "no admin key is configured".into(),
        AdminFailure::Unsupported => "this server has no admin endpoints".into(),
        AdminFailure::Unauthorized(m) => format!("the admin key was refused: {m}"),
        AdminFailure::Other(m) => format!("cannot load the accounts: {m}"),
    }
}

fn unavailable(a: &Availability, error: Option<&AdminFailure>, area: Rect, buf: &mut Buffer) {
    let lines: Vec<Line> = match a {
        Availability::Unknown => vec![Line::styled("Connecting…", theme::dim())],
        Availability::NoAdminKey => NO_ADMIN_KEY_HELP
            .iter()
            .map(|l| Line::raw(l.to_string()))
            .collect(),
        Availability::Unsupported => vec![Line::styled(
            "This server has no admin endpoints (an older convo serve, or another service).",
            theme::warn(),
        )],
        Availability::Refused(m) => vec![
            Line::styled(
                format!("The server refused the admin key: {m}"),
                theme::error(),
            ),
            Line::raw(
                "Check CONVO_ADMIN_KEY or [connection] admin_key against the server's --admin-key.",
            ),
        ],
        Availability::Available => error
            .map(|e| vec![Line::styled(failure_text(e), theme::error())])
            .unwrap_or_default(),
    };
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}

fn details(d: &Details, area: Rect, buf: &mut Buffer) {
    let a = &d.account;
    let mut lines = vec![
        Line::from(vec![
            Span::styled(a.name.clone(), theme::bold()),
            Span::styled(
                format!(
                    " · {} · keys {} · id {}",
                    a.tier,
                    key_hints(a),
                    a.account_id
                ),
                theme::dim(),
            ),
        ]),
        Line::raw(""),
    ];
    let gauge_w = (area.width as usize).saturating_sub(32).min(40);
    for (limit, used, max) in [
        (Limit::Requests, a.requests.used, a.requests.limit),
        (Limit::Tokens, a.tokens.used, a.tokens.limit),
        (Limit::Sessions, a.sessions.active, a.sessions.limit),
    ] {
        let mut spans = vec![Span::raw(format!("{:<9}", limit.name()))];
        spans.extend(gauge(a, limit, gauge_w));
        spans.push(Span::styled(
            format!("  {} / {}", group_digits(used), group_digits(max)),
            theme::dim(),
        ));
        lines.push(Line::from(spans));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "day          messages    tokens  sessions",
        theme::dim(),
    ));
    let most = d
        .days
        .iter()
        .filter_map(|day| day.metrics.as_ref()?.as_ref().ok())
        .map(|m| m.tokens.total)
        .max()
        .unwrap_or(0)
        .max(1);
    let bar_w = (area.width as usize).saturating_sub(44);
    for day in &d.days {
        let date = day.start.format("%a %m-%d").to_string();
        let line = match &day.metrics {
            None => Line::styled(format!("{date:<12} …"), theme::dim()),
            Some(Err(e)) => Line::styled(format!("{date:<12} {e}"), theme::error()),
            Some(Ok(m)) => {
                let (filled, _) = gauge_bar(m.tokens.total as f64 / most as f64, bar_w);
                Line::from(vec![
                    Span::raw(format!(
                        "{date:<12} {:>8} {:>9} {:>9}  ",
                        count(m.messages.total),
                        count(m.tokens.total),
                        count(m.sessions.total)
                    )),
                    Span::styled(filled, theme::hint()),
                ])
            }
        };
        lines.push(line);
    }
    Paragraph::new(lines).render(area, buf);
}
