//! The embedded local service: started in-process when no base URL is configured.

use std::path::Path;
use std::sync::Mutex;

use crate::api::client::{Client, ClientOptions};
pub use crate::service::RunningService;
use crate::service::{DbLocation, EngineConfig, ServiceConfig, Tier};

use super::event::Endpoint;
use crate::private_file::write_private;

const WALLET_TOKEN_TTL_SECS: u64 = 30 * 24 * 3600;

/// Starts the local service on `127.0.0.1:<ephemeral>` with its database in `data_dir`.
/// The key is kept in `data_dir` (mode 0600) so that sessions stay reachable across runs.
pub async fn start(
    data_dir: &Path,
    pace_ms: u64,
    slot: &Mutex<Option<RunningService>>,
) -> Result<(Client, Endpoint), String> {
    let key =
        local_key(data_dir).map_err(|e| format!("cannot prepare {}: {e}", data_dir.display()))?;
    let jwt_secret = crate::service::ids::random_alnum(48);
    let config = ServiceConfig {
        db: DbLocation::File(data_dir.join("service.db")),
        api_keys: vec![(key.clone(), Tier::Pro)],
        jwt_secret: jwt_secret.clone(),
        engine: EngineConfig::Builtin { pace_ms },
        max_context_tokens: crate::service::config::DEFAULT_MAX_CONTEXT_TOKENS,
        // Warmed by the TUI when the user starts typing (`workers`), not at start.
        warm_token_counter: false,
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let service = crate::service::start(config, addr)
        .await
        .map_err(|e| e.to_string())?;
    let base = url::Url::parse(&service.base_url()).map_err(|e| e.to_string())?;
    let mut options = ClientOptions::new(base);
    options.api_key = Some(key);
    // A wallet token for the wallet view, valid for this run (the secret is new each start).
    options.wallet_token = Some(crate::service::jwt::mint(
        &jwt_secret,
        "convo-tui",
        WALLET_TOKEN_TTL_SECS,
    ));
    let client = Client::new(options).map_err(|e| e.to_string())?;
    let endpoint = Endpoint::Embedded {
        addr: service.addr.to_string(),
    };
    tracing::info!(addr = %service.addr, "embedded service started");
    if let Ok(mut slot) = slot.lock() {
        *slot = Some(service);
    }
    Ok((client, endpoint))
}

/// The embedded service's key, created on first use.
fn local_key(data_dir: &Path) -> std::io::Result<String> {
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join("local-service.key");
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let existing = existing.trim().to_string();
        if crate::service::config::is_valid_api_key(&existing) {
            return Ok(existing);
        }
    }
    let key = crate::service::generate_api_key();
    write_private(&path, key.as_bytes())?;
    Ok(key)
}
