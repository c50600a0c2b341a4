//! The local Conversational Session Service (`convo serve`, and embedded by the TUI).
//! No terminal code here: the TUI embeds it through `convo_tui::embedded`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), convo_service::ServiceError> {
//! use convo_service::{ServiceConfig, start};
//! let service = start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap()).await?;
//! println!("{} with key {}", service.base_url(), service.api_key);
//! service.shutdown().await;
//! # Ok(()) }
//! ```

mod account_events;
pub mod auth;
pub mod cli;
pub mod config;
pub mod connections;
pub mod engine;
pub mod error;
pub mod head_errors;
pub mod ids;
pub mod jwt;
pub mod metrics;
pub mod models;
pub mod paths;
pub mod router;
pub mod routes;
mod server;
pub mod storage;
pub mod stream;
pub mod time;
mod turn;
pub mod wallets;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, watch};
use tokio::task::JoinSet;

pub use config::{DbLocation, EngineConfig, ServiceConfig, Tier};
pub use connections::ConnectionLimits;
use convo_core::Account;
use convo_wire::account_stream::SessionChange;
pub use error::ServiceError;
pub use ids::{generate_admin_key, generate_api_key};
use storage::{Db, Storage};

/// Shared state of a running service.
pub(crate) struct AppState {
    pub store: Db,
    /// The database's own id (`Storage::database_id`), read at start.
    pub database_id: String,
    /// Accounts by SHA-256 of their key.
    pub accounts: HashMap<String, Account>,
    pub jwt_secret: String,
    /// Seconds of clock skew allowed on a JWT's `exp` and `nbf` (`--jwt-leeway`).
    pub jwt_leeway_secs: u64,
    /// How long a request's body may take to arrive (`--body-read-timeout`).
    pub body_read_timeout: std::time::Duration,
    pub engine: Box<dyn engine::ReplyEngine>,
    pub max_context_tokens: u64,
    pub hub: Arc<stream::StreamHub>,
    /// On PostgreSQL: replies relayed to and from the other replicas.
    pub relay: Mutex<Option<storage::postgres::relay::Relay>>,
    /// On PostgreSQL: this replica's heartbeat and the sweep for stopped replicas' turns.
    pub leases: Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub session_locks: SessionLocks,
    /// Replies being generated; awaited on shutdown.
    pub turns: Mutex<JoinSet<()>>,
    /// How to stop the reply being generated for a session (when it is deleted).
    pub stoppers: turn::Stoppers,
    /// Where this node's looks for sessions deleted, and exchanges undone, elsewhere are
    /// (`storage/deletions.rs`; on PostgreSQL the heartbeat looks too, through the same).
    pub deletions: Arc<tokio::sync::Mutex<storage::deletions::Deletions>>,
    /// Becomes true when the service shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// The operator's key (`--admin-key`), hashed; `None`: the operator's endpoints are off.
    pub admin_key: Option<auth::AdminKey>,
    /// What `/metrics` exposes: the request counters and histograms, and what a scrape reads.
    pub metrics: metrics::Metrics,
}

impl AppState {
    /// What this replica does about a deleted session, whichever replica deleted it (this one
    /// at once; on PostgreSQL the others at their next heartbeat, `leases.rs`): the reply it
    /// is generating in the session stops, and the engine forgets its state.
    pub(crate) fn forget_deleted(&self, session_id: &str) {
        self.stoppers.stop(session_id);
        self.engine.forget_session(session_id);
    }

    /// What this node does about an exchange undone through it (`routes/sessions.rs`), once
    /// the undo committed: its engine is trimmed ([`AppState::trim_undone`]), and its own
    /// looks for undos elsewhere skip this one.
    pub(crate) async fn undone_here(&self, account_id: i64, session_id: &str) {
        if !self.engine.keeps_sessions() {
            return;
        }
        (self.deletions.lock().await).undone_here(session_id, time::now_ms());
        let deadline = tokio::time::Instant::now() + storage::deletions::LOOK_WITHIN;
        self.trim_undone(account_id, session_id, deadline).await;
    }

    /// What this node does about an exchange undone, here or elsewhere: the engine keeps of
    /// the session's state only what the remaining messages begin with, so the undone
    /// messages leave its memory and its saved states. When the store cannot say what
    /// remains by `deadline`, the engine forgets the session's state instead.
    pub(crate) async fn trim_undone(
        &self,
        account_id: i64,
        session_id: &str,
        deadline: tokio::time::Instant,
    ) {
        if !self.engine.keeps_sessions() {
            return;
        }
        let read = self
            .store
            .session_messages(account_id, session_id.to_string());
        let Ok(read) = tokio::time::timeout_at(deadline, read).await else {
            tracing::warn!(session = %session_id, "reading what an undo left took too long; the engine forgets the session's state");
            return self.engine.forget_session(session_id);
        };
        match read {
            Ok(Some(rows)) => {
                let history: Vec<convo_core::HistoryEntry> = rows
                    .into_iter()
                    .map(|m| convo_core::HistoryEntry {
                        role: m.role,
                        content: m.content,
                        tokens: m.tokens,
                    })
                    .collect();
                self.engine.trim_session(session_id, &history);
            }
            Ok(None) => self.engine.forget_session(session_id),
            Err(e) => {
                tracing::warn!(session = %session_id, error = %e, "cannot read what an undo left; the engine forgets the session's state");
                self.engine.forget_session(session_id);
            }
        }
    }

    /// Looks for sessions deleted, and exchanges undone, elsewhere since the last look, and
    /// does here what was done there (`storage/deletions.rs`, which says when each store
    /// looks), all within `LOOK_WITHIN`: a look the database does not answer in time is left
    /// to the next one, which reaches back as far.
    pub(crate) async fn catch_up_elsewhere(&self) {
        let deadline = tokio::time::Instant::now() + storage::deletions::LOOK_WITHIN;
        let look = async { self.deletions.lock().await.look(&self.store).await };
        let Ok(found) = tokio::time::timeout_at(deadline, look).await else {
            tracing::warn!(
                "the look for sessions deleted or undone elsewhere took too long; the next one makes it"
            );
            return;
        };
        match found {
            Ok(found) => self.caught_up(found, deadline).await,
            Err(e) => {
                tracing::warn!(error = %e, "the look for sessions deleted or undone elsewhere failed")
            }
        }
    }

    /// What a look found deleted or undone elsewhere: forgotten, or cut to what remains (as
    /// far as the store says it by `deadline`), here.
    pub(crate) async fn caught_up(
        &self,
        found: storage::deletions::Found,
        deadline: tokio::time::Instant,
    ) {
        if !found.is_empty() {
            tracing::debug!(
                deleted = found.deleted.len(),
                undone = found.undone.len(),
                "sessions changed elsewhere caught up with here"
            );
        }
        for id in &found.deleted {
            self.forget_deleted(id);
        }
        for (id, account_id) in &found.undone {
            self.trim_undone(*account_id, id, deadline).await;
        }
    }

    /// A session's context limit: `--max-context-tokens`, or the engine's window when that is
    /// smaller (a local model with a small window).
    pub fn context_limit(&self) -> u64 {
        match self.engine.context_window() {
            Some(window) => window.min(self.max_context_tokens),
            None => self.max_context_tokens,
        }
    }
}

/// One async mutex per session: turns of a session run one after the other, so messages are
/// stored in order (user, reply, user, reply) and the context check sees every stored token.
#[derive(Default)]
pub(crate) struct SessionLocks {
    map: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SessionLocks {
    pub async fn lock(&self, session_id: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            if map.len() > 1024 {
                map.retain(|_, l| Arc::strong_count(l) > 1);
            }
            map.entry(session_id.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// The session's lock if no turn holds it or waits for it (`DELETE …/messages/last`).
    pub fn try_lock(&self, session_id: &str) -> Option<OwnedMutexGuard<()>> {
        let lock = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(session_id.to_string()).or_default().clone()
        };
        lock.try_lock_owned().ok()
    }
}

/// A service running in the background of the current tokio runtime. Call `shutdown` to stop
/// it cleanly; dropping it also stops it (the server, streams and replies in flight wind down in
/// the background) but without waiting for the final checkpoint.
pub struct RunningService {
    pub addr: SocketAddr,
    /// The first configured key.
    pub api_key: String,
    pub jwt_secret: String,
    shutdown: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    state: Arc<AppState>,
}

impl std::fmt::Debug for RunningService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningService")
            .field("addr", &self.addr)
            .field("api_key", &config::redact_key(&self.api_key))
            .finish_non_exhaustive()
    }
}

impl RunningService {
    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What answers: `builtin`, `local · SmolLM2-135M-Instruct`, …
    pub fn engine_label(&self) -> String {
        self.state.engine.label()
    }

    /// Whether the engine can answer yet (a local model loads in the background).
    pub fn engine_load(&self) -> watch::Receiver<engine::LoadState> {
        self.state.engine.load_state()
    }

    /// The context limit of a session now (see `AppState::context_limit`).
    pub fn context_limit(&self) -> u64 {
        self.state.context_limit()
    }

    /// On PostgreSQL, its connection pool's use and how turns were written (batches or alone),
    /// as `/metrics` reports them; `None` on SQLite.
    pub fn pool_use(&self) -> Option<storage::postgres::PoolUse> {
        match &self.state.store {
            storage::Db::Postgres(pg) => Some(pg.pool_use()),
            storage::Db::Sqlite(_) => None,
        }
    }

    /// Stops accepting requests, closes stream connections, cancels replies in flight (rolled
    /// back like any failed reply), then checkpoints the database.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        if let Err(e) = self.server.await {
            tracing::error!(error = %e, "the server task failed");
        }
        let mut turns = {
            let mut guard = self.state.turns.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *guard)
        };
        while turns.join_next().await.is_some() {}
        let relay = self
            .state
            .relay
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(relay) = relay {
            relay.stop().await;
        }
        let leases = self
            .state
            .leases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(leases) = leases {
            leases.abort();
        }
        if self.state.engine.keeps_sessions() {
            // The engine saves the states it holds as it stops: none of a session deleted
            // elsewhere since the last look, nor of an exchange undone there (a look the
            // database does not answer in time is the next start's first look's to make).
            self.state.catch_up_elsewhere().await;
        }
        if let Db::Postgres(pg) = &self.state.store {
            storage::postgres::leases::unregister(pg).await;
        }
        if let Err(e) = self.state.store.close().await {
            tracing::error!(error = %e, "final checkpoint failed");
        }
        tracing::info!("service stopped");
    }
}

/// Connections the kernel queues before `accept`: with the standard library's 128, a burst of
/// 200 clients connecting at once overflowed the queue and some waited for a SYN retransmit
/// (one second).
const LISTEN_BACKLOG: u32 = 1024;

fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Bind `addr` (port 0 allowed), migrate, serve in a background tokio task.
pub async fn start(
    config: ServiceConfig,
    addr: SocketAddr,
) -> Result<RunningService, ServiceError> {
    if config.api_keys.is_empty() {
        return Err(ServiceError::Config(
            "at least one API key is needed".into(),
        ));
    }
    if let Some((bad, _)) = config
        .api_keys
        .iter()
        .find(|(k, _)| !config::is_valid_api_key(k))
    {
        return Err(ServiceError::Config(format!(
            "API key {} is not `service_live_` followed by at least 16 of [A-Za-z0-9]",
            config::redact_key(bad)
        )));
    }
    let admin_key = config
        .admin_key
        .as_deref()
        .map(auth::AdminKey::new)
        .transpose()
        .map_err(ServiceError::Config)?;
    if config.jwt_secret.is_empty() {
        return Err(ServiceError::Config(
            "the JWT secret must not be empty".into(),
        ));
    }
    if let Some(warning) = jwt::weak_secret_warning(&config.jwt_secret) {
        tracing::warn!("{warning}");
    }
    if config.max_context_tokens == 0 {
        return Err(ServiceError::Config(
            "--max-context-tokens must be at least 1".into(),
        ));
    }
    let engine = engine::build(&config.engine).map_err(ServiceError::Config)?;
    let limits = config.connections;
    let max_connections =
        connections::effective_max(limits.max_connections, connections::raise_open_file_limit());
    if max_connections < limits.max_connections {
        tracing::warn!(
            configured = limits.max_connections,
            max_connections,
            "--max-connections lowered to what the open-file limit leaves"
        );
    }
    let counter =
        connections::ConnectionCounter::new(max_connections, limits.max_connections_per_address);
    let listener = bind(addr).map_err(|source| ServiceError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServiceError::Bind { addr, source })?;

    let db = config.db.clone();
    let keys = config.api_keys.clone();
    let store = Db::open(&db).await?;
    let accounts = store.ensure_keys(keys, time::now_ms()).await?;
    let hub = Arc::new(stream::StreamHub::default());
    // Turns the lease task rolls back (a stopped replica's, or this one's late): their
    // accounts' streams are told once the state exists (below).
    let (rolled_back_tx, mut rolled_back) = tokio::sync::mpsc::unbounded_channel();
    // Sessions any replica deleted, or undid an exchange of, found by the lease task: caught
    // up with here (below).
    let (deleted_tx, mut deleted) =
        tokio::sync::mpsc::unbounded_channel::<storage::deletions::Found>();
    let deletions = Arc::new(tokio::sync::Mutex::new(storage::deletions::Deletions::new(
        time::now_ms(),
    )));
    let (relay, leases) = match &store {
        Db::Postgres(pg) => (
            Some(
                storage::postgres::relay::Relay::start(
                    pg.config(),
                    pg.replica().to_string(),
                    hub.clone(),
                )
                .await
                .map_err(ServiceError::Store)?,
            ),
            Some(storage::postgres::leases::start(
                pg.clone(),
                hub.clone(),
                rolled_back_tx,
                deleted_tx,
                deletions.clone(),
            )),
        ),
        Db::Sqlite(_) => (None, None),
    };
    // Ready token counting in the background; the first count waits for it if needed.
    if config.warm_token_counter {
        tokio::task::spawn_blocking(convo_tokens::warm);
    }

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let database_id = store.database_id().await.map_err(ServiceError::Store)?;
    let state = Arc::new(AppState {
        store,
        database_id,
        accounts,
        jwt_secret: config.jwt_secret.clone(),
        jwt_leeway_secs: config.jwt_leeway_secs,
        body_read_timeout: limits.body_read_timeout,
        engine,
        max_context_tokens: config.max_context_tokens,
        hub,
        relay: Mutex::new(relay),
        leases: Mutex::new(leases),
        session_locks: SessionLocks::default(),
        turns: Mutex::new(JoinSet::new()),
        stoppers: turn::Stoppers::default(),
        deletions,
        shutdown: shutdown_rx.clone(),
        admin_key,
        metrics: metrics::Metrics::new(),
    });
    {
        let state = state.clone();
        tokio::spawn(async move {
            while let Some(turn) = rolled_back.recv().await {
                account_events::tell(
                    &state,
                    turn.account_id,
                    &turn.session_id,
                    account_events::Change::Updated(SessionChange::Message),
                );
            }
        });
    }
    {
        let state = state.clone();
        tokio::spawn(async move {
            while let Some(found) = deleted.recv().await {
                let deadline = tokio::time::Instant::now() + storage::deletions::LOOK_WITHIN;
                state.caught_up(found, deadline).await;
            }
        });
    }
    if matches!(state.store, Db::Sqlite(_)) && state.engine.keeps_sessions() {
        // What the engine saved before this start, of sessions deleted meanwhile, goes (on
        // PostgreSQL the first heartbeat, at once, looks as far).
        let state = state.clone();
        tokio::spawn(async move { state.catch_up_elsewhere().await });
    }
    let app = router::build(state.clone());
    let server = tokio::spawn(server::serve(listener, app, limits, counter, shutdown_rx));
    tracing::info!(addr = %local, engine = state.engine.name(), db = state.store.kind(), "service listening");
    Ok(RunningService {
        addr: local,
        api_key: config.api_keys[0].0.clone(),
        jwt_secret: config.jwt_secret,
        shutdown: shutdown_tx,
        server,
        state,
    })
}
