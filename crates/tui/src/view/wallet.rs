//! The wallet view (F3): the id prompt with recent ids, then the wallet at a glance —
//! address, alias, balance, risk gauge, risk factors and tags as badges — and the token
//! accounts and NFTs as scrolling tables.

use chrono::{DateTime, Utc};
use crossterm::event::KeyEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, StatefulWidget, Table, TableState, Widget, Wrap};
use unicode_width::UnicodeWidthStr;

use super::{theme, truncate};
use crate::command::Command;
use crate::full_view::{FullView, HelpSection, KeyResult};
use crate::keys::KeyBindings;
use crate::wallet::{TokenStatus, WalletFailure, WalletLoad, WalletSection, WalletState};
use convo_client::api::Wallet;
use convo_client::format::{RiskBand, amount, counted, gauge_bar, usd};
use convo_client::sanitize::sanitize_owned;

/// What to do when no wallet token is configured, one line each.
pub const NO_TOKEN_HELP: [&str; 5] = [
    "No wallet token is configured: the wallet endpoint needs a JWT. Set one of:",
    "  • the CONVO_WALLET_TOKEN environment variable",
    "  • wallet_token under [connection] in the config file (see `convo config`)",
    "  • local service: CONVO_WALLET_TOKEN=$(convo token --secret SECRET --sub you)",
    "The embedded local service (convo with no base URL) sets one up by itself.",
];

pub fn risk_style(band: RiskBand) -> Style {
    match band {
        RiskBand::Low => theme::success(),
        RiskBand::Medium => theme::warn(),
        RiskBand::High => theme::error(),
    }
}

fn factor_badge() -> Style {
    Style::default().fg(Color::Black).bg(Color::Yellow)
}

fn tag_badge() -> Style {
    Style::default().fg(Color::White).bg(Color::DarkGray)
}

impl FullView for WalletState {
    fn key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        _now: DateTime<Utc>,
        out: &mut Vec<Command>,
    ) -> KeyResult {
        let mut reqs = Vec::new();
        let result = self.handle_key(keys, key, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Wallet));
        result
    }

    fn paste(&mut self, text: &str) {
        WalletState::paste(self, text);
    }

    fn scroll(&mut self, delta: isize) {
        WalletState::scroll(self, delta);
    }

    fn hints(&self, keys: &KeyBindings) -> Vec<(String, &'static str)> {
        hints(self, keys)
    }

    fn help(keys: &KeyBindings) -> HelpSection {
        (
            format!("Wallet view ({})", keys.wallet_view.first_label()),
            vec![
                ("Enter".into(), "fetch the typed id".into()),
                ("↑ ↓".into(), "recent ids; scroll tables".into()),
                (keys.focus_next.first_label(), "prompt, tokens, NFTs".into()),
                (keys.back.first_label(), "back to the chat".into()),
            ],
        )
    }

    fn render(&self, keys: &KeyBindings, area: Rect, buf: &mut Buffer) {
        render(self, keys, area, buf);
    }
}

/// Key hints for the status bar while the view is shown.
fn hints(w: &WalletState, k: &KeyBindings) -> Vec<(String, &'static str)> {
    let mut out = vec![(k.back.first_label(), "back")];
    match w.section {
        WalletSection::Prompt => {
            out.push(("Enter".into(), "fetch"));
            out.push(("↑↓".into(), "recent"));
        }
        _ => {
            out.push((k.move_up.first_label(), "scroll"));
            out.push((k.refresh.first_label(), "refresh"));
        }
    }
    out.push((k.focus_next.first_label(), "section"));
    out.push(("F1".into(), "help"));
    out
}

fn render(w: &WalletState, keys: &KeyBindings, area: Rect, buf: &mut Buffer) {
    let [title, prompt, suggestions, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(area);
    render_title(w, title, buf);
    render_prompt(w, prompt, buf);
    render_suggestions(w, suggestions, buf);
    let body = Rect::new(
        body.x + 1,
        body.y,
        body.width.saturating_sub(2),
        body.height,
    );
    let no_token = w.token == TokenStatus::Missing;
    match &w.load {
        WalletLoad::Failed {
            failure: WalletFailure::NoToken,
            ..
        } => render_no_token(body, buf),
        WalletLoad::Idle if no_token => render_no_token(body, buf),
        WalletLoad::Idle => {
            let mut lines = vec![Line::from(Span::styled(
                "Type a wallet id and press Enter.",
                theme::dim(),
            ))];
            if !w.suggestions().is_empty() {
                lines.push(Line::from(Span::styled(
                    "↑↓ in the prompt go through the ids shown above.",
                    theme::dim(),
                )));
            }
            Paragraph::new(lines)
                .wrap(Wrap { trim: true })
                .render(body, buf);
        }
        WalletLoad::Loading { wallet_id, .. } => {
            Line::from(Span::styled(
                format!("Loading wallet `{}`…", sanitize_owned(wallet_id)),
                theme::warn(),
            ))
            .render(body, buf);
        }
        WalletLoad::Failed { wallet_id, failure } => {
            render_failure(keys, wallet_id, failure, body, buf)
        }
        WalletLoad::Loaded(wallet) => render_wallet(w, wallet, body, buf),
    }
}

fn render_title(w: &WalletState, area: Rect, buf: &mut Buffer) {
    let what = match (&w.load, w.shown_id()) {
        (WalletLoad::Loaded(wallet), _) => format!(
            " Wallet {} · alias “{}” ",
            sanitize_owned(&wallet.wallet_id),
            sanitize_owned(&wallet.alias)
        ),
        (_, Some(id)) => format!(" Wallet {} ", sanitize_owned(id)),
        (_, None) => " Wallet ".to_string(),
    };
    Line::from(Span::styled(
        truncate(&what, area.width as usize),
        theme::bold().add_modifier(Modifier::REVERSED),
    ))
    .render(area, buf);
}

fn render_prompt(w: &WalletState, area: Rect, buf: &mut Buffer) {
    let focused = w.section == WalletSection::Prompt;
    let label_style = if focused {
        theme::hint().add_modifier(Modifier::BOLD)
    } else {
        theme::dim()
    };
    let mut spans = vec![Span::styled(" Wallet id › ", label_style)];
    spans.extend(w.input.spans(
        usize::from(area.width).saturating_sub(13),
        focused,
        Style::default(),
        theme::hint(),
    ));
    if let Some(e) = &w.input_error {
        spans.push(Span::styled(format!("  ✗ {e}"), theme::error()));
    }
    Line::from(spans).render(area, buf);
}

fn render_suggestions(w: &WalletState, area: Rect, buf: &mut Buffer) {
    let all = w.suggestions();
    if all.is_empty() {
        return;
    }
    let label = if w.recent.is_empty() {
        " known: "
    } else {
        " recent: "
    };
    let mut spans = vec![Span::styled(label, theme::dim())];
    let mut used = label.len();
    let room = area.width as usize;
    for (i, id) in all.iter().enumerate() {
        let text = format!(" {} ", sanitize_owned(id));
        let wdt = text.width() + 1;
        if used + wdt + 2 > room {
            spans.push(Span::styled("…", theme::dim()));
            break;
        }
        let style = if w.suggestion == Some(i) {
            theme::selected().fg(Color::Cyan)
        } else {
            theme::hint()
        };
        spans.push(Span::styled(text, style));
        spans.push(Span::raw(" "));
        used += wdt;
    }
    Line::from(spans).render(area, buf);
}

fn render_no_token(area: Rect, buf: &mut Buffer) {
    let lines: Vec<Line> = NO_TOKEN_HELP
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let style = if i == 0 {
                theme::warn()
            } else {
                Style::default()
            };
            Line::from(Span::styled(*l, style))
        })
        .collect();
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}

fn render_failure(
    keys: &KeyBindings,
    id: &str,
    failure: &WalletFailure,
    area: Rect,
    buf: &mut Buffer,
) {
    let id = sanitize_owned(id);
    let retry = keys.refresh.first_label();
    let lines: Vec<Line> = match failure {
        WalletFailure::NoToken => return render_no_token(area, buf),
        WalletFailure::Unauthorized(msg) => vec![
            Line::from(Span::styled(
                "The wallet token was refused (401 unauthorized).",
                theme::error(),
            )),
            Line::from(
                "It may have expired, or be signed with another secret: mint a new one with",
            ),
            Line::from("`convo token` or check CONVO_WALLET_TOKEN / connection.wallet_token."),
            Line::from(Span::styled(
                format!("The server said: {msg}"),
                theme::dim(),
            )),
        ],
        WalletFailure::NotFound => vec![
            Line::from(Span::styled(
                format!("No wallet `{id}` on this server (wallet_not_found)."),
                theme::error(),
            )),
            Line::from(Span::styled(
                "Check the id; ↑↓ in the prompt go through known ids.",
                theme::dim(),
            )),
        ],
        WalletFailure::Other(msg) => vec![
            Line::from(Span::styled(
                format!("Could not fetch wallet `{id}`."),
                theme::error(),
            )),
            Line::from(msg.clone()),
            Line::from(Span::styled(
                format!("{retry} (outside the prompt) tries again."),
                theme::dim(),
            )),
        ],
    };
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

/// Lays badges out in rows of `width` columns, the first row after a `label`.
fn badge_lines(label: &str, items: &[String], style: Style, width: usize) -> Vec<Line<'static>> {
    let indent = label.width();
    let mut lines = Vec::new();
    let mut spans = vec![Span::styled(label.to_string(), theme::bold())];
    let mut used = indent;
    if items.is_empty() {
        spans.push(Span::styled("none", theme::dim()));
        return vec![Line::from(spans)];
    }
    for item in items {
        let text = format!(" {} ", sanitize_owned(item));
        let text = truncate(&text, width.saturating_sub(indent).max(4));
        let w = text.width();
        if used > indent && used + w > width {
            lines.push(Line::from(std::mem::take(&mut spans)));
            spans.push(Span::raw(" ".repeat(indent)));
            used = indent;
        }
        spans.push(Span::styled(text, style));
        spans.push(Span::raw(" "));
        used += w + 1;
    }
    lines.push(Line::from(spans));
    lines
}

fn render_wallet(w: &WalletState, wallet: &Wallet, area: Rect, buf: &mut Buffer) {
    let width = area.width as usize;
    let band = RiskBand::of(wallet.risk_score);
    let factors = badge_lines("Factors  ", &wallet.risk_factors, factor_badge(), width);
    let tags = badge_lines("Tags     ", &wallet.tags, tag_badge(), width);
    // Keep room for the tables: at most two rows of each kind of badge.
    let factor_rows = factors.len().min(2) as u16;
    let tag_rows = tags.len().min(2) as u16;
    let [address, balance, risk, f_area, t_area, tables] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(factor_rows),
        Constraint::Length(tag_rows),
        Constraint::Min(0),
    ])
    .areas(area);
    Line::from(vec![
        Span::styled("Address  ", theme::bold()),
        Span::raw(truncate(
            &sanitize_owned(&wallet.address),
            width.saturating_sub(9),
        )),
    ])
    .render(address, buf);
    let tokens_usd: f64 = wallet.token_accounts.iter().map(|a| a.usd_value).sum();
    Line::from(vec![
        Span::styled("Balance  ", theme::bold()),
        Span::styled(
            format!("{} SOL", amount(wallet.balance, 6)),
            theme::success().add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(
                " · tokens {} · {}",
                usd(tokens_usd),
                counted(wallet.nfts.len() as u64, "NFT")
            ),
            theme::dim(),
        ),
    ])
    .render(balance, buf);
    // The risk row: label, gauge coloured by band, score and band.
    let gauge_w = 24.min(width.saturating_sub(30)).max(5);
    let (filled, rest) = gauge_bar(wallet.risk_score / 100.0, gauge_w);
    Line::from(vec![
        Span::styled("Risk     ", theme::bold()),
        Span::styled(filled, risk_style(band)),
        Span::styled(rest, theme::dim()),
        Span::styled(
            format!(" {}/100 ", amount(wallet.risk_score, 1)),
            risk_style(band).add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!("{} risk", band.label()), risk_style(band)),
    ])
    .render(risk, buf);
    Paragraph::new(factors).render(f_area, buf);
    Paragraph::new(tags).render(t_area, buf);
    render_tables(w, wallet, tables, buf);
}

fn section_title(title: String, focused: bool) -> Line<'static> {
    let style = if focused {
        theme::hint().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    } else {
        theme::bold()
    };
    Line::from(Span::styled(title, style))
}

fn render_tables(w: &WalletState, wallet: &Wallet, area: Rect, buf: &mut Buffer) {
    if area.height < 2 {
        return;
    }
    let [tokens_h, nfts_h] = table_heights(
        wallet.token_accounts.len(),
        wallet.nfts.len(),
        area.height,
        w.section == WalletSection::Nfts,
    );
    let [tokens_area, nfts_area, _] = Layout::vertical([
        Constraint::Length(tokens_h),
        Constraint::Length(nfts_h),
        Constraint::Min(0),
    ])
    .areas(area);
    render_tokens(w, wallet, tokens_area, buf);
    render_nfts(w, wallet, nfts_area, buf);
}

/// Rows for the token and NFT tables (title, header and rows each): what they need when
/// both fit, else the table not focused gets at most a third and the focused one the rest.
pub fn table_heights(tokens: usize, nfts: usize, height: u16, nfts_focused: bool) -> [u16; 2] {
    let need = |n: usize| 2 + n.max(1) as u16;
    let (t, n) = (need(tokens), need(nfts));
    if t + n <= height {
        return [t, n];
    }
    let (focused_need, other_need) = if nfts_focused { (n, t) } else { (t, n) };
    let mut other = other_need.min((height / 3).max(3));
    let mut focused = focused_need.min(height.saturating_sub(other));
    if focused < 3 {
        focused = focused_need.min(height);
        other = height - focused;
    }
    if nfts_focused {
        [other, focused]
    } else {
        [focused, other]
    }
}

fn numeric(text: String) -> Cell<'static> {
    Cell::from(Line::from(text).right_aligned())
}

/// Renders a table with its title line; the title says which rows show when they do not all
/// fit. The focused table highlights its row at `cursor`.
fn titled_table(
    title: String,
    table: Table,
    len: usize,
    cursor: Option<usize>,
    focused: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let [head, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let mut state =
        TableState::default().with_selected(cursor.map(|c| c.min(len.saturating_sub(1))));
    StatefulWidget::render(table, body, buf, &mut state);
    let visible = (body.height as usize).saturating_sub(1);
    let mut title = title;
    if len > visible && visible > 0 {
        let first = state.offset() + 1;
        let last = (state.offset() + visible).min(len);
        title.push_str(&format!(" · rows {first}–{last} of {len}"));
    }
    section_title(title, focused).render(head, buf);
}

fn render_tokens(w: &WalletState, wallet: &Wallet, area: Rect, buf: &mut Buffer) {
    let focused = w.section == WalletSection::Tokens;
    let accounts = &wallet.token_accounts;
    let total: f64 = accounts.iter().map(|a| a.usd_value).sum();
    let title = format!("Token accounts ({}) · total {}", accounts.len(), usd(total));
    if accounts.is_empty() {
        section_title(title, focused).render(area, buf);
        let body = Rect::new(
            area.x,
            area.y.saturating_add(1),
            area.width,
            area.height.saturating_sub(1),
        );
        Span::styled("  no token accounts", theme::dim()).render(body, buf);
        return;
    }
    // Narrow terminals drop the share and mint columns rather than cut numbers.
    let wide = area.width >= 70;
    let rows: Vec<Row> = accounts
        .iter()
        .map(|a| {
            let share = if total > 0.0 {
                a.usd_value / total * 100.0
            } else {
                0.0
            };
            let mut cells = vec![
                Cell::from(sanitize_owned(&a.symbol)),
                numeric(amount(a.balance, 4)),
                numeric(usd(a.usd_value)),
            ];
            if wide {
                cells.push(numeric(format!("{share:.1}%")));
                cells.push(Cell::from(Span::styled(
                    sanitize_owned(&a.mint),
                    theme::dim(),
                )));
            }
            Row::new(cells)
        })
        .collect();
    let mut header = vec![
        Cell::from("Symbol"),
        numeric("Balance".into()),
        numeric("USD value".into()),
    ];
    let widths = if wide {
        header.push(numeric("Share".into()));
        header.push(Cell::from("Mint"));
        vec![
            Constraint::Length(8),
            Constraint::Length(16),
            Constraint::Length(15),
            Constraint::Length(6),
            Constraint::Min(8),
        ]
    } else {
        vec![
            Constraint::Length(7),
            Constraint::Min(10),
            Constraint::Min(10),
        ]
    };
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(theme::bold()))
        .row_highlight_style(theme::selected());
    let cursor = focused.then_some(w.tokens_scroll);
    titled_table(title, table, accounts.len(), cursor, focused, area, buf);
}

fn render_nfts(w: &WalletState, wallet: &Wallet, area: Rect, buf: &mut Buffer) {
    let focused = w.section == WalletSection::Nfts;
    let floor: f64 = wallet.nfts.iter().map(|n| n.floor_price).sum();
    let title = format!(
        "NFTs ({}) · floor total {} SOL",
        wallet.nfts.len(),
        amount(floor, 3)
    );
    if wallet.nfts.is_empty() {
        section_title(title, focused).render(area, buf);
        let body = Rect::new(
            area.x,
            area.y.saturating_add(1),
            area.width,
            area.height.saturating_sub(1),
        );
        Span::styled("  no NFTs", theme::dim()).render(body, buf);
        return;
    }
    let wide = area.width >= 70;
    let rows: Vec<Row> = wallet
        .nfts
        .iter()
        .map(|n| {
            let mut cells = vec![
                Cell::from(sanitize_owned(&n.name)),
                Cell::from(sanitize_owned(&n.collection)),
                numeric(format!("{} SOL", amount(n.floor_price, 3))),
            ];
            if wide {
                cells.push(Cell::from(Span::styled(
                    sanitize_owned(&n.mint),
                    theme::dim(),
                )));
            }
            Row::new(cells)
        })
        .collect();
    let mut header = vec![
        Cell::from("Name"),
        Cell::from("Collection"),
        numeric("Floor".into()),
    ];
    let widths = if wide {
        header.push(Cell::from("Mint"));
        vec![
            Constraint::Length(22),
            Constraint::Length(20),
            Constraint::Length(12),
            Constraint::Min(8),
        ]
    } else {
        vec![
            Constraint::Min(10),
            Constraint::Min(8),
            Constraint::Length(11),
        ]
    };
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(theme::bold()))
        .row_highlight_style(theme::selected());
    let cursor = focused.then_some(w.nfts_scroll);
    titled_table(title, table, wallet.nfts.len(), cursor, focused, area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_get_what_they_need_or_share_by_focus() {
        assert_eq!(table_heights(2, 12, 30, false), [4, 14]);
        assert_eq!(table_heights(12, 0, 13, false), [10, 3]);
        assert_eq!(table_heights(12, 12, 12, true), [4, 8]);
        assert_eq!(table_heights(0, 0, 2, false), [2, 0]);
    }

    #[test]
    fn badges_wrap_under_their_label() {
        let items: Vec<String> = ["aaaa", "bbbb", "cccc"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let lines = badge_lines("Tags ", &items, tag_badge(), 20);
        let text: Vec<String> = lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(text, ["Tags  aaaa   bbbb  ", "      cccc  "]);
        let none = badge_lines("Tags ", &[], tag_badge(), 20);
        assert_eq!(none.len(), 1);
    }
}
