//! The accounts view of an operator (F4): every account of the deployment with a gauge per
//! limit, sorted and filtered by the service (`GET /v1/admin/accounts`), one account's usage
//! over time on Enter (`GET /v1/admin/accounts/{id}/metrics`), kept current by the admin
//! stream (`workers/admin_feed.rs`), and the alerts raised when a watched account crosses
//! 80 % or 100 % of a limit (`alerts.rs`).
//!
//! The list is fetched whole, in pages of [`PAGE`] (10,000 accounts are 10 requests and a few
//! megabytes), when the view first opens and again when the sort or the filter changes or `r`
//! is pressed; the table draws only the rows on screen (`window.rs`). Live updates change a
//! row in place and do not move it: `r` re-sorts.

pub mod alerts;
pub mod update;
pub mod window;
pub mod worker;

use chrono::{DateTime, Utc};

use crate::line_input::LineInput;

use convo_client::api::{AccountSort, AdminAccount, Metrics};

pub use alerts::{Alerts, Crossing, Limit, ShareLevel};

/// Accounts asked for in one request while the whole list is fetched.
pub const PAGE: u64 = 1000;
/// Accounts the fallback poll asks for (the nearest their limits), while the admin stream is
/// down or missing.
pub const POLL_TOP: u64 = 200;
/// Days of usage an account's details show.
pub const DETAIL_DAYS: usize = 7;

/// Whether the view can be offered.
#[derive(Debug, Clone, PartialEq)]
pub enum Availability {
    /// Not connected yet.
    Unknown,
    /// An admin key is configured (or the embedded service's).
    Available,
    /// No admin key is configured for this remote server.
    NoAdminKey,
    /// The server has no admin endpoints.
    Unsupported,
    /// The server refused the admin key.
    Refused(String),
}

/// Work for the accounts view's worker.
#[derive(Debug, Clone, PartialEq)]
pub enum AccountsRequest {
    /// Fetch the whole list in this order, matching `q`; `debounce`: wait a little first and
    /// drop the load if a newer one came meanwhile (typing a filter).
    Load {
        seq: u64,
        sort: AccountSort,
        q: Option<String>,
        debounce: bool,
    },
    /// One account's metrics for each of `days` (start, end).
    Details {
        seq: u64,
        account_id: u64,
        days: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    },
}

/// Why a request of the view failed, in the terms it explains.
#[derive(Debug, Clone, PartialEq)]
pub enum AdminFailure {
    NoAdminKey,
    Unsupported,
    Unauthorized(String),
    Other(String),
}

/// What the worker and the admin feed report.
#[derive(Debug, Clone, PartialEq)]
pub enum AccountsEvent {
    /// The whole list of a load.
    Loaded {
        seq: u64,
        result: Result<(u64, Vec<AdminAccount>), AdminFailure>,
    },
    /// One day of an account's details.
    Day {
        seq: u64,
        index: usize,
        result: Result<Box<Metrics>, String>,
    },
    /// The admin feed: whether the client has an admin key at all.
    FeedStarted { admin_key: bool },
    /// The admin stream (re)connected: the deployment's account count.
    Hello { total: u64 },
    /// An account's usage changed (the stream), or the fallback poll saw these accounts.
    Changed(Vec<AdminAccount>),
    /// Whether the admin stream is open (else the feed polls).
    Live(bool),
    /// The feed cannot watch: the server has no admin endpoints or refused the key.
    FeedFailed(AdminFailure),
}

/// One day of the details.
#[derive(Debug, Clone, PartialEq)]
pub struct Day {
    pub start: DateTime<Utc>,
    pub metrics: Option<Result<Box<Metrics>, String>>,
}

/// One account's details (Enter).
#[derive(Debug, Clone, PartialEq)]
pub struct Details {
    pub seq: u64,
    pub account: AdminAccount,
    pub days: Vec<Day>,
}

/// The accounts view's whole state.
/// The longest filter that can be typed, in characters.
pub const FILTER_MAX_CHARS: usize = 200;

#[derive(Debug, Clone)]
pub struct AccountsState {
    pub availability: Availability,
    pub sort: AccountSort,
    /// The filter applied (sent as `q`).
    pub filter: LineInput,
    /// Whether `/` is editing the filter.
    pub filtering: bool,
    pub rows: Vec<AdminAccount>,
    /// How many accounts match the filter, as the service says.
    pub total: u64,
    /// Whether a list has been loaded since the view was offered.
    pub loaded: bool,
    /// The load in flight, if any.
    pub loading: Option<u64>,
    pub error: Option<AdminFailure>,
    pub selected: usize,
    /// The first row shown.
    pub offset: usize,
    /// Rows of the table on the last screen (set by `App` from the view's area).
    pub page_rows: usize,
    pub details: Option<Details>,
    pub alerts: Alerts,
    /// Alerts raised since the view was last shown (its tab label says how many).
    pub unseen_alerts: usize,
    /// The last alert raised.
    pub last_alert: Option<Crossing>,
    /// Whether the admin stream is open.
    pub live: bool,
    /// A paste changed the filter: its load goes out at the next `flush`.
    filter_changed: bool,
    next_seq: u64,
}

impl Default for AccountsState {
    fn default() -> Self {
        AccountsState {
            availability: Availability::Unknown,
            sort: AccountSort::Share,
            filter: LineInput::new(FILTER_MAX_CHARS),
            filtering: false,
            rows: Vec::new(),
            total: 0,
            loaded: false,
            loading: None,
            error: None,
            selected: 0,
            offset: 0,
            page_rows: 20,
            details: None,
            alerts: Alerts::default(),
            unseen_alerts: 0,
            last_alert: None,
            live: false,
            filter_changed: false,
            next_seq: 1,
        }
    }
}

/// The next sort of `s`.
pub fn next_sort(sort: AccountSort) -> AccountSort {
    match sort {
        AccountSort::Share => AccountSort::Requests,
        AccountSort::Requests => AccountSort::Tokens,
        AccountSort::Tokens => AccountSort::Name,
        AccountSort::Name => AccountSort::Share,
    }
}

impl AccountsState {
    fn seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// The label of F4 for the status bar's hints: `accounts`, with the alerts not yet seen.
    pub fn tab_label(&self) -> String {
        match self.unseen_alerts {
            0 => "accounts".into(),
            n => format!("accounts ⚠ {n}"),
        }
    }

    /// The account selected, if any.
    pub fn selected_account(&self) -> Option<&AdminAccount> {
        self.rows.get(self.selected)
    }
}
