//! The turn above the local engine on the real model (issue 28: progress, stop, length): the
//! prompt progress of a long prompt reaches a listener before the first text; a cancel mid-reply
//! stores the text so far marked `stopped`; a reply cut by the reply cap ends with `length`.

use convo_client::api::StreamEvent;
use convo_service::engine::LocalOptions;
use convo_wire::FinishReason;
use reqwest::StatusCode;
use serde_json::json;

use super::common::{close, json as body_json, next_event, session, until_end};
use super::local_model::{options as greedy, start_local};

/// The tests' options ([`greedy`]) with a reply cap of `max_reply_tokens`.
fn options(max_reply_tokens: u32) -> LocalOptions {
    LocalOptions {
        max_reply_tokens: Some(max_reply_tokens),
        ..greedy()
    }
}

#[tokio::test]
async fn a_long_prompt_sends_progress_before_the_first_text() {
    let svc = start_local(options(16)).await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let long = "Summarise this: ".to_string()
        + &"the quick brown fox jumps over the lazy dog. ".repeat(150);
    let (status, body) = svc
        .post(&sid, json!({"content": long, "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["messageId"].as_str().unwrap().to_string();
    let events = until_end(&mut ws, &id).await;
    let first_text = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Delta { .. }))
        .expect("some text");
    let progress: Vec<(u64, u64)> = events[..first_text]
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Progress {
                prompt_tokens,
                prompt_total,
                ..
            } => Some((*prompt_tokens, *prompt_total)),
            _ => None,
        })
        .collect();
    assert!(
        !progress.is_empty(),
        "no progress before the text: {events:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0].0 <= w[1].0),
        "progress only grows: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .all(|&(read, total)| read <= total && total > 1000)
    );
    assert!(
        events[first_text..]
            .iter()
            .all(|e| !matches!(e, StreamEvent::Progress { .. })),
        "no progress after the text"
    );
    close(ws).await;
}

#[tokio::test]
async fn a_cancel_mid_reply_stores_the_text_so_far() {
    let svc = start_local(options(2_000)).await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let (status, body) = svc
        .post(
            &sid,
            json!({"content": "Write a long essay about the history of Rome.", "stream": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["messageId"].as_str().unwrap().to_string();
    let mut seen = String::new();
    while seen.split_whitespace().count() < 5 {
        if let StreamEvent::Delta { content, .. } = next_event(&mut ws).await {
            seen.push_str(&content);
        }
    }
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages/{id}/cancel")))
        .bearer_auth(&svc.key)
        .send()
        .await
        .expect("request");
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let events = until_end(&mut ws, &id).await;
    let Some(StreamEvent::Done { message }) = events.last() else {
        panic!("expected done, got {events:?}");
    };
    assert_eq!(message.finish_reason, Some(FinishReason::Stopped));
    assert!(
        message.content.starts_with(&seen),
        "{:?} then {seen:?}",
        message.content
    );
    let (_, history) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(history["messages"][1]["finishReason"], "stopped");
    assert_eq!(history["messages"][1]["content"], message.content.as_str());
    close(ws).await;
}

#[tokio::test]
async fn a_reply_cut_by_the_reply_cap_ends_with_length_and_continue_goes_on() {
    let svc = start_local(options(12)).await;
    let sid = session();
    let cut = svc
        .send_text(&sid, "Write a long essay about the history of Rome.")
        .await;
    assert_eq!(cut["finishReason"], "length", "{cut}");
    // `/continue` in the TUI sends this message: the next reply goes on.
    let rest = svc
        .send_text(
            &sid,
            convo_tui::transcript_pane::reply_marks::CONTINUE_PROMPT,
        )
        .await;
    assert!(!rest["content"].as_str().unwrap().is_empty());
}
