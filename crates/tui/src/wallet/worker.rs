//! Carries out the wallet view's requests: fetching a wallet, and reading and writing the
//! recent ids file. Answers go back through a sink (the loop wraps them in `AppEvent`).

use std::path::PathBuf;

use super::{TokenStatus, WalletEvent, WalletFailure, WalletRequest, recent};
use convo_client::api::{ApiError, Client};
use convo_client::sanitize::sanitize_owned;

/// How the view explains a client error.
pub fn failure_of(e: &ApiError) -> WalletFailure {
    match e {
        ApiError::Config(msg) if msg.contains("wallet token") => WalletFailure::NoToken,
        ApiError::Unauthorized { message } => WalletFailure::Unauthorized(sanitize_owned(message)),
        ApiError::Service { code, .. } if code == "wallet_not_found" => WalletFailure::NotFound,
        other => WalletFailure::Other(sanitize_owned(&other.to_string())),
    }
}

/// Whether a client can call the wallet endpoint.
pub fn token_status(client: &Client) -> TokenStatus {
    if client.options().wallet_token.is_some() {
        TokenStatus::Configured
    } else {
        TokenStatus::Missing
    }
}

/// The loop's wallet worker.
#[derive(Debug, Clone)]
pub struct WalletWorker {
    /// Where the recent ids are kept; `None` keeps them for this run only.
    recent_path: Option<PathBuf>,
}

impl WalletWorker {
    pub fn new(recent_path: Option<PathBuf>) -> Self {
        WalletWorker { recent_path }
    }

    /// Reads the recent ids saved by an earlier run and reports them. A file that cannot be
    /// read is logged and treated as empty: it only holds suggestions.
    pub fn load_recent<F>(&self, sink: F)
    where
        F: Fn(WalletEvent) + Send + Sync + 'static,
    {
        let Some(path) = self.recent_path.clone() else {
            return;
        };
        tokio::task::spawn_blocking(move || match recent::load(&path) {
            Ok(ids) => sink(WalletEvent::RecentLoaded(ids)),
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot read the recent wallet ids: {e}")
            }
        });
    }

    /// Carries out one request; without a client (not connected yet) a fetch fails at
    /// once. Must be called inside a tokio runtime.
    pub fn handle<F>(&self, request: WalletRequest, client: Option<&Client>, sink: F)
    where
        F: Fn(WalletEvent) + Send + Sync + 'static,
    {
        match request {
            WalletRequest::Fetch {
                fetch_id,
                wallet_id,
            } => {
                let Some(client) = client.cloned() else {
                    sink(WalletEvent::Fetched {
                        fetch_id,
                        result: Err(WalletFailure::Other(
                            "not connected to the service yet".into(),
                        )),
                    });
                    return;
                };
                tokio::spawn(async move {
                    let result = client
                        .wallet(&wallet_id)
                        .await
                        .map(Box::new)
                        .map_err(|e| failure_of(&e));
                    sink(WalletEvent::Fetched { fetch_id, result });
                });
            }
            WalletRequest::SaveRecent(ids) => {
                let Some(path) = self.recent_path.clone() else {
                    return;
                };
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = recent::save(&path, &ids) {
                        tracing::warn!(path = %path.display(), "cannot save the recent wallet ids: {e}");
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_map_to_what_the_view_explains() {
        let no_token =
            ApiError::Config("no wallet token: pass --token or set CONVO_WALLET_TOKEN".into());
        assert_eq!(failure_of(&no_token), WalletFailure::NoToken);
        assert_eq!(
            failure_of(&ApiError::Unauthorized {
                message: "token expired\u{1b}[2J".into()
            }),
            WalletFailure::Unauthorized("token expired".into())
        );
        let nf = ApiError::Service {
            status: 404,
            code: "wallet_not_found".into(),
            message: "no wallet".into(),
        };
        assert_eq!(failure_of(&nf), WalletFailure::NotFound);
        assert_eq!(
            failure_of(&ApiError::Network("refused".into())),
            WalletFailure::Other("network error: refused".into())
        );
    }
}
