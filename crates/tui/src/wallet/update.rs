//! How the wallet view's state changes: opening, keys, pastes, scrolling and fetch answers.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::validate_id;
use super::{
    TokenStatus, WalletEvent, WalletFailure, WalletLoad, WalletRequest, WalletSection, WalletState,
    recent,
};
use crate::key_result::KeyResult;
use crate::keys::KeyBindings;
use crate::line_input::LineKey;

/// Rows a page key scrolls a table.
const PAGE: usize = 10;

impl WalletState {
    /// F3 (no id) or `/wallet ID`: the view is shown, fetching `wallet_id` if given. The ids of
    /// the embedded service's wallets are suggested when connected to it (`embedded`).
    pub fn open(&mut self, wallet_id: Option<&str>, embedded: bool, out: &mut Vec<WalletRequest>) {
        self.known = if embedded {
            super::embedded_wallet_ids()
        } else {
            Vec::new()
        };
        match wallet_id.map(str::trim).filter(|id| !id.is_empty()) {
            Some(id) => {
                self.fetch(id, out);
                self.section = if self.input_error.is_some() {
                    WalletSection::Prompt
                } else {
                    WalletSection::Tokens
                };
            }
            None if matches!(self.load, WalletLoad::Idle) => self.section = WalletSection::Prompt,
            // A wallet is shown (or coming) and F3 is pressed again: ready for another id,
            // typed from scratch (the shown one stays under Up/Down among the recent ones).
            None => {
                self.section = WalletSection::Prompt;
                self.input.clear();
                self.suggestion = None;
                self.input_error = None;
            }
        }
    }

    /// Asks for a wallet. An invalid id is refused inline with no request.
    pub fn fetch(&mut self, wallet_id: &str, out: &mut Vec<WalletRequest>) {
        let wallet_id = wallet_id.trim();
        if let Err(e) = validate_id(wallet_id) {
            self.input_error = Some(e);
            return;
        }
        self.input.set_text(wallet_id);
        self.input_error = None;
        self.suggestion = None;
        let fetch_id = self.next_fetch;
        self.next_fetch += 1;
        self.load = WalletLoad::Loading {
            fetch_id,
            wallet_id: wallet_id.to_string(),
        };
        self.tokens_scroll = 0;
        self.nfts_scroll = 0;
        out.push(WalletRequest::Fetch {
            fetch_id,
            wallet_id: wallet_id.to_string(),
        });
    }

    /// The id of the wallet shown, loading or failed.
    pub fn shown_id(&self) -> Option<&str> {
        match &self.load {
            WalletLoad::Idle => None,
            WalletLoad::Loading { wallet_id, .. } | WalletLoad::Failed { wallet_id, .. } => {
                Some(wallet_id)
            }
            WalletLoad::Loaded(w) => Some(&w.wallet_id),
        }
    }

    /// A key while the wallet view is shown.
    pub fn handle_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        out: &mut Vec<WalletRequest>,
    ) -> KeyResult {
        if keys.stop_or_quit.matches(key) {
            if self.is_loading() {
                // The answer, if it still comes, is ignored.
                self.load = WalletLoad::Idle;
                return KeyResult::Consumed;
            }
            return KeyResult::Quit;
        }
        if keys.back.matches(key) {
            return KeyResult::Back;
        }
        if keys.focus_next.matches(key) {
            self.section = self.section.next();
            return KeyResult::Consumed;
        }
        if keys.focus_prev.matches(key) {
            self.section = self.section.prev();
            return KeyResult::Consumed;
        }
        let consumed = match self.section {
            WalletSection::Prompt => self.prompt_key(key, out),
            WalletSection::Tokens | WalletSection::Nfts => self.table_key(keys, key, out),
        };
        if consumed {
            KeyResult::Consumed
        } else if self.section != WalletSection::Prompt && keys.quit.matches(key) {
            KeyResult::Quit
        } else if self.section != WalletSection::Prompt
            && matches!(key.code, KeyCode::Char(c) if !c.is_control())
            && !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
        {
            // A character no table key uses starts a new id in the prompt, never dropped.
            self.section = WalletSection::Prompt;
            self.input.clear();
            self.suggestion = None;
            self.input_error = None;
            self.prompt_key(key, out);
            KeyResult::Consumed
        } else {
            KeyResult::NotConsumed
        }
    }

    fn prompt_key(&mut self, key: &KeyEvent, out: &mut Vec<WalletRequest>) -> bool {
        match key.code {
            KeyCode::Enter => {
                let id = self.input.text().to_string();
                self.fetch(&id, out);
                if self.input_error.is_none() {
                    self.section = WalletSection::Tokens;
                }
            }
            KeyCode::Up | KeyCode::Down => {
                let n = self.suggestions().len();
                if n == 0 {
                    return true;
                }
                let next = match (self.suggestion, key.code) {
                    (None, KeyCode::Down) => 0,
                    (None, _) => n - 1,
                    (Some(i), KeyCode::Down) => (i + 1) % n,
                    (Some(i), _) => (i + n - 1) % n,
                };
                self.suggestion = Some(next);
                let id = self.suggestions()[next].to_string();
                self.input.set_text(&id);
                self.input_error = None;
            }
            _ => match self.input.key(key) {
                LineKey::Edited => {
                    self.suggestion = None;
                    // Nothing typed is not an error yet.
                    self.input_error = (!self.input.is_empty())
                        .then(|| validate_id(self.input.text()).err())
                        .flatten();
                }
                LineKey::Moved => {}
                LineKey::Ignored => return false,
            },
        }
        true
    }

    fn table_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        out: &mut Vec<WalletRequest>,
    ) -> bool {
        if keys.refresh.matches(key) {
            if let Some(id) = self.shown_id().map(str::to_string) {
                let section = self.section;
                self.fetch(&id, out);
                self.section = section;
            }
            return true;
        }
        let len = match (self.section, self.wallet()) {
            (WalletSection::Tokens, Some(w)) => w.token_accounts.len(),
            (WalletSection::Nfts, Some(w)) => w.nfts.len(),
            _ => 0,
        };
        let scroll = match self.section {
            WalletSection::Nfts => &mut self.nfts_scroll,
            _ => &mut self.tokens_scroll,
        };
        let last = len.saturating_sub(1);
        if keys.move_up.matches(key) {
            *scroll = scroll.saturating_sub(1);
        } else if keys.move_down.matches(key) {
            *scroll = (*scroll + 1).min(last);
        } else if keys.scroll_up.matches(key) {
            *scroll = scroll.saturating_sub(PAGE);
        } else if keys.scroll_down.matches(key) {
            *scroll = (*scroll + PAGE).min(last);
        } else if keys.scroll_top.matches(key) {
            *scroll = 0;
        } else if keys.scroll_bottom.matches(key) {
            *scroll = last;
        } else {
            return false;
        }
        true
    }

    /// The mouse wheel: scrolls the NFTs when they have focus, else the token accounts.
    pub fn scroll(&mut self, delta: isize) {
        let (len, pos) = match (self.section, self.wallet()) {
            (_, None) => return,
            (WalletSection::Nfts, Some(w)) => (w.nfts.len(), &mut self.nfts_scroll),
            (_, Some(w)) => (w.token_accounts.len(), &mut self.tokens_scroll),
        };
        *pos = (*pos as isize + delta).clamp(0, len.saturating_sub(1) as isize) as usize;
    }

    /// Pasted text goes into the prompt (first line only).
    pub fn paste(&mut self, text: &str) {
        let line = text.lines().next().unwrap_or("").trim();
        self.section = WalletSection::Prompt;
        self.input.paste(line);
        self.suggestion = None;
        self.input_error = validate_id(self.input.text()).err();
    }

    /// A report from the worker or the loop.
    pub fn on_event(&mut self, ev: WalletEvent, out: &mut Vec<WalletRequest>) {
        match ev {
            WalletEvent::Fetched { fetch_id, result } => {
                let WalletLoad::Loading {
                    fetch_id: want,
                    wallet_id,
                } = &self.load
                else {
                    return;
                };
                if *want != fetch_id {
                    return;
                }
                let wallet_id = wallet_id.clone();
                match result {
                    Ok(mut w) => {
                        // Most valuable first.
                        w.token_accounts
                            .sort_by(|a, b| b.usd_value.total_cmp(&a.usd_value));
                        w.nfts
                            .sort_by(|a, b| b.floor_price.total_cmp(&a.floor_price));
                        self.token = TokenStatus::Configured;
                        recent::remember(&mut self.recent, &wallet_id);
                        out.push(WalletRequest::SaveRecent(self.recent.clone()));
                        self.load = WalletLoad::Loaded(w);
                    }
                    Err(failure) => {
                        if failure == WalletFailure::NoToken {
                            self.token = TokenStatus::Missing;
                        }
                        self.load = WalletLoad::Failed { wallet_id, failure };
                    }
                }
            }
            WalletEvent::RecentLoaded(ids) => {
                // Ids fetched before the file was read stay first.
                let mut merged = self.recent.clone();
                for id in ids {
                    if !merged.contains(&id) {
                        merged.push(id);
                    }
                }
                merged.truncate(recent::MAX_RECENT);
                self.recent = merged;
            }
            WalletEvent::Token(status) => self.token = status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use convo_client::api::Wallet;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn wallet(id: &str) -> Box<Wallet> {
        Box::new(
            serde_json::from_value(serde_json::json!({
                "walletId": id, "address": "Addr1", "alias": "Alias", "balance": 1.5,
                "tokenAccounts": [
                    {"mint": "m1", "symbol": "AAA", "balance": 1.0, "usdValue": 5.0},
                    {"mint": "m2", "symbol": "BBB", "balance": 2.0, "usdValue": 50.0}
                ],
                "nfts": [], "riskScore": 12, "riskFactors": [], "tags": ["x"]
            }))
            .unwrap(),
        )
    }

    fn fetch_id(reqs: &[WalletRequest]) -> u64 {
        reqs.iter()
            .find_map(|r| match r {
                WalletRequest::Fetch { fetch_id, .. } => Some(*fetch_id),
                _ => None,
            })
            .expect("a fetch")
    }

    #[test]
    fn typing_an_id_and_enter_fetches_it_and_remembers_it() {
        let keys = KeyBindings::default();
        let mut s = WalletState::default();
        let mut reqs = Vec::new();
        for c in "treasury".chars() {
            assert_eq!(
                s.handle_key(&keys, &key(KeyCode::Char(c)), &mut reqs),
                KeyResult::Consumed
            );
        }
        s.handle_key(&keys, &key(KeyCode::Enter), &mut reqs);
        assert_eq!(
            reqs,
            vec![WalletRequest::Fetch {
                fetch_id: 1,
                wallet_id: "treasury".into()
            }]
        );
        assert!(s.is_loading());
        assert_eq!(s.section, WalletSection::Tokens);
        let mut out = Vec::new();
        s.on_event(
            WalletEvent::Fetched {
                fetch_id: 1,
                result: Ok(wallet("treasury")),
            },
            &mut out,
        );
        assert_eq!(
            out,
            vec![WalletRequest::SaveRecent(vec!["treasury".into()])]
        );
        let w = s.wallet().unwrap();
        // Sorted by USD value, most valuable first.
        assert_eq!(w.token_accounts[0].symbol, "BBB");
        assert_eq!(s.token, TokenStatus::Configured);
    }

    #[test]
    fn with_a_wallet_shown_f3_again_and_typed_characters_go_to_the_prompt() {
        let keys = KeyBindings::default();
        let mut s = WalletState::default();
        let mut reqs = Vec::new();
        s.open(Some("treasury"), false, &mut reqs);
        let id = fetch_id(&reqs);
        s.on_event(
            WalletEvent::Fetched {
                fetch_id: id,
                result: Ok(wallet("treasury")),
            },
            &mut Vec::new(),
        );
        assert_eq!(s.section, WalletSection::Tokens);
        // F3 again: the prompt, empty, takes what is typed.
        s.open(None, false, &mut reqs);
        assert_eq!(s.section, WalletSection::Prompt);
        for c in "ops".chars() {
            s.handle_key(&keys, &key(KeyCode::Char(c)), &mut reqs);
        }
        assert_eq!(s.input.text(), "ops");
        // From the table, a character no table key uses starts a new id too; j and q keep
        // their meaning there.
        s.section = WalletSection::Tokens;
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Char('j')), &mut reqs),
            KeyResult::Consumed
        );
        assert_eq!(s.section, WalletSection::Tokens);
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Char('x')), &mut reqs),
            KeyResult::Consumed
        );
        assert_eq!((s.section, s.input.text()), (WalletSection::Prompt, "x"));
        s.section = WalletSection::Tokens;
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Char('q')), &mut reqs),
            KeyResult::Quit
        );
    }

    #[test]
    fn bad_ids_are_refused_inline() {
        let keys = KeyBindings::default();
        let mut s = WalletState::default();
        let mut reqs = Vec::new();
        s.handle_key(&keys, &key(KeyCode::Enter), &mut reqs);
        assert!(reqs.is_empty());
        assert_eq!(s.input_error.as_deref(), Some("type a wallet id"));
        assert_eq!(s.section, WalletSection::Prompt);
        s.handle_key(&keys, &key(KeyCode::Char('a')), &mut reqs);
        s.handle_key(&keys, &key(KeyCode::Char(' ')), &mut reqs);
        s.handle_key(&keys, &key(KeyCode::Char('b')), &mut reqs);
        assert!(s.input_error.as_deref().unwrap().contains("no spaces"));
        s.handle_key(&keys, &key(KeyCode::Enter), &mut reqs);
        assert!(reqs.is_empty());
    }

    #[test]
    fn a_slip_in_the_id_is_mended_where_it_is() {
        let keys = KeyBindings::default();
        let mut s = WalletState::default();
        let mut reqs = Vec::new();
        for c in "tresury".chars() {
            s.handle_key(&keys, &key(KeyCode::Char(c)), &mut reqs);
        }
        s.handle_key(&keys, &key(KeyCode::Home), &mut reqs);
        for _ in 0..3 {
            s.handle_key(&keys, &key(KeyCode::Right), &mut reqs);
        }
        s.handle_key(&keys, &key(KeyCode::Char('a')), &mut reqs);
        assert_eq!(s.input.text(), "treasury");
        assert_eq!(s.input.cursor(), 4);
        // A space typed in the middle is refused as it would be at the end.
        s.handle_key(&keys, &key(KeyCode::Char(' ')), &mut reqs);
        assert!(s.input_error.as_deref().unwrap().contains("no spaces"));
        s.handle_key(&keys, &key(KeyCode::Backspace), &mut reqs);
        assert_eq!(s.input_error, None);
        s.handle_key(&keys, &key(KeyCode::Enter), &mut reqs);
        assert_eq!(
            reqs,
            vec![WalletRequest::Fetch {
                fetch_id: 1,
                wallet_id: "treasury".into()
            }]
        );
    }

    #[test]
    fn up_and_down_cycle_through_recent_then_known_ids() {
        let keys = KeyBindings::default();
        let mut s = WalletState {
            recent: vec!["mine".into()],
            known: vec!["treasury".into(), "empty".into()],
            ..WalletState::default()
        };
        let mut reqs = Vec::new();
        s.handle_key(&keys, &key(KeyCode::Down), &mut reqs);
        assert_eq!(s.input.text(), "mine");
        s.handle_key(&keys, &key(KeyCode::Down), &mut reqs);
        assert_eq!(s.input.text(), "treasury");
        s.handle_key(&keys, &key(KeyCode::Up), &mut reqs);
        s.handle_key(&keys, &key(KeyCode::Up), &mut reqs);
        assert_eq!(s.input.text(), "empty");
        // `q`, `j` and `?` are text in the prompt.
        s.handle_key(&keys, &key(KeyCode::Char('q')), &mut reqs);
        assert_eq!(s.input.text(), "emptyq");
    }

    #[test]
    fn failures_are_kept_with_the_id_and_stale_answers_dropped() {
        let mut s = WalletState::default();
        let mut reqs = Vec::new();
        s.fetch("ghost", &mut reqs);
        s.fetch("nope", &mut reqs);
        let mut out = Vec::new();
        s.on_event(
            WalletEvent::Fetched {
                fetch_id: 1,
                result: Ok(wallet("ghost")),
            },
            &mut out,
        );
        assert!(s.is_loading() && out.is_empty());
        s.on_event(
            WalletEvent::Fetched {
                fetch_id: fetch_id(&reqs[1..]),
                result: Err(WalletFailure::NotFound),
            },
            &mut out,
        );
        assert_eq!(
            s.load,
            WalletLoad::Failed {
                wallet_id: "nope".into(),
                failure: WalletFailure::NotFound
            }
        );
        assert!(s.recent.is_empty());
        s.fetch("x", &mut reqs);
        s.on_event(
            WalletEvent::Fetched {
                fetch_id: 3,
                result: Err(WalletFailure::NoToken),
            },
            &mut out,
        );
        assert_eq!(s.token, TokenStatus::Missing);
    }

    #[test]
    fn tables_scroll_within_their_rows_and_r_refetches() {
        let keys = KeyBindings::default();
        let mut s = WalletState::default();
        let mut reqs = Vec::new();
        s.fetch("treasury", &mut reqs);
        let mut out = Vec::new();
        s.on_event(
            WalletEvent::Fetched {
                fetch_id: 1,
                result: Ok(wallet("treasury")),
            },
            &mut out,
        );
        s.section = WalletSection::Tokens;
        for _ in 0..5 {
            s.handle_key(&keys, &key(KeyCode::Down), &mut reqs);
        }
        assert_eq!(s.tokens_scroll, 1);
        s.handle_key(&keys, &key(KeyCode::Char('k')), &mut reqs);
        assert_eq!(s.tokens_scroll, 0);
        // The mouse wheel stays within the rows.
        s.scroll(5);
        assert_eq!(s.tokens_scroll, 1);
        s.scroll(-9);
        assert_eq!(s.tokens_scroll, 0);
        reqs.clear();
        s.handle_key(&keys, &key(KeyCode::Char('r')), &mut reqs);
        assert_eq!(fetch_id(&reqs), 2);
        assert_eq!(s.section, WalletSection::Tokens);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(s.handle_key(&keys, &ctrl_c, &mut reqs), KeyResult::Consumed);
        assert_eq!(s.load, WalletLoad::Idle);
        assert_eq!(s.handle_key(&keys, &ctrl_c, &mut reqs), KeyResult::Quit);
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Char('q')), &mut reqs),
            KeyResult::Quit
        );
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Esc), &mut reqs),
            KeyResult::Back
        );
    }

    #[test]
    fn recent_ids_from_disk_come_after_those_of_this_run() {
        let mut s = WalletState {
            recent: vec!["b".into()],
            ..WalletState::default()
        };
        let mut out = Vec::new();
        s.on_event(
            WalletEvent::RecentLoaded(vec!["a".into(), "b".into()]),
            &mut out,
        );
        assert_eq!(s.recent, ["b", "a"]);
    }
}
