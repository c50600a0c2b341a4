//! The account feed: what keeps the usage gauges (and, through the account stream, the
//! sessions pane) current at the least cost in requests.
//!
//! Against a server with the account stream (`GET /v1/stream`, docs/service.md) it holds the
//! stream open and passes its events on as `AppEvent::Account`: the gauges update from its
//! `hello` and `usage` events and nothing is polled (one request per connection). Against a
//! server without it, or while the stream is down, it polls `GET /v1/analytics/usage`
//! adaptively ([`next_poll_in`]): at the configured interval while the user types or a reply
//! streams, at once when the app asks (after one's own send, the refresh key), and backing off
//! to `UsagePacing::idle_every` (5 minutes) when idle and nothing changes, but a poll refused
//! at a plan limit comes again no later than the limit's `Retry-After` (its reset). A stream
//! refused by the requests limit is not tried again until a poll is answered (the limit lifted). An idle
//! TUI so spends at most 16 requests in its first hour on a server without the stream
//! (docs/tui.md).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::Shared;
use crate::event::{AppEvent, EventSender};
use convo_client::api::ApiError;
use convo_client::api::account_stream::{AccountStream, AccountUpdate};
use convo_client::api::types::Usage;

/// How often the usage is polled when it must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsagePacing {
    /// While the user types or a reply streams (`ui.usage_refresh_secs`).
    pub active_every: Duration,
    /// The slowest pace, when idle and nothing changes.
    pub idle_every: Duration,
    /// Activity this recent counts as "typing or streaming".
    pub active_for: Duration,
}

/// The slowest poll when idle.
pub const IDLE_EVERY: Duration = Duration::from_secs(300);
/// How long after the last key or streamed piece the TUI counts as active.
pub const ACTIVE_FOR: Duration = Duration::from_secs(30);

impl UsagePacing {
    /// The pace for a configured interval.
    pub fn every(active_every: Duration) -> Self {
        UsagePacing {
            active_every,
            idle_every: IDLE_EVERY,
            active_for: ACTIVE_FOR,
        }
    }
}

/// The wait before the next poll: `active_every` while active; when idle, a tenth of
/// `idle_every` (never less than `active_every`) doubled for each poll in a row that saw no
/// change (`quiet_polls`), up to `idle_every`. With the defaults: 30 s, 60 s, 120 s, 240 s,
/// then every 300 s.
pub fn next_poll_in(pacing: &UsagePacing, active: bool, quiet_polls: u32) -> Duration {
    if active {
        return pacing.active_every;
    }
    let first = (pacing.idle_every / 10).max(pacing.active_every);
    first
        .saturating_mul(2u32.saturating_pow(quiet_polls.min(16)))
        .min(pacing.idle_every.max(pacing.active_every))
}

/// The wait after a poll refused by a plan limit that lifts in `lifts_in` (its
/// `Retry-After`): the usual wait ([`next_poll_in`]), but no later than the lift, so a TUI left
/// idle at its limit sees a new period on time; never sooner than `active_every` (a clock
/// behind the server's would otherwise poll in a loop).
pub fn next_poll_when_refused(
    pacing: &UsagePacing,
    active: bool,
    quiet_polls: u32,
    lifts_in: Duration,
) -> Duration {
    next_poll_in(pacing, active, quiet_polls).min(lifts_in.max(pacing.active_every))
}

/// Whether a poll saw a change beyond the one request it cost itself.
pub fn usage_changed(before: Option<&Usage>, after: &Usage) -> bool {
    let Some(before) = before else {
        return true;
    };
    // Our own poll adds one request (a server may count none); more is someone else's, fewer
    // a new billing period.
    after.tokens.used != before.tokens.used
        || after.sessions.active != before.sessions.active
        || after.requests.used > before.requests.used + 1
        || after.requests.used < before.requests.used
        || after.requests.limit != before.requests.limit
        || after.tier != before.tier
}

/// When the user last typed or a reply last streamed, as the workers see it.
pub(super) type Activity = watch::Sender<Option<Instant>>;

/// Where the feed is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The account stream is being tried: no poll yet.
    Trying,
    /// The account stream is open: nothing to poll.
    Streaming,
    /// No account stream (the server has none, or it is down): polling.
    Polling,
}

/// Runs the feed for the connected client (it waits for the connection: the app's first
/// `RefreshUsage` kick comes with it).
pub(super) async fn account_feed(
    shared: Arc<Shared>,
    kick: Arc<Notify>,
    mut activity: watch::Receiver<Option<Instant>>,
    pacing: UsagePacing,
    events: EventSender,
) {
    let client = loop {
        if let Some(client) = shared.client.get() {
            break client;
        }
        kick.notified().await;
    };
    // The stream's handle: dropping it closes the stream.
    let (mut stream, mut updates) = AccountStream::connect(client.options().clone());
    let mut stream_open = true;
    // The stream was refused by the requests limit: tried again once a poll is answered (the
    // limit lifted: a new period, a larger plan), not before (docs/tui.md).
    let mut refused = false;
    let mut mode = Mode::Trying;
    let mut last: Option<Usage> = None;
    let mut quiet = 0u32;
    let mut last_poll: Option<Instant> = None;
    let mut next_poll: Option<Instant> = None;
    let active = |activity: &watch::Receiver<Option<Instant>>| {
        activity
            .borrow()
            .is_some_and(|at| at.elapsed() < pacing.active_for)
    };
    loop {
        tokio::select! {
            update = updates.recv(), if stream_open => match update {
                Some(AccountUpdate::Event(event)) => {
                    if !events.send(AppEvent::Account(event)) {
                        return;
                    }
                }
                Some(AccountUpdate::Connected) => {
                    mode = Mode::Streaming;
                    next_poll = None;
                }
                Some(AccountUpdate::Disconnected { retry_in: Some(_), error }) => {
                    tracing::debug!(%error, "the account stream dropped; polling the usage until it is back");
                    if mode != Mode::Polling {
                        mode = Mode::Polling;
                        next_poll = Some(Instant::now());
                    }
                }
                // Ended for good: refused, or the server has none.
                ended => {
                    stream_open = false;
                    refused = matches!(
                        ended,
                        Some(AccountUpdate::Disconnected { error: ApiError::QuotaExceeded { .. }, .. })
                    );
                    if mode != Mode::Polling {
                        mode = Mode::Polling;
                        next_poll = Some(Instant::now());
                    }
                }
            },
            _ = kick.notified() => {
                stream.retry_now();
                if mode == Mode::Polling {
                    next_poll = Some(Instant::now());
                }
            }
            changed = activity.changed() => {
                if changed.is_err() {
                    return;
                }
                // Someone is at the keyboard: a stream waiting to reconnect tries now.
                stream.retry_now();
                // Active again: the next poll comes at the active pace.
                if mode == Mode::Polling && active(&activity) {
                    let soon = last_poll.map_or_else(Instant::now, |at| at + pacing.active_every);
                    next_poll = Some(next_poll.map_or(soon, |next| next.min(soon)));
                }
            }
            _ = sleep_until(next_poll) => {
                let now = Instant::now();
                last_poll = Some(now);
                let ev = match client.usage().await {
                    Ok(usage) => {
                        if refused {
                            refused = false;
                            (stream, updates) = AccountStream::connect(client.options().clone());
                            stream_open = true;
                        }
                        if usage_changed(last.as_ref(), &usage) {
                            quiet = 0;
                        } else {
                            quiet = quiet.saturating_add(1);
                        }
                        last = Some(usage.clone());
                        AppEvent::UsageFetched(usage)
                    }
                    Err(e) => {
                        quiet = quiet.saturating_add(1);
                        AppEvent::UsageFailed(e)
                    }
                };
                let wait = match &ev {
                    AppEvent::UsageFailed(ApiError::QuotaExceeded { retry_after: Some(lifts_in), .. }) => {
                        next_poll_when_refused(&pacing, active(&activity), quiet, *lifts_in)
                    }
                    _ => next_poll_in(&pacing, active(&activity), quiet),
                };
                if !events.send(ev) {
                    return;
                }
                next_poll = (mode == Mode::Polling).then(|| now + wait);
            }
        }
    }
}

/// Resolves at `due`, never when there is none.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls an idle TUI makes in `span` from its first poll at 0, nothing changing.
    fn idle_polls(pacing: &UsagePacing, span: Duration) -> u32 {
        let (mut at, mut polls, mut quiet) = (Duration::ZERO, 0u32, 0u32);
        while at <= span {
            polls += 1;
            // The first poll sees a change (nothing was known); the rest none.
            if polls > 1 {
                quiet += 1;
            }
            at += next_poll_in(pacing, false, quiet);
        }
        polls
    }

    #[test]
    fn an_idle_hour_costs_at_most_sixteen_polls_whatever_the_interval() {
        let hour = Duration::from_secs(3600);
        for secs in [1, 2, 5, 10, 30, 60, 300, 900] {
            let pacing = UsagePacing::every(Duration::from_secs(secs));
            let polls = idle_polls(&pacing, hour);
            assert!(polls <= 16, "{secs} s: {polls} polls in an idle hour");
            assert!(polls >= 1, "{secs} s");
        }
        // The default's schedule: 30 s, 60 s, 120 s, 240 s, then every 5 minutes.
        let pacing = UsagePacing::every(Duration::from_secs(10));
        let waits: Vec<u64> = (0..7)
            .map(|q| next_poll_in(&pacing, false, q).as_secs())
            .collect();
        assert_eq!(waits, vec![30, 60, 120, 240, 300, 300, 300]);
        assert_eq!(idle_polls(&pacing, hour), 15);
        // Every later hour: 12.
        assert_eq!(
            idle_polls(&pacing, hour * 2) - idle_polls(&pacing, hour),
            12
        );
    }

    #[test]
    fn while_active_the_configured_interval_holds() {
        let pacing = UsagePacing::every(Duration::from_secs(10));
        for quiet in [0, 3, 50] {
            assert_eq!(next_poll_in(&pacing, true, quiet), Duration::from_secs(10));
        }
        // An interval slower than the idle pace is kept when idle too.
        let slow = UsagePacing::every(Duration::from_secs(900));
        assert_eq!(next_poll_in(&slow, false, 5), Duration::from_secs(900));
    }

    #[test]
    fn a_poll_refused_at_a_limit_comes_back_when_it_lifts_and_not_sooner_than_the_active_pace() {
        let pacing = UsagePacing::every(Duration::from_secs(10));
        // Idle, backed off to 5 minutes: a limit lifting in 40 s is polled at 40 s.
        assert_eq!(
            next_poll_when_refused(&pacing, false, 6, Duration::from_secs(40)),
            Duration::from_secs(40)
        );
        // A lift in three days changes nothing.
        let days = Duration::from_secs(3 * 86_400);
        for (active, quiet) in [(false, 0), (false, 6), (true, 6)] {
            assert_eq!(
                next_poll_when_refused(&pacing, active, quiet, days),
                next_poll_in(&pacing, active, quiet)
            );
        }
        // A lift said to be now (a clock behind the server's) waits the active pace.
        assert_eq!(
            next_poll_when_refused(&pacing, false, 6, Duration::ZERO),
            Duration::from_secs(10)
        );
    }

    fn usage(requests: u64, tokens: u64, sessions: u64) -> Usage {
        serde_json::from_value(serde_json::json!({
            "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
            "requests": {"used": requests, "limit": 1000, "percentage": 0.5},
            "tokens": {"used": tokens, "limit": 200000, "percentage": 0.025},
            "sessions": {"active": sessions, "limit": 10, "percentage": 10.0},
            "tier": "free",
        }))
        .unwrap()
    }

    #[test]
    fn a_poll_that_only_counted_itself_is_no_change() {
        let before = usage(5, 50, 1);
        assert!(usage_changed(None, &before));
        assert!(!usage_changed(Some(&before), &usage(6, 50, 1)));
        assert!(
            !usage_changed(Some(&before), &usage(5, 50, 1)),
            "a server not counting polls"
        );
        assert!(
            usage_changed(Some(&before), &usage(8, 50, 1)),
            "others' requests"
        );
        assert!(usage_changed(Some(&before), &usage(6, 70, 1)));
        assert!(usage_changed(Some(&before), &usage(6, 50, 2)));
        assert!(
            usage_changed(Some(&before), &usage(0, 0, 0)),
            "a new period"
        );
    }
}
