//! The server that a command which only reads the account asks (`convo usage`, `convo
//! metrics`): the configured one, or with no base URL the embedded service of the data dir:
//! a running TUI's (whose gauges then move as the command asks), else one started for the
//! command as the TUI starts it and stopped after it
//! (`convo_tui::embedded::start_for_reading`, which says why that is safe beside a running
//! TUI). The commands that change sessions start it with the configured engine instead
//! (`super::session_server`); the others need a configured server (docs/client.md).

use std::process::ExitCode;

use convo_client::api::Client;
use convo_client::config::Config;
use convo_client::target::TargetId;
use convo_tui::embedded::RunningService;
use convo_wire::exit;

use super::{client_for, codes, fail};

pub(crate) struct AccountReader {
    pub client: Client,
    embedded: Embedded,
}

/// Whose account the reader asks.
enum Embedded {
    /// The configured server's.
    No,
    /// The embedded service of a TUI running on the data dir (`convo_tui::embedded::running`).
    Running,
    /// The embedded service started for this command.
    Started(RunningService),
}

impl AccountReader {
    /// The configured server's client, or the embedded service's; on error, the exit code
    /// (a configuration that makes no client, or a data dir whose service cannot be read:
    /// `store`, exit 2, the data dir left as it was).
    pub async fn start(config: &Config) -> Result<AccountReader, ExitCode> {
        if config.connection.base_url.is_some() {
            return Ok(AccountReader {
                client: client_for(config)?,
                embedded: Embedded::No,
            });
        }
        let data_dir = &config.paths.data_dir;
        if let Some(client) = convo_tui::embedded::running(data_dir).await {
            return Ok(AccountReader {
                client,
                embedded: Embedded::Running,
            });
        }
        match convo_tui::embedded::start_for_reading(data_dir).await {
            Ok((service, client)) => Ok(AccountReader {
                client,
                embedded: Embedded::Started(service),
            }),
            Err(e) => Err(fail(
                exit::USAGE_ERROR,
                codes::STORE,
                format_args!(
                    "no base URL configured, and the embedded service's data in {} cannot be read: {e}",
                    data_dir.display()
                ),
            )),
        }
    }

    /// Whether it is the embedded service's local account.
    pub fn is_embedded(&self) -> bool {
        !matches!(self.embedded, Embedded::No)
    }

    /// The account's id in the local store (its kept metrics buckets): the TUI's for the same
    /// target, `embedded` or the hash of the base URL and key.
    pub fn account(&self) -> String {
        match self.embedded {
            Embedded::No => TargetId::remote(self.client.options()).id().to_string(),
            Embedded::Running | Embedded::Started(_) => TargetId::embedded().id().to_string(),
        }
    }

    /// Stops the embedded service, if one was started.
    pub async fn finish(self) {
        if let Embedded::Started(service) = self.embedded {
            let _ =
                tokio::time::timeout(convo_tui::embedded::STOP_WITHIN, service.shutdown()).await;
        }
    }
}
