//! The PostgreSQL server of convo's tests.
//!
//! With `CONVO_TEST_PG=postgres://…` set, the tests use that server. Otherwise they use a
//! private, throw-away cluster started from the installed PostgreSQL binaries by
//! `pg-cluster.sh` (beside this crate's `Cargo.toml`): `initdb` + `postgres` on a temporary
//! directory, trust authentication, a free port on 127.0.0.1, fsync off.
//!
//! - Under `cargo nextest run`, the setup script of `.config/nextest.toml` starts one cluster for
//!   the whole run and hands its URL to the tests as `CONVO_TEST_PG_RUN`; a watchdog stops it
//!   and removes its directory when the nextest process exits.
//! - Elsewhere (`cargo test`), the first test of a process that asks for the server starts a
//!   cluster for that process, removed by the same watchdog once the process has exited.
//!
//! A test that stops or restarts PostgreSQL takes a [`Cluster`] of its own, so that the other
//! tests never see it go away.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The script that starts, stops and removes the clusters.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/pg-cluster.sh");

/// The server named by `CONVO_TEST_PG`, when it is set: an existing server, shared with
/// whoever else uses it, that no test may stop or restart.
pub fn external_server() -> Option<String> {
    std::env::var("CONVO_TEST_PG")
        .ok()
        .filter(|url| !url.is_empty())
}

/// The URL (`postgres://user@host:port`, no database) of the server this process's tests use:
/// `CONVO_TEST_PG`, else the nextest run's cluster (`CONVO_TEST_PG_RUN`), else a cluster
/// started for this process on first use.
///
/// # Panics
/// When a cluster is needed and cannot be started, e.g. without PostgreSQL's binaries (the
/// message names `scripts/setup.sh`, which installs them).
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Some(url) = external_server() {
            return url;
        }
        if let Some(url) = std::env::var("CONVO_TEST_PG_RUN")
            .ok()
            .filter(|url| !url.is_empty())
        {
            return url;
        }
        let cluster = Cluster::new().unwrap_or_else(|e| panic!("{e}"));
        let url = cluster.url().to_string();
        // Kept for the life of the process: the watchdog removes it after the process exits.
        std::mem::forget(cluster);
        url
    })
}

/// A private PostgreSQL cluster, stopped and deleted on drop (and by its watchdog if this
/// process dies first).
#[derive(Debug)]
pub struct Cluster {
    url: String,
    dir: PathBuf,
}

impl Cluster {
    /// Creates and starts a cluster owned by this process.
    pub fn new() -> Result<Cluster, String> {
        let out = script(&["new", &std::process::id().to_string()])
            .map_err(|e| format!("cannot start a private PostgreSQL cluster for the tests: {e}"))?;
        let field = |name: &str| {
            out.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_string)
                .ok_or_else(|| format!("pg-cluster.sh printed no {name}: {out}"))
        };
        Ok(Cluster {
            url: field("url")?,
            dir: PathBuf::from(field("dir")?),
        })
    }

    /// `postgres://postgres@127.0.0.1:PORT` (user `postgres`, trust authentication); the
    /// database `postgres` exists.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The cluster's directory (its data in `data/`, the server's log in `log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the server (fast shutdown: open connections are ended). Blocks until it has
    /// stopped; panics if it could not be stopped.
    pub fn stop(&self) {
        self.control("stop");
    }

    /// Starts the stopped server again on the same port, with the same data. Blocks until it
    /// accepts connections; panics if it does not start.
    pub fn start(&self) {
        self.control("start");
    }

    /// Stops and starts the server.
    pub fn restart(&self) {
        self.control("restart");
    }

    fn control(&self, action: &str) {
        if let Err(e) = script(&[action, &self.dir.to_string_lossy()]) {
            panic!("pg-cluster.sh {action} {}: {e}", self.dir.display());
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(e) = script(&["remove", &self.dir.to_string_lossy()]) {
            eprintln!("could not remove the cluster {}: {e}", self.dir.display());
        }
    }
}

/// Runs `pg-cluster.sh ARGS`: its standard output, or what it said on failure. What it says on
/// standard error is passed on through `eprint!`, so the test harness shows it with the test.
fn script(args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(SCRIPT)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run bash {SCRIPT}: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        eprint!("{stderr}");
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{} ({})", stderr.trim_end(), out.status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    fn accepts(cluster: &Cluster) -> bool {
        let addr = cluster.url().rsplit('@').next().unwrap();
        TcpStream::connect(addr).is_ok()
    }

    /// A cluster starts, stops, starts again on the same port, restarts, and is gone from disk
    /// after drop.
    #[test]
    fn a_cluster_stops_starts_restarts_and_is_removed() {
        let cluster = Cluster::new().expect("a cluster");
        assert!(cluster.url().starts_with("postgres://postgres@127.0.0.1:"));
        assert!(accepts(&cluster), "the server accepts connections");
        cluster.stop();
        assert!(!accepts(&cluster), "the server stopped");
        cluster.start();
        assert!(accepts(&cluster), "the server is back on its port");
        cluster.restart();
        assert!(accepts(&cluster), "the server is back after a restart");
        let dir = cluster.dir().to_path_buf();
        assert!(dir.join("data/PG_VERSION").exists());
        drop(cluster);
        assert!(!dir.exists(), "the cluster's directory is removed");
    }
}
