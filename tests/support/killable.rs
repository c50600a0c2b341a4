//! A local service a test can kill as SIGKILL ends `convo serve`, and start again on the same
//! database and port. Shared by `tests/client` and `tests/tui` through `#[path]`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use convo_service::{RunningService, ServiceConfig};

/// A service on a runtime of its own, so that a test can kill it: shutting that runtime down
/// ends its tasks where they stand, with no rollback.
pub fn start_killable(
    config: ServiceConfig,
    addr: SocketAddr,
) -> (tokio::runtime::Runtime, RunningService) {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let service = rt.block_on(convo_service::start(config, addr)).unwrap();
        (rt, service)
    })
    .join()
    .unwrap()
}

/// The service started again on the database in `data` and on `addr`, trying for `within`:
/// a killed runtime lets go of its port in the background.
pub async fn restart(data: &Path, addr: SocketAddr, within: Duration) -> RunningService {
    let deadline = Instant::now() + within;
    loop {
        let config = ServiceConfig::persistent(data, 150).unwrap();
        match convo_service::start(config, addr).await {
            Ok(s) => return s,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("the service starts again on the same file and port: {e}"),
        }
    }
}
