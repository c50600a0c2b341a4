//! The paths the service serves and the largest body it reads: named here, below both the
//! router that mounts them and the handlers that cite them.

pub const MESSAGES: &str = "/v1/sessions/{sessionId}/messages";
pub const SESSIONS: &str = "/v1/sessions";
pub const SESSION: &str = "/v1/sessions/{sessionId}";
pub const LAST_EXCHANGE: &str = "/v1/sessions/{sessionId}/messages/last";
pub const CANCEL: &str = "/v1/sessions/{sessionId}/messages/{messageId}/cancel";
pub const FORK: &str = "/v1/sessions/{sessionId}/fork";
pub const STREAM: &str = "/v1/sessions/{sessionId}/stream";
pub const ACCOUNT_STREAM: &str = "/v1/stream";
pub const METRICS: &str = "/v1/analytics/metrics";
pub const USAGE: &str = "/v1/analytics/usage";
pub const WALLET: &str = "/v1/wallets/{walletId}";
pub const HEALTH: &str = "/healthz";
pub const READY: &str = "/readyz";
pub const ADMIN_ACCOUNTS: &str = "/v1/admin/accounts";
pub const ADMIN_ACCOUNT_METRICS: &str = "/v1/admin/accounts/{accountId}/metrics";
pub const ADMIN_STREAM: &str = "/v1/admin/stream";
/// Prometheus's scrape target (not `METRICS`, the interface's analytics).
pub const PROMETHEUS: &str = "/metrics";

/// Largest accepted request body: room for 10,000 characters of content written as JSON
/// `\uXXXX` surrogate pairs (12 bytes each) plus 16 KiB of metadata, escaped.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
