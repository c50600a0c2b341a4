//! The metrics view (F2, `/metrics`): state, its update functions and the worker that runs
//! the queries. A chart is built from one metrics query per bucket, plus one query for the
//! totals of the whole range (sessions and averages cannot be summed from buckets).
//!
//! Loads are cached per (range, granularity); presets are resolved against the clock when a
//! load starts, and `r` reloads with a fresh clock.

pub mod update;
pub mod worker;

use std::collections::HashMap;
use std::ops::Range;

use chrono::{DateTime, Utc};
use ratatui::layout::{Constraint, Layout, Rect};

use crate::line_input::LineInput;
use convo_client::api::{Granularity, Metrics};

pub use convo_client::series::KnownBucket;
pub use convo_client::series::buckets::{Bucket, RangeError, RangePreset, TimeRange};

/// The chosen range: a preset (resolved at each load) or fixed dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeChoice {
    Preset(RangePreset),
    Custom(TimeRange),
}

impl RangeChoice {
    pub fn resolve(self, now: DateTime<Utc>) -> TimeRange {
        match self {
            RangeChoice::Preset(p) => p.resolve(now),
            RangeChoice::Custom(r) => r,
        }
    }

    pub fn describe(self) -> String {
        match self {
            RangeChoice::Preset(p) => p.describe().to_string(),
            RangeChoice::Custom(r) => format!(
                "{} → {}",
                r.start.format("%Y-%m-%d %H:%M"),
                r.end.format("%Y-%m-%d %H:%M")
            ),
        }
    }
}

/// What a load is cached under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetricsKey {
    pub range: RangeChoice,
    pub granularity: Granularity,
}

/// The parts of the view that Tab moves between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Range,
    Granularity,
    Charts,
    Table,
}

impl Section {
    pub fn next(self) -> Section {
        match self {
            Section::Range => Section::Granularity,
            Section::Granularity => Section::Charts,
            Section::Charts => Section::Table,
            Section::Table => Section::Range,
        }
    }

    pub fn prev(self) -> Section {
        match self {
            Section::Range => Section::Table,
            Section::Granularity => Section::Range,
            Section::Charts => Section::Granularity,
            Section::Table => Section::Charts,
        }
    }
}

/// One query's state: the totals, or one bucket.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot {
    /// Not asked: the bucket has not been on screen yet. Scrolling to it asks for it.
    NotAsked,
    /// Asked for, not answered yet.
    Pending,
    Loaded(Box<Metrics>),
    /// A complete bucket answered before (this run or an earlier one, from the local store):
    /// shown without being asked again.
    Kept(Box<Metrics>),
    /// The query failed; the reason is shown, never a zero.
    Failed(String),
    /// The load was cancelled before this query answered.
    Cancelled,
}

impl Slot {
    pub fn metrics(&self) -> Option<&Metrics> {
        match self {
            Slot::Loaded(m) | Slot::Kept(m) => Some(m),
            _ => None,
        }
    }

    pub fn is_pending(&self) -> bool {
        matches!(self, Slot::Pending)
    }
}

/// One series of the charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    Messages,
    Tokens,
    ActiveSessions,
}

impl Series {
    pub const ALL: [Series; 3] = [Series::Messages, Series::Tokens, Series::ActiveSessions];

    pub fn value(self, m: &Metrics) -> u64 {
        match self {
            Series::Messages => m.messages.total,
            Series::Tokens => m.tokens.total,
            Series::ActiveSessions => m.sessions.active,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Series::Messages => "Messages",
            Series::Tokens => "Tokens",
            Series::ActiveSessions => "Active sessions",
        }
    }
}

/// The queries of one (range, granularity), as far as they have answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub id: u64,
    pub key: MetricsKey,
    /// The range as resolved when the load started.
    pub range: TimeRange,
    pub totals: Slot,
    pub buckets: Vec<(Bucket, Slot)>,
    /// When the load started.
    pub started_at: DateTime<Utc>,
}

impl Load {
    /// Queries asked so far: the totals and one per bucket that has been on screen, less
    /// those kept from earlier answers.
    pub fn total_queries(&self) -> usize {
        1 + (self.buckets.iter())
            .filter(|(_, s)| !matches!(s, Slot::NotAsked | Slot::Kept(_)))
            .count()
    }

    /// Buckets shown from earlier answers, not asked again.
    pub fn kept(&self) -> usize {
        (self.buckets.iter())
            .filter(|(_, s)| matches!(s, Slot::Kept(_)))
            .count()
    }

    /// Whether some buckets have not been asked for (never on screen).
    pub fn has_unasked(&self) -> bool {
        self.buckets
            .iter()
            .any(|(_, s)| matches!(s, Slot::NotAsked))
    }

    /// Queries answered (loaded or failed).
    pub fn answered(&self) -> usize {
        std::iter::once(&self.totals)
            .chain(self.buckets.iter().map(|(_, s)| s))
            .filter(|s| matches!(s, Slot::Loaded(_) | Slot::Failed(_)))
            .count()
    }

    pub fn is_loading(&self) -> bool {
        self.totals.is_pending() || self.buckets.iter().any(|(_, s)| s.is_pending())
    }

    pub fn failed_buckets(&self) -> usize {
        self.buckets
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Failed(_)))
            .count()
    }

    pub fn was_cancelled(&self) -> bool {
        std::iter::once(&self.totals)
            .chain(self.buckets.iter().map(|(_, s)| s))
            .any(|s| matches!(s, Slot::Cancelled))
    }

    /// The largest value of `series` over the loaded buckets.
    pub fn max(&self, series: Series) -> u64 {
        self.buckets
            .iter()
            .filter_map(|(_, s)| s.metrics().map(|m| series.value(m)))
            .max()
            .unwrap_or(0)
    }
}

/// The longest custom range that can be typed, in characters.
pub const CUSTOM_MAX_CHARS: usize = 80;

/// A typed custom range, validated as it is typed.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomInput {
    pub text: LineInput,
    pub editing: bool,
    /// What is wrong with `text` so far, shown inline.
    pub error: Option<String>,
}

impl Default for CustomInput {
    fn default() -> Self {
        Self {
            text: LineInput::new(CUSTOM_MAX_CHARS),
            editing: false,
            error: None,
        }
    }
}

/// The metrics view's whole state.
#[derive(Debug, Clone)]
pub struct MetricsState {
    pub range: RangeChoice,
    /// Position in the range selector: the presets, then "custom".
    pub range_cursor: usize,
    pub granularity: Granularity,
    pub section: Section,
    pub custom: CustomInput,
    /// Why the selection cannot be charted (too many buckets, too long), shown inline.
    pub problem: Option<String>,
    /// A remark about the last change (a granularity changed to fit the cap).
    pub note: Option<String>,
    /// Requests left in the plan, from the usage poll (none until it answers): a load that
    /// would take more than [`ASK_SHARE_PERCENT`] of them asks first.
    pub requests_left: Option<u64>,
    /// A load that waits for the user to accept its cost (Enter loads, Esc drops it).
    pub asking: Option<CostQuestion>,
    /// Answers for complete buckets (ended before their load began): they never change, so no
    /// load asks for one twice, whatever range or preset it belongs to. They are kept in the
    /// local store under [`Self::account`] and read back when the client connects.
    pub known: HashMap<(Bucket, Granularity), Box<Metrics>>,
    /// Whose numbers these are (the service and key, see `api::Client::account`), once the
    /// store has answered: complete buckets are written under it.
    pub account: Option<String>,
    /// The screen area the view is drawn in, as last laid out (empty until then): a load asks
    /// only for the buckets it shows.
    pub viewport: Rect,
    /// What the view shows: a load in flight or one from the cache.
    pub current: Option<Load>,
    pub cache: HashMap<MetricsKey, Load>,
    /// The selected bucket, shared by the charts and the table.
    pub cursor: usize,
    next_id: u64,
}

/// Position of "custom" in the range selector.
pub const CUSTOM_SLOT: usize = RangePreset::ALL.len();

/// A load costing more than this share of the requests left asks before it starts.
pub const ASK_SHARE_PERCENT: u64 = 5;

/// Before the first usage poll has answered, a load of more requests than this asks first
/// (what is left of the plan is not known to weigh it against).
pub const ASK_UNKNOWN_ABOVE: u64 = 50;

/// The cost of a load that waits for a yes: each bucket is one request, the totals one more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostQuestion {
    /// The choice of the chart shown while asking, back if the answer is no.
    pub previous: Option<MetricsKey>,
    pub requests: u64,
    /// Requests left in the plan; none before the first usage poll.
    pub left: Option<u64>,
}

impl CostQuestion {
    /// `146 requests = 15 % of the 973 left`.
    pub fn describe(&self) -> String {
        let left = match self.left {
            None => {
                return format!(
                    "{} requests (what is left of the plan is not known yet)",
                    self.requests
                );
            }
            Some(0) => {
                return format!(
                    "{} requests, and the request limit is reached",
                    self.requests
                );
            }
            Some(left) => left,
        };
        let pct = (self.requests as f64 * 100.0 / left as f64).round() as u64;
        format!(
            "{} requests = {pct} % of the {} left",
            self.requests,
            convo_client::format::count(left)
        )
    }
}

impl Default for MetricsState {
    fn default() -> Self {
        MetricsState {
            range: RangeChoice::Preset(RangePreset::Last24Hours),
            range_cursor: 0,
            granularity: Granularity::Hour,
            section: Section::Range,
            custom: CustomInput::default(),
            problem: None,
            note: None,
            requests_left: None,
            asking: None,
            known: HashMap::new(),
            account: None,
            viewport: Rect::ZERO,
            current: None,
            cache: HashMap::new(),
            cursor: 0,
            next_id: 1,
        }
    }
}

impl MetricsState {
    pub fn key(&self) -> MetricsKey {
        MetricsKey {
            range: self.range,
            granularity: self.granularity,
        }
    }

    pub fn is_loading(&self) -> bool {
        self.current.as_ref().is_some_and(Load::is_loading)
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

/// Work for the metrics worker.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricsRequest {
    /// Run these queries (the totals first, then each bucket), a few at a time, and report
    /// each answer; a new load replaces any load in flight.
    Load(LoadPlan),
    /// Ask for more buckets of the load shown (they came on screen): `(index, bucket)`.
    Fetch {
        load_id: u64,
        granularity: Granularity,
        ask: Vec<(usize, Bucket)>,
    },
    /// Stop the load with this id; its unanswered queries are dropped.
    Cancel { load_id: u64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct LoadPlan {
    pub load_id: u64,
    pub range: TimeRange,
    pub granularity: Granularity,
    pub buckets: Vec<Bucket>,
    /// The buckets to ask for, by index: those on screen whose answers the app lacks.
    pub ask: Vec<usize>,
    /// Buckets whose answers the app already has (complete ones): not queried, also when a
    /// preset's buckets are planned again.
    pub known: Vec<Bucket>,
    /// For a preset: the worker resolves it again against the wall clock when the load
    /// starts (the app's clock ticks only every few seconds) and reports the new plan.
    pub preset: Option<RangePreset>,
}

/// Which query an answer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    Totals,
    Bucket(usize),
}

/// Answers from the metrics worker.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricsEvent {
    /// The worker resolved the preset again with the wall clock: these are the range and
    /// buckets of the load from now on. Comes before any answer of the load.
    Replanned {
        load_id: u64,
        range: TimeRange,
        buckets: Vec<Bucket>,
    },
    Answered {
        load_id: u64,
        query: Query,
        /// The metrics, or the failure as one line for the user.
        result: Result<Box<Metrics>, String>,
    },
    /// The complete buckets the local store keeps for `account` (read when the client
    /// connects).
    Known {
        account: String,
        buckets: Vec<KnownBucket>,
    },
}

/// The view's parts, top to bottom: title, controls, info, totals, tabs, body (charts or
/// table) and the selected bucket's detail. The view draws into these and the state asks for
/// what the body shows, so both read this one function.
pub fn areas(area: Rect) -> [Rect; 7] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// `r` less a column each side.
pub fn pad(r: Rect) -> Rect {
    Rect::new(
        r.x.saturating_add(1),
        r.y,
        r.width.saturating_sub(2),
        r.height,
    )
}

/// Bar width, gap and how many bars fit in `width` columns for `n` buckets.
pub fn fit(n: usize, width: u16) -> (u16, u16, usize) {
    let w = width as usize;
    if n == 0 || w == 0 {
        return (1, 0, 0);
    }
    if n * 2 <= w + 1 {
        // Room for a gap: widen the bars to use the width, up to 9 columns.
        let bar = ((w + 1) / n).saturating_sub(1).clamp(1, 9);
        (bar as u16, 1, n)
    } else {
        (1, 0, n.min(w))
    }
}

/// The first bucket shown when `visible` fit: the selected one stays in view, at the right
/// edge (the bottom of the table) when it has to scroll.
pub fn first_visible(cursor: usize, visible: usize, n: usize) -> usize {
    if visible == 0 || n <= visible {
        0
    } else {
        (cursor + 1).saturating_sub(visible).min(n - visible)
    }
}

/// The indices of the `n` buckets on screen in `viewport`, with `cursor` selected: the bars
/// that fit the charts, or the rows of the table (all of them before any layout).
pub fn on_screen(viewport: Rect, section: Section, cursor: usize, n: usize) -> Range<usize> {
    if viewport.is_empty() {
        return 0..n;
    }
    let body = areas(viewport)[5];
    let visible = match section {
        // The table's header takes a row.
        Section::Table => body.height.saturating_sub(1) as usize,
        _ => fit(n, pad(body).width).2,
    };
    let first = first_visible(cursor, visible, n);
    first..(first + visible).min(n)
}
