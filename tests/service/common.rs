//! Starting a service and talking to it.

use std::time::Duration;

use convo_client::api::{StreamEvent, new_session_id};
use convo_service::{RunningService, ServiceConfig, start};
use convo_wire::account_stream::AccountEvent;
use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message as WsMessage};

/// Failure guard only: no test asserts on timing.
pub const GUARD: Duration = Duration::from_secs(60);

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct Svc {
    pub service: RunningService,
    pub http: reqwest::Client,
    pub key: String,
}

pub async fn start_with(config: ServiceConfig) -> Svc {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let key = config.api_keys[0].0.clone();
    let service = start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts");
    Svc {
        service,
        http: reqwest::Client::new(),
        key,
    }
}

/// In-memory service, builtin engine without pacing.
pub async fn start_default() -> Svc {
    start_with(ServiceConfig::ephemeral(0)).await
}

pub fn session() -> String {
    new_session_id()
}

pub async fn json(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let text = resp.text().await.expect("body");
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, value)
}

impl Svc {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.service.base_url())
    }

    pub async fn post_with_key(
        &self,
        key: &str,
        session: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(self.url(&format!("/v1/sessions/{session}/messages")))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("request");
        json(resp).await
    }

    pub async fn post(&self, session: &str, body: Value) -> (StatusCode, Value) {
        self.post_with_key(&self.key, session, body).await
    }

    pub async fn send_text(&self, session: &str, text: &str) -> Value {
        let (status, body) = self
            .post(session, serde_json::json!({"content": text}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.get_with_key(path, &self.key).await
    }

    /// `GET path` as the account of `key`.
    pub async fn get_with_key(&self, path: &str, key: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("request");
        json(resp).await
    }

    /// `session` as `GET /v1/sessions` lists it; it must be listed.
    pub async fn listed(&self, session: &str) -> Value {
        let (status, list) = self.get("/v1/sessions").await;
        assert_eq!(status, StatusCode::OK, "{list}");
        list["sessions"]
            .as_array()
            .expect("a list of sessions")
            .iter()
            .find(|s| s["sessionId"] == session)
            .unwrap_or_else(|| panic!("{session} not listed: {list}"))
            .clone()
    }

    pub async fn delete(&self, session: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .delete(self.url(&format!("/v1/sessions/{session}")))
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("request");
        json(resp).await
    }

    /// Undoes the last exchange of `session` (`DELETE /v1/sessions/{id}/messages/last`).
    pub async fn undo(&self, session: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .delete(self.url(&format!("/v1/sessions/{session}/messages/last")))
            .bearer_auth(&self.key)
            .send()
            .await
            .expect("request");
        json(resp).await
    }

    /// Gives `session` its title (`PATCH /v1/sessions/{id}`), which must be taken.
    pub async fn set_title(&self, session: &str, title: &str) {
        let resp = self
            .http
            .patch(self.url(&format!("/v1/sessions/{session}")))
            .bearer_auth(&self.key)
            .json(&serde_json::json!({ "title": title }))
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), StatusCode::OK, "{:?}", resp.text().await);
    }

    pub async fn usage(&self) -> Value {
        let (status, body) = self.get("/v1/analytics/usage").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// Metrics of the whole current month and the next (everything a test stores).
    pub async fn metrics_now(&self) -> Value {
        let now = chrono::Utc::now();
        let start = (now - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ");
        let end = (now + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ");
        let (status, body) = self
            .get(&format!(
                "/v1/analytics/metrics?startDate={start}&endDate={end}"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    pub async fn ws(&self, session: &str) -> Ws {
        self.ws_at(&format!("/v1/sessions/{session}/stream"), &self.key)
            .await
    }

    /// The WebSocket at `path` (`/v1/stream`, `/v1/admin/stream`, …) opened with `key`.
    pub async fn ws_at(&self, path: &str, key: &str) -> Ws {
        ws_connect(&format!("ws://{}{path}", self.service.addr), key).await
    }

    /// The status of a refused WebSocket handshake.
    pub async fn ws_refused(&self, session: &str, key: &str) -> u16 {
        let url = format!("ws://{}/v1/sessions/{session}/stream", self.service.addr);
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
        match tokio_tungstenite::connect_async(request).await {
            Err(tungstenite::Error::Http(resp)) => resp.status().as_u16(),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("the handshake was accepted"),
        }
    }
}

/// Opens the WebSocket at `url` (`ws://…`) with `key` as the bearer.
pub async fn ws_connect(url: &str, key: &str) -> Ws {
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    let (ws, _) = tokio::time::timeout(GUARD, tokio_tungstenite::connect_async(request))
        .await
        .expect("connect in time")
        .unwrap_or_else(|e| panic!("the WebSocket {url} opens: {e}"));
    ws
}

/// Reads the account stream `ws` (`GET /v1/stream`) until it tells that session `sid` lost
/// its messages (a turn rolled back): `session.deleted`, or `session.updated` with none left.
/// Every event read, that one last; a panic when none comes within `GUARD`.
pub async fn until_session_emptied(ws: &mut Ws, sid: &str) -> Vec<AccountEvent> {
    let emptied = |event: &AccountEvent| match event {
        AccountEvent::SessionDeleted { session_id } => session_id == sid,
        AccountEvent::SessionUpdated { session, .. } => {
            session.session_id == sid && session.message_count == 0
        }
        _ => false,
    };
    let mut told = Vec::new();
    let read = tokio::time::timeout(GUARD, async {
        while !told.last().is_some_and(emptied) {
            told.push(next_json::<AccountEvent>(ws).await);
        }
    })
    .await;
    if read.is_err() {
        panic!("the account's stream did not tell that {sid} lost its messages: {told:?}");
    }
    told
}

/// The next event of a WebSocket, a text frame of JSON read as `T` (pings skipped).
pub async fn next_json<T: serde::de::DeserializeOwned>(ws: &mut Ws) -> T {
    loop {
        let frame = tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("an event in time")
            .expect("the stream stays open")
            .expect("a frame");
        match frame {
            WsMessage::Text(text) => {
                return serde_json::from_str(text.as_str()).unwrap_or_else(|e| {
                    panic!("not a {} ({e}): {text}", std::any::type_name::<T>())
                });
            }
            WsMessage::Ping(_) | WsMessage::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// The next session stream event (pings skipped), `started` events too.
pub async fn next_event_or_start(ws: &mut Ws) -> StreamEvent {
    next_json(ws).await
}

/// The next session stream event but a `started` (pings skipped): the tests of what a reply
/// carries read past the event that begins it; those of `started` itself read it with
/// [`next_event_or_start`].
pub async fn next_event(ws: &mut Ws) -> StreamEvent {
    loop {
        match next_json(ws).await {
            StreamEvent::Started { .. } => continue,
            event => return event,
        }
    }
}

/// Reads events until the `done` or `error` of `message_id`; returns everything read.
pub async fn until_end(ws: &mut Ws, message_id: &str) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    loop {
        let event = next_event(ws).await;
        let end = match &event {
            StreamEvent::Done { message } => message.message_id == message_id,
            StreamEvent::Error { message_id: id, .. } => id == message_id,
            _ => false,
        };
        events.push(event);
        if end {
            return events;
        }
    }
}

pub async fn close(mut ws: Ws) {
    let _ = ws.send(WsMessage::Close(None)).await;
}
