//! The admission of a turn, differential: the same request sequences against a service on
//! SQLite and one on PostgreSQL give identical answers (status, error code and body, ids and
//! times left out). The order itself is `convo_core::admission::admit`'s (tested there over
//! every combination); this proves both stores gather the facts and obey it alike, and pins
//! the cases where they used to differ (a first message that overflows at the session limit;
//! NUL in `content`).

use convo_service::{Tier, generate_api_key};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::backends::Backend;
use super::common::{Svc, session, start_with};

/// The context window of these services: a few turns of short messages fit, `huge()` alone
/// does not.
const MAX_CONTEXT: u64 = 1000;

/// A message of about 1,500 tokens (7,500 characters, under the 10,000 limit).
fn huge() -> String {
    "word ".repeat(1500)
}

/// One request of a sequence, with the answer it must get: the status and, for an error, its
/// code and (for `quota_exceeded`) its limit.
enum Step {
    /// A plain send to the `n`th session of the sequence, maybe with an `Idempotency-Key`.
    Send {
        session: usize,
        content: String,
        key: Option<&'static str>,
        expect: (u16, &'static str),
    },
    Delete(usize),
    /// Sets the account's tokens of the period (the quota's count) directly in the database.
    TokensUsed(i64),
    /// The stored messages of the `n`th session.
    History(usize),
    Usage,
}

fn send(session: usize, content: impl Into<String>, expect: (u16, &'static str)) -> Step {
    Step::Send {
        session,
        content: content.into(),
        key: None,
        expect,
    }
}

fn send_keyed(
    session: usize,
    content: impl Into<String>,
    key: &'static str,
    expect: (u16, &'static str),
) -> Step {
    Step::Send {
        session,
        content: content.into(),
        key: Some(key),
        expect,
    }
}

const OK: (u16, &str) = (200, "");
const NOT_FOUND: (u16, &str) = (404, "session_not_found");
const TOKENS: (u16, &str) = (429, "tokens");
const SESSIONS: (u16, &str) = (429, "sessions");
const OVERFLOW: (u16, &str) = (400, "context_overflow");
const INVALID: (u16, &str) = (400, "invalid_request");

/// What a step answered, without ids and times.
#[derive(Debug, PartialEq)]
struct Answer {
    step: usize,
    status: u16,
    replayed: bool,
    body: Value,
}

/// Drops what differs between two runs by nature: ids and timestamps.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for key in [
                "messageId",
                "sessionId",
                "createdAt",
                "resetAt",
                "billingPeriod",
                "id",
                "lastActivityAt",
            ] {
                map.remove(key);
            }
            map.values_mut().for_each(normalize);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::String(text) => *text = without_session_ids(text),
        _ => {}
    }
}

/// `text` with every session id (`session_` and 16 characters) written `session_…`.
fn without_session_ids(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("session_") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let id_len = "session_".len() + 16;
        let is_id = from.len() >= id_len
            && from.as_bytes()["session_".len()..id_len]
                .iter()
                .all(u8::is_ascii_alphanumeric);
        if is_id {
            out.push_str("session_…");
            rest = &from[id_len..];
        } else {
            out.push_str("session_");
            rest = &from["session_".len()..];
        }
    }
    out.push_str(rest);
    out
}

/// The code an answer is checked against: the error's `limit` for `quota_exceeded`, else its
/// `code`, "" for a success.
fn code_of(body: &Value) -> String {
    let error = &body["error"];
    let field = if error["code"] == "quota_exceeded" {
        "limit"
    } else {
        "code"
    };
    error[field].as_str().unwrap_or("").to_string()
}

async fn answer(step: usize, resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let replayed = resp.headers().get("idempotent-replayed").is_some();
    let text = resp.text().await.unwrap();
    let mut body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    normalize(&mut body);
    Answer {
        step,
        status,
        replayed,
        body,
    }
}

/// Runs `steps` against a fresh service on `backend` (one account of `tier`), checking each
/// expected answer, and returns every answer.
async fn run(backend: Backend, tier: Tier, steps: &[Step]) -> Vec<Answer> {
    let mut config = backend.config();
    config.api_keys = vec![(generate_api_key(), tier)];
    config.max_context_tokens = MAX_CONTEXT;
    let svc: Svc = start_with(config).await;
    let sessions: Vec<String> = (0..16).map(|_| session()).collect();
    let mut answers = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let a = match step {
            Step::Send {
                session,
                content,
                key,
                expect,
            } => {
                let mut req = svc
                    .http
                    .post(svc.url(&format!("/v1/sessions/{}/messages", sessions[*session])))
                    .bearer_auth(&svc.key)
                    .json(&json!({ "content": content }));
                if let Some(key) = key {
                    req = req.header("idempotency-key", *key);
                }
                let a = answer(i, req.send().await.unwrap()).await;
                let got = (a.status, code_of(&a.body));
                assert_eq!(
                    got,
                    (expect.0, expect.1.to_string()),
                    "step {i} on {}: {}",
                    backend_name(&backend),
                    a.body
                );
                a
            }
            Step::Delete(n) => {
                let resp = svc
                    .http
                    .delete(svc.url(&format!("/v1/sessions/{}", sessions[*n])))
                    .bearer_auth(&svc.key)
                    .send()
                    .await
                    .unwrap();
                answer(i, resp).await
            }
            Step::TokensUsed(tokens) => {
                backend
                    .execute("UPDATE usage_totals SET tokens = $1", &[*tokens])
                    .await;
                Answer {
                    step: i,
                    status: 0,
                    replayed: false,
                    body: Value::Null,
                }
            }
            Step::History(n) => {
                let path = format!("/v1/sessions/{}/messages", sessions[*n]);
                let resp = svc
                    .http
                    .get(svc.url(&path))
                    .bearer_auth(&svc.key)
                    .send()
                    .await
                    .unwrap();
                answer(i, resp).await
            }
            Step::Usage => {
                let resp = svc
                    .http
                    .get(svc.url("/v1/analytics/usage"))
                    .bearer_auth(&svc.key)
                    .send()
                    .await
                    .unwrap();
                let a = answer(i, resp).await;
                assert_eq!(a.status, StatusCode::OK.as_u16(), "{}", a.body);
                a
            }
        };
        answers.push(a);
    }
    svc.service.shutdown().await;
    answers
}

fn backend_name(backend: &Backend) -> &'static str {
    match backend {
        Backend::Sqlite(_) => "SQLite",
        Backend::Postgres(_) => "PostgreSQL",
    }
}

/// The same sequence on both stores: each answer as expected, and all answers identical.
async fn differential(tier: Tier, steps: Vec<Step>) -> Vec<Answer> {
    let sqlite = run(Backend::sqlite().await, tier, &steps).await;
    let postgres = run(Backend::postgres().await, tier, &steps).await;
    for (s, p) in sqlite.iter().zip(&postgres) {
        assert_eq!(
            s, p,
            "step {} differs: SQLite left, PostgreSQL right",
            s.step
        );
    }
    assert_eq!(sqlite.len(), postgres.len());
    sqlite
}

/// Ten short sessions: a free account at its session limit.
fn ten_sessions() -> Vec<Step> {
    (0..10).map(|i| send(i, format!("hello {i}"), OK)).collect()
}

/// The case the two stores answered differently: at the session limit, a first message that
/// alone overflows the context is refused for the session quota (checked before the context).
#[tokio::test]
async fn at_the_session_limit_an_overflowing_first_message_is_a_session_quota_refusal() {
    let mut steps = ten_sessions();
    steps.extend([
        send(10, huge(), SESSIONS),
        send(10, "hi", SESSIONS),
        // An existing session is not held by the session quota: its context is.
        send(0, huge(), OVERFLOW),
        Step::Delete(3),
        // Under the limit again: the same first message now overflows the context.
        send(10, huge(), OVERFLOW),
        send(10, "hi", OK),
        send(3, "hi", NOT_FOUND),
        send(11, "one too many", SESSIONS),
        Step::Usage,
    ]);
    differential(Tier::Free, steps).await;
}

/// NUL in `content` is refused with 400 `invalid_request` on both stores (PostgreSQL's TEXT
/// cannot hold it; it used to answer 500), before the session is created; other control
/// characters are stored as given.
#[tokio::test]
async fn nul_in_content_is_refused_alike_and_other_controls_are_stored_as_given() {
    let controls = "bell\u{7} esc\u{1b}[31mred del\u{7f} tab\t cr\r end";
    let steps = vec![
        send(0, "a\u{0}b", INVALID),
        // Nothing was created: the session is still new.
        send(0, "hi", OK),
        send(0, "trailing\u{0}", INVALID),
        send_keyed(0, "\u{0}", "k-nul", INVALID),
        send(0, controls, OK),
        Step::History(0),
        Step::Usage,
    ];
    differential(Tier::Pro, steps).await;
}

/// Replay comes after the session state and before every quota and the context; the token
/// quota before the session quota and the context.
#[tokio::test]
async fn replay_deletion_and_token_quota_are_checked_in_the_documented_order() {
    let mut steps = vec![
        send_keyed(0, "first", "k1", OK),
        Step::Send {
            session: 0,
            content: "first".into(),
            key: Some("k1"),
            expect: OK,
        },
        // The body of a repeat is not compared: a replay, not a context overflow.
        send_keyed(0, huge(), "k1", OK),
        Step::TokensUsed(200_000),
        send(0, "more", TOKENS),
        send_keyed(0, "more", "k1", OK),
        send(1, "new", TOKENS),
        send(1, huge(), TOKENS),
        Step::Delete(0),
        // The session state comes before the replay.
        send_keyed(0, "first", "k1", NOT_FOUND),
        Step::TokensUsed(0),
        send(1, huge(), OVERFLOW),
        send(1, "ok", OK),
        Step::History(1),
        Step::Usage,
    ];
    // At both limits at once, a new session is refused for the tokens.
    steps.extend((2..11).map(|i| send(i, format!("hello {i}"), OK)));
    steps.extend([
        Step::TokensUsed(200_000),
        send(11, "hi", TOKENS),
        Step::TokensUsed(0),
        send(11, "hi", SESSIONS),
        Step::Usage,
    ]);
    let answers = differential(Tier::Free, steps).await;
    let replayed: Vec<bool> = answers[..6].iter().map(|a| a.replayed).collect();
    assert_eq!(replayed, [false, true, true, false, false, true]);
    assert_eq!(answers[1].body, answers[0].body);
}
