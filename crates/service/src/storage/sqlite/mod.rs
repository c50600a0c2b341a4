//! SQLite storage: one connection, owned by a writer thread that commits in groups.
//!
//! `SqliteStore::call` hands a closure to the writer thread and awaits its result, so the async
//! workers never block. The writer takes every closure waiting at that moment and runs them
//! in one transaction, each inside its own savepoint (so each stays all-or-nothing), then
//! commits once and only then answers them all: under load, one WAL write and one commit serve
//! many requests instead of one each. Nothing is answered before it is committed.

pub mod accounts;
pub mod admin;
pub mod idempotency;
pub mod messages;
mod migrations;
pub mod usage;

use super::DbLocation;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use rusqlite::Connection;

use crate::error::StoreError;

/// Most closures committed together.
const MAX_GROUP: usize = 256;

/// How often the checkpointer thread copies the WAL into the database file.
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);
/// Sooner when the last checkpoint found at least this many frames in the WAL (4 MiB).
const CHECKPOINT_BUSY_FRAMES: i64 = 1000;
/// Past this many frames in the WAL (128 MiB), the writer finishes a checkpoint by itself right
/// after a background one, so that the WAL starts over. SQLite restarts the WAL only when a
/// write transaction begins with every frame checkpointed, which a background checkpoint never
/// achieves while the writer keeps committing. Finishing it costs the writer two `fsync`s and
/// the copy of the frames committed during the last background pass (5-21 ms under load), and
/// a third `fsync` when the WAL restarts: paid once per this many frames (about once a second
/// at full load), not at every background pass. 16k and 64k frames did no better (interleaved
/// runs at 12 connections, docs/performance.md).
const WAL_RESTART_FRAMES: i64 = 32 * 1024;
/// The writer is asked to finish once a background pass began with at most this many frames
/// it had not copied before (or after five passes).
const CATCH_UP_FRAMES: i64 = 256;
/// The writer connection's own automatic checkpoint: only a backstop, should the checkpointer
/// thread stall (512 MiB).
const WRITER_AUTOCHECKPOINT_FRAMES: i64 = 128 * 1024;

/// How long a full checkpoint retries while the checkpointer holds the checkpoint lock.
const CHECKPOINT_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// The WAL's thresholds: the constants above (smaller in tests).
#[derive(Clone, Copy, Debug)]
struct WalLimits {
    restart_frames: i64,
    catch_up_frames: i64,
    autocheckpoint_frames: i64,
}

impl Default for WalLimits {
    fn default() -> Self {
        WalLimits {
            restart_frames: WAL_RESTART_FRAMES,
            catch_up_frames: CATCH_UP_FRAMES,
            autocheckpoint_frames: WRITER_AUTOCHECKPOINT_FRAMES,
        }
    }
}

/// What the writer and checkpointer threads tell each other.
#[derive(Default)]
struct WalState {
    limits: WalLimits,
    /// The writer's transactions: an idle database is not checkpointed.
    writes: AtomicU64,
    /// Set by the checkpointer when the WAL has grown past `WAL_RESTART_FRAMES`; the writer
    /// then checkpoints between two groups and clears it. The checkpointer waits meanwhile.
    catch_up: AtomicBool,
    /// `writes` when `catch_up` was set: a writer that has committed nothing since is idle.
    writes_when_asked: AtomicU64,
    /// The writer's checkpoints so far (logged with each).
    catch_ups: AtomicU64,
    /// Set by the checkpointer before it waits for a commit with no timeout (an idle database
    /// wakes nothing); the writer's next commit clears it and wakes the checkpointer (`wake`).
    asleep: AtomicBool,
    /// The checkpointer's background passes so far.
    passes: AtomicU64,
}

/// What the checkpointer thread is told.
enum Signal {
    /// Stop (`Checkpointer::stop`).
    Stop,
    /// The writer committed while the checkpointer was asleep.
    Wake,
}

/// The writer's side of the checkpointer's channel: counts a commit and wakes the checkpointer
/// if it sleeps. `None` for a database with no checkpointer (in memory).
struct Committed {
    wake: Option<mpsc::Sender<Signal>>,
}

impl Committed {
    fn count(&self, wal: &WalState) {
        wal.writes.fetch_add(1, Ordering::SeqCst);
        if wal.asleep.swap(false, Ordering::SeqCst)
            && let Some(wake) = &self.wake
        {
            // The checkpointer may be gone already (stopped): nothing to wake then.
            let _ = wake.send(Signal::Wake);
        }
    }
}

/// Answers a closure's caller once the fate of its transaction is known: `None` when it was
/// committed, else why it was not.
type Completion = Box<dyn FnOnce(Option<String>) + Send>;

/// A closure for the writer thread. `alone` ones run outside any group (they commit or
/// checkpoint themselves).
struct Job {
    alone: bool,
    run: Box<dyn FnOnce(&mut Connection) -> Completion + Send>,
}

/// Handle to the database; cheap to clone. The writer thread ends when the last handle goes.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    jobs: mpsc::Sender<Job>,
    checkpointer: Arc<Checkpointer>,
    #[cfg(test)]
    wal: Arc<WalState>,
}

/// The thread that checkpoints a file database in the background (PASSIVE: it never blocks
/// the writer), so that copying the WAL into the database file and syncing it happen off the
/// writer thread, but for the writer's one checkpoint per WAL restart (`catch_up`). It stops
/// when told to or when the last `SqliteStore` handle goes. While nothing is written it sleeps
/// until the writer's next commit wakes it (no timer).
#[derive(Default)]
struct Checkpointer {
    stop: Mutex<Option<mpsc::Sender<Signal>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Checkpointer {
    fn start(path: &std::path::Path, wal: Arc<WalState>) -> Result<Checkpointer, rusqlite::Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // The database file, for an `fdatasync` before each pass (`background_pass`).
        let file = std::fs::File::open(path).map_err(|e| {
            rusqlite::Error::InvalidParameterName(format!(
                "cannot open the database file to sync it: {e}"
            ))
        })?;
        let (stop, stopped) = mpsc::channel::<Signal>();
        // Read before the thread starts: a commit made before its first look must count as
        // new, or the thread would fall asleep past it with nothing left to wake it.
        let mut seen = wal.writes.load(Ordering::SeqCst);
        let thread = std::thread::Builder::new()
            .name("convo-checkpoint".into())
            .spawn(move || {
                let mut wait = CHECKPOINT_INTERVAL;
                // How many times this thread found the writer asked and not yet done.
                let mut looks = 0;
                // Ends on a stop message or when every sender is dropped.
                while let Ok(Signal::Wake) | Err(mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(wait)
                {
                    if wal.catch_up.load(Ordering::Acquire) {
                        looks += 1;
                        // The writer's checkpoint comes first (it would find this one's lock),
                        // but a writer that has gone idle runs none: after 100 ms without a
                        // commit the request is taken back, and a pass of this thread, with
                        // no commit during it, copies everything.
                        let idle = wal.writes.load(Ordering::Relaxed)
                            == wal.writes_when_asked.load(Ordering::Relaxed);
                        if !(idle && looks >= 20) {
                            wait = CHECKPOINT_INTERVAL / 20;
                            continue;
                        }
                        wal.catch_up.store(false, Ordering::Release);
                    }
                    let now = wal.writes.load(Ordering::SeqCst);
                    if now == seen {
                        // Idle: sleep until the writer's next commit (`Committed::count`). The
                        // flag is set before the last look, so a commit after that look
                        // finds it and wakes this thread.
                        wal.asleep.store(true, Ordering::SeqCst);
                        if wal.writes.load(Ordering::SeqCst) == seen {
                            match stopped.recv() {
                                Ok(Signal::Wake) => {}
                                Ok(Signal::Stop) | Err(_) => break,
                            }
                        } else {
                            wal.asleep.store(false, Ordering::SeqCst);
                        }
                        // A burst's first commit: let the writer add to it before the pass.
                        wait = CHECKPOINT_INTERVAL;
                        continue;
                    }
                    seen = now;
                    // A pass reports the WAL as it was when it began: the frames committed during
                    // it are not counted, and the writer's commit counter tells whether there
                    // were any. Once the WAL is past its limit, passes follow each other until
                    // one began with few new frames (so that the frames committed during it,
                    // which the writer will copy, are few too), at most five.
                    let limits = wal.limits;
                    let mut passes = 0;
                    let mut copied_before = 0;
                    let (done, wrote_during) = loop {
                        let writes_before = wal.writes.load(Ordering::Relaxed);
                        let done = background_pass(&conn, &file);
                        wal.passes.fetch_add(1, Ordering::Relaxed);
                        passes += 1;
                        let wrote_during = wal.writes.load(Ordering::Relaxed) != writes_before;
                        match &done {
                            Ok(c)
                                if c.frames >= limits.restart_frames
                                    && wrote_during
                                    && passes < 5
                                    && c.copied - copied_before > limits.catch_up_frames =>
                            {
                                copied_before = c.copied;
                            }
                            _ => break (done, wrote_during),
                        }
                    };
                    wait = match done {
                        // With no commit during the pass, every frame is copied and the WAL
                        // starts over at the next write anyway.
                        Ok(c) if c.frames >= limits.restart_frames && wrote_during => {
                            tracing::debug!(
                                frames = c.frames,
                                passes,
                                "asking the writer to finish the checkpoint"
                            );
                            looks = 0;
                            let writes = wal.writes.load(Ordering::Relaxed);
                            wal.writes_when_asked.store(writes, Ordering::Relaxed);
                            wal.catch_up.store(true, Ordering::Release);
                            CHECKPOINT_INTERVAL / 20
                        }
                        Ok(c) if c.frames >= CHECKPOINT_BUSY_FRAMES => CHECKPOINT_INTERVAL / 4,
                        Ok(_) => CHECKPOINT_INTERVAL,
                        Err(e) => {
                            tracing::warn!(error = %e, "background checkpoint failed");
                            CHECKPOINT_INTERVAL * 10
                        }
                    };
                }
            })
            .map_err(|e| {
                rusqlite::Error::InvalidParameterName(format!(
                    "cannot start the checkpoint thread: {e}"
                ))
            })?;
        Ok(Checkpointer {
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// A sender for the writer's wake-ups; `None` when there is no thread.
    fn waker(&self) -> Option<mpsc::Sender<Signal>> {
        self.stop.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops the thread and waits for its checkpoint in progress, if any.
    fn stop(&self) {
        // A message, not only the dropped sender: the writer holds a sender too (`Committed`).
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(Signal::Stop);
        }
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// An `fdatasync` of the database file, then one background checkpoint. SQLite syncs the
/// database file only when a checkpoint copied every frame of the WAL, which under continuous
/// writes is the writer's (`WAL_RESTART_FRAMES`): that `fsync` then had to write back every
/// page copied since, on the writer thread (8-10 ms at 2,000 POSTs/s). Synced here, before the
/// next copy, it finds only the last pass's pages. The sync adds no guarantee and takes none
/// away; its failure is only logged.
fn background_pass(
    conn: &Connection,
    file: &std::fs::File,
) -> Result<Checkpointed, rusqlite::Error> {
    if let Err(e) = file.sync_data() {
        tracing::warn!(error = %e, "cannot sync the database file");
    }
    checkpoint(conn, "PASSIVE")
}

/// What `PRAGMA wal_checkpoint` reports.
struct Checkpointed {
    /// Another connection's checkpoint held the lock.
    blocked: bool,
    /// Frames in the WAL when the checkpoint began (those committed during it are not counted).
    frames: i64,
    /// Of which copied into the database file (by this checkpoint or earlier ones).
    copied: i64,
}

/// Runs `PRAGMA wal_checkpoint(MODE)`.
fn checkpoint(conn: &Connection, mode: &str) -> Result<Checkpointed, rusqlite::Error> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok(Checkpointed {
            blocked: r.get::<_, i64>(0)? != 0,
            frames: r.get(1)?,
            copied: r.get(2)?,
        })
    })
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database. Blocking: call off the async workers.
    pub fn open(location: &DbLocation) -> Result<SqliteStore, rusqlite::Error> {
        SqliteStore::open_with(location, WalLimits::default())
    }

    fn open_with(location: &DbLocation, limits: WalLimits) -> Result<SqliteStore, rusqlite::Error> {
        let mut conn = match location {
            DbLocation::Memory => Connection::open_in_memory()?,
            DbLocation::Postgres(_) => {
                return Err(rusqlite::Error::InvalidParameterName(
                    "a PostgreSQL URL is not a SQLite database (use Db::open)".into(),
                ));
            }
            DbLocation::File(path) => {
                let conn = Connection::open(path)?;
                // Before the WAL exists: SQLite creates it and the `-shm` file with the
                // database file's permissions.
                restrict_permissions(path);
                conn
            }
        };
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // Every statement of the hot paths stays compiled (`prepare_cached`).
        conn.set_prepared_statement_cache_capacity(64);
        // Plans never depend on bound values (there are no statistics to use them with): with
        // the bundled SQLite's STAT4, a cached statement whose plan could have used a value
        // (the history query) was otherwise compiled anew every time it was run.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        // Deleted content is overwritten with zeros, not just unlinked (docs/design.md, "Sessions").
        conn.pragma_update(None, "secure_delete", "ON")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        if matches!(location, DbLocation::File(_)) {
            let mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                tracing::warn!(mode, "the database did not switch to WAL mode");
            }
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            // The checkpointer thread keeps the WAL short; this is only a backstop.
            conn.pragma_update(None, "wal_autocheckpoint", limits.autocheckpoint_frames)?;
            // Read pages through a memory map, so that a page missing from the page cache is
            // a copy rather than a read syscall (throughput fell as the database grew without
            // it). The page cache stays small: every commit after a B-tree page split walks the
            // whole cache (SQLite renumbers pages through a reserved page number, and the
            // cache then truncates past it), which with 32 MiB was 6 % of the writer; 4 MiB
            // did best of 4, 8 and 32 MiB (CPU per POST, interleaved runs).
            conn.pragma_update(None, "mmap_size", 256 * 1024 * 1024)?;
            conn.pragma_update(None, "cache_size", -4 * 1024)?;
        }
        // Savepoint journals in memory: each closure of a group has its savepoint, and the
        // pages it first changes are copied to the sub-journal, which otherwise spills to a
        // temporary file past 64 KiB (a `pwrite` per page, 12 % of the writer).
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        migrations::migrate(&mut conn)?;
        let wal = Arc::new(WalState {
            limits,
            ..WalState::default()
        });
        let checkpointer = match location {
            DbLocation::File(path) => Checkpointer::start(path, wal.clone())?,
            DbLocation::Memory | DbLocation::Postgres(_) => Checkpointer::default(),
        };
        let conn = Arc::new(Mutex::new(conn));
        #[cfg(test)]
        let wal_for_tests = wal.clone();
        let (jobs, queue) = mpsc::channel();
        let writer_conn = conn.clone();
        let committed = Committed {
            wake: checkpointer.waker(),
        };
        std::thread::Builder::new()
            .name("convo-store".into())
            .spawn(move || write_groups(&writer_conn, &queue, &wal, &committed))
            .map_err(|e| {
                rusqlite::Error::InvalidParameterName(format!("cannot start the store thread: {e}"))
            })?;
        Ok(SqliteStore {
            conn,
            jobs,
            checkpointer: Arc::new(checkpointer),
            #[cfg(test)]
            wal: wal_for_tests,
        })
    }

    /// Runs `f` with the connection on the writer thread, inside a savepoint of a group
    /// transaction; the result arrives once the group is committed. `f` must not commit or
    /// checkpoint by itself (use `transaction`-like `savepoint`s, which nest).
    pub async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(false, f).await
    }

    /// Like `call`, but `f` runs outside any group transaction: for work that must commit
    /// before it goes on (a deletion or an undo followed by a checkpoint).
    pub async fn call_alone<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(true, f).await
    }

    async fn submit<T, F>(&self, alone: bool, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let run = Box::new(move |conn: &mut Connection| -> Completion {
            let result = f(conn);
            Box::new(move |failed: Option<String>| {
                let result = match failed {
                    Some(why) => Err(StoreError::Commit(why)),
                    None => result,
                };
                let _ = tx.send(result);
            })
        });
        self.jobs
            .send(Job { alone, run })
            .map_err(|_| StoreError::Join("the store thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Join("the database task failed".into()))?
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
    /// A checkpoint blocked by the background one (which holds the checkpoint lock while it
    /// runs) is retried until it completes.
    pub fn checkpoint(conn: &Connection) -> Result<(), rusqlite::Error> {
        let started = std::time::Instant::now();
        loop {
            // In-memory databases have no WAL; the pragma is then a no-op returning a row.
            if !checkpoint(conn, "TRUNCATE")?.blocked {
                return Ok(());
            }
            if started.elapsed() > CHECKPOINT_RETRY {
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    Some("the WAL checkpoint stayed blocked".into()),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Readiness: the writer thread runs a trivial query within `within`.
    pub async fn ready(&self, within: std::time::Duration) -> Result<(), String> {
        let probe = self.call(|conn| Ok(conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?));
        match tokio::time::timeout(within, probe).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("SQLite did not answer within {within:?}")),
        }
    }

    /// Final checkpoint before the service stops (after stopping the background one).
    pub async fn close(&self) -> Result<(), StoreError> {
        let checkpointer = self.checkpointer.clone();
        self.call_alone(move |conn| {
            checkpointer.stop();
            Ok(SqliteStore::checkpoint(conn)?)
        })
        .await
    }
}

/// The writer thread: takes the closures waiting, runs them as one group, answers them.
fn write_groups(
    conn: &Mutex<Connection>,
    queue: &mpsc::Receiver<Job>,
    wal: &WalState,
    committed: &Committed,
) {
    let mut next = None;
    loop {
        let first = match next.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                // Every handle is gone.
                Err(_) => return,
            },
        };
        let mut guard = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if first.alone {
            if let Some(done) = run_job(&mut guard, first) {
                done(None);
            }
            committed.count(wal);
            catch_up(&guard, wal);
            continue;
        }
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) if job.alone => {
                    next = Some(job);
                    break;
                }
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        run_group(&mut guard, group);
        // After the commit: the checkpointer then copies this group's frames too.
        committed.count(wal);
        catch_up(&guard, wal);
    }
}

/// The writer's checkpoint when the checkpointer asked for it (`WAL_RESTART_FRAMES`): it
/// copies the frames committed since the last background checkpoint and, with no write in
/// between, completes, so the next transaction restarts the WAL.
fn catch_up(conn: &Connection, wal: &WalState) {
    if wal.catch_up.load(Ordering::Acquire) {
        let started = std::time::Instant::now();
        match checkpoint(conn, "PASSIVE") {
            Ok(c) => {
                let nth = wal.catch_ups.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::debug!(
                    frames = c.frames,
                    copied = c.copied,
                    took_us = started.elapsed().as_micros() as u64,
                    nth,
                    "the writer finished a checkpoint",
                );
            }
            Err(e) => tracing::warn!(error = %e, "the writer's checkpoint failed"),
        }
        wal.catch_up.store(false, Ordering::Release);
    }
}

/// Runs one closure; `None` if it panicked (its caller then learns that the task failed, and
/// its savepoint was rolled back while unwinding).
fn run_job(conn: &mut Connection, job: Job) -> Option<Completion> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| (job.run)(conn))) {
        Ok(done) => Some(done),
        Err(_) => {
            tracing::error!("a database task panicked");
            None
        }
    }
}

fn run_group(conn: &mut Connection, group: Vec<Job>) {
    // A group of one too: its transaction takes the write lock as it begins, so that while
    // another process writes to the file (a one-shot command's service beside the TUI's), it
    // waits for the busy timeout. A closure's own savepoint in autocommit would begin a
    // deferred transaction, which fails at once ("database is locked") when it read before
    // the other committed and then writes.
    if conn.execute_batch("BEGIN IMMEDIATE").is_err() {
        // The group transaction cannot start: each closure on its own.
        for job in group {
            if let Some(done) = run_job(conn, job) {
                done(None);
            }
        }
        return;
    }
    let mut pending: Vec<Completion> = Vec::with_capacity(group.len());
    for job in group {
        pending.extend(run_job(conn, job));
        if conn.is_autocommit() {
            // An error made SQLite roll the whole group back: tell everyone in it, start anew.
            for done in pending.drain(..) {
                done(Some("the transaction was rolled back".into()));
            }
            if conn.execute_batch("BEGIN IMMEDIATE").is_err() {
                break;
            }
        }
    }
    if conn.is_autocommit() {
        return;
    }
    match conn.execute_batch("COMMIT") {
        Ok(()) => pending.into_iter().for_each(|done| done(None)),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            let why = e.to_string();
            pending.into_iter().for_each(|done| done(Some(why.clone())));
        }
    }
}

/// The database holds conversations: readable by its owner only. SQLite gives the `-wal` and
/// `-shm` files it creates the database file's permissions; those left by a process that
/// stopped without closing (created before this was done first) are restricted too.
#[cfg(unix)]
fn restrict_permissions(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    for (file, required) in [(path.as_os_str(), true), (&wal, false), (&shm, false)] {
        match std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if required || e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(path = %std::path::Path::new(file).display(), error = %e,
                    "cannot restrict the database's permissions");
            }
            _ => {}
        }
    }
}

#[cfg(not(unix))]
fn restrict_permissions(_path: &std::path::Path) {}

#[cfg(test)]
mod tests {
    use std::sync::mpsc as std_mpsc;

    use super::*;

    fn insert(conn: &mut Connection, n: i64) -> Result<(), StoreError> {
        let sp = conn.savepoint()?;
        sp.execute(
            "INSERT INTO accounts (id, tier, created_at) VALUES (?1, 'pro', 0)",
            [n],
        )?;
        sp.commit()?;
        Ok(())
    }

    /// Two services on one database file (the TUI's embedded service and a one-shot
    /// command's, or `convo usage` beside the TUI): a closure that reads before it writes
    /// waits for the other's transaction, rather than failing with "database is locked" (a
    /// deferred transaction whose snapshot went stale cannot wait).
    #[tokio::test]
    async fn two_stores_on_one_file_reading_then_writing_at_once_both_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let location = DbLocation::File(dir.path().join("service.db"));
        let stores = [
            SqliteStore::open(&location).unwrap(),
            SqliteStore::open(&location).unwrap(),
        ];
        let tasks: Vec<_> = stores
            .into_iter()
            .enumerate()
            .map(|(n, store)| {
                tokio::spawn(async move {
                    for i in 0..150_i64 {
                        store
                            .call(move |conn| {
                                let sp = conn.savepoint()?;
                                let count: i64 =
                                    sp.query_row("SELECT count(*) FROM accounts", [], |r| {
                                        r.get(0)
                                    })?;
                                sp.execute(
                                    "INSERT INTO accounts (id, tier, created_at)
                                     VALUES (?1, 'pro', ?2)",
                                    [1_000 * n as i64 + i, count],
                                )?;
                                sp.commit()?;
                                Ok(())
                            })
                            .await?;
                    }
                    Ok::<(), StoreError>(())
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
    }

    /// Closures waiting while the writer is busy run as one group; one that fails or panics
    /// takes back only its own writes, and the others are committed and answered.
    #[tokio::test]
    async fn waiting_closures_commit_as_a_group_and_fail_alone() {
        let store = SqliteStore::open(&DbLocation::Memory).unwrap();
        let (release, wait) = std_mpsc::channel::<()>();
        let (started, has_started) = std_mpsc::channel::<()>();
        // The first closure holds the writer until every other one is queued.
        let mut first = Box::pin(store.call(move |conn| {
            let grouped = !conn.is_autocommit();
            let _ = started.send(());
            wait.recv().map_err(|e| StoreError::Join(e.to_string()))?;
            insert(conn, 1)?;
            Ok(grouped)
        }));
        assert!(futures_util::poll!(&mut first).is_pending());
        has_started.recv().unwrap();
        let mut queued = Vec::new();
        for n in 2..=6_i64 {
            let mut f = Box::pin(store.call(move |conn| {
                let grouped = !conn.is_autocommit();
                let sp = conn.savepoint()?;
                sp.execute(
                    "INSERT INTO accounts (id, tier, created_at) VALUES (?1, 'pro', 0)",
                    [n],
                )?;
                match n {
                    // Fails after writing: its savepoint is rolled back, nothing of it stays.
                    3 => return Err(StoreError::Corrupt("refused".into())),
                    // Panics after writing: the same, and its caller learns the task failed.
                    4 => panic!("a closure panicked"),
                    _ => {}
                }
                sp.commit()?;
                Ok(grouped)
            }));
            assert!(futures_util::poll!(&mut f).is_pending());
            queued.push((n, f));
        }
        release.send(()).unwrap();
        assert!(
            first.await.unwrap(),
            "the first closure, alone in its group, ran in its transaction too"
        );
        for (n, f) in queued {
            match (n, f.await) {
                (3, Err(StoreError::Corrupt(_))) | (4, Err(StoreError::Join(_))) => {}
                (_, Ok(grouped)) => assert!(grouped, "closure {n} ran in a group"),
                (n, other) => panic!("closure {n}: {other:?}"),
            }
        }
        let ids: Vec<i64> = store
            .call(|conn| {
                let mut stmt = conn.prepare("SELECT id FROM accounts ORDER BY id")?;
                let ids = stmt.query_map([], |r| r.get(0))?;
                Ok(ids.collect::<Result<_, _>>()?)
            })
            .await
            .unwrap();
        assert_eq!(ids, vec![1, 2, 5, 6]);
    }

    /// The writer checkpoints only when the checkpointer asked; its checkpoint then copies
    /// every frame, so the next transaction starts the WAL over.
    #[test]
    fn the_writer_catches_up_only_when_asked_and_the_wal_then_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        for _ in 0..50 {
            conn.execute("INSERT INTO t VALUES (zeroblob(4000))", [])
                .unwrap();
        }
        let db_len = || std::fs::metadata(&path).unwrap().len();
        let before = db_len();
        assert!(before < 50 * 4000, "the rows are still in the WAL");

        let wal = WalState::default();
        catch_up(&conn, &wal);
        assert_eq!(db_len(), before, "nothing was asked");

        wal.catch_up.store(true, Ordering::Release);
        catch_up(&conn, &wal);
        assert!(!wal.catch_up.load(Ordering::Acquire));
        assert!(db_len() >= 50 * 4000, "every frame was copied");

        conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let frames = checkpoint(&conn, "PASSIVE").unwrap().frames;
        assert!(frames < 5, "the WAL started over: {frames} frames");
    }

    /// The database and its `-wal` and `-shm` files are readable by their owner only, also
    /// when a `-wal` file was left readable by others.
    #[cfg(unix)]
    #[tokio::test]
    async fn the_database_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("private.db");
        let mode = |suffix: &str| {
            let file = format!("{}{suffix}", path.display());
            std::fs::metadata(file).unwrap().permissions().mode() & 0o777
        };
        let store = SqliteStore::open(&DbLocation::File(path.clone())).unwrap();
        store
            .call(|conn| Ok(conn.execute_batch("CREATE TABLE t (x)")?))
            .await
            .unwrap();
        for suffix in ["", "-wal", "-shm"] {
            assert_eq!(mode(suffix), 0o600, "private{suffix}");
        }
        // A `-wal` file readable by others, as one stopped process of an earlier version left.
        let wal = format!("{}-wal", path.display());
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o644)).unwrap();
        let again = SqliteStore::open(&DbLocation::File(path.clone())).unwrap();
        assert_eq!(mode("-wal"), 0o600);
        drop(again);
        store.close().await.unwrap();
    }

    /// An idle database's checkpointer sleeps with no timer, and the next commit wakes it for a
    /// pass.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_checkpointer_sleeps_while_idle_and_a_commit_wakes_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&DbLocation::File(dir.path().join("idle.db"))).unwrap();
        let write = || {
            store.call(|conn| {
                let sp = conn.savepoint()?;
                sp.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)", [])?;
                sp.execute("INSERT INTO t VALUES (1)", [])?;
                sp.commit()?;
                Ok(())
            })
        };
        let until = |what: &str, done: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !done() {
                assert!(std::time::Instant::now() < deadline, "{what}");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        write().await.unwrap();
        let wal = store.wal.clone();
        until("the checkpointer made no pass after a write", &|| {
            wal.passes.load(Ordering::Relaxed) >= 1
        });
        until("the checkpointer never went to sleep", &|| {
            wal.asleep.load(Ordering::SeqCst)
        });
        let passes = wal.passes.load(Ordering::Relaxed);
        std::thread::sleep(CHECKPOINT_INTERVAL * 3);
        assert_eq!(
            wal.passes.load(Ordering::Relaxed),
            passes,
            "a pass with nothing written"
        );
        assert!(wal.asleep.load(Ordering::SeqCst));
        write().await.unwrap();
        until(
            "the commit did not wake the checkpointer for a pass",
            &|| wal.passes.load(Ordering::Relaxed) > passes,
        );
        until("the checkpointer did not go back to sleep", &|| {
            wal.asleep.load(Ordering::SeqCst)
        });
        store.close().await.unwrap();
    }

    /// Under writes that never pause, the checkpointer asks the writer to finish once the WAL
    /// has grown past its limit, again and again (the limits are tiny here, and the writer's
    /// automatic checkpoint is off: only this scheme restarts the WAL).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn under_continuous_writes_the_checkpointer_has_the_writer_finish() {
        let dir = tempfile::tempdir().unwrap();
        let limits = WalLimits {
            restart_frames: 64,
            catch_up_frames: 8,
            autocheckpoint_frames: 0,
        };
        let store =
            SqliteStore::open_with(&DbLocation::File(dir.path().join("wal.db")), limits).unwrap();
        store
            .call(|conn| Ok(conn.execute_batch("CREATE TABLE t (x BLOB)")?))
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // Eight writers, each always waiting with its next insert: the writer never idles.
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    while store.wal.catch_ups.load(Ordering::Relaxed) < 3
                        && std::time::Instant::now() < deadline
                    {
                        store
                            .call(|conn| {
                                let sp = conn.savepoint()?;
                                sp.execute("INSERT INTO t VALUES (zeroblob(200))", [])?;
                                sp.commit()?;
                                Ok(())
                            })
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        assert!(
            store.wal.catch_ups.load(Ordering::Relaxed) >= 3,
            "the writer finished no checkpoint in 30 s of writes"
        );
        // Asked when the writes have stopped, the idle writer never answers: the checkpointer
        // takes the request back (and its own next pass, with no commit during it, copies
        // everything).
        let writes = store.wal.writes.load(Ordering::Relaxed);
        store.wal.writes_when_asked.store(writes, Ordering::Relaxed);
        store.wal.catch_up.store(true, Ordering::Release);
        // The checkpointer sleeps once nothing is written: wake it as a commit would.
        let waker = store
            .checkpointer
            .waker()
            .expect("a file database has a checkpointer");
        waker.send(Signal::Wake).unwrap();
        let asked_until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while store.wal.catch_up.load(Ordering::Acquire) {
            assert!(
                std::time::Instant::now() < asked_until,
                "the request stayed up"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        store.close().await.unwrap();
    }
}
