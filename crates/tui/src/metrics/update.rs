//! How the metrics view's state changes: opening, keys, pastes, scrolling and worker answers.

use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{
    ASK_SHARE_PERCENT, ASK_UNKNOWN_ABOVE, CUSTOM_SLOT, CostQuestion, KnownBucket, Load, LoadPlan,
    MetricsEvent, MetricsRequest, MetricsState, Query, RangeChoice, Section, Slot,
};
use crate::key_result::KeyResult;
use crate::keys::{KeyBindings, typed_char};
use crate::line_input::LineKey;
use convo_client::api::Granularity;
use convo_client::series::buckets::{self, Bucket, MAX_BUCKETS, RangeError, RangePreset};

const GRANULARITIES: [Granularity; 4] = [
    Granularity::Hour,
    Granularity::Day,
    Granularity::Week,
    Granularity::Month,
];

/// Rows a page key moves in the table.
const PAGE: usize = 10;

/// How old an answer about a range that includes its own load time may be when the view is
/// opened again before it is reloaded.
pub const STALE_AFTER: chrono::Duration = chrono::Duration::seconds(60);

fn is_left(key: &KeyEvent) -> bool {
    matches!(key.code, KeyCode::Left | KeyCode::Char('h'))
        && !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
}

fn is_right(key: &KeyEvent) -> bool {
    matches!(key.code, KeyCode::Right | KeyCode::Char('l'))
        && !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
}

impl MetricsState {
    /// The view was opened: show the selection, loading it unless shown or cached.
    /// Coming back to the view after chatting reloads a range that reaches into the time
    /// since it was loaded (a preset, or dates past the load) once the answer is this old.
    pub fn open(&mut self, now: DateTime<Utc>, out: &mut Vec<MetricsRequest>) {
        let key = self.key();
        let shown = self
            .current
            .as_ref()
            .filter(|l| l.key == key)
            .or_else(|| self.cache.get(&key));
        let stale = shown.is_some_and(|l| {
            !l.is_loading() && l.range.end >= l.started_at && now - l.started_at > STALE_AFTER
        });
        self.select(now, out, stale);
    }

    /// Shows the current selection: from the cache, or by starting a load. `force` reloads
    /// with a fresh clock even when cached.
    pub fn select(&mut self, now: DateTime<Utc>, out: &mut Vec<MetricsRequest>, force: bool) {
        self.start(now, out, force, false);
    }

    /// [`Self::select`]; `accepted`: the user said yes to its cost.
    fn start(
        &mut self,
        now: DateTime<Utc>,
        out: &mut Vec<MetricsRequest>,
        force: bool,
        accepted: bool,
    ) {
        let key = self.key();
        self.asking = None;
        if !force {
            if self.current.as_ref().is_some_and(|l| l.key == key) {
                return;
            }
            if let Some(cached) = self.cache.get(&key).cloned() {
                self.cancel(out);
                self.problem = None;
                self.cursor = cached.buckets.len().saturating_sub(1);
                self.current = Some(cached);
                return;
            }
        }
        let range = self.range.resolve(now);
        match buckets::buckets(range, self.granularity) {
            Err(e) => {
                self.cancel(out);
                self.cache.remove(&key);
                self.problem = Some(e.to_string());
                self.current = None;
            }
            Ok(list) => {
                self.problem = None;
                // Only the buckets on screen are asked for (the rest as they scroll into
                // view), and not those known already; `r` (force) asks them all again.
                let g = self.granularity;
                let cursor = list.len().saturating_sub(1);
                let window = super::on_screen(self.viewport, self.section, cursor, list.len());
                let known: Vec<Bucket> = list
                    .iter()
                    .filter(|b| !force && self.known.contains_key(&(**b, g)))
                    .copied()
                    .collect();
                let ask: Vec<usize> = window
                    .clone()
                    .filter(|&i| !known.contains(&list[i]))
                    .collect();
                // Each bucket asked is a request, the totals one more: a load that would take
                // a good share of what is left asks first, and the chart keeps what it shows.
                let requests = ask.len() as u64 + 1;
                let costly = match self.requests_left {
                    Some(left) => requests * 100 > left * ASK_SHARE_PERCENT,
                    None => requests > ASK_UNKNOWN_ABOVE,
                };
                if costly && !accepted {
                    let left = self.requests_left;
                    // What is shown stays until the answer; a no brings its choice back.
                    let previous = self.current.as_ref().map(|l| l.key);
                    self.asking = Some(CostQuestion {
                        previous,
                        requests,
                        left,
                    });
                    return;
                }
                self.cancel(out);
                self.cache.remove(&key);
                let load_id = self.take_id();
                self.cursor = cursor;
                let slots = list
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        let slot = match (known.contains(b), ask.contains(&i)) {
                            (true, _) => self.slot_for(*b),
                            (false, true) => Slot::Pending,
                            (false, false) => Slot::NotAsked,
                        };
                        (*b, slot)
                    })
                    .collect();
                self.current = Some(Load {
                    id: load_id,
                    key,
                    range,
                    totals: Slot::Pending,
                    buckets: slots,
                    started_at: now,
                });
                out.push(MetricsRequest::Load(LoadPlan {
                    load_id,
                    range,
                    granularity: self.granularity,
                    buckets: list,
                    ask,
                    known,
                    preset: match self.range {
                        RangeChoice::Preset(p) => Some(p),
                        RangeChoice::Custom(_) => None,
                    },
                }));
            }
        }
    }

    /// Asks for the buckets that came on screen (the cursor moved, the charts and the table
    /// swapped, the terminal grew) and were never asked for. The app calls it after every
    /// change while the view is shown.
    pub fn fetch_on_screen(&mut self, out: &mut Vec<MetricsRequest>) {
        let g = self.granularity;
        let Some(load) = self.current.as_ref() else {
            return;
        };
        let window = super::on_screen(self.viewport, self.section, self.cursor, load.buckets.len());
        let missing: Vec<(usize, Bucket)> = window
            .filter(|&i| matches!(load.buckets[i].1, Slot::NotAsked))
            .map(|i| (i, load.buckets[i].0))
            .collect();
        if missing.is_empty() {
            return;
        }
        let mut ask = Vec::new();
        for (i, bucket) in missing {
            let slot = self.slot_for(bucket);
            let asked = slot.is_pending();
            if let Some(load) = self.current.as_mut() {
                load.buckets[i].1 = slot;
            }
            if asked {
                ask.push((i, bucket));
            }
        }
        if let Some(load) = self.current.as_ref().filter(|_| !ask.is_empty()) {
            out.push(MetricsRequest::Fetch {
                load_id: load.id,
                granularity: g,
                ask,
            });
        }
    }

    /// A bucket's slot as a load starts: its answer when it is known, else pending.
    fn slot_for(&self, bucket: Bucket) -> Slot {
        match self.known.get(&(bucket, self.granularity)) {
            Some(m) => Slot::Kept(m.clone()),
            None => Slot::Pending,
        }
    }

    /// Stops the load in flight, if any: its unanswered queries show as cancelled.
    pub fn cancel(&mut self, out: &mut Vec<MetricsRequest>) -> bool {
        let Some(load) = self.current.as_mut().filter(|l| l.is_loading()) else {
            return false;
        };
        let cancel = |s: &mut Slot| {
            if s.is_pending() {
                *s = Slot::Cancelled;
            }
        };
        cancel(&mut load.totals);
        load.buckets.iter_mut().for_each(|(_, s)| cancel(s));
        out.push(MetricsRequest::Cancel { load_id: load.id });
        true
    }

    /// Chooses a range. When the granularity would make too many buckets for it, the finest
    /// coarser one that fits is taken instead, and the view says so.
    pub fn set_range(
        &mut self,
        choice: RangeChoice,
        now: DateTime<Utc>,
        out: &mut Vec<MetricsRequest>,
    ) {
        self.range = choice;
        self.range_cursor = match choice {
            RangeChoice::Preset(p) => RangePreset::ALL.iter().position(|q| *q == p).unwrap_or(0),
            RangeChoice::Custom(_) => CUSTOM_SLOT,
        };
        self.note = None;
        if let Err(RangeError::TooManyBuckets {
            count,
            granularity,
            coarser: Some(coarser),
        }) = buckets::check(choice.resolve(now), self.granularity)
        {
            self.note = Some(format!(
                "by {coarser}: {count} {granularity} buckets would be more than {MAX_BUCKETS}"
            ));
            self.granularity = coarser;
        }
        self.select(now, out, false);
    }

    pub fn set_granularity(
        &mut self,
        g: Granularity,
        now: DateTime<Utc>,
        out: &mut Vec<MetricsRequest>,
    ) {
        self.granularity = g;
        self.note = None;
        self.select(now, out, false);
    }

    /// A key, while the metrics view is shown.
    pub fn handle_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<MetricsRequest>,
    ) -> KeyResult {
        if self.custom.editing {
            return self.edit_key(keys, key, now, out);
        }
        if self.asking.is_some() {
            // Enter (or the confirm key) accepts the cost; anything else drops the question.
            if key.code == KeyCode::Enter || keys.confirm.matches(key) {
                self.start(now, out, true, true);
            } else {
                // No: the range and granularity of the chart shown come back.
                if let Some(previous) = self.asking.take().and_then(|q| q.previous) {
                    self.range = previous.range;
                    self.granularity = previous.granularity;
                    self.range_cursor = match previous.range {
                        RangeChoice::Preset(p) => {
                            RangePreset::ALL.iter().position(|q| *q == p).unwrap_or(0)
                        }
                        RangeChoice::Custom(_) => CUSTOM_SLOT,
                    };
                    self.note = None;
                }
                if keys.stop_or_quit.matches(key) || keys.back.matches(key) {
                    return KeyResult::Consumed;
                }
                return self.handle_key(keys, key, now, out);
            }
            return KeyResult::Consumed;
        }
        if keys.stop_or_quit.matches(key) {
            return if self.cancel(out) {
                KeyResult::Consumed
            } else {
                KeyResult::Quit
            };
        }
        if keys.back.matches(key) {
            return KeyResult::Back;
        }
        if keys.refresh.matches(key) {
            self.select(now, out, true);
            return KeyResult::Consumed;
        }
        if keys.focus_next.matches(key) {
            self.section = self.section.next();
            return KeyResult::Consumed;
        }
        if keys.focus_prev.matches(key) {
            self.section = self.section.prev();
            return KeyResult::Consumed;
        }
        if let Some(c @ '1'..='4') = typed_char(key) {
            let preset = RangePreset::ALL[(c as usize) - ('1' as usize)];
            self.section = Section::Range;
            self.set_range(RangeChoice::Preset(preset), now, out);
            return KeyResult::Consumed;
        }
        let consumed = match self.section {
            Section::Range => self.range_key(key, now, out),
            Section::Granularity => self.granularity_key(key, now, out),
            Section::Charts => self.chart_key(keys, key),
            Section::Table => self.table_key(keys, key),
        };
        if consumed {
            KeyResult::Consumed
        } else if keys.quit.matches(key) {
            KeyResult::Quit
        } else {
            KeyResult::NotConsumed
        }
    }

    fn range_key(
        &mut self,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<MetricsRequest>,
    ) -> bool {
        // The arrows only move the cursor: nothing loads (and nothing is spent) until Enter
        // confirms the range under it.
        if is_left(key) {
            self.range_cursor = self.range_cursor.saturating_sub(1);
            return true;
        }
        if is_right(key) {
            self.range_cursor = (self.range_cursor + 1).min(CUSTOM_SLOT);
            return true;
        }
        if key.code != KeyCode::Enter {
            return false;
        }
        let target = self.range_cursor;
        if target == CUSTOM_SLOT {
            self.start_editing();
        } else if self.range != RangeChoice::Preset(RangePreset::ALL[target])
            || self.current.is_none()
        {
            self.set_range(RangeChoice::Preset(RangePreset::ALL[target]), now, out);
        }
        true
    }

    fn start_editing(&mut self) {
        self.range_cursor = CUSTOM_SLOT;
        self.custom.editing = true;
        if self.custom.text.is_empty() {
            // Start from the range shown, so that a small change is a small edit.
            if let Some(l) = &self.current {
                self.custom.text.set_text(&format!(
                    "{}..{}",
                    l.range.start.format("%Y-%m-%d"),
                    (l.range.end + chrono::Duration::days(1)).format("%Y-%m-%d")
                ));
            }
        }
        self.validate_custom();
    }

    fn validate_custom(&mut self) {
        self.custom.error = match buckets::parse_range(self.custom.text.text()) {
            Err(e) => Some(e),
            Ok(r) => match buckets::check(r, self.granularity) {
                Err(RangeError::TooManyBuckets {
                    coarser: Some(_), ..
                })
                | Ok(_) => None,
                Err(e) => Some(e.to_string()),
            },
        };
    }

    fn edit_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<MetricsRequest>,
    ) -> KeyResult {
        match key.code {
            KeyCode::Enter => {
                if let Ok(r) = buckets::parse_range(self.custom.text.text()) {
                    self.validate_custom();
                    if self.custom.error.is_none() {
                        self.custom.editing = false;
                        self.set_range(RangeChoice::Custom(r), now, out);
                    }
                }
                KeyResult::Consumed
            }
            KeyCode::Esc => {
                self.custom.editing = false;
                self.custom.error = None;
                // Back to the range that is shown.
                self.range_cursor = match self.range {
                    RangeChoice::Preset(p) => {
                        RangePreset::ALL.iter().position(|q| *q == p).unwrap_or(0)
                    }
                    RangeChoice::Custom(_) => CUSTOM_SLOT,
                };
                KeyResult::Consumed
            }
            _ if keys.focus_next.matches(key) || keys.focus_prev.matches(key) => {
                self.custom.editing = false;
                self.custom.error = None;
                self.handle_key(keys, key, now, out)
            }
            _ => match self.custom.text.key(key) {
                LineKey::Edited => {
                    self.validate_custom();
                    KeyResult::Consumed
                }
                LineKey::Moved => KeyResult::Consumed,
                LineKey::Ignored if keys.stop_or_quit.matches(key) => {
                    self.custom.editing = false;
                    KeyResult::Consumed
                }
                LineKey::Ignored => KeyResult::NotConsumed,
            },
        }
    }

    /// Pasted text goes into the custom range while it is edited.
    pub fn paste(&mut self, text: &str) {
        if self.custom.editing && self.custom.text.paste(text) {
            self.validate_custom();
        }
    }

    fn granularity_key(
        &mut self,
        key: &KeyEvent,
        now: DateTime<Utc>,
        out: &mut Vec<MetricsRequest>,
    ) -> bool {
        let i = GRANULARITIES
            .iter()
            .position(|g| *g == self.granularity)
            .unwrap_or(1);
        let target = if is_left(key) {
            i.saturating_sub(1)
        } else if is_right(key) {
            (i + 1).min(GRANULARITIES.len() - 1)
        } else {
            return false;
        };
        if target != i {
            self.set_granularity(GRANULARITIES[target], now, out);
        }
        true
    }

    fn bucket_count(&self) -> usize {
        self.current.as_ref().map_or(0, |l| l.buckets.len())
    }

    /// The mouse wheel: moves the selected bucket.
    pub fn scroll(&mut self, delta: isize) {
        self.move_cursor(delta);
    }

    fn move_cursor(&mut self, delta: isize) {
        let n = self.bucket_count();
        if n == 0 {
            return;
        }
        self.cursor = (self.cursor as isize + delta).clamp(0, n as isize - 1) as usize;
    }

    fn chart_key(&mut self, keys: &KeyBindings, key: &KeyEvent) -> bool {
        if is_left(key) {
            self.move_cursor(-1);
        } else if is_right(key) {
            self.move_cursor(1);
        } else {
            return self.jump_key(keys, key);
        }
        true
    }

    fn table_key(&mut self, keys: &KeyBindings, key: &KeyEvent) -> bool {
        if keys.move_up.matches(key) {
            self.move_cursor(-1);
        } else if keys.move_down.matches(key) {
            self.move_cursor(1);
        } else {
            return self.jump_key(keys, key);
        }
        true
    }

    fn jump_key(&mut self, keys: &KeyBindings, key: &KeyEvent) -> bool {
        if keys.scroll_up.matches(key) {
            self.move_cursor(-(PAGE as isize));
        } else if keys.scroll_down.matches(key) {
            self.move_cursor(PAGE as isize);
        } else if keys.scroll_top.matches(key) {
            self.cursor = 0;
        } else if keys.scroll_bottom.matches(key) {
            self.cursor = self.bucket_count().saturating_sub(1);
        } else {
            return false;
        }
        true
    }

    /// An answer from the worker. Answers for a load that is no longer shown are dropped.
    /// Returns the bucket this answer made complete, if any, for the local store.
    pub fn on_event(&mut self, ev: MetricsEvent) -> Vec<KnownBucket> {
        let (load_id, query, result) = match ev {
            MetricsEvent::Replanned {
                load_id,
                range,
                buckets,
            } => {
                let Some(load) = self.current.as_ref().filter(|l| l.id == load_id) else {
                    return Vec::new();
                };
                // The worker asks the same positions again, less the known buckets.
                let slots: Vec<(Bucket, Slot)> = (buckets.into_iter().enumerate())
                    .map(|(i, b)| {
                        let asked = load.buckets.get(i).is_some_and(|(_, s)| s.is_pending());
                        match self.slot_for(b) {
                            Slot::Pending if !asked => (b, Slot::NotAsked),
                            slot => (b, slot),
                        }
                    })
                    .collect();
                if let Some(load) = self.current.as_mut() {
                    load.range = range;
                    load.buckets = slots;
                    self.cursor = load.buckets.len().saturating_sub(1);
                }
                return Vec::new();
            }
            MetricsEvent::Known { account, buckets } => {
                self.account = Some(account);
                for k in buckets {
                    self.known.insert((k.bucket, k.granularity), k.metrics);
                }
                // A load shown fills what it has not asked for yet.
                let known = &self.known;
                if let Some(load) = self.current.as_mut() {
                    let g = load.key.granularity;
                    for (b, slot) in load.buckets.iter_mut() {
                        if let (Slot::NotAsked | Slot::Cancelled, Some(m)) =
                            (&slot, known.get(&(*b, g)))
                        {
                            *slot = Slot::Kept(m.clone());
                        }
                    }
                }
                return Vec::new();
            }
            MetricsEvent::Answered {
                load_id,
                query,
                result,
            } => (load_id, query, result),
        };
        let Some(load) = self.current.as_mut().filter(|l| l.id == load_id) else {
            return Vec::new();
        };
        let slot = match query {
            Query::Totals => Some(&mut load.totals),
            Query::Bucket(i) => load.buckets.get_mut(i).map(|(_, s)| s),
        };
        let Some(slot) = slot else {
            return Vec::new();
        };
        // An answer that beat the cancel is still a true answer.
        if matches!(slot, Slot::Pending | Slot::Cancelled) {
            *slot = match result {
                Ok(m) => Slot::Loaded(m),
                Err(e) => Slot::Failed(e),
            };
        }
        // A whole bucket that ended well before its load began (a margin for clocks that
        // differ and writes in flight) is complete: kept for every later load.
        let mut complete = Vec::new();
        if let Query::Bucket(i) = query
            && let Some((bucket, Slot::Loaded(m))) = load.buckets.get(i)
            && convo_client::series::is_complete(*bucket, load.key.granularity, load.started_at)
            && !self.known.contains_key(&(*bucket, load.key.granularity))
        {
            self.known
                .insert((*bucket, load.key.granularity), m.clone());
            complete.push(KnownBucket {
                granularity: load.key.granularity,
                bucket: *bucket,
                metrics: m.clone(),
            });
        }
        if !load.is_loading()
            && !load.was_cancelled()
            && load.failed_buckets() == 0
            && !matches!(load.totals, Slot::Failed(_))
        {
            self.cache.insert(load.key, load.clone());
        }
        complete
    }
}

#[cfg(test)]
mod tests {
    use super::super::TimeRange;
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 12, 34, 0).unwrap()
    }

    /// A view whose plan has room: no load asks its cost first.
    fn roomy() -> MetricsState {
        MetricsState {
            requests_left: Some(1_000_000),
            ..Default::default()
        }
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn metrics(messages: u64) -> Box<convo_client::api::Metrics> {
        Box::new(
            serde_json::from_value(serde_json::json!({
                "period": {"start": "2026-11-22T00:00:00Z", "end": "2026-11-22T01:00:00Z", "granularity": "hour"},
                "sessions": {"total": 1, "active": 1, "averageDuration": 60.0},
                "messages": {"total": messages, "averagePerSession": messages as f64, "userMessages": messages / 2, "assistantMessages": messages / 2},
                "tokens": {"total": messages * 10, "prompt": messages * 4, "completion": messages * 6, "averagePerMessage": 10.0}
            }))
            .unwrap(),
        )
    }

    fn plan(reqs: &[MetricsRequest]) -> &LoadPlan {
        match reqs.iter().find(|r| matches!(r, MetricsRequest::Load(_))) {
            Some(MetricsRequest::Load(p)) => p,
            _ => panic!("no load in {reqs:?}"),
        }
    }

    fn answer_all(s: &mut MetricsState, p: &LoadPlan) {
        s.on_event(MetricsEvent::Answered {
            load_id: p.load_id,
            query: Query::Totals,
            result: Ok(metrics(10)),
        });
        for i in 0..p.buckets.len() {
            s.on_event(MetricsEvent::Answered {
                load_id: p.load_id,
                query: Query::Bucket(i),
                result: Ok(metrics(i as u64)),
            });
        }
    }

    #[test]
    fn opening_loads_the_last_24_hours_by_hour() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let p = plan(&reqs).clone();
        assert_eq!(p.granularity, Granularity::Hour);
        assert_eq!(p.buckets.len(), 24);
        assert_eq!(p.range.end, now());
        assert!(s.is_loading());
        assert_eq!(s.cursor, 23);
        // Opening again while it loads does not start another load.
        let mut again = Vec::new();
        s.open(now(), &mut again);
        assert!(again.is_empty());
    }

    #[test]
    fn answers_fill_slots_and_a_complete_load_is_cached() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let p = plan(&reqs).clone();
        answer_all(&mut s, &p);
        let load = s.current.as_ref().unwrap();
        assert!(!load.is_loading());
        assert_eq!(load.answered(), 25);
        assert_eq!(load.max(super::super::Series::Messages), 23);
        assert!(s.cache.contains_key(&s.key()));
        // Another range, then back: served from the cache, no request.
        let mut r2 = Vec::new();
        s.set_range(RangeChoice::Preset(RangePreset::Last7Days), now(), &mut r2);
        assert_eq!(plan(&r2).buckets.len(), 7 * 24 - 11);
        let mut r3 = Vec::new();
        s.set_range(
            RangeChoice::Preset(RangePreset::Last24Hours),
            now(),
            &mut r3,
        );
        // Only the cancel of the 7-day load in flight.
        assert_eq!(
            r3,
            vec![MetricsRequest::Cancel {
                load_id: plan(&r2).load_id
            }]
        );
        assert_eq!(s.current.as_ref().unwrap().id, p.load_id);
    }

    #[test]
    fn reopening_reloads_a_range_that_runs_up_to_now_once_it_is_stale() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let p = plan(&reqs).clone();
        answer_all(&mut s, &p);
        // Half a minute later: shown as it is.
        let mut again = Vec::new();
        s.open(now() + chrono::Duration::seconds(30), &mut again);
        assert!(again.is_empty());
        // Two minutes later: reloaded, since the last 24 hours have moved on.
        s.open(now() + chrono::Duration::minutes(2), &mut again);
        assert_ne!(plan(&again).load_id, p.load_id);
        // A custom range wholly in the past is history: never reloaded by itself.
        let past = TimeRange {
            start: now() - chrono::Duration::days(3),
            end: now() - chrono::Duration::days(2),
        };
        let mut reqs = Vec::new();
        s.set_range(RangeChoice::Custom(past), now(), &mut reqs);
        let p = plan(&reqs).clone();
        answer_all(&mut s, &p);
        let mut later = Vec::new();
        s.open(now() + chrono::Duration::hours(5), &mut later);
        assert!(later.is_empty(), "{later:?}");
    }

    #[test]
    fn a_failed_bucket_stays_failed_and_is_not_cached() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let p = plan(&reqs).clone();
        answer_all(&mut s, &p);
        s.cache.clear();
        let mut reqs = Vec::new();
        s.select(now(), &mut reqs, true);
        let p = plan(&reqs).clone();
        s.on_event(MetricsEvent::Answered {
            load_id: p.load_id,
            query: Query::Bucket(3),
            result: Err("network error: refused".into()),
        });
        answer_all(&mut s, &p);
        let load = s.current.as_ref().unwrap();
        assert_eq!(
            load.buckets[3].1,
            Slot::Failed("network error: refused".into())
        );
        assert_eq!(load.failed_buckets(), 1);
        assert!(!s.cache.contains_key(&s.key()));
    }

    #[test]
    fn ctrl_c_cancels_a_load_and_quits_when_idle() {
        let keys = KeyBindings::default();
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let id = plan(&reqs).load_id;
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        let mut reqs = Vec::new();
        assert_eq!(
            s.handle_key(&keys, &ctrl_c, now(), &mut reqs),
            KeyResult::Consumed
        );
        assert_eq!(reqs, vec![MetricsRequest::Cancel { load_id: id }]);
        let load = s.current.as_ref().unwrap();
        assert!(!load.is_loading());
        assert!(load.was_cancelled());
        assert!(load.buckets.iter().all(|(_, s)| *s == Slot::Cancelled));
        // Late answers still count; others stay cancelled.
        s.on_event(MetricsEvent::Answered {
            load_id: id,
            query: Query::Bucket(0),
            result: Ok(metrics(2)),
        });
        assert!(s.current.as_ref().unwrap().buckets[0].1.metrics().is_some());
        assert!(!s.cache.contains_key(&s.key()));
        assert_eq!(
            s.handle_key(&keys, &ctrl_c, now(), &mut reqs),
            KeyResult::Quit
        );
        // `r` reloads.
        let mut reqs = Vec::new();
        s.handle_key(&keys, &key(KeyCode::Char('r')), now(), &mut reqs);
        assert_ne!(plan(&reqs).load_id, id);
    }

    #[test]
    fn a_replanned_load_takes_the_worker_range() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let p = plan(&reqs).clone();
        assert_eq!(p.preset, Some(RangePreset::Last24Hours));
        let later = now() + chrono::Duration::minutes(40);
        let range = RangePreset::Last24Hours.resolve(later);
        let list = buckets::buckets(range, Granularity::Hour).unwrap();
        s.on_event(MetricsEvent::Replanned {
            load_id: p.load_id,
            range,
            buckets: list.clone(),
        });
        let load = s.current.as_ref().unwrap();
        assert_eq!(load.range.end, later);
        assert_eq!(load.buckets[0].0, list[0]);
        assert_eq!(load.buckets.len(), 24);
        assert!(load.is_loading());
        // A replan for another load changes nothing.
        s.on_event(MetricsEvent::Replanned {
            load_id: p.load_id + 7,
            range: p.range,
            buckets: vec![],
        });
        assert_eq!(s.current.as_ref().unwrap().buckets.len(), 24);
    }

    #[test]
    fn answers_of_a_replaced_load_are_ignored() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let old = plan(&reqs).load_id;
        let mut reqs = Vec::new();
        s.set_granularity(Granularity::Day, now(), &mut reqs);
        assert_eq!(reqs[0], MetricsRequest::Cancel { load_id: old });
        s.on_event(MetricsEvent::Answered {
            load_id: old,
            query: Query::Bucket(0),
            result: Ok(metrics(5)),
        });
        let load = s.current.as_ref().unwrap();
        // 13:00 yesterday to 12:34 today: two partial days.
        assert_eq!(load.buckets.len(), 2);
        assert!(load.buckets[0].1.is_pending());
    }

    #[test]
    fn tab_moves_between_sections_and_arrows_change_the_selection() {
        let keys = KeyBindings::default();
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        reqs.clear();
        // The arrows move the cursor only: nothing loads until Enter.
        s.handle_key(&keys, &key(KeyCode::Right), now(), &mut reqs);
        assert_eq!(s.range, RangeChoice::Preset(RangePreset::Last24Hours));
        assert_eq!(s.range_cursor, 1);
        assert!(reqs.is_empty(), "{reqs:?}");
        s.handle_key(&keys, &key(KeyCode::Enter), now(), &mut reqs);
        assert_eq!(s.range, RangeChoice::Preset(RangePreset::Last7Days));
        assert!(!reqs.is_empty());
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Tab), now(), &mut reqs),
            KeyResult::Consumed
        );
        assert_eq!(s.section, Section::Granularity);
        s.handle_key(&keys, &key(KeyCode::Right), now(), &mut reqs);
        assert_eq!(s.granularity, Granularity::Day);
        s.handle_key(&keys, &key(KeyCode::Tab), now(), &mut reqs);
        assert_eq!(s.section, Section::Charts);
        assert_eq!(s.cursor, 6);
        s.handle_key(&keys, &key(KeyCode::Left), now(), &mut reqs);
        s.handle_key(&keys, &key(KeyCode::Left), now(), &mut reqs);
        assert_eq!(s.cursor, 4);
        s.handle_key(&keys, &key(KeyCode::Tab), now(), &mut reqs);
        assert_eq!(s.section, Section::Table);
        s.handle_key(&keys, &key(KeyCode::Home), now(), &mut reqs);
        assert_eq!(s.cursor, 0);
        s.handle_key(&keys, &key(KeyCode::Down), now(), &mut reqs);
        assert_eq!(s.cursor, 1);
        s.handle_key(&keys, &key(KeyCode::BackTab), now(), &mut reqs);
        assert_eq!(s.section, Section::Charts);
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Esc), now(), &mut reqs),
            KeyResult::Back
        );
        assert_eq!(
            s.handle_key(&keys, &key(KeyCode::Char('q')), now(), &mut reqs),
            KeyResult::Quit
        );
    }

    #[test]
    fn a_long_preset_switches_to_a_granularity_that_fits() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.set_range(
            RangeChoice::Preset(RangePreset::Last90Days),
            now(),
            &mut reqs,
        );
        assert_eq!(s.granularity, Granularity::Day);
        assert_eq!(
            s.note.as_deref(),
            Some("by day: 2149 hour buckets would be more than 200")
        );
        assert_eq!(plan(&reqs).buckets.len(), 90);
        // Asking for hours explicitly is refused inline, with no request.
        let mut reqs = Vec::new();
        s.set_granularity(Granularity::Hour, now(), &mut reqs);
        assert!(!reqs.iter().any(|r| matches!(r, MetricsRequest::Load(_))));
        assert_eq!(
            s.problem.as_deref(),
            Some("2149 hourly buckets are more than 200: choose day or a shorter range")
        );
        assert!(s.current.is_none());
    }

    #[test]
    fn a_custom_range_is_validated_as_typed() {
        let keys = KeyBindings::default();
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        for _ in 0..4 {
            s.handle_key(&keys, &key(KeyCode::Right), now(), &mut reqs);
        }
        s.handle_key(&keys, &key(KeyCode::Right), now(), &mut reqs);
        assert!(!s.custom.editing);
        s.handle_key(&keys, &key(KeyCode::Enter), now(), &mut reqs);
        assert!(s.custom.editing);
        assert_eq!(s.range_cursor, CUSTOM_SLOT);
        s.custom.text.clear();
        reqs.clear();
        for c in "2026-11-0".chars() {
            s.handle_key(&keys, &key(KeyCode::Char(c)), now(), &mut reqs);
        }
        assert!(s.custom.error.as_deref().unwrap().contains("not a date"));
        // `q` and digits are text while editing.
        for c in "1..2026-11-08".chars() {
            assert_eq!(
                s.handle_key(&keys, &key(KeyCode::Char(c)), now(), &mut reqs),
                KeyResult::Consumed
            );
        }
        assert_eq!(s.custom.error, None);
        assert!(reqs.is_empty());
        s.handle_key(&keys, &key(KeyCode::Enter), now(), &mut reqs);
        assert!(!s.custom.editing);
        let p = plan(&reqs);
        assert_eq!(
            p.range.start,
            Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
        );
        // Passing over the longer presets loaded none of them: the granularity is still the
        // 24-hour preset's.
        assert_eq!(p.granularity, Granularity::Hour);
        assert_eq!(p.buckets.len(), 7 * 24);
        // A range the service refuses cannot be applied.
        s.handle_key(&keys, &key(KeyCode::Enter), now(), &mut reqs);
        assert!(s.custom.editing);
        s.custom.text.set_text("2024-01-01..2026-01-011");
        s.handle_key(&keys, &key(KeyCode::Backspace), now(), &mut reqs);
        assert!(s.custom.error.as_deref().unwrap().contains("at most 366"));
        reqs.clear();
        s.handle_key(&keys, &key(KeyCode::Enter), now(), &mut reqs);
        assert!(s.custom.editing && reqs.is_empty());
        s.handle_key(&keys, &key(KeyCode::Esc), now(), &mut reqs);
        assert!(!s.custom.editing);
    }

    #[test]
    fn a_complete_bucket_is_never_asked_for_twice() {
        let keys = KeyBindings::default();
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let first = plan(&reqs).clone();
        assert!(first.known.is_empty());
        answer_all(&mut s, &first);
        // 23 whole hours are complete; the current hour (12:00–12:34) is not.
        assert_eq!(s.known.len(), 23);
        // 7 days by hour: the 23 hours it shares with the last 24 are not asked again.
        reqs.clear();
        s.handle_key(&keys, &key(KeyCode::Char('2')), now(), &mut reqs);
        let week = plan(&reqs).clone();
        assert_eq!(week.known.len(), 23);
        let load = s.current.as_ref().unwrap();
        let filled = load
            .buckets
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Kept(_)))
            .count();
        assert_eq!(filled, 23);
        assert!(
            load.buckets.last().unwrap().1.is_pending(),
            "the current hour is asked"
        );
        // With a budget to weigh against, the cost counts only what is asked.
        // (The whole 24-hour load is cached too; without it, only the new is asked.)
        s.requests_left = Some(10_000);
        s.cache.clear();
        reqs.clear();
        s.handle_key(&keys, &key(KeyCode::Char('1')), now(), &mut reqs);
        assert!(s.asking.is_none());
        assert_eq!(
            plan(&reqs).known.len(),
            23,
            "two queries: the totals and the current hour"
        );
    }

    #[test]
    fn a_load_asks_only_for_the_bars_on_screen_and_the_rest_as_they_scroll_in() {
        let keys = KeyBindings::default();
        // An 80×24 screen less the status bar: 78 bars fit the charts.
        let mut s = MetricsState {
            viewport: ratatui::layout::Rect::new(0, 0, 80, 23),
            ..roomy()
        };
        let mut reqs = Vec::new();
        s.handle_key(&keys, &key(KeyCode::Char('2')), now(), &mut reqs);
        let p = plan(&reqs).clone();
        assert_eq!(p.buckets.len(), 157);
        assert_eq!(p.ask, (79..157).collect::<Vec<_>>(), "the last 78 buckets");
        let load = s.current.as_ref().unwrap();
        assert_eq!(load.total_queries(), 79);
        assert!(matches!(load.buckets[78].1, Slot::NotAsked));
        // Answered, the chart is complete for what it shows; nothing else is asked.
        answer_all(&mut s, &p);
        reqs.clear();
        s.fetch_on_screen(&mut reqs);
        assert!(reqs.is_empty());
        assert!(!s.is_loading());
        // The selected bar stays at the right edge: one step left scrolls bucket 78 on
        // screen, and it alone is asked for.
        s.section = Section::Charts;
        s.handle_key(&keys, &key(KeyCode::Left), now(), &mut reqs);
        s.fetch_on_screen(&mut reqs);
        assert_eq!(
            reqs,
            vec![MetricsRequest::Fetch {
                load_id: p.load_id,
                granularity: Granularity::Hour,
                ask: vec![(78, p.buckets[78])],
            }]
        );
        assert!(s.current.as_ref().unwrap().buckets[78].1.is_pending());
        // Asked once: the same screen asks nothing more.
        reqs.clear();
        s.fetch_on_screen(&mut reqs);
        assert!(reqs.is_empty());
        // The table shows fewer rows (23 - 8 rows of controls, less its header): moving
        // within the asked part asks nothing.
        s.section = Section::Table;
        s.fetch_on_screen(&mut reqs);
        assert!(reqs.is_empty());
    }

    #[test]
    fn known_buckets_from_the_store_are_not_asked_and_new_complete_ones_are_returned() {
        let mut s = roomy();
        let mut reqs = Vec::new();
        s.open(now(), &mut reqs);
        let first = plan(&reqs).clone();
        // The answers of one run, as the app hands them to the store.
        let mut kept = Vec::new();
        let _ = s.on_event(MetricsEvent::Answered {
            load_id: first.load_id,
            query: Query::Totals,
            result: Ok(metrics(1)),
        });
        for i in 0..first.buckets.len() {
            kept.extend(s.on_event(MetricsEvent::Answered {
                load_id: first.load_id,
                query: Query::Bucket(i),
                result: Ok(metrics(i as u64)),
            }));
        }
        assert_eq!(kept.len(), 23, "every whole hour, not the current one");
        // A new run: the store's answer comes in, then the view opens.
        let mut next = roomy();
        let _ = next.on_event(MetricsEvent::Known {
            account: "embedded".into(),
            buckets: kept,
        });
        assert_eq!(next.account.as_deref(), Some("embedded"));
        reqs.clear();
        next.open(now(), &mut reqs);
        let p = plan(&reqs);
        assert_eq!(p.ask, vec![23], "only the current hour");
        let load = next.current.as_ref().unwrap();
        assert_eq!(load.buckets[5].1, Slot::Kept(metrics(5)));
        assert_eq!(load.total_queries(), 2, "the totals and the current hour");
        assert_eq!(load.kept(), 23);
        // Answers already known are not returned again.
        let again = next.on_event(MetricsEvent::Answered {
            load_id: p.load_id,
            query: Query::Bucket(23),
            result: Ok(metrics(0)),
        });
        assert!(again.is_empty());
    }

    #[test]
    fn before_the_first_usage_poll_a_big_load_asks_too() {
        let keys = KeyBindings::default();
        let mut s = MetricsState::default();
        let mut reqs = Vec::new();
        // 24 hours by hour: 25 requests, asked at once.
        s.open(now(), &mut reqs);
        assert!(s.asking.is_none());
        // 7 days by hour: 158, and nothing known to weigh them against.
        reqs.clear();
        s.handle_key(&keys, &key(KeyCode::Char('2')), now(), &mut reqs);
        assert!(reqs.iter().all(|r| !matches!(r, MetricsRequest::Load(_))));
        let q = s.asking.clone().unwrap();
        assert_eq!(q.left, None);
        assert_eq!(
            q.describe(),
            "158 requests (what is left of the plan is not known yet)"
        );
        s.handle_key(&keys, &key(KeyCode::Enter), now(), &mut reqs);
        assert_eq!(plan(&reqs).buckets.len(), 157);
    }
}
