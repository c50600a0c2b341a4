//! The embedded local service (interim: the service is not on `main` yet, so `convo` needs
//! `CONVO_BASE_URL` until it lands; this file is then replaced by the real start-up).

use std::path::Path;
use std::sync::Mutex;

use crate::api::client::Client;

use super::event::Endpoint;

/// Stands in for `service::RunningService` until the service lands.
pub struct RunningService;

impl RunningService {
    pub async fn shutdown(self) {}
}

pub async fn start(
    _data_dir: &Path,
    _pace_ms: u64,
    _slot: &Mutex<Option<RunningService>>,
) -> Result<(Client, Endpoint), String> {
    Err("this build has no embedded service yet: set CONVO_BASE_URL and CONVO_API_KEY".into())
}
