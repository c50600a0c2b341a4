//! Helpers shared by the client tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use convo_client::api::{Client, ClientOptions, Timeouts};
use url::Url;

/// Serve `router` on 127.0.0.1:0; the server lives as long as the runtime.
pub async fn serve(router: Router) -> Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Url::parse(&format!("http://{addr}")).expect("url")
}

/// Options for a test client: short backoff is not configurable, so few retries.
pub fn options(base: &Url) -> ClientOptions {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut o = ClientOptions::new(base.clone());
    o.api_key = Some("service_live_testkey000000000000".into());
    o.wallet_token = Some("header.payload.signature".into());
    // Generous: only a guard against a hang, never a measured bound.
    o.timeouts = Timeouts {
        connect: Duration::from_secs(10),
        request: Duration::from_secs(30),
        reply: Duration::from_secs(30),
    };
    o.max_retries = 2;
    o
}

pub fn client(base: &Url) -> Client {
    Client::new(options(base)).expect("client")
}

/// A shared counter for handlers.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    /// Increment and return the count before.
    pub fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

pub const SESSION: &str = "session_abcdefgh12345678";

pub fn message_json(content: &str) -> serde_json::Value {
    serde_json::json!({
        "messageId": "msg_other_1",
        "sessionId": SESSION,
        "role": "assistant",
        "content": content,
        "tokens": 3,
        "createdAt": "2026-11-22T00:00:00Z",
    })
}

pub fn usage_json() -> serde_json::Value {
    serde_json::json!({
        "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
        "requests": {"used": 5, "limit": 1000, "percentage": 0.5},
        "tokens": {"used": 50, "limit": 200000, "percentage": 0.025},
        "sessions": {"active": 1, "limit": 10, "percentage": 10.0},
        "tier": "free",
    })
}
