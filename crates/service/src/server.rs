//! The accept loop: every connection takes a slot of the caps (`connections.rs`) or is refused
//! with 503, and is served by hyper's HTTP/1 server with its header read timeout (which is also
//! the idle keep-alive timeout), WebSocket upgrades included. A graceful stop takes no new
//! connection, lets each one finish the request it is serving, and waits for them all.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::connections::{ConnectionCounter, ConnectionLimits};
use super::head_errors::EnvelopedStream;
use super::{AppState, paths, routes};

/// How long the loop waits after `accept` fails for want of descriptors or memory before it
/// tries again (a failed client connection is skipped at once).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Open connections of the `--metrics-addr` bind (a scraper or two).
const METRICS_MAX_CONNECTIONS: usize = 64;

/// `convo serve --metrics-addr`: serves `GET /metrics` of `state` on `listener` without the
/// admin key, and nothing else (the service's 404 and 405 envelopes), until the service stops.
/// Its scrapes are not counted in `convo_http_requests_total` (only the service's address is).
pub(crate) async fn serve_metrics(listener: TcpListener, state: Arc<AppState>) {
    let stop = state.shutdown.clone();
    let app = Router::new()
        .route(paths::PROMETHEUS, get(routes::prometheus::scrape_open))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .with_state(state);
    let counter = ConnectionCounter::new(METRICS_MAX_CONNECTIONS, 0);
    serve(listener, app, ConnectionLimits::default(), counter, stop).await;
}

/// Serves `app` on `listener` until `stop` becomes true, then waits for the open connections.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    counter: Arc<ConnectionCounter>,
    mut stop: watch::Receiver<bool>,
) {
    // Each connection task holds a receiver; `closed` resolves when all of them are gone.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                if !is_connection_error(&e) {
                    tracing::error!(error = %e, "accept error");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                continue;
            }
        };
        let slot = match counter.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refusal) => {
                counter.refuse(stream, peer, refusal);
                continue;
            }
        };
        // Answers go out as soon as they are written: with Nagle's algorithm a write that
        // follows an unacknowledged one waits for the peer's (delayed) ACK.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let io = EnvelopedStream::new(stream, slot);
        tokio::spawn(connection(
            io,
            peer,
            app.clone(),
            limits,
            stop.clone(),
            open_rx.clone(),
        ));
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}

/// Serves one connection until it closes; on the stop, finishes its request in flight first.
async fn connection(
    io: EnvelopedStream,
    peer: SocketAddr,
    app: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
    _open: watch::Receiver<()>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let service = TowerToHyperService::new(app);
    let mut conn = pin!(
        builder
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades()
    );
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
                break;
            }
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Whether a failed `accept` is one client's connection failing (take the next at once), not
/// the process out of something: descriptors (`EMFILE`), memory.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
