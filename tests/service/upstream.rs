//! A fake OpenAI-compatible server (axum, SSE) for the `openai` engine, on 127.0.0.1:0.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::mpsc;

enum Script {
    /// Every request gets this status and body.
    Fixed(u16, String),
    /// The next request streams whatever the test sends; the stream ends when the sender drops.
    Live(Option<mpsc::UnboundedReceiver<String>>),
}

struct UpstreamState {
    script: Mutex<Script>,
    requests: Mutex<Vec<Value>>,
}

pub struct Upstream {
    pub url: String,
    state: Arc<UpstreamState>,
}

/// One SSE event carrying a content delta.
pub fn chunk(content: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
    )
}

pub fn finish() -> String {
    format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    )
}

async fn completions(State(state): State<Arc<UpstreamState>>, body: axum::Json<Value>) -> Response {
    state.requests.lock().unwrap().push(body.0);
    let live = {
        let mut script = state.script.lock().unwrap();
        match &mut *script {
            Script::Fixed(status, body) => {
                return (
                    StatusCode::from_u16(*status).unwrap(),
                    [("content-type", "text/event-stream")],
                    body.clone(),
                )
                    .into_response();
            }
            Script::Live(rx) => rx.take(),
        }
    };
    let Some(rx) = live else {
        return (StatusCode::SERVICE_UNAVAILABLE, "only one live stream").into_response();
    };
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|text| (Ok::<_, std::io::Error>(text), rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn serve(script: Script) -> Upstream {
    let state = Arc::new(UpstreamState {
        script: Mutex::new(script),
        requests: Mutex::new(Vec::new()),
    });
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Upstream { url, state }
}

impl Upstream {
    pub async fn fixed(status: u16, body: impl Into<String>) -> Upstream {
        serve(Script::Fixed(status, body.into())).await
    }

    /// An upstream whose first reply the test writes through the returned sender.
    pub async fn live() -> (Upstream, mpsc::UnboundedSender<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (serve(Script::Live(Some(rx))).await, tx)
    }

    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn engine_config(&self) -> convo_service::EngineConfig {
        convo_service::EngineConfig::OpenAi {
            url: self.url.clone(),
            model: "fake-model".into(),
            api_key: Some("upstream-secret".into()),
        }
    }
}
