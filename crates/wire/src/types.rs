//! Wire types of the Conversational Session Service, shared by the client (`api::Client`)
//! and the local service (`service`). Field names follow the interface; decisions
//! where it is silent follow docs/design.md. Unknown fields are ignored on input.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Role of a message. Input roles are `user` and `system`; replies are `assistant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    System,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::System => "system",
            Role::Assistant => "assistant",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "user" => Ok(Role::User),
            "system" => Ok(Role::System),
            "assistant" => Ok(Role::Assistant),
            other => Err(format!(
                "unknown role `{other}` (expected user, system or assistant)"
            )),
        }
    }
}

/// Body of POST `/v1/sessions/{sessionId}/messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendMessage {
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// The response to a sent message: the assistant reply (complete, or to come when streamed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub message_id: String,
    pub session_id: String,
    pub role: Role,
    pub content: String,
    pub tokens: u64,
    /// ISO 8601 timestamp, kept as sent so that a server with another format still parses.
    pub created_at: String,
    /// Not in the interface: how an assistant reply ended (`convo serve` adds it to replies;
    /// absent on user and system messages, on replies stored before it existed and from
    /// other servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
}

/// How an assistant reply ended (`finishReason`, an extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// The engine ended the reply itself.
    Stop,
    /// A limit cut it: the reply cap or what the context window left.
    Length,
    /// A client asked the service to stop it (`POST .../messages/{id}/cancel`); the text so
    /// far was kept.
    Stopped,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for FinishReason {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stop" => Ok(FinishReason::Stop),
            "length" => Ok(FinishReason::Length),
            "stopped" => Ok(FinishReason::Stopped),
            other => Err(format!(
                "unknown finish reason `{other}` (expected stop, length or stopped)"
            )),
        }
    }
}

/// The answer of `POST /v1/sessions/{sessionId}/messages/{messageId}/cancel` (an extension):
/// the reply is stopping; its `done` (with `finishReason: "stopped"`) follows on the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancelled {
    pub session_id: String,
    pub message_id: String,
    pub stopping: bool,
}

/// Body of a successful DELETE `/v1/sessions/{sessionId}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deleted {
    pub deleted: bool,
    pub session_id: String,
}

/// Granularity of a metrics query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    Hour,
    #[default]
    Day,
    Week,
    Month,
}

impl Granularity {
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Hour => "hour",
            Granularity::Day => "day",
            Granularity::Week => "week",
            Granularity::Month => "month",
        }
    }
}

impl std::fmt::Display for Granularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Granularity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hour" => Ok(Granularity::Hour),
            "day" => Ok(Granularity::Day),
            "week" => Ok(Granularity::Week),
            "month" => Ok(Granularity::Month),
            other => Err(format!(
                "unknown granularity `{other}` (expected hour, day, week or month)"
            )),
        }
    }
}

/// GET `/v1/analytics/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub period: MetricsPeriod,
    pub sessions: SessionMetrics,
    pub messages: MessageMetrics,
    pub tokens: TokenMetrics,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsPeriod {
    pub start: String,
    pub end: String,
    pub granularity: Granularity,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMetrics {
    pub total: u64,
    pub active: u64,
    /// Seconds (docs/design.md, "Metrics").
    pub average_duration: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageMetrics {
    pub total: u64,
    pub average_per_session: f64,
    pub user_messages: u64,
    pub assistant_messages: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenMetrics {
    pub total: u64,
    pub prompt: u64,
    pub completion: u64,
    pub average_per_message: f64,
}

/// GET `/v1/analytics/usage`: the current billing period against the plan's limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub billing_period: BillingPeriod,
    pub requests: Quota,
    pub tokens: Quota,
    pub sessions: SessionQuota,
    pub tier: String,
    /// Not in the interface: the context window of a session (`convo serve` adds it; other
    /// servers may not, and clients fall back to what they knew before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextWindow>,
}

/// A session's context window, as `convo serve` reports it in `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextWindow {
    /// The most tokens a session's context may hold: a message that would take it past this
    /// is refused with `context_overflow`.
    pub max_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BillingPeriod {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quota {
    pub used: u64,
    pub limit: u64,
    /// used / limit × 100, as a decimal (42.5 means 42.5 %).
    pub percentage: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionQuota {
    pub active: u64,
    pub limit: u64,
    pub percentage: f64,
}

/// GET `/v1/wallets/{walletId}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wallet {
    pub wallet_id: String,
    pub address: String,
    pub alias: String,
    pub balance: f64,
    #[serde(default)]
    pub token_accounts: Vec<TokenAccount>,
    #[serde(default)]
    pub nfts: Vec<Nft>,
    pub risk_score: f64,
    #[serde(default)]
    pub risk_factors: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenAccount {
    pub mint: String,
    pub symbol: String,
    pub balance: f64,
    pub usd_value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nft {
    pub mint: String,
    pub name: String,
    pub collection: String,
    pub floor_price: f64,
}

/// The error envelope: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// The object inside the error envelope. `code` and `message` are always present; the other
/// fields belong to particular codes (`context_overflow`, `quota_exceeded`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// For `quota_exceeded`: which limit, `requests`, `tokens` or `sessions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// For `quota_exceeded`: ISO 8601 time at which the limit resets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<String>,
}

impl ErrorBody {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ErrorBody {
            code: code.into(),
            message: message.into(),
            current_tokens: None,
            max_tokens: None,
            limit: None,
            reset_at: None,
        }
    }
}

/// One WebSocket text frame on `GET /v1/sessions/{sessionId}/stream` (docs/design.md, "Streaming").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum StreamEvent {
    /// Not in the interface: a reply begins. Sent when its turn starts, and on connect (and
    /// to a listener that lagged) before the `snapshot` of each reply in flight, so a listener
    /// hears of every reply first through this event. `idempotency_key` is the
    /// `Idempotency-Key` of the POST that started it (absent when it had none): a client that
    /// sent a message tells its own reply from another device's before the POST's answer
    /// names it (clients that do not know the event ignore it).
    #[serde(rename_all = "camelCase")]
    Started {
        session_id: String,
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
    },
    /// A piece of the reply. `seq` starts at 0 for each message and has no gaps.
    #[serde(rename_all = "camelCase")]
    Delta {
        session_id: String,
        message_id: String,
        seq: u64,
        content: String,
    },
    /// The reply is complete; `message` is exactly what was stored.
    Done { message: Message },
    /// The reply failed; nothing half-written was stored as a complete reply.
    #[serde(rename_all = "camelCase")]
    Error {
        session_id: String,
        message_id: String,
        error: ErrorBody,
    },
    /// Sent on connect while a reply is in flight: all content so far. `seq` is the number of
    /// deltas folded into `content`, so the next delta carries `seq` equal to it.
    #[serde(rename_all = "camelCase")]
    Snapshot {
        session_id: String,
        message_id: String,
        seq: u64,
        content: String,
    },
    /// Not in the interface: the engine is reading the prompt of the reply `message_id`,
    /// `prompt_tokens` of `prompt_total` so far (sent at most every ~250 ms, before the first
    /// delta; clients that do not know it ignore it).
    #[serde(rename_all = "camelCase")]
    Progress {
        session_id: String,
        message_id: String,
        prompt_tokens: u64,
        prompt_total: u64,
    },
}

/// True when `id` is a well-formed session id: `session_` + 16 of `[A-Za-z0-9]`.
pub fn is_valid_session_id(id: &str) -> bool {
    id.strip_prefix("session_")
        .is_some_and(|rest| rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// A fresh random session id.
pub fn new_session_id() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let tail: String = (0..16)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("session_{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_validated() {
        assert!(is_valid_session_id("session_abcdefgh12345678"));
        assert!(!is_valid_session_id("session_abc"));
        assert!(!is_valid_session_id("session_abcdefgh1234567!"));
        assert!(!is_valid_session_id("sess_abcdefgh12345678"));
        assert!(is_valid_session_id(&new_session_id()));
    }

    #[test]
    fn stream_events_round_trip() {
        let json = r#"{"type":"delta","sessionId":"session_abcdefgh12345678","messageId":"msg_1","seq":0,"content":"Hi","extra":1}"#;
        let ev: StreamEvent = serde_json::from_str(json).unwrap();
        assert!(matches!(ev, StreamEvent::Delta { seq: 0, .. }));
        let back = serde_json::to_value(&ev).unwrap();
        assert_eq!(back["type"], "delta");
        assert_eq!(back["messageId"], "msg_1");
    }

    #[test]
    fn finish_reason_is_optional_and_round_trips() {
        let old = r#"{"messageId":"m","sessionId":"s","role":"assistant","content":"x","tokens":1,"createdAt":"t"}"#;
        let m: Message = serde_json::from_str(old).unwrap();
        assert_eq!(m.finish_reason, None);
        assert!(!serde_json::to_string(&m).unwrap().contains("finishReason"));
        let cut = r#"{"messageId":"m","sessionId":"s","role":"assistant","content":"x","tokens":1,"createdAt":"t","finishReason":"length"}"#;
        let m: Message = serde_json::from_str(cut).unwrap();
        assert_eq!(m.finish_reason, Some(FinishReason::Length));
        assert_eq!(serde_json::to_value(&m).unwrap()["finishReason"], "length");
        assert_eq!("stopped".parse::<FinishReason>(), Ok(FinishReason::Stopped));
    }

    #[test]
    fn started_events_round_trip_with_or_without_a_key() {
        let json =
            r#"{"type":"started","sessionId":"s","messageId":"msg_1","idempotencyKey":"k1"}"#;
        let ev: StreamEvent = serde_json::from_str(json).unwrap();
        assert_eq!(
            ev,
            StreamEvent::Started {
                session_id: "s".into(),
                message_id: "msg_1".into(),
                idempotency_key: Some("k1".into()),
            }
        );
        assert_eq!(serde_json::to_value(&ev).unwrap()["idempotencyKey"], "k1");
        let bare: StreamEvent =
            serde_json::from_str(r#"{"type":"started","sessionId":"s","messageId":"m"}"#).unwrap();
        assert!(matches!(
            bare,
            StreamEvent::Started {
                idempotency_key: None,
                ..
            }
        ));
        assert!(
            !serde_json::to_string(&bare)
                .unwrap()
                .contains("idempotencyKey")
        );
    }

    #[test]
    fn progress_events_round_trip() {
        let json = r#"{"type":"progress","sessionId":"s","messageId":"m","promptTokens":512,"promptTotal":1100}"#;
        let ev: StreamEvent = serde_json::from_str(json).unwrap();
        assert_eq!(
            ev,
            StreamEvent::Progress {
                session_id: "s".into(),
                message_id: "m".into(),
                prompt_tokens: 512,
                prompt_total: 1100
            }
        );
        assert_eq!(serde_json::to_string(&ev).unwrap(), json);
    }

    #[test]
    fn error_envelope_skips_absent_fields() {
        let env = ErrorEnvelope {
            error: ErrorBody::new("session_not_found", "no such session"),
        };
        let v = serde_json::to_value(&env).unwrap();
        assert_eq!(v["error"].as_object().unwrap().len(), 2);
    }
}
