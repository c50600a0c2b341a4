//! The help overlay's content and geometry, from the key bindings alone: the sections (keys,
//! slash commands, each full-screen view's keys) and how they fit a screen. `view::help` draws
//! it; `App` asks how far it can scroll.

use ratatui::layout::Rect;
use unicode_width::UnicodeWidthStr;

use crate::accounts_view::AccountsState;
use crate::full_view::FullView;
use crate::kept_view::KeptState;
use crate::keys::KeyBindings;
use crate::layout::centered;
use crate::metrics::MetricsState;
use crate::slash::SlashCommand;
use crate::wallet::WalletState;

/// A row of the help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelpRow {
    /// A section's title, styled as a header.
    Header(String),
    /// Keys (or a command) and what they do.
    Entry(String, String),
    /// Space between two sections.
    Blank,
}

/// Every row of the help, in order: sections, each a header and its entries.
pub fn lines(keys: &KeyBindings) -> Vec<HelpRow> {
    let mut sections: Vec<(String, Vec<(String, String)>)> = vec![
        (
            "Keys".to_string(),
            keys.describe()
                .into_iter()
                .map(|(_, desc, b)| (b.label(), desc.to_string()))
                .collect(),
        ),
        (
            "Commands (type in the composer)".to_string(),
            SlashCommand::LIST
                .iter()
                .map(|(k, d)| (k.to_string(), d.to_string()))
                .collect(),
        ),
    ];
    sections.push(MetricsState::help(keys));
    sections.push(WalletState::help(keys));
    sections.push(AccountsState::help(keys));
    sections.push(KeptState::help(keys));
    let mut out = Vec::new();
    for (title, entries) in sections {
        if !out.is_empty() {
            out.push(HelpRow::Blank);
        }
        out.push(HelpRow::Header(title));
        out.extend(entries.into_iter().map(|(k, d)| HelpRow::Entry(k, d)));
    }
    out
}

/// Where the help goes on `screen` and how it is laid out.
pub struct HelpLayout {
    pub area: Rect,
    pub key_w: usize,
    pub col_w: usize,
    /// The rows of each column (one or two).
    pub columns: Vec<Vec<HelpRow>>,
}

pub fn layout(rows: &[HelpRow], screen: Rect) -> HelpLayout {
    let entries = || {
        rows.iter().filter_map(|r| match r {
            HelpRow::Entry(k, d) => Some((k, d)),
            _ => None,
        })
    };
    let key_w = entries()
        .map(|(k, _)| k.width())
        .max()
        .unwrap_or(0)
        .min(MAX_KEY_WIDTH);
    let desc_w = entries().map(|(_, d)| d.width()).max().unwrap_or(0);
    let header_w = rows
        .iter()
        .filter_map(|r| match r {
            HelpRow::Header(t) => Some(t.width() + 2),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    // One entry: " key  desc " — two columns only when neither would be cut.
    let entry_w = (key_w + desc_w + 3).max(header_w);
    let wide = (2 * entry_w + 2) as u16;
    let area = centered(
        screen,
        wide.min(screen.width.saturating_sub(2)),
        screen.height.saturating_sub(2).max(3),
    );
    let inner_w = area.width.saturating_sub(2) as usize;
    let columns = if inner_w >= 2 * entry_w {
        split_at_a_section(rows)
    } else {
        vec![rows.to_vec()]
    };
    HelpLayout {
        area,
        key_w,
        col_w: inner_w / columns.len(),
        columns,
    }
}

/// Two columns as even as can be, the second starting at a section's header so that no
/// header is parted from its entries.
fn split_at_a_section(rows: &[HelpRow]) -> Vec<Vec<HelpRow>> {
    let best = rows
        .iter()
        .enumerate()
        .filter(|(i, r)| *i > 0 && matches!(r, HelpRow::Header(_)))
        // The blank row before the header stays out of both columns.
        .min_by_key(|(i, _)| (i - 1).max(rows.len() - i))
        .map(|(i, _)| i);
    match best {
        Some(i) => vec![rows[..i - 1].to_vec(), rows[i..].to_vec()],
        None => vec![rows.to_vec()],
    }
}

/// The largest useful scroll offset of the help on `screen`.
pub fn max_scroll(keys: &KeyBindings, screen: Rect) -> u16 {
    let l = layout(&lines(keys), screen);
    let rows = l.columns.iter().map(Vec::len).max().unwrap_or(0);
    (rows as u16).saturating_sub(l.area.height.saturating_sub(2))
}

/// Key labels longer than this are cut (a binding with many keys).
const MAX_KEY_WIDTH: usize = 22;
