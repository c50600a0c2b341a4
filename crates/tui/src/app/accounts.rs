//! The accounts view (F4) and the operator's alerts as `App` sees them: opening the view, the
//! worker's and the admin feed's reports, and what a crossing does — the status bar says it
//! and `[notify]` rings, once per crossing (`accounts_view::alerts`).

use super::{App, Command, Level, View};
use crate::accounts_view::{AccountsEvent, AccountsState, Crossing};
use crate::notify::Notification;

impl App {
    /// The accounts view's state (F4).
    pub fn accounts(&self) -> &AccountsState {
        &self.accounts
    }

    /// F4: shows the accounts view (loading the list the first time).
    pub(super) fn open_accounts(&mut self, out: &mut Vec<Command>) {
        self.view = View::Accounts;
        let mut reqs = Vec::new();
        self.accounts.open(&mut reqs);
        out.extend(reqs.into_iter().map(Command::Accounts));
    }

    pub(super) fn on_accounts(&mut self, event: AccountsEvent, out: &mut Vec<Command>) {
        let mut reqs = Vec::new();
        let crossings = self.accounts.on_event(event, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Accounts));
        if self.view == View::Accounts {
            // Shown: the alerts are seen as they come.
            self.accounts.unseen_alerts = 0;
        }
        self.alert(&crossings, out);
    }

    /// Crossings: one line in the status bar (the last, with how many more) and one ring.
    fn alert(&mut self, crossings: &[Crossing], out: &mut Vec<Command>) {
        let Some(last) = crossings.last() else {
            return;
        };
        let more = match crossings.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        let text = format!(
            "⚠ {}{more} · {} accounts",
            last.describe(),
            self.keys.accounts_view.first_label()
        );
        self.notify(Level::Warn, text.clone());
        if self.settings.notify.mode != convo_client::config::NotifyMode::Off {
            out.push(Command::Notify(Notification {
                mode: self.settings.notify.mode,
                text: format!("convo: {}", last.describe()),
            }));
        }
    }

    /// After each event: the table's height for the view's paging, and a pasted filter's load.
    pub(super) fn flush_accounts(&mut self, out: &mut Vec<Command>) {
        // The title row and the header row are not rows of the table.
        let rows = self.full_view_area().height.saturating_sub(2) as usize;
        let mut reqs = Vec::new();
        self.accounts.flush(rows, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Accounts));
    }

    /// The status bar's word for F4 while alerts wait unseen: `F4 accounts ⚠ 2`.
    pub fn accounts_alert_hint(&self) -> Option<(String, String)> {
        (self.accounts.unseen_alerts > 0 && self.view != View::Accounts).then(|| {
            (
                self.keys.accounts_view.first_label(),
                self.accounts.tab_label(),
            )
        })
    }
}
