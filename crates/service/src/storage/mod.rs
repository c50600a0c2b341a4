//! The service's storage: one interface (`interface.rs`: everything the service asks of its
//! database, each method one transaction) and its two implementations side by side, SQLite
//! (`sqlite/`, the default: one writer thread committing groups) and PostgreSQL (`postgres/`,
//! shared by replicas), behind one handle, `Db` (`db.rs`). What both hand back is in
//! `rows.rs`; the rules a turn is admitted by are `convo_core`'s.

pub mod db;
pub(crate) mod deletions;
pub mod interface;
pub mod postgres;
pub mod rows;
pub mod sqlite;

use std::path::PathBuf;

pub use db::Db;
pub use interface::{Storage, TurnAdmission};
pub use sqlite::SqliteStore;

/// Where the database lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbLocation {
    /// A private in-memory SQLite database, gone when the service stops.
    Memory,
    /// A SQLite database file (created if missing), with its `-wal` and `-shm` companions
    /// beside it.
    File(PathBuf),
    /// A PostgreSQL database (`postgres://USER@HOST:PORT/DB` or `postgresql://…`), which
    /// replicas can share.
    Postgres(String),
}

impl DbLocation {
    /// What `--db` (or `CONVO_SERVE_DB`) names: a PostgreSQL URL, `:memory:`, or a SQLite file.
    pub fn parse(arg: &str) -> DbLocation {
        if arg.starts_with("postgres://") || arg.starts_with("postgresql://") {
            DbLocation::Postgres(arg.to_string())
        } else if arg == ":memory:" {
            DbLocation::Memory
        } else {
            DbLocation::File(PathBuf::from(arg))
        }
    }
}
