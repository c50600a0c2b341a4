//! The wallet view (F3, `/wallet ID`): a wallet-id prompt that remembers recent ids, then the
//! wallet's address, alias, balance, token accounts, NFTs, risk score, factors and tags.

pub mod recent;
pub mod update;
pub mod worker;

use crate::line_input::LineInput;
use convo_client::api::Wallet;

/// The parts of the view that Tab moves between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalletSection {
    Prompt,
    Tokens,
    Nfts,
}

impl WalletSection {
    pub fn next(self) -> Self {
        match self {
            WalletSection::Prompt => WalletSection::Tokens,
            WalletSection::Tokens => WalletSection::Nfts,
            WalletSection::Nfts => WalletSection::Prompt,
        }
    }

    pub fn prev(self) -> Self {
        match self {
            WalletSection::Prompt => WalletSection::Nfts,
            WalletSection::Tokens => WalletSection::Prompt,
            WalletSection::Nfts => WalletSection::Tokens,
        }
    }
}

/// Whether the client has a token for the wallet endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenStatus {
    /// Not reported yet: try, and learn from the answer.
    Unknown,
    Configured,
    Missing,
}

/// Why a wallet could not be shown, in the terms the view explains.
#[derive(Debug, Clone, PartialEq)]
pub enum WalletFailure {
    /// No wallet token is configured.
    NoToken,
    /// The token was refused (401): expired, or signed with another secret.
    Unauthorized(String),
    /// `wallet_not_found`.
    NotFound,
    /// Anything else, as one line.
    Other(String),
}

/// What the view shows below the prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum WalletLoad {
    Idle,
    Loading {
        fetch_id: u64,
        wallet_id: String,
    },
    Loaded(Box<Wallet>),
    Failed {
        wallet_id: String,
        failure: WalletFailure,
    },
}

/// The wallet view's whole state.
#[derive(Debug, Clone)]
pub struct WalletState {
    /// The id being typed.
    pub input: LineInput,
    /// What is wrong with `input`, shown inline.
    pub input_error: Option<String>,
    pub section: WalletSection,
    /// Ids fetched before, most recent first (kept on disk by the loop).
    pub recent: Vec<String>,
    /// Ids the server is known to have (the embedded service's wallets).
    pub known: Vec<String>,
    /// Position in `suggestions()` while ↑/↓ cycles through them.
    pub suggestion: Option<usize>,
    pub load: WalletLoad,
    pub token: TokenStatus,
    /// First visible row of each table.
    pub tokens_scroll: usize,
    pub nfts_scroll: usize,
    next_fetch: u64,
}

impl Default for WalletState {
    fn default() -> Self {
        WalletState {
            input: LineInput::new(MAX_ID_CHARS),
            input_error: None,
            section: WalletSection::Prompt,
            recent: Vec::new(),
            known: Vec::new(),
            suggestion: None,
            load: WalletLoad::Idle,
            token: TokenStatus::Unknown,
            tokens_scroll: 0,
            nfts_scroll: 0,
            next_fetch: 1,
        }
    }
}

impl WalletState {
    /// Recent ids first, then the known ones not among them.
    pub fn suggestions(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.recent.iter().map(String::as_str).collect();
        for k in &self.known {
            if !out.contains(&k.as_str()) {
                out.push(k);
            }
        }
        out
    }

    pub fn wallet(&self) -> Option<&Wallet> {
        match &self.load {
            WalletLoad::Loaded(w) => Some(w),
            _ => None,
        }
    }

    pub fn is_loading(&self) -> bool {
        matches!(self.load, WalletLoad::Loading { .. })
    }
}

/// Work for the wallet worker.
#[derive(Debug, Clone, PartialEq)]
pub enum WalletRequest {
    /// GET the wallet; the answer comes back with `fetch_id`.
    Fetch { fetch_id: u64, wallet_id: String },
    /// Keep these recent ids (most recent first) for the next start.
    SaveRecent(Vec<String>),
}

/// Reports to the wallet view.
#[derive(Debug, Clone, PartialEq)]
pub enum WalletEvent {
    Fetched {
        fetch_id: u64,
        result: Result<Box<Wallet>, WalletFailure>,
    },
    /// The recent ids saved by an earlier run.
    RecentLoaded(Vec<String>),
    /// Whether the client has a wallet token.
    Token(TokenStatus),
}

/// Longest wallet id accepted at the prompt.
pub const MAX_ID_CHARS: usize = 128;
/// Checks a wallet id as typed: not empty, not too long, no spaces or control characters.
pub fn validate_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("type a wallet id".to_string());
    }
    if id.chars().count() > MAX_ID_CHARS {
        return Err(format!("a wallet id has at most {MAX_ID_CHARS} characters"));
    }
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a wallet id has no spaces or control characters".to_string());
    }
    Ok(())
}

/// The wallet ids of the embedded local service (`assets/wallets.json`), offered as
/// suggestions when connected to it.
pub fn embedded_wallet_ids() -> Vec<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Id {
        wallet_id: String,
    }
    serde_json::from_str::<Vec<Id>>(include_str!("../../../../assets/wallets.json"))
        .map(|v| v.into_iter().map(|w| w.wallet_id).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_ids_are_offered() {
        let ids = embedded_wallet_ids();
        assert!(ids.contains(&"treasury".to_string()), "{ids:?}");
        assert!(ids.contains(&"flagged".to_string()));
    }

    #[test]
    fn suggestions_put_recent_ids_first_without_repeats() {
        let s = WalletState {
            recent: vec!["flagged".into(), "mine".into()],
            known: vec!["treasury".into(), "flagged".into()],
            ..WalletState::default()
        };
        assert_eq!(s.suggestions(), ["flagged", "mine", "treasury"]);
    }
}
