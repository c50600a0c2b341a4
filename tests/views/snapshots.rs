//! Snapshots of the metrics and wallet views: loaded, loading, empty, error and narrow.

use convo_client::api::{Metrics, Wallet};
use convo_tui::app::{App, Command, View};
use convo_tui::event::AppEvent;
use convo_tui::metrics::{KnownBucket, LoadPlan, MetricsEvent, MetricsRequest, Query};
use convo_tui::view;
use convo_tui::wallet::{TokenStatus, WalletEvent, WalletFailure, WalletRequest};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::fixture::{app, key};

pub fn render(app: &App) -> String {
    let backend = TestBackend::new(app.size().width, app.size().height);
    let mut terminal = Terminal::new(backend).unwrap();
    terminal.draw(|f| view::draw(f, app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

// ---- metrics --------------------------------------------------------------------------------

fn metrics(messages: u64, tokens: u64, active: u64) -> Box<Metrics> {
    let user = messages / 2;
    Box::new(
        serde_json::from_value(serde_json::json!({
            "period": {"start": "2026-11-21T13:00:00Z", "end": "2026-11-22T12:34:00Z", "granularity": "hour"},
            "sessions": {"total": active, "active": active, "averageDuration": if active > 0 { 754.0 } else { 0.0 }},
            "messages": {
                "total": messages,
                "averagePerSession": if active > 0 { messages as f64 / active as f64 } else { 0.0 },
                "userMessages": user, "assistantMessages": messages - user
            },
            "tokens": {
                "total": tokens, "prompt": tokens / 3, "completion": tokens - tokens / 3,
                "averagePerMessage": if messages > 0 { tokens as f64 / messages as f64 } else { 0.0 }
            }
        }))
        .unwrap(),
    )
}

/// Opens the metrics view and returns the load it asked for.
fn open_metrics(app: &mut App) -> LoadPlan {
    // No usage poll has answered here: a plan with room, unless a test gave one.
    app.metrics.requests_left.get_or_insert(1_000_000);
    let out = app.update(key(KeyCode::F(2)));
    assert_eq!(app.view(), View::Metrics);
    out.into_iter()
        .find_map(|c| match c {
            Command::Metrics(MetricsRequest::Load(p)) => Some(p),
            _ => None,
        })
        .expect("F2 starts a load")
}

fn answer(app: &mut App, plan: &LoadPlan, query: Query, result: Result<Box<Metrics>, String>) {
    app.update(AppEvent::Metrics(MetricsEvent::Answered {
        load_id: plan.load_id,
        query,
        result,
    }));
}

/// A day of activity: busier in the afternoon, quiet at night.
fn hourly(i: usize) -> (u64, u64, u64) {
    let h = (13 + i) % 24;
    let m = match h {
        0..=6 => 0,
        7..=11 => 4 + (h as u64 - 7) * 2,
        _ => 10 + (h as u64 % 5) * 3,
    };
    (m, m * 137, m.div_ceil(4))
}

fn metrics_loaded(w: u16, h: u16) -> App {
    let mut app = app(w, h);
    let plan = open_metrics(&mut app);
    let mut total = (0, 0);
    for i in 0..plan.buckets.len() {
        let (m, t, a) = hourly(i);
        total = (total.0 + m, total.1 + t);
        answer(&mut app, &plan, Query::Bucket(i), Ok(metrics(m, t, a)));
    }
    answer(
        &mut app,
        &plan,
        Query::Totals,
        Ok(metrics(total.0, total.1, 9)),
    );
    app
}

#[test]
fn metrics_loaded_80x24() {
    insta::assert_snapshot!(render(&metrics_loaded(80, 24)));
}

#[test]
fn metrics_loaded_120x40() {
    insta::assert_snapshot!(render(&metrics_loaded(120, 40)));
}

/// The next run: the complete hours of [`metrics_loaded`] come from the local store, then
/// 7 days by hour loads only the bars on screen that are not among them.
fn metrics_kept_and_partial(w: u16, h: u16) -> App {
    let earlier = metrics_loaded(w, h);
    let buckets: Vec<KnownBucket> = (earlier.metrics.known.iter())
        .map(|((bucket, granularity), m)| KnownBucket {
            granularity: *granularity,
            bucket: *bucket,
            metrics: m.clone(),
        })
        .collect();
    let mut app = app(w, h);
    app.update(AppEvent::Metrics(MetricsEvent::Known {
        account: "embedded".into(),
        buckets,
    }));
    open_metrics(&mut app);
    let out = app.update(key(KeyCode::Char('2')));
    let plan = out
        .into_iter()
        .find_map(|c| match c {
            Command::Metrics(MetricsRequest::Load(p)) => Some(p),
            _ => None,
        })
        .expect("a load");
    assert!(
        plan.ask.len() < plan.buckets.len(),
        "only what is on screen"
    );
    for &i in &plan.ask {
        let (m, t, a) = hourly(i);
        answer(&mut app, &plan, Query::Bucket(i), Ok(metrics(m, t, a)));
    }
    answer(&mut app, &plan, Query::Totals, Ok(metrics(300, 41100, 9)));
    app
}

#[test]
fn metrics_kept_and_partial_80x24() {
    let screen = render(&metrics_kept_and_partial(80, 24));
    assert!(screen.contains("23 kept"), "{screen}");
    assert!(screen.contains("loaded)"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn metrics_kept_and_partial_120x40() {
    insta::assert_snapshot!(render(&metrics_kept_and_partial(120, 40)));
}

#[test]
fn metrics_loaded_table_80x24() {
    let mut app = metrics_loaded(80, 24);
    app.update(key(KeyCode::BackTab));
    app.update(key(KeyCode::Up));
    insta::assert_snapshot!(render(&app));
}

#[test]
fn metrics_loading_80x24() {
    let mut app = app(80, 24);
    let plan = open_metrics(&mut app);
    answer(&mut app, &plan, Query::Totals, Ok(metrics(120, 16440, 9)));
    for i in 0..9 {
        let (m, t, a) = hourly(i);
        answer(&mut app, &plan, Query::Bucket(i), Ok(metrics(m, t, a)));
    }
    insta::assert_snapshot!(render(&app));
}

#[test]
fn metrics_empty_80x24() {
    let mut app = app(80, 24);
    let plan = open_metrics(&mut app);
    for i in 0..plan.buckets.len() {
        answer(&mut app, &plan, Query::Bucket(i), Ok(metrics(0, 0, 0)));
    }
    answer(&mut app, &plan, Query::Totals, Ok(metrics(0, 0, 0)));
    insta::assert_snapshot!(render(&app));
}

#[test]
fn metrics_error_80x24() {
    // Failed buckets show as failed, not as zero; the selected one says why.
    let mut app = app(80, 24);
    let plan = open_metrics(&mut app);
    let n = plan.buckets.len();
    for i in 0..n {
        let result = if i == 20 || i == n - 1 {
            Err("network error: cannot connect to http://127.0.0.1:40000".to_string())
        } else {
            let (m, t, a) = hourly(i);
            Ok(metrics(m, t, a))
        };
        answer(&mut app, &plan, Query::Bucket(i), result);
    }
    answer(
        &mut app,
        &plan,
        Query::Totals,
        Err("internal: database is locked".into()),
    );
    insta::assert_snapshot!(render(&app));
}

#[test]
fn metrics_too_many_buckets_80x24() {
    let mut app = app(80, 24);
    open_metrics(&mut app);
    app.update(key(KeyCode::Char('4')));
    app.update(key(KeyCode::Tab));
    app.update(key(KeyCode::Left));
    insta::assert_snapshot!(render(&app));
}

#[test]
fn metrics_custom_range_typed_80x24() {
    let mut app = app(80, 24);
    open_metrics(&mut app);
    for _ in 0..4 {
        app.update(key(KeyCode::Right));
    }
    app.update(key(KeyCode::Enter));
    for _ in 0..30 {
        app.update(key(KeyCode::Backspace));
    }
    for c in "2026-11-01..2026-11-3x".chars() {
        app.update(key(KeyCode::Char(c)));
    }
    insta::assert_snapshot!(render(&app));
}

/// A slip in the middle of the range is mended where it is, the rest left as typed.
#[test]
fn metrics_custom_range_mended_in_the_middle_80x24() {
    let mut app = app(80, 24);
    open_metrics(&mut app);
    for _ in 0..4 {
        app.update(key(KeyCode::Right));
    }
    app.update(key(KeyCode::Enter));
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    for c in "2026-1101..2026-11-30".chars() {
        app.update(key(KeyCode::Char(c)));
    }
    assert!(
        app.metrics
            .custom
            .error
            .as_deref()
            .unwrap()
            .contains("start"),
        "{:?}",
        app.metrics.custom.error
    );
    app.update(key(KeyCode::Home));
    for _ in 0.."2026-11".len() {
        app.update(key(KeyCode::Right));
    }
    app.update(key(KeyCode::Char('-')));
    assert_eq!(app.metrics.custom.text.text(), "2026-11-01..2026-11-30");
    assert_eq!(app.metrics.custom.error, None);
    insta::assert_snapshot!(render(&app));
}

#[test]
fn metrics_cancelled_80x24() {
    let mut app = app(80, 24);
    let plan = open_metrics(&mut app);
    for i in 0..5 {
        let (m, t, a) = hourly(i);
        answer(&mut app, &plan, Query::Bucket(i), Ok(metrics(m, t, a)));
    }
    let out = app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert!(out.contains(&Command::Metrics(MetricsRequest::Cancel {
        load_id: plan.load_id
    })));
    assert!(
        !app.has_quit(),
        "Ctrl-C while loading cancels, it does not quit"
    );
    insta::assert_snapshot!(render(&app));
}

#[test]
fn metrics_narrow_50x16() {
    insta::assert_snapshot!(render(&metrics_loaded(50, 16)));
}

// ---- wallet ---------------------------------------------------------------------------------

fn fixture(id: &str) -> Box<Wallet> {
    let all: Vec<Wallet> = serde_json::from_str(include_str!("../../assets/wallets.json")).unwrap();
    Box::new(all.into_iter().find(|w| w.wallet_id == id).unwrap())
}

/// Opens the wallet view with `/wallet ID` and returns the fetch it asked for.
fn open_wallet(app: &mut App, id: &str) -> u64 {
    for c in format!("/wallet {id}").chars() {
        app.update(key(KeyCode::Char(c)));
    }
    let out = app.update(key(KeyCode::Enter));
    assert_eq!(app.view(), View::Wallet);
    out.into_iter()
        .find_map(|c| match c {
            Command::Wallet(WalletRequest::Fetch { fetch_id, .. }) => Some(fetch_id),
            _ => None,
        })
        .expect("/wallet ID fetches")
}

fn wallet_loaded(w: u16, h: u16, id: &str) -> App {
    let mut app = app(w, h);
    let fetch_id = open_wallet(&mut app, id);
    app.update(AppEvent::Wallet(WalletEvent::Fetched {
        fetch_id,
        result: Ok(fixture(id)),
    }));
    app
}

#[test]
fn wallet_loaded_80x24() {
    insta::assert_snapshot!(render(&wallet_loaded(80, 24, "treasury")));
}

#[test]
fn wallet_loaded_120x40() {
    insta::assert_snapshot!(render(&wallet_loaded(120, 40, "collector")));
}

#[test]
fn wallet_high_risk_80x24() {
    insta::assert_snapshot!(render(&wallet_loaded(80, 24, "flagged")));
}

#[test]
fn wallet_empty_80x24() {
    insta::assert_snapshot!(render(&wallet_loaded(80, 24, "empty")));
}

#[test]
fn wallet_loading_80x24() {
    let mut app = app(80, 24);
    open_wallet(&mut app, "market-maker");
    insta::assert_snapshot!(render(&app));
}

#[test]
fn wallet_prompt_80x24() {
    let mut app = app(80, 24);
    app.update(AppEvent::Wallet(WalletEvent::RecentLoaded(vec![
        "flagged".into(),
        "staker".into(),
    ])));
    app.update(key(KeyCode::F(3)));
    app.update(key(KeyCode::Down));
    app.update(key(KeyCode::Down));
    insta::assert_snapshot!(render(&app));
}

#[test]
fn wallet_not_found_80x24() {
    let mut app = app(80, 24);
    let fetch_id = open_wallet(&mut app, "ghost");
    app.update(AppEvent::Wallet(WalletEvent::Fetched {
        fetch_id,
        result: Err(WalletFailure::NotFound),
    }));
    insta::assert_snapshot!(render(&app));
}

#[test]
fn wallet_unauthorized_80x24() {
    let mut app = app(80, 24);
    let fetch_id = open_wallet(&mut app, "treasury");
    app.update(AppEvent::Wallet(WalletEvent::Fetched {
        fetch_id,
        result: Err(WalletFailure::Unauthorized("the token has expired".into())),
    }));
    insta::assert_snapshot!(render(&app));
}

#[test]
fn wallet_no_token_80x24() {
    let mut app = app(80, 24);
    app.update(AppEvent::Wallet(WalletEvent::Token(TokenStatus::Missing)));
    app.update(key(KeyCode::F(3)));
    insta::assert_snapshot!(render(&app));
}

#[test]
fn wallet_narrow_50x16() {
    insta::assert_snapshot!(render(&wallet_loaded(50, 16, "market-maker")));
}

#[test]
fn help_lists_the_view_keys() {
    let mut app = app(120, 40);
    app.update(key(KeyCode::F(2)));
    app.update(key(KeyCode::F(1)));
    let screen = render(&app);
    assert!(screen.contains("/metrics"), "{screen}");
    assert!(screen.contains("/wallet [ID]"), "{screen}");
    assert!(screen.contains("cancel loading"), "{screen}");
    // Any key closes the help and the view is still there.
    app.update(key(KeyCode::Char('x')));
    assert_eq!(app.view(), View::Metrics);
    assert!(app.overlay().is_none());
}

#[test]
fn tiny_terminals_do_not_panic() {
    for (w, h) in [
        (1, 1),
        (10, 3),
        (20, 5),
        (30, 8),
        (45, 12),
        (200, 3),
        (3, 60),
    ] {
        let mut m = metrics_loaded(80, 24);
        m.update(AppEvent::Resize(w, h));
        render(&m);
        m.update(key(KeyCode::BackTab));
        render(&m);
        let mut wl = wallet_loaded(80, 24, "collector");
        wl.update(AppEvent::Resize(w, h));
        render(&wl);
        wl.update(key(KeyCode::Tab));
        render(&wl);
        let mut nt = app(w, h);
        nt.update(AppEvent::Wallet(WalletEvent::Token(TokenStatus::Missing)));
        nt.update(key(KeyCode::F(3)));
        render(&nt);
    }
}

/// A free plan with 1,000 requests of which 27 are used.
fn free_usage(used: u64) -> convo_client::api::Usage {
    serde_json::from_value(serde_json::json!({
        "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
        "requests": {"used": used, "limit": 1000, "percentage": used as f64 / 10.0},
        "tokens": {"used": 100, "limit": 100000, "percentage": 0.1},
        "sessions": {"active": 1, "limit": 10, "percentage": 10.0},
        "tier": "free"
    }))
    .unwrap()
}

fn loads(out: &[Command]) -> usize {
    out.iter()
        .filter(|c| matches!(c, Command::Metrics(MetricsRequest::Load(_))))
        .count()
}

#[test]
fn a_costly_load_asks_first() {
    // 7 days by hour is 157 buckets; only the bars that fit the width are asked for (78 at
    // 80 columns, 118 at 120), plus the totals.
    for (w, h, cost) in [
        (80, 24, "79 requests = 8 % of the 973 left"),
        (120, 40, "119 requests = 12 % of the 973 left"),
    ] {
        let mut app = app(w, h);
        app.update(AppEvent::UsageFetched(free_usage(27)));
        // 24 hours by hour: 25 requests, under 5 % of the 973 left: it loads.
        open_metrics(&mut app);
        // 7 days by hour: more than 5 % of what is left: it asks.
        let out = app.update(key(KeyCode::Char('2')));
        assert_eq!(loads(&out), 0);
        let screen = render(&app);
        assert!(screen.contains(cost), "{screen}");
        assert!(
            !screen.contains("cancelled"),
            "the chart shown goes on loading"
        );
        insta::assert_snapshot!(format!("metrics_asks_the_cost_{w}x{h}"), screen);
        // Esc keeps the chart as it was, with nothing spent.
        let out = app.update(key(KeyCode::Esc));
        assert_eq!(loads(&out), 0);
        assert!(app.metrics.asking.is_none());
        assert_eq!(app.view(), View::Metrics);
        assert!(
            render(&app).contains("last 24 hours by hour"),
            "the choice shown is back"
        );
        // Asked again, Enter loads.
        app.update(key(KeyCode::Char('2')));
        let out = app.update(key(KeyCode::Enter));
        assert_eq!(loads(&out), 1);
    }
}
