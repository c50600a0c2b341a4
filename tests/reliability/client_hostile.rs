//! Hostile input on the client side (issue 6, item 3): replies full of escape sequences,
//! control characters, bidi overrides, megabyte lines, deep markdown nesting and invalid
//! UTF-8, from the `openai` engine's upstream through the local service and from a raw
//! server, reach the screen harmlessly while the UI keeps working; bodies over the cap are
//! refused with a clear error.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::{get, post};
use convo_service::ServiceConfig;
use convo_tui::app::{App, StreamState};
use convo_tui::render::transcript::EntryState;
use crossterm::event::KeyCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::tui::{Tui, options};
use crate::upstream::{Upstream, chunk, finish};

/// Everything a reply should never get onto a terminal, with plain words around it.
const HOSTILE: &str = concat!(
    "Before \x1b[2J\x1b[H cleared? \x1b]0;pwned title\x07 clipboard \x1b]52;c;ZXZpbA==\x07 ",
    "dcs \x1bP+q544e\x1b\\ c1 \u{9b}31m csi \u{85} nel \u{9d}osc\u{9c} bell \x07 ",
    "backspace\x08\x08\x08 carriage\r return \u{202e}gpj.exe\u{202c} \u{2066}iso\u{2069} ",
    "\u{200f}rlm \u{061c}alm nul\x00 del\x7f tab\there\n\n",
    "```sh\n\x1b[31mred in code\x1b[0m \x1b]8;;http://evil\x07link\x1b]8;;\x07\n```\n\n",
    "- **bold \x1b[5mblink** and `code \x1b[8m hidden`\n",
    "[click](http://x/\x1b[2J) After"
);

/// Nothing on screen that a terminal would act on.
fn assert_harmless(cells: &[String]) {
    for (i, cell) in cells.iter().enumerate() {
        for c in cell.chars() {
            let bad = c.is_control()
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}');
            assert!(!bad, "cell {i} holds {:?}", c);
        }
    }
}

fn reply_complete(app: &App) -> bool {
    let Some(o) = app.session() else {
        return false;
    };
    let last = o.items.len().wrapping_sub(1);
    o.pending.is_none()
        && o.items
            .last()
            .is_some_and(|i| i.state == EntryState::Complete && !o.content(last).is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_replies_from_the_engine_upstream_reach_the_screen_harmlessly() {
    // Streamed in small pieces, so that sequences are split across deltas.
    let pieces: Vec<String> = HOSTILE
        .chars()
        .collect::<Vec<_>>()
        .chunks(3)
        .map(|c| chunk(&c.iter().collect::<String>()))
        .collect();
    let upstream = Upstream::fixed(200, pieces.concat() + &finish()).await;
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    let svc = convo_service::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(
        options(svc.base_url().parse().unwrap(), &svc.api_key),
        dir.path(),
    );
    tui.until("stream open", |app| {
        app.store_ready() && app.session().is_some_and(|o| o.stream == StreamState::Open)
    })
    .await;
    tui.type_text("say something nasty");
    tui.press(KeyCode::Enter);
    // Frames drawn while it streams are harmless too.
    tui.until("part of the reply", |app| {
        app.session()
            .is_some_and(|o| !o.content(o.items.len().wrapping_sub(1)).is_empty())
    })
    .await;
    assert_harmless(&tui.cells());
    tui.until("the reply", reply_complete).await;
    let cells = tui.cells();
    assert_harmless(&cells);
    let screen = tui.screen();
    for word in ["Before", "clipboard", "backspace", "red in code", "After"] {
        assert!(screen.contains(word), "`{word}` shown:\n{screen}");
    }
    assert!(
        !screen.contains("pwned") || !screen.contains("\x1b"),
        "{screen}"
    );
}

/// A service of its own making: plain replies from `replies` in turn, usage of `tier`, no
/// stream endpoint.
async fn raw_service(replies: Vec<String>, tier: &'static str) -> url::Url {
    let queue = Arc::new(Mutex::new(replies));
    let router = Router::new()
        .route(
            "/v1/sessions/{id}/messages",
            post(move |axum::extract::Path(id): axum::extract::Path<String>| {
                let queue = queue.clone();
                async move {
                    let content = queue.lock().unwrap().remove(0);
                    axum::Json(json!({
                        "messageId": format!("msg_{}", rand::random::<u32>()),
                        "sessionId": id,
                        "role": "assistant",
                        "content": content,
                        "tokens": 7,
                        "createdAt": "2026-11-22T01:00:00Z",
                    }))
                }
            }),
        )
        .route(
            "/v1/analytics/usage",
            get(move || async move {
                axum::Json(json!({
                    "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
                    "requests": {"used": 1, "limit": 10, "percentage": 10.0},
                    "tokens": {"used": 1, "limit": 10, "percentage": 10.0},
                    "sessions": {"active": 1, "limit": 10, "percentage": 10.0},
                    "tier": tier,
                }))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_tier_from_the_usage_endpoint_reaches_the_screen_harmlessly() {
    let base = raw_service(vec![], "pro\x1b]0;pwned\x07\u{202e}\u{9b}2J").await;
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(options(base, "service_live_hostile0000000000"), dir.path());
    tui.until("store", |app| app.store_ready()).await;
    tui.press(KeyCode::Tab);
    tui.press(KeyCode::Char('r'));
    tui.until("usage", |app| app.usage().usage.is_some()).await;
    assert_harmless(&tui.cells());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_and_deeply_nested_replies_from_a_raw_server_leave_the_ui_working() {
    let megabyte_line = "x".repeat(1024 * 1024);
    let replies = vec![
        HOSTILE.to_string(),
        format!("one line of a megabyte: {megabyte_line} end"),
        format!("{} deep quote", "> ".repeat(5_000)),
        format!("{}- deep list", "  ".repeat(3_000)),
        format!("{}x{}", "[".repeat(50_000), "](u)".repeat(10_000)),
        format!("{}emphasis{}", "*_".repeat(20_000), "_*".repeat(20_000)),
        format!(
            "{}\n",
            "| a ".repeat(5_000) + "|\n" + &"|---".repeat(5_000) + "|"
        ),
        "```\n".repeat(10_000),
    ];
    let base = raw_service(replies.clone(), "pro").await;
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(options(base, "service_live_hostile0000000000"), dir.path());
    // No stream endpoint here: plain replies.
    tui.until("ready for plain replies", |app| {
        app.store_ready()
            && app
                .session()
                .is_some_and(|o| o.stream == StreamState::Unsupported)
    })
    .await;
    for (i, _) in replies.iter().enumerate() {
        tui.type_text(&format!("message {i}"));
        tui.press(KeyCode::Enter);
        tui.until(&format!("reply {i}"), |app| {
            reply_complete(app) && app.session().unwrap().items.len() == 2 * (i + 1)
        })
        .await;
        assert_harmless(&tui.cells());
        // Still working: scrolling and typing change what is drawn.
        tui.press(KeyCode::PageUp);
        tui.press(KeyCode::PageDown);
        tui.type_text("typing");
        assert_eq!(tui.app().composer_text(), "typing");
        assert!(tui.screen().contains("typing"));
        for _ in 0.."typing".len() {
            tui.press(KeyCode::Backspace);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_error_messages_reach_the_screen_harmlessly() {
    let nasty = "refused \u{202e}\u{2066}evil\u{2069} \x1b]0;pwned\x07 \u{9b}2J end";
    let envelope = move |code: &str| axum::Json(json!({"error": {"code": code, "message": nasty}}));
    let router = Router::new()
        .route(
            "/v1/sessions/{id}/messages",
            post(move || async move {
                (
                    axum::http::StatusCode::BAD_REQUEST,
                    envelope("invalid_request"),
                )
            }),
        )
        .route(
            "/v1/analytics/usage",
            get(move || async move {
                (
                    axum::http::StatusCode::UNAUTHORIZED,
                    envelope("unauthorized"),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let dir = tempfile::tempdir().unwrap();
    let mut tui = Tui::start(options(base, "service_live_hostile0000000000"), dir.path());
    tui.until("ready", |app| {
        app.store_ready()
            && app
                .session()
                .is_some_and(|o| o.stream == StreamState::Unsupported)
    })
    .await;
    tui.type_text("hello");
    tui.press(KeyCode::Enter);
    tui.until("the send refused", |app| {
        app.composer().send_error().is_some()
    })
    .await;
    tui.press(KeyCode::Tab);
    tui.press(KeyCode::Char('r'));
    tui.until("the poll refused", |app| app.usage().error.is_some())
        .await;
    let screen = tui.screen();
    assert!(
        screen.contains("STALE") && screen.contains("end"),
        "{screen}"
    );
    assert_harmless(&tui.cells());
}

/// A server answering every request with `answer` (a whole HTTP response).
async fn raw_answers(answer: Vec<u8>) -> url::Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(&answer).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    base
}

fn http_200(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_oversized_replies_are_refused_with_a_clear_error() {
    let invalid = http_200(
        b"{\"messageId\":\"msg_1\",\"sessionId\":\"session_abcdefgh12345678\",\"role\":\"assistant\",\"content\":\"bad \xff\xfe\xc0\xaf bytes\",\"tokens\":1,\"createdAt\":\"2026-11-22T01:00:00Z\"}",
    );
    let surrogate = http_200(
        br#"{"messageId":"msg_1","sessionId":"session_abcdefgh12345678","role":"assistant","content":"lone \ud800 surrogate","tokens":1,"createdAt":"2026-11-22T01:00:00Z"}"#,
    );
    let huge = http_200(
        format!(
            r#"{{"messageId":"msg_1","sessionId":"s","role":"assistant","content":"{}","tokens":1,"createdAt":"2026-11-22T01:00:00Z"}}"#,
            "y".repeat(5 * 1024 * 1024)
        )
        .as_bytes(),
    );
    for (name, answer, says) in [
        ("invalid UTF-8", invalid, ""),
        ("a lone surrogate", surrogate, ""),
        ("5 MiB", huge, "larger than"),
    ] {
        let base = raw_answers(answer).await;
        let dir = tempfile::tempdir().unwrap();
        let mut tui = Tui::start(options(base, "service_live_hostile0000000000"), dir.path());
        tui.until("ready", |app| {
            app.store_ready()
                && app.session().is_some_and(|o| {
                    !matches!(o.stream, StreamState::Connecting | StreamState::Open)
                })
        })
        .await;
        tui.type_text("hello");
        tui.press(KeyCode::Enter);
        tui.until(name, |app| app.composer().send_error().is_some())
            .await;
        let error = tui.app().composer().send_error().unwrap().to_string();
        assert!(error.contains(says), "{name}: {error}");
        assert!(error.len() < 300, "{name}: one clear line: {error}");
        assert_eq!(
            tui.app().composer_text(),
            "hello",
            "{name}: the text is kept"
        );
        assert_harmless(&tui.cells());
    }
}
