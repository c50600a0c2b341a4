//! The accounts view's update: keys (move, sort, `/` filter, Enter for details, `r`), the
//! worker's answers and the admin feed's changes, which return the alerts they raise.

use chrono::{DateTime, Duration, Utc};
use crossterm::event::{KeyCode, KeyEvent};

use super::window::clamp_offset;
use super::{
    AccountsEvent, AccountsRequest, AccountsState, AdminFailure, Availability, Crossing,
    DETAIL_DAYS, Day, Details, next_sort,
};
use crate::key_result::KeyResult;
use crate::keys::{KeyBindings, typed_char};
use crate::line_input::LineKey;
use convo_client::api::AdminAccount;
use convo_client::sanitize::sanitize_owned;

/// An account as the service sent it, its text made terminal-safe.
pub fn clean(mut a: AdminAccount) -> AdminAccount {
    a.name = sanitize_owned(&a.name);
    a.tier = sanitize_owned(&a.tier);
    for hint in &mut a.key_hints {
        *hint = sanitize_owned(hint);
    }
    a
}

/// The `DETAIL_DAYS` days up to `now`: each from midnight (UTC) to the next, the last to now.
pub fn detail_days(now: DateTime<Utc>) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let today = now
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .map(|d| d.and_utc())
        .unwrap_or(now);
    (0..DETAIL_DAYS)
        .map(|i| {
            let start = today - Duration::days((DETAIL_DAYS - 1 - i) as i64);
            (start, (start + Duration::days(1)).min(now))
        })
        .collect()
}

impl AccountsState {
    /// The view is shown: the alerts are seen, and the list is loaded the first time.
    pub fn open(&mut self, out: &mut Vec<AccountsRequest>) {
        self.unseen_alerts = 0;
        if self.availability == Availability::Available && !self.loaded && self.loading.is_none() {
            self.load(false, out);
        }
    }

    fn load(&mut self, debounce: bool, out: &mut Vec<AccountsRequest>) {
        let seq = self.seq();
        self.loading = Some(seq);
        let q = Some(self.filter.text().trim().to_string()).filter(|q| !q.is_empty());
        out.push(AccountsRequest::Load {
            seq,
            sort: self.sort,
            q,
            debounce,
        });
    }

    fn move_to(&mut self, row: isize) {
        let last = self.rows.len().saturating_sub(1) as isize;
        self.selected = row.clamp(0, last.max(0)) as usize;
        self.offset = clamp_offset(self.offset, self.selected, self.page_rows, self.rows.len());
    }

    /// The mouse wheel: moves the selection.
    pub fn scroll(&mut self, delta: isize) {
        if self.details.is_none() {
            self.move_to(self.selected as isize + delta);
        }
    }

    /// Pasted text goes to the filter while it is edited; its load goes out at the next
    /// [`AccountsState::flush`].
    pub fn paste(&mut self, text: &str) {
        if self.filtering && self.filter.paste(text) {
            self.filter_changed = true;
        }
    }

    /// After each event: the rows the screen has room for (the table's height), and the load
    /// of a filter changed by a paste.
    pub fn flush(&mut self, page_rows: usize, out: &mut Vec<AccountsRequest>) {
        self.page_rows = page_rows;
        self.offset = clamp_offset(self.offset, self.selected, page_rows, self.rows.len());
        if std::mem::take(&mut self.filter_changed) {
            self.load(true, out);
        }
    }

    /// A key while the view is shown, at `now`.
    pub fn handle_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<AccountsRequest>,
    ) -> KeyResult {
        if self.details.is_some() {
            return self.details_key(keys, key, now, out);
        }
        if self.filtering {
            return self.filter_key(key, out);
        }
        if self.availability != Availability::Available {
            return if keys.back.matches(key) {
                KeyResult::Back
            } else {
                KeyResult::NotConsumed
            };
        }
        let page = self.page_rows.max(1) as isize;
        let at = self.selected as isize;
        if keys.back.matches(key) {
            return KeyResult::Back;
        } else if keys.move_up.matches(key) {
            self.move_to(at - 1);
        } else if keys.move_down.matches(key) {
            self.move_to(at + 1);
        } else if keys.scroll_up.matches(key) {
            self.move_to(at - page);
        } else if keys.scroll_down.matches(key) {
            self.move_to(at + page);
        } else if keys.scroll_top.matches(key) {
            self.move_to(0);
        } else if keys.scroll_bottom.matches(key) {
            self.move_to(isize::MAX);
        } else if typed_char(key) == Some('s') {
            self.sort = next_sort(self.sort);
            self.selected = 0;
            self.offset = 0;
            self.load(false, out);
        } else if keys.filter_sessions.matches(key) {
            self.filtering = true;
        } else if keys.refresh.matches(key) {
            self.load(false, out);
        } else if key.code == KeyCode::Enter {
            self.open_details(now, out);
        } else if keys.quit.matches(key) {
            return KeyResult::Quit;
        } else {
            return KeyResult::NotConsumed;
        }
        KeyResult::Consumed
    }

    fn filter_key(&mut self, key: &KeyEvent, out: &mut Vec<AccountsRequest>) -> KeyResult {
        match key.code {
            KeyCode::Enter => self.filtering = false,
            KeyCode::Esc => {
                self.filtering = false;
                if !self.filter.is_empty() {
                    self.filter.clear();
                    self.load(false, out);
                }
            }
            _ => match self.filter.key(key) {
                LineKey::Edited => {
                    self.selected = 0;
                    self.offset = 0;
                    self.load(true, out);
                }
                LineKey::Moved => {}
                LineKey::Ignored => return KeyResult::NotConsumed,
            },
        }
        KeyResult::Consumed
    }

    fn open_details(&mut self, now: DateTime<Utc>, out: &mut Vec<AccountsRequest>) {
        let Some(account) = self.selected_account().cloned() else {
            return;
        };
        let seq = self.seq();
        let days = detail_days(now);
        out.push(AccountsRequest::Details {
            seq,
            account_id: account.account_id,
            days: days.clone(),
        });
        self.details = Some(Details {
            seq,
            account,
            days: days
                .into_iter()
                .map(|(start, _)| Day {
                    start,
                    metrics: None,
                })
                .collect(),
        });
    }

    fn details_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<AccountsRequest>,
    ) -> KeyResult {
        if keys.back.matches(key) {
            self.details = None;
        } else if keys.refresh.matches(key) {
            self.open_details(now, out);
        } else if keys.quit.matches(key) {
            return KeyResult::Quit;
        } else {
            return KeyResult::NotConsumed;
        }
        KeyResult::Consumed
    }

    /// A report of the worker or the admin feed; the alerts it raises (once per crossing).
    pub fn on_event(
        &mut self,
        event: AccountsEvent,
        out: &mut Vec<AccountsRequest>,
    ) -> Vec<Crossing> {
        let mut crossings = Vec::new();
        match event {
            AccountsEvent::Loaded { seq, result } => {
                if self.loading != Some(seq) {
                    return crossings;
                }
                self.loading = None;
                match result {
                    Ok((total, rows)) => {
                        self.rows = rows.into_iter().map(clean).collect();
                        self.total = total;
                        self.loaded = true;
                        self.error = None;
                        self.availability = Availability::Available;
                        for a in &self.rows {
                            crossings.extend(self.alerts.observe(a));
                        }
                        let selected = self.selected as isize;
                        self.move_to(selected);
                    }
                    Err(failure) => self.failed(failure),
                }
            }
            AccountsEvent::Day { seq, index, result } => {
                if let Some(d) = self.details.as_mut().filter(|d| d.seq == seq)
                    && let Some(day) = d.days.get_mut(index)
                {
                    day.metrics = Some(result);
                }
            }
            AccountsEvent::FeedStarted { admin_key } => {
                self.availability = if admin_key {
                    Availability::Available
                } else {
                    Availability::NoAdminKey
                };
            }
            AccountsEvent::Hello { total } => {
                self.live = true;
                // Accounts came or went while away: the list is fetched again.
                if self.loaded && self.filter.is_empty() && total != self.total {
                    self.load(false, out);
                }
            }
            AccountsEvent::Changed(accounts) => {
                for a in accounts.into_iter().map(clean) {
                    crossings.extend(self.alerts.observe(&a));
                    if let Some(d) = self
                        .details
                        .as_mut()
                        .filter(|d| d.account.account_id == a.account_id)
                    {
                        d.account = a.clone();
                    }
                    match self.rows.iter_mut().find(|r| r.account_id == a.account_id) {
                        Some(row) => *row = a,
                        None if self.loaded && self.filter.is_empty() => {
                            self.rows.push(a);
                            self.total += 1;
                        }
                        None => {}
                    }
                }
            }
            AccountsEvent::Live(live) => self.live = live,
            AccountsEvent::FeedFailed(failure) => {
                if !self.loaded {
                    self.failed(failure);
                }
            }
        }
        if let Some(last) = crossings.last() {
            self.unseen_alerts += crossings.len();
            self.last_alert = Some(last.clone());
        }
        crossings
    }

    fn failed(&mut self, failure: AdminFailure) {
        match &failure {
            AdminFailure::NoAdminKey => self.availability = Availability::NoAdminKey,
            AdminFailure::Unsupported => self.availability = Availability::Unsupported,
            AdminFailure::Unauthorized(m) => self.availability = Availability::Refused(m.clone()),
            AdminFailure::Other(_) => {}
        }
        self.error = Some(failure);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts_view::alerts::test_account as account;
    use convo_client::api::AccountSort;
    use crossterm::event::{KeyEvent, KeyModifiers};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn now() -> DateTime<Utc> {
        "2026-11-26T10:30:00Z".parse().unwrap()
    }

    fn ready(n: u64) -> AccountsState {
        let mut s = AccountsState::default();
        let mut out = Vec::new();
        s.on_event(AccountsEvent::FeedStarted { admin_key: true }, &mut out);
        s.open(&mut out);
        let seq = s.loading.unwrap();
        let rows = (1..=n).map(|i| account(i, i % 100, 0)).collect();
        s.on_event(
            AccountsEvent::Loaded {
                seq,
                result: Ok((n, rows)),
            },
            &mut out,
        );
        s
    }

    fn press(s: &mut AccountsState, code: KeyCode) -> (KeyResult, Vec<AccountsRequest>) {
        let keys = KeyBindings::defaults().unwrap();
        let mut out = Vec::new();
        let r = s.handle_key(&keys, &key(code), now(), &mut out);
        (r, out)
    }

    #[test]
    fn opening_loads_once_and_only_with_an_admin_key() {
        let mut s = AccountsState::default();
        let mut out = Vec::new();
        s.on_event(AccountsEvent::FeedStarted { admin_key: false }, &mut out);
        s.open(&mut out);
        assert!(out.is_empty());
        assert_eq!(s.availability, Availability::NoAdminKey);
        s.on_event(AccountsEvent::FeedStarted { admin_key: true }, &mut out);
        s.open(&mut out);
        s.open(&mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(matches!(
            &out[0],
            AccountsRequest::Load {
                sort: AccountSort::Share,
                q: None,
                debounce: false,
                ..
            }
        ));
    }

    #[test]
    fn s_cycles_the_sort_and_reloads() {
        let mut s = ready(3);
        let mut sorts = Vec::new();
        for _ in 0..4 {
            let (r, out) = press(&mut s, KeyCode::Char('s'));
            assert_eq!(r, KeyResult::Consumed);
            match &out[..] {
                [AccountsRequest::Load { sort, .. }] => sorts.push(*sort),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            sorts,
            [
                AccountSort::Requests,
                AccountSort::Tokens,
                AccountSort::Name,
                AccountSort::Share
            ]
        );
    }

    #[test]
    fn the_filter_is_sent_debounced_and_stale_answers_are_dropped() {
        let mut s = ready(3);
        press(&mut s, KeyCode::Char('/'));
        assert!(s.filtering);
        let (_, first) = press(&mut s, KeyCode::Char('p'));
        let (_, second) = press(&mut s, KeyCode::Char('r'));
        let seq_of = |out: &[AccountsRequest]| match out {
            [
                AccountsRequest::Load {
                    seq, q, debounce, ..
                },
            ] => {
                assert!(*debounce);
                (*seq, q.clone())
            }
            other => panic!("{other:?}"),
        };
        let (old, _) = seq_of(&first);
        let (new, q) = seq_of(&second);
        assert_eq!(q.as_deref(), Some("pr"));
        let mut out = Vec::new();
        // The first load's answer comes late: dropped.
        s.on_event(
            AccountsEvent::Loaded {
                seq: old,
                result: Ok((1, vec![account(9, 1, 0)])),
            },
            &mut out,
        );
        assert_eq!(s.rows.len(), 3);
        s.on_event(
            AccountsEvent::Loaded {
                seq: new,
                result: Ok((1, vec![account(2, 1, 0)])),
            },
            &mut out,
        );
        assert_eq!(s.rows.len(), 1);
        assert_eq!(s.total, 1);
        // Enter keeps the filter; Esc (editing again) clears it and reloads everything.
        press(&mut s, KeyCode::Enter);
        assert!(!s.filtering);
        assert_eq!(s.filter.text(), "pr");
        press(&mut s, KeyCode::Char('/'));
        let (_, out) = press(&mut s, KeyCode::Esc);
        assert!(matches!(
            &out[..],
            [AccountsRequest::Load {
                q: None,
                debounce: false,
                ..
            }]
        ));
    }

    #[test]
    fn the_filter_is_edited_where_its_cursor_is_and_moving_loads_nothing() {
        let mut s = ready(3);
        press(&mut s, KeyCode::Char('/'));
        for c in "pr".chars() {
            press(&mut s, KeyCode::Char(c));
        }
        let (r, out) = press(&mut s, KeyCode::Home);
        assert_eq!((r, out.len()), (KeyResult::Consumed, 0));
        let (_, out) = press(&mut s, KeyCode::Char('a'));
        assert!(matches!(
            &out[..],
            [AccountsRequest::Load { q: Some(q), .. }] if q == "apr"
        ));
        let (_, out) = press(&mut s, KeyCode::Delete);
        assert!(matches!(
            &out[..],
            [AccountsRequest::Load { q: Some(q), .. }] if q == "ar"
        ));
        assert_eq!((s.filter.text(), s.filter.cursor()), ("ar", 1));
    }

    #[test]
    fn selection_moves_within_the_list_and_the_window_follows() {
        let mut s = ready(10_000);
        s.page_rows = 20;
        press(&mut s, KeyCode::Up);
        assert_eq!(s.selected, 0);
        press(&mut s, KeyCode::PageDown);
        assert_eq!(s.selected, 20);
        assert_eq!(s.offset, 1);
        press(&mut s, KeyCode::End);
        assert_eq!((s.selected, s.offset), (9_999, 9_980));
        press(&mut s, KeyCode::Home);
        assert_eq!((s.selected, s.offset), (0, 0));
        s.scroll(3);
        assert_eq!(s.selected, 3);
    }

    #[test]
    fn enter_opens_the_details_of_the_selected_account_and_esc_goes_back() {
        let mut s = ready(3);
        press(&mut s, KeyCode::Down);
        let (_, out) = press(&mut s, KeyCode::Enter);
        let (seq, days) = match &out[..] {
            [
                AccountsRequest::Details {
                    seq,
                    account_id: 2,
                    days,
                },
            ] => (*seq, days.clone()),
            other => panic!("{other:?}"),
        };
        assert_eq!(days.len(), DETAIL_DAYS);
        assert_eq!(days[DETAIL_DAYS - 1].1, now());
        assert_eq!(days[0].0.to_rfc3339(), "2026-11-20T00:00:00+00:00");
        let mut out = Vec::new();
        s.on_event(
            AccountsEvent::Day {
                seq,
                index: 6,
                result: Err("boom".into()),
            },
            &mut out,
        );
        assert_eq!(
            s.details.as_ref().unwrap().days[6].metrics,
            Some(Err("boom".into()))
        );
        assert_eq!(press(&mut s, KeyCode::Esc).0, KeyResult::Consumed);
        assert!(s.details.is_none());
        assert_eq!(press(&mut s, KeyCode::Esc).0, KeyResult::Back);
    }

    #[test]
    fn live_changes_update_rows_in_place_and_alert_once_per_crossing() {
        let mut s = ready(3);
        let mut out = Vec::new();
        let crossed = s.on_event(AccountsEvent::Changed(vec![account(2, 85, 0)]), &mut out);
        assert_eq!(crossed.len(), 1);
        assert_eq!(s.rows[1].requests.used, 85);
        assert_eq!(s.unseen_alerts, 1);
        assert_eq!(s.tab_label(), "accounts ⚠ 1");
        assert!(
            s.on_event(AccountsEvent::Changed(vec![account(2, 90, 0)]), &mut out)
                .is_empty()
        );
        let crossed = s.on_event(AccountsEvent::Changed(vec![account(2, 100, 0)]), &mut out);
        assert_eq!(crossed[0].level, crate::accounts_view::ShareLevel::Reached);
        assert_eq!(s.unseen_alerts, 2);
        // A new account is added at the end; opening the view marks the alerts seen.
        s.on_event(AccountsEvent::Changed(vec![account(4, 1, 0)]), &mut out);
        assert_eq!((s.rows.len(), s.total), (4, 4));
        s.open(&mut out);
        assert_eq!(s.tab_label(), "accounts");
        assert!(out.is_empty());
        // A hello with another count reloads.
        s.on_event(AccountsEvent::Hello { total: 9 }, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn refusals_say_what_is_missing() {
        let mut s = AccountsState::default();
        let mut out = Vec::new();
        s.on_event(AccountsEvent::FeedStarted { admin_key: true }, &mut out);
        s.open(&mut out);
        let seq = s.loading.unwrap();
        s.on_event(
            AccountsEvent::Loaded {
                seq,
                result: Err(AdminFailure::Unauthorized("bad key".into())),
            },
            &mut out,
        );
        assert_eq!(s.availability, Availability::Refused("bad key".into()));
        assert_eq!(press(&mut s, KeyCode::Esc).0, KeyResult::Back);
    }

    #[test]
    fn names_are_made_terminal_safe() {
        let mut a = account(1, 0, 0);
        a.name = "evil\u{1b}[2J".into();
        assert_eq!(clean(a).name, "evil");
    }
}
