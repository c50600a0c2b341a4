//! SQLite storage: one connection behind a mutex, used only from blocking threads
//! (`Store::call` runs the closure with `spawn_blocking`), so the async workers never block.

pub mod accounts;
pub mod idempotency;
pub mod messages;
mod migrations;
pub mod usage;

use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::config::DbLocation;
use super::error::StoreError;

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
}

impl Store {
    /// Opens (creating if needed) and migrates the database. Blocking: call off the async workers.
    pub fn open(location: &DbLocation) -> Result<Store, rusqlite::Error> {
        let mut conn = match location {
            DbLocation::Memory => Connection::open_in_memory()?,
            DbLocation::File(path) => Connection::open(path)?,
        };
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // Every statement of the hot paths stays compiled (`prepare_cached`).
        conn.set_prepared_statement_cache_capacity(64);
        // Deleted content is overwritten with zeros, not just unlinked (DESIGN.md §4.1).
        conn.pragma_update(None, "secure_delete", "ON")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        if matches!(location, DbLocation::File(_)) {
            let mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                tracing::warn!(mode, "the database did not switch to WAL mode");
            }
            conn.pragma_update(None, "synchronous", "NORMAL")?;
        }
        migrations::migrate(&mut conn)?;
        if let DbLocation::File(path) = location {
            restrict_permissions(path);
        }
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` with the connection on a blocking thread.
    pub async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|e| StoreError::Join(e.to_string()))?
    }

    /// Runs `f` with the connection on the current thread (only from blocking contexts).
    pub fn blocking<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self
            .conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }

    /// Moves everything from the WAL into the main file and truncates the WAL, so that
    /// deleted content no longer exists in any of the database's files.
    pub fn checkpoint(conn: &Connection) -> Result<(), rusqlite::Error> {
        // In-memory databases have no WAL; the pragma is then a no-op returning a row.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
    }

    /// Final checkpoint before the service stops.
    pub async fn close(&self) -> Result<(), StoreError> {
        self.call(|conn| Ok(Store::checkpoint(conn)?)).await
    }
}

/// The database holds conversations: readable by its owner only (SQLite gives the `-wal` and
/// `-shm` files the same permissions).
#[cfg(unix)]
fn restrict_permissions(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        tracing::warn!(path = %path.display(), error = %e, "cannot restrict the database's permissions");
    }
}

#[cfg(not(unix))]
fn restrict_permissions(_path: &std::path::Path) {}
