//! Snapshots at 80×24 and 120×40 of every pane, dialog and error state.

use chrono::{DateTime, TimeZone, Utc};
use convo_client::api::ApiError;
use convo_client::api::stream::StreamUpdate;
use convo_client::api::{Message, Role, StreamEvent, Usage};
use convo_service::engine::LoadState;
use convo_tui::app::{App, Command, Settings};
use convo_tui::event::{AppEvent, Endpoint, EngineStatus, Exported, SessionSummary, StoredMessage};
use convo_tui::keys::KeyBindings;
use convo_tui::view;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use ratatui::style::Color;

const A: &str = "session_AAAAAAAAAAAAAAAA";
const B: &str = "session_BBBBBBBBBBBBBBBB";
const C: &str = "session_CCCCCCCCCCCCCCCC";
const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
}

fn usage(req_pct: f64) -> Usage {
    let used = (req_pct * 500.0).round() as u64;
    serde_json::from_value(serde_json::json!({
        "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
        "requests": {"used": used, "limit": 50000, "percentage": req_pct},
        "tokens": {"used": 123456, "limit": 10000000, "percentage": 1.23456},
        "sessions": {"active": 3, "limit": 500, "percentage": 0.6},
        "tier": "pro"
    }))
    .unwrap()
}

fn summary(id: &str, title: &str, mins_ago: i64, tokens: u64) -> SessionSummary {
    SessionSummary {
        id: id.into(),
        title: title.into(),
        title_set: false,
        last_activity: t0() - chrono::Duration::minutes(mins_ago),
        tokens,
        forked_from: None,
    }
}

fn msg(role: Role, content: &str, tokens: u64) -> StoredMessage {
    StoredMessage {
        role,
        content: content.into(),
        tokens,
        message_id: None,
        created_at: t0(),
        status: convo_client::local_store::MessageStatus::Complete,
        finish_reason: None,
    }
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// Connected, three sessions, A open with a short conversation, usage polled.
fn chat(w: u16, h: u16) -> App {
    chat_with(
        w,
        h,
        vec![
            msg(
                Role::User,
                "What does 'static mean for a type parameter?",
                12,
            ),
            msg(
                Role::Assistant,
                "It means the type holds no borrowed data shorter than the whole program.\n\nFor example `String` is 'static but `&'a str` is not unless 'a is 'static.",
                40,
            ),
        ],
    )
}

/// The chat of [`chat`] with `messages` in the open session.
fn chat_with(w: u16, h: u16, messages: Vec<StoredMessage>) -> App {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, w, h),
        t0(),
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:40000".into(),
    }));
    app.update(AppEvent::StoreLoaded {
        sessions: vec![
            summary(A, "Rust lifetimes", 2, 1234),
            summary(B, "Dinner ideas for a rainy Tuesday evening", 90, 420),
            summary(C, "Trip to Lisbon", 3 * 24 * 60, 9800),
        ],
        last_open: Some(A.into()),
    });
    app.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages,
        draft: None,
        rendered: None,
    });
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Connected,
    });
    app.update(AppEvent::UsageFetched(usage(0.4)));
    app
}

fn render(app: &App) -> String {
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

fn snap(name: &str, build: impl Fn(u16, u16) -> App) {
    for (w, h) in SIZES {
        let app = build(w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), render(&app));
    }
}

fn type_text(app: &mut App, text: &str) -> Vec<Command> {
    text.chars()
        .flat_map(|c| app.update(key(KeyCode::Char(c))))
        .collect()
}

fn send_id(cmds: &[Command]) -> u64 {
    cmds.iter()
        .find_map(|c| match c {
            Command::Send { send_id, .. } => Some(*send_id),
            _ => None,
        })
        .expect("a send")
}

/// Enter sends what the composer holds, and the service accepts it: the reply `reply_id` of
/// `session_id`, empty so far.
fn send_accepted(app: &mut App, session_id: &str, reply_id: &str, prompt_tokens: u64) {
    let id = send_id(&app.update(key(KeyCode::Enter)));
    app.update(AppEvent::SendAccepted {
        session_id: session_id.into(),
        send_id: id,
        reply: Message {
            message_id: reply_id.into(),
            session_id: session_id.into(),
            role: Role::Assistant,
            content: String::new(),
            tokens: 0,
            created_at: "2026-11-22T12:00:00Z".into(),
            finish_reason: None,
        },
        prompt_tokens,
    });
}

#[test]
fn connecting() {
    snap("connecting", |w, h| {
        App::new(
            KeyBindings::default(),
            Settings::default(),
            Rect::new(0, 0, w, h),
            t0(),
        )
    });
}

#[test]
fn connect_failed() {
    snap("connect_failed", |w, h| {
        let mut app = App::new(
            KeyBindings::default(),
            Settings::default(),
            Rect::new(0, 0, w, h),
            t0(),
        );
        app.update(AppEvent::StoreLoaded {
            sessions: vec![summary(A, "Rust lifetimes", 2, 0)],
            last_open: None,
        });
        app.update(AppEvent::TranscriptLoaded {
            session_id: A.into(),
            messages: vec![],
            draft: None,
            rendered: None,
        });
        app.update(AppEvent::ConnectFailed(
            "cannot bind 127.0.0.1:0: permission denied".into(),
        ));
        app
    });
}

#[test]
fn chat_with_history() {
    snap("chat", chat);
}

#[test]
fn new_session() {
    snap("new_session", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('n'),
            KeyModifiers::CONTROL,
        )));
        app
    });
}

#[test]
fn streaming_reply() {
    snap("streaming", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "Show me a code example");
        send_accepted(&mut app, A, "msg_1", 6);
        for (seq, part) in ["Here is ", "one:\n\n```rust\nfn ", "longest<'a>(x: &'a str"]
            .iter()
            .enumerate()
        {
            app.update(AppEvent::Stream {
                session_id: A.into(),
                update: StreamUpdate::Event(StreamEvent::Delta {
                    session_id: A.into(),
                    message_id: "msg_1".into(),
                    seq: seq as u64,
                    content: part.to_string(),
                }),
            });
        }
        app
    });
}

#[test]
fn sessions_pane_filtering() {
    snap("sessions_filter", |w, h| {
        let mut app = chat(w, h);
        app.update(key(KeyCode::Tab));
        app.update(key(KeyCode::Char('/')));
        type_text(&mut app, "li");
        app
    });
}

#[test]
fn help_overlay() {
    snap("help", |w, h| {
        let mut app = chat(w, h);
        app.update(key(KeyCode::F(1)));
        app
    });
}

#[test]
fn confirm_delete_dialog() {
    snap("confirm_delete", |w, h| {
        let mut app = chat(w, h);
        app.update(key(KeyCode::Tab));
        app.update(key(KeyCode::Down));
        app.update(key(KeyCode::Char('d')));
        app
    });
}

#[test]
fn context_overflow_dialog() {
    snap("context_overflow", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "a very long paste");
        let id = send_id(&app.update(key(KeyCode::Enter)));
        app.update(AppEvent::SendFailed {
            session_id: A.into(),
            send_id: id,
            failure: ApiError::ContextOverflow {
                current: 8450,
                max: 8192,
                message: "too long".into(),
            },
        });
        app
    });
}

#[test]
fn unauthorized_send() {
    snap("unauthorized", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "hello?");
        let id = send_id(&app.update(key(KeyCode::Enter)));
        app.update(AppEvent::SendFailed {
            session_id: A.into(),
            send_id: id,
            failure: ApiError::Unauthorized {
                message: "unknown API key".into(),
            },
        });
        app
    });
}

#[test]
fn quota_exceeded_send() {
    snap("quota_exceeded", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::UsageFetched(usage(100.0)));
        type_text(&mut app, "one more");
        let id = send_id(&app.update(key(KeyCode::Enter)));
        app.update(AppEvent::SendFailed {
            session_id: A.into(),
            send_id: id,
            failure: ApiError::QuotaExceeded {
                limit: Some("requests".into()),
                reset_at: Some((Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()).to_rfc3339()),
                retry_after: None,
                message: "quota exceeded".into(),
            },
        });
        app
    });
}

#[test]
fn usage_stale() {
    snap("usage_stale", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::Clock(t0() + chrono::Duration::minutes(2)));
        app.update(AppEvent::UsageFailed(ApiError::Network(
            "connection refused".into(),
        )));
        app
    });
}

#[test]
fn usage_limit_reached_shows_the_gauge_full_with_the_reset() {
    // The poll itself is refused by the spent request quota: the gauge says so, full and
    // in the error colour, with when it resets, instead of freezing on its last numbers.
    for (w, h) in [(80, 24), (120, 40), (200, 60), (60, 20)] {
        let mut app = chat(w, h);
        app.update(AppEvent::UsageFetched(usage(50.7)));
        app.update(AppEvent::UsageFailed(ApiError::QuotaExceeded {
            limit: Some("requests".into()),
            reset_at: Some((Utc.with_ymd_and_hms(2026, 11, 22, 14, 30, 0).unwrap()).to_rfc3339()),
            retry_after: None,
            message: "request quota exceeded".into(),
        }));
        let screen = render(&app);
        assert!(!screen.contains("STALE"), "{screen}");
        assert!(screen.contains("full"), "{screen}");
        assert!(screen.contains("in 2h 30m"), "{screen}");
        insta::assert_snapshot!(format!("usage_limit_reached_{w}x{h}"), screen);
        // A later poll that is answered shows the numbers again.
        let mut u = usage(1.0);
        u.requests.used = 10;
        app.update(AppEvent::UsageFetched(u));
        let screen = render(&app);
        assert!(!screen.contains("full"), "{screen}");
    }
}

#[test]
fn the_status_dot_follows_the_connection() {
    snap("service_unreachable", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Disconnected {
                error: ApiError::Network("connection refused".into()),
                retry_in: Some(std::time::Duration::from_secs(2)),
            },
        });
        app
    });
    let mut app = chat(100, 30);
    app.update(AppEvent::UsageFailed(ApiError::Network(
        "connection refused".into(),
    )));
    assert!(render(&app).contains("◌ reconnecting to the local service"));
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Connected,
    });
    assert!(render(&app).contains("● local service"));
    // A remote service that refuses the key.
    let mut app = chat(100, 30);
    app.update(AppEvent::Connected(Endpoint::Remote {
        base_url: "https://convo.example".into(),
    }));
    app.update(AppEvent::UsageFailed(ApiError::Unauthorized {
        message: "unknown API key".into(),
    }));
    assert!(
        render(&app).contains("✗ key refused by https://convo.example"),
        "{}",
        render(&app)
    );
    app.update(AppEvent::UsageFetched(usage(1.0)));
    assert!(render(&app).contains("● https://convo.example"));
}

#[test]
fn usage_high() {
    snap("usage_high", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::UsageFetched(usage(93.0)));
        app
    });
}

#[test]
fn system_role_and_metadata_badge() {
    snap("system_meta", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "/meta {\"topic\":\"rust\"}");
        app.update(key(KeyCode::Enter));
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('r'),
            KeyModifiers::CONTROL,
        )));
        type_text(&mut app, "Answer in one sentence.");
        app
    });
}

#[test]
fn stale_session_notice() {
    snap("session_not_found", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::DeleteFailed {
            session_id: C.into(),
            failure: ApiError::SessionNotFound {
                message: "session not found".into(),
            },
        });
        app
    });
}

#[test]
fn transcript_focused_with_selection_scrolled_up() {
    snap("transcript_selected", |w, h| {
        let mut app = chat(w, h);
        app.update(key(KeyCode::BackTab));
        app.update(key(KeyCode::Up));
        app.update(key(KeyCode::Up));
        app
    });
}

/// Scrolled up from the end, the bottom border says how to follow again; at 80 columns the
/// context bar gives way so that the hint is whole.
#[test]
fn scrolled_up_the_follow_hint_is_whole() {
    snap("transcript_scrolled_up", |w, h| {
        let long: String = (1..=60).map(|i| format!("line {i}\n\n")).collect();
        let mut app = chat_with(
            w,
            h,
            vec![
                msg(Role::User, "count to sixty", 4),
                msg(Role::Assistant, &long, 240),
            ],
        );
        app.update(key(KeyCode::BackTab));
        app.update(key(KeyCode::PageUp));
        app
    });
}

/// Gauges change colour at 70 % and 90 % (the text snapshots do not show colour).
#[test]
fn gauge_colours() {
    for (pct, colour) in [
        (40.0, Color::Green),
        (75.0, Color::Yellow),
        (93.0, Color::Red),
    ] {
        let mut app = chat(120, 40);
        app.update(AppEvent::UsageFetched(usage(pct)));
        let backend = TestBackend::new(120, 40);
        let mut terminal = Terminal::new(backend).unwrap();
        terminal.draw(|f| view::draw(f, &app)).unwrap();
        let buf = terminal.backend().buffer();
        let layout = app.layout();
        // The requests bar is the second line inside the usage column.
        let y = layout.usage.y + 2;
        let x = layout.usage.x + 1;
        assert_eq!(buf[(x, y)].symbol(), "━", "bar at {pct}%");
        assert_eq!(buf[(x, y)].fg, colour, "colour at {pct}%");
    }
}

#[test]
fn stopped_and_failed_replies_with_the_stream_down() {
    snap("reply_states", |w, h| {
        let mut app = chat(w, h);
        for (text, msg_id) in [("first question", "m1"), ("second question", "m2")] {
            type_text(&mut app, text);
            send_accepted(&mut app, A, msg_id, 2);
            app.update(AppEvent::Stream {
                session_id: A.into(),
                update: StreamUpdate::Event(StreamEvent::Delta {
                    session_id: A.into(),
                    message_id: msg_id.into(),
                    seq: 0,
                    content: "Partial answer".into(),
                }),
            });
            if msg_id == "m1" {
                // Ctrl-C stops the first (a server without the cancel: it is no longer
                // watched).
                app.update(AppEvent::Key(KeyEvent::new(
                    KeyCode::Char('c'),
                    KeyModifiers::CONTROL,
                )));
                app.update(AppEvent::CancelAnswered {
                    session_id: A.into(),
                    message_id: msg_id.into(),
                    outcome: convo_tui::event::CancelOutcome::Unsupported,
                });
            } else {
                app.update(AppEvent::Stream {
                    session_id: A.into(),
                    update: StreamUpdate::Event(StreamEvent::Error {
                        session_id: A.into(),
                        message_id: msg_id.into(),
                        error: convo_client::api::ErrorBody::new("internal", "the engine failed"),
                    }),
                });
            }
        }
        app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Disconnected {
                error: ApiError::Network("connection reset".into()),
                retry_in: None,
            },
        });
        app
    });
}

#[test]
fn filtering_sessions_shows_the_filter_keys_over_a_notice() {
    snap("filtering", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "/meta {\"a\":1}");
        app.update(key(KeyCode::Enter));
        assert!(app.notice().is_some());
        app.update(key(KeyCode::Tab));
        app.update(key(KeyCode::Char('/')));
        type_text(&mut app, "tr");
        app
    });
}

#[test]
fn a_reply_cut_off_by_the_stream_reads_interrupted() {
    snap("reply_cut_off", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "tell me more");
        send_accepted(&mut app, A, "m1", 3);
        app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Delta {
                session_id: A.into(),
                message_id: "m1".into(),
                seq: 0,
                content: "The partial answer".into(),
            }),
        });
        app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Disconnected {
                error: ApiError::Network("connection reset".into()),
                retry_in: None,
            },
        });
        app
    });
}

#[test]
fn session_titles_from_markdown_messages_are_plain() {
    snap("markdown_titles", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('n'),
            KeyModifiers::CONTROL,
        )));
        let sid = app.session().unwrap().id.clone();
        app.update(AppEvent::Stream {
            session_id: sid.clone(),
            update: StreamUpdate::Connected,
        });
        app.update(AppEvent::Paste(
            "# **Plan** for `v2`:  ship _it_\n\nthe details".into(),
        ));
        send_accepted(&mut app, &sid, "m1", 9);
        app
    });
}

/// `/title` on the open session: the store's answer renames it in the list and on the
/// transcript's border, and the status bar says so.
#[test]
fn a_title_the_user_gave_shows_in_the_list() {
    snap("user_title", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "/title Lifetimes, explained");
        let cmds = app.update(key(KeyCode::Enter));
        assert!(
            cmds.iter().any(|c| matches!(
                c,
                Command::Persist(convo_tui::app::StoreOp::SetTitle { .. })
            )),
            "{cmds:?}"
        );
        app.update(AppEvent::TitleChanged {
            session_id: A.into(),
            title: Some("Lifetimes, explained".into()),
            title_set: true,
        });
        app
    });
}

/// `/export`: the status bar says where the file went, or why it did not.
#[test]
fn export_says_where_it_wrote() {
    snap("exported", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "/export");
        let cmds = app.update(key(KeyCode::Enter));
        assert!(cmds.contains(&Command::Export {
            session_id: A.into(),
            path: None
        }));
        app.update(AppEvent::Exported {
            session_id: A.into(),
            result: Ok(Exported {
                path: "./rust-lifetimes.md".into(),
                messages: 2,
            }),
        });
        app
    });
    snap("export_failed", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "/export notes.md");
        app.update(key(KeyCode::Enter));
        app.update(AppEvent::Exported {
            session_id: A.into(),
            result: Err(
                "./notes.md already exists and was left as it is: give another name".into(),
            ),
        });
        app
    });
}

#[test]
fn the_help_section_headers_are_styled_as_headers_not_as_keys() {
    let mut app = chat(120, 40);
    app.update(key(KeyCode::F(1)));
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    terminal.draw(|f| view::draw(f, &app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    // The style of the first cell of `text` on screen.
    let style_of = |text: &str| {
        for y in 0..buf.area.height {
            let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
            if let Some(byte) = row.find(text) {
                let x = row[..byte].chars().count() as u16;
                return buf[(x, y)].style();
            }
        }
        panic!("{text:?} is not on screen");
    };
    let key_row = style_of("/delete");
    for header in [
        "Keys    ",
        "Commands (type in the composer)",
        "Metrics view (F2)",
        "Wallet view (F3)",
    ] {
        let style = style_of(header);
        assert!(
            style.add_modifier.contains(ratatui::style::Modifier::BOLD),
            "{header}: {style:?}"
        );
        assert_ne!(style.fg, key_row.fg, "{header} is not coloured as a key");
    }
    // The views' keys are entries, under their header.
    assert_eq!(style_of("1 2 3 4").fg, key_row.fg);
}

/// Every size from 1×1 up draws without a panic, twice in the same terminal (the second frame
/// copies the transcript's rows from the first): in debug builds this also checks that the
/// transcript pane's cells are reset when it is drawn (`Transcript::render_on_reset`), whatever
/// the layout does at that size.
#[test]
fn every_small_size_draws_twice_without_a_panic() {
    for w in 1..=64u16 {
        for h in 1..=20u16 {
            let app = chat(w, h);
            let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
            for _ in 0..2 {
                terminal.draw(|f| view::draw(f, &app)).unwrap();
            }
        }
    }
}

/// The narrow layout's usage band cuts no number at any width (`2/5` would read as two
/// sessions of five, not of 500): as the row narrows the gauges drop, all alike, their bars,
/// their numbers and last their labels, with a limit reached and without.
#[test]
fn the_usage_band_never_cuts_a_number() {
    let whole = [
        "req",
        "tok",
        "ses",
        "200/50k",
        "123.5k/10M",
        "3/500",
        "0%",
        "1%",
        "full",
    ];
    let mut banded = 0;
    for reached in [false, true] {
        for w in 1..=120u16 {
            let mut app = chat(w, 24);
            if reached {
                app.update(AppEvent::UsageFailed(ApiError::QuotaExceeded {
                    limit: Some("requests".into()),
                    reset_at: Some(
                        (Utc.with_ymd_and_hms(2026, 11, 22, 14, 30, 0).unwrap()).to_rfc3339(),
                    ),
                    retry_after: None,
                    message: "request quota exceeded".into(),
                }));
            }
            let screen = render(&app);
            let band = screen.lines().next().unwrap_or_default();
            if band.starts_with('┌') || band.trim().is_empty() {
                continue;
            }
            banded += 1;
            // Where the three labelled percentages fit ("req 0% tok 1% ses 1% ", "req full
            // tok 1% ses 1% "), each gauge keeps its label.
            if w >= if reached { 23 } else { 21 } {
                for label in ["req ", "tok ", "ses "] {
                    assert!(band.contains(label), "no {label:?} at width {w}: {band:?}");
                }
            }
            for word in band.split_whitespace() {
                if word.chars().all(|c| c == '━' || c == '─') || whole.contains(&word) {
                    continue;
                }
                // The reset time of a limit reached, where it fits: "· resets in 2h 30m".
                assert!(
                    reached && ["·", "resets", "in", "2h", "30m"].contains(&word),
                    "a cut word {word:?} at width {w}: {band:?}"
                );
            }
        }
    }
    assert!(banded > 100, "the band was drawn at {banded} widths");
}

/// A notice too long for the status bar's rows after a local model's label: the label gives
/// way to its dot, and the advice at the end is whole.
#[test]
fn a_long_notice_is_never_cut_for_the_connection_label() {
    snap("long_notice_with_a_model", |w, h| {
        let mut app = chat(w, h);
        app.update(engine(
            "local · SmolLM2-135M-Instruct",
            LoadState::Ready,
            None,
        ));
        // A notice as a worker failure gives it (the snapshot is of the text, whatever its level).
        app.update(AppEvent::WorkerError(
            "the service did not keep your last message (it may have restarted): it is \
                   back in the composer, marked not sent · the reply was interrupted while it \
                   streamed (connection reset by the service at 127.0.0.1:40000); your message \
                   was not kept: it is back in the composer, marked not sent — send it again"
                .into(),
        ));
        app
    });
}

fn engine(label: &str, state: LoadState, hint: Option<&str>) -> AppEvent {
    AppEvent::Engine(EngineStatus {
        label: label.into(),
        state,
        hint: hint.map(str::to_string),
    })
}

#[test]
fn local_model_loading() {
    snap("local_model_loading", |w, h| {
        let mut app = chat(w, h);
        app.update(engine(
            "local · SmolLM2-135M-Instruct",
            LoadState::Loading { fraction: 0.42 },
            None,
        ));
        app
    });
}

#[test]
fn local_model_ready() {
    snap("local_model_ready", |w, h| {
        let mut app = chat(w, h);
        app.update(engine(
            "local · SmolLM2-135M-Instruct",
            LoadState::Ready,
            None,
        ));
        app
    });
}

#[test]
fn local_model_failed() {
    snap("local_model_failed", |w, h| {
        let mut app = chat(w, h);
        app.update(engine(
            "local · Broken",
            LoadState::Failed("llama.cpp cannot load the model /m/Broken.gguf".into()),
            None,
        ));
        app
    });
}

#[test]
fn no_model_installed_says_how_to_get_one() {
    snap("no_model_hint", |w, h| {
        let mut app = chat(w, h);
        app.update(engine(
            "builtin (no model)",
            LoadState::Ready,
            Some(convo_tui::embedded::NO_MODEL_HINT),
        ));
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('n'),
            KeyModifiers::CONTROL,
        )));
        app
    });
}

/// The chat with a reply holding two code blocks, the transcript focused.
fn chat_with_code(w: u16, h: u16) -> App {
    let mut app = chat(w, h);
    type_text(&mut app, "How do I run it?");
    let id = send_id(&app.update(key(KeyCode::Enter)));
    let content = "Build it, then run it:\n\n```sh\ncargo build --release\n```\n\nand:\n\n```rust\nfn main() {\n    println!(\"hello\");\n}\n```";
    let reply = Message {
        message_id: "msg_code".into(),
        session_id: A.into(),
        role: Role::Assistant,
        content: content.into(),
        tokens: 30,
        created_at: "2026-11-22T12:00:00Z".into(),
        finish_reason: None,
    };
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id: id,
        reply: Message {
            content: String::new(),
            ..reply.clone()
        },
        prompt_tokens: 6,
    });
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done { message: reply }),
    });
    app.update(key(KeyCode::BackTab));
    app
}

#[test]
fn copy_code_numbers_the_blocks_of_the_reply() {
    snap("code_blocks_numbered", |w, h| {
        let mut app = chat_with_code(w, h);
        app.update(key(KeyCode::Char('c')));
        let screen = render(&app);
        assert!(screen.contains("[1]") && screen.contains("[2]"), "{screen}");
        assert!(
            screen.contains("copy code block: 1–2, Esc cancels"),
            "{screen}"
        );
        app
    });
}

#[test]
fn copy_code_says_what_it_copied() {
    snap("code_block_copied", |w, h| {
        let mut app = chat_with_code(w, h);
        app.update(key(KeyCode::Char('c')));
        let cmds = app.update(key(KeyCode::Char('2')));
        assert!(cmds.contains(&Command::CopyToClipboard(
            "fn main() {\n    println!(\"hello\");\n}".into()
        )));
        app
    });
}

#[test]
fn the_text_saved_in_the_editor_is_in_the_composer() {
    snap("editor_saved", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "draft");
        let cmds = app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('g'),
            KeyModifiers::CONTROL,
        )));
        assert!(cmds.contains(&Command::EditInEditor {
            draft: "draft".into()
        }));
        app.update(AppEvent::EditorClosed(
            convo_tui::editor::EditorOutcome::Saved(
                "A longer question, written in vi:\n\n- first point\n- second point".into(),
            ),
        ));
        app
    });
}

#[test]
fn a_failing_editor_says_why_and_keeps_the_draft() {
    snap("editor_failed", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "draft");
        app.update(AppEvent::EditorClosed(
            convo_tui::editor::EditorOutcome::Failed(
                "editor vi exited with status 1: draft unchanged".into(),
            ),
        ));
        app
    });
}

fn ctrl(c: char) -> AppEvent {
    AppEvent::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

/// The chat with the search bar open and `query` typed in it.
fn searching(query: &str, w: u16, h: u16) -> App {
    let mut app = chat(w, h);
    type_text(&mut app, "a draft");
    app.update(ctrl('f'));
    type_text(&mut app, query);
    app
}

#[test]
fn search_bar_with_matches() {
    snap("search_matches", |w, h| searching("static", w, h));
}

#[test]
fn search_bar_moved_to_the_next_match() {
    snap("search_next", |w, h| {
        let mut app = searching("static", w, h);
        app.update(key(KeyCode::Enter));
        app
    });
}

#[test]
fn search_bar_with_no_match() {
    snap("search_no_match", |w, h| searching("zebra", w, h));
}

#[test]
fn search_highlights_the_matches_and_the_current_one_apart() {
    let app = searching("static", 80, 24);
    let backend = TestBackend::new(80, 24);
    let mut terminal = Terminal::new(backend).unwrap();
    terminal.draw(|f| view::draw(f, &app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    let mut current = 0;
    let mut other = 0;
    for y in 0..24 {
        for x in 0..80 {
            match buf[(x, y)].bg {
                Color::LightRed => current += 1,
                Color::Yellow => other += 1,
                _ => {}
            }
        }
    }
    assert_eq!(current, "static".len(), "one current match");
    assert_eq!(other, 2 * "static".len(), "the other two");
}

fn hit(
    session: &str,
    title: &str,
    role: Role,
    minutes: i64,
    snippet: &[(&str, bool)],
) -> convo_client::local_store::SearchHit {
    convo_client::local_store::SearchHit {
        session_id: session.into(),
        session_title: Some(title.into()),
        position: 1,
        message_id: None,
        role,
        created_at: t0() - chrono::Duration::minutes(minutes),
        snippet: snippet
            .iter()
            .map(|(text, matched)| convo_client::local_store::SnippetPart {
                text: (*text).into(),
                matched: *matched,
            })
            .collect(),
    }
}

/// Types `/search …` and Enter: the sequence number of the store search it asks for.
fn search_sessions(app: &mut App, command: &str) -> u64 {
    type_text(app, command);
    let cmds = app.update(key(KeyCode::Enter));
    cmds.iter()
        .find_map(|c| match c {
            Command::SearchSessions { seq, .. } => Some(*seq),
            _ => None,
        })
        .expect("a search of the store")
}

#[test]
fn search_hits_across_sessions() {
    snap("search_hits", |w, h| {
        let mut app = chat(w, h);
        let seq = search_sessions(&mut app, "/search static");
        app.update(AppEvent::SessionHits {
            seq,
            result: Ok((
                vec![
                    hit(
                        A,
                        "Rust lifetimes",
                        Role::Assistant,
                        2,
                        &[
                            ("For example String is ", false),
                            ("'static", true),
                            (" but &'a str is not unless 'a is ", false),
                            ("'static", true),
                            (".", false),
                        ],
                    ),
                    hit(
                        A,
                        "Rust lifetimes",
                        Role::User,
                        3,
                        &[
                            ("What does '", false),
                            ("static", true),
                            (" mean for a type parameter?", false),
                        ],
                    ),
                    hit(
                        C,
                        "Trip to Lisbon",
                        Role::Assistant,
                        3 * 24 * 60,
                        &[
                            ("…the tram is ", false),
                            ("static", true),
                            (" on Sundays…", false),
                        ],
                    ),
                ],
                Vec::new(),
            )),
        });
        app.update(key(KeyCode::Down));
        app
    });
}

#[test]
fn search_hits_with_no_match() {
    snap("search_hits_none", |w, h| {
        let mut app = chat(w, h);
        app.update(key(KeyCode::Tab));
        type_text(&mut app, "s");
        let cmds = type_text(&mut app, "zebra");
        let seq = cmds
            .iter()
            .rev()
            .find_map(|c| match c {
                Command::SearchSessions { seq, .. } => Some(*seq),
                _ => None,
            })
            .expect("a search of the store");
        // Two sessions written on another device have no message here.
        app.update(AppEvent::SessionHits {
            seq,
            result: Ok((Vec::new(), vec![B.to_string(), C.to_string()])),
        });
        app
    });
}

#[test]
fn search_hits_just_opened_from_the_sessions_pane() {
    snap("search_hits_empty", |w, h| {
        let mut app = chat(w, h);
        app.update(key(KeyCode::Tab));
        type_text(&mut app, "s");
        app
    });
}

#[test]
fn search_hits_searching_then_failed() {
    snap("search_hits_searching", |w, h| {
        let mut app = chat(w, h);
        type_text(&mut app, "/search lisbon");
        app.update(key(KeyCode::Enter));
        app
    });
    snap("search_hits_failed", |w, h| {
        let mut app = chat(w, h);
        let seq = search_sessions(&mut app, "/search lisbon");
        app.update(AppEvent::SessionHits {
            seq,
            result: Err("local store convo.db: database is locked".into()),
        });
        app
    });
}

#[test]
fn search_bar_just_opened() {
    snap("search_open", |w, h| searching("", w, h));
}

/// A draft whose words end exactly at the composer's edge (54 columns at 80×24): each wrapped
/// row starts with a word, not with the space of the break (ratatui-textarea's own word wrap
/// put it there).
#[test]
fn the_composer_wraps_between_words_without_a_leading_space() {
    let rows = [
        "The composer wraps a long draft between words: the one",
        "space at each break stays at the end of its row, never",
        "at the start of the next one.",
    ];
    let mut app = chat(80, 24);
    type_text(&mut app, &rows.join(" "));
    let inner = app.layout().composer.width - 2;
    assert_eq!(
        usize::from(inner),
        rows[0].len(),
        "the first row fills the composer"
    );
    let screen = render(&app);
    insta::assert_snapshot!("composer_wrapped_80x24", screen);
    let composer: Vec<&str> = screen
        .lines()
        .filter_map(|l| {
            l.strip_prefix('│')
                .and_then(|l| l.split_once('│'))
                .map(|(_, r)| r)
        })
        .filter_map(|r| r.strip_prefix('│'))
        .collect();
    for row in rows {
        assert!(
            composer.iter().any(|c| c.starts_with(row)),
            "{row:?} is a row of its own in {composer:#?}"
        );
    }
}

/// A fork of `source` in the sessions list.
fn fork_of(id: &str, title: &str, mins_ago: i64, source: &str) -> SessionSummary {
    SessionSummary {
        forked_from: Some(source.into()),
        ..summary(id, title, mins_ago, 300)
    }
}

#[test]
fn fork_tree() {
    snap("fork_tree", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::StoreLoaded {
            sessions: vec![
                summary(A, "Rust lifetimes", 2, 1234),
                // The same title as its source: the end of the id tells them apart.
                fork_of("session_FORK1AAAAAAAAAAA", "Rust lifetimes", 1, A),
                fork_of(
                    "session_FORK2AAAAAAAAAAA",
                    "Lifetimes, the short answer",
                    30,
                    "session_FORK1AAAAAAAAAAA",
                ),
                summary(B, "Dinner ideas for a rainy Tuesday evening", 90, 420),
                // Its source was deleted: at the top level, marked.
                fork_of(
                    "session_ORPHANAAAAAAAAAA",
                    "Packing list",
                    200,
                    "session_GONEAAAAAAAAAAAA",
                ),
                summary(C, "Trip to Lisbon", 3 * 24 * 60, 9800),
            ],
            last_open: Some(A.into()),
        });
        app.update(key(KeyCode::Tab));
        app
    });
}

#[test]
fn message_selection() {
    snap("message_selection", |w, h| {
        let mut app = chat(w, h);
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char('o'),
            KeyModifiers::CONTROL,
        )));
        app.update(key(KeyCode::Up));
        app
    });
}

#[test]
fn delete_dialog_of_a_session_never_sent() {
    snap("delete_unsent", |w, h| {
        let mut app = chat(w, h);
        let new = "session_NEWAAAAAAAAAAAAA";
        app.update(AppEvent::StoreLoaded {
            sessions: vec![
                summary(new, convo_tui::app::NEW_SESSION_TITLE, 0, 0),
                summary(A, "Rust lifetimes", 2, 1234),
            ],
            last_open: Some(new.into()),
        });
        app.update(AppEvent::TranscriptLoaded {
            session_id: new.into(),
            messages: Vec::new(),
            draft: None,
            rendered: None,
        });
        for c in "/delete".chars() {
            app.update(key(KeyCode::Char(c)));
        }
        app.update(key(KeyCode::Enter));
        app
    });
}

/// A reply sent and accepted as `msg_1`, nothing arrived yet.
fn reply_pending(w: u16, h: u16) -> App {
    let mut app = chat(w, h);
    type_text(&mut app, "Write an essay about Rome");
    send_accepted(&mut app, A, "msg_1", 6);
    app
}

fn reply_done(app: &mut App, content: &str, tokens: u64, reason: convo_wire::FinishReason) {
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: Message {
                message_id: "msg_1".into(),
                session_id: A.into(),
                role: Role::Assistant,
                content: content.into(),
                tokens,
                created_at: "2026-11-22T12:00:00Z".into(),
                finish_reason: Some(reason),
            },
        }),
    });
}

#[test]
fn a_reply_reading_the_conversation_stopped_or_cut() {
    snap("reply_progress", |w, h| {
        let mut app = reply_pending(w, h);
        app.update(AppEvent::Stream {
            session_id: A.into(),
            update: StreamUpdate::Event(StreamEvent::Progress {
                session_id: A.into(),
                message_id: "msg_1".into(),
                prompt_tokens: 517,
                prompt_total: 1100,
            }),
        });
        app
    });
    snap("reply_stopped", |w, h| {
        let mut app = reply_pending(w, h);
        reply_done(
            &mut app,
            "Rome began as a village",
            5,
            convo_wire::FinishReason::Stopped,
        );
        app
    });
    snap("reply_cut", |w, h| {
        let mut app = reply_pending(w, h);
        reply_done(
            &mut app,
            "Rome began as a village on seven hills and grew",
            12,
            convo_wire::FinishReason::Length,
        );
        app
    });
}

/// `/kept` with two sessions kept aside (the server's database turned out new, and one its
/// list lacks), then the first read.
fn kept_view(w: u16, h: u16, read: bool) -> App {
    use convo_tui::kept_view::{KeptEvent, KeptSession};
    let mut app = chat(w, h);
    type_text(&mut app, "/kept");
    app.update(key(KeyCode::Enter));
    let kept = |id: &str, title: &str, label: &str, tokens| KeptSession {
        id: id.into(),
        title: Some(title.into()),
        label: label.into(),
        last_activity: t0() - chrono::Duration::days(2),
        tokens,
    };
    app.update(AppEvent::Kept(KeptEvent::Listed(Ok(vec![
        kept(
            "session_LIGHTHOUSEKEEPER@db_2f9c",
            "A lighthouse keeper's logbook",
            "https://convo.example.com #4be1a0 (earlier database, until 2026-11-27 21:17 UTC)",
            1_284,
        ),
        kept(
            "session_TRIPTOLISBONXXXX@missing",
            "Trip to Lisbon",
            "https://convo.example.com #4be1a0 (missing from the server since 2026-11-26)",
            312,
        ),
    ]))));
    if read {
        app.update(key(KeyCode::Enter));
        app.update(AppEvent::Kept(KeptEvent::Read {
            session_id: "session_LIGHTHOUSEKEEPER@db_2f9c".into(),
            result: Ok(convo_tui::event::Rendered::new(convo_tui::app::render_stored(&[
                msg(Role::User, "Write the first entry of a lighthouse keeper's logbook.", 12),
                msg(
                    Role::Assistant,
                    "**12 March.** Wind from the north-east, the lamp lit at dusk.\n\n- oil: 4 gallons\n- visitors: none",
                    30,
                ),
            ]))),
        }));
    }
    app
}

#[test]
fn kept_sessions_listed() {
    snap("kept_list", |w, h| kept_view(w, h, false));
}

#[test]
fn a_kept_session_read() {
    snap("kept_read", |w, h| kept_view(w, h, true));
}

#[test]
fn a_kept_session_asked_about_before_it_is_erased() {
    snap("kept_erase", |w, h| {
        let mut app = kept_view(w, h, false);
        app.update(key(KeyCode::Char('d')));
        app
    });
}
