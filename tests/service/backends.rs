//! The two storage backends the service tests run against: a SQLite file in a temporary
//! directory, and a PostgreSQL database with a random name, dropped when the test ends, also
//! when it fails. The PostgreSQL server is the tests' own private cluster (`convo-testpg`:
//! one per `cargo nextest run`, or one per test process under `cargo test`), or the server at
//! `CONVO_TEST_PG` when that is set. SQL given to `ints`/`texts`/`execute` must read the same
//! in both dialects: `$1`-style parameters (SQLite numbers them in order of appearance) and
//! `CAST(… AS BIGINT)` around sums.

use std::path::PathBuf;

use convo_service::{DbLocation, ServiceConfig};

/// The server the PostgreSQL tests use (`postgres://user@host:port`, no database).
pub fn pg_server() -> String {
    convo_testpg::server_url().to_string()
}

/// The test server's address (it listens on TCP: the suite's proxy and socket checks need one).
pub async fn pg_server_addr() -> std::net::SocketAddr {
    let config: tokio_postgres::Config = pg_server().parse().expect("the server's URL");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(host) => host.clone(),
        #[cfg(unix)]
        other => panic!("the tests' PostgreSQL is not on TCP: {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    tokio::net::lookup_host((host.as_str(), port))
        .await
        .expect("the server's address")
        .next()
        .expect("an address")
}

/// A database of its own on the test server, dropped (with its connections) on drop.
pub struct TestDb {
    pub name: String,
}

impl TestDb {
    pub async fn create() -> TestDb {
        let name = format!(
            "convo_test_{}",
            convo_service::ids::random_alnum(16).to_ascii_lowercase()
        );
        let client = admin().await;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("cannot create a test database on {}: {e}", pg_server()));
        TestDb { name }
    }

    pub fn url(&self) -> String {
        format!("{}/{}", pg_server(), self.name)
    }

    pub async fn client(&self) -> tokio_postgres::Client {
        connect(&self.url()).await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs inside the test's runtime (or while it unwinds): a thread of its own with
        // its own runtime drops the database.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let client = admin().await;
                if let Err(e) = client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                {
                    eprintln!("could not drop test database {name}: {e}");
                }
            });
        })
        .join();
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {url} is not reachable: {e}"));
    tokio::spawn(connection);
    client
}

async fn admin() -> tokio_postgres::Client {
    connect(&format!("{}/postgres", pg_server())).await
}

/// Where a test's service stores everything.
pub enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(TestDb),
}

impl Backend {
    pub async fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }

    pub async fn postgres() -> Backend {
        Backend::Postgres(TestDb::create().await)
    }

    pub fn location(&self) -> DbLocation {
        match self {
            Backend::Sqlite(dir) => DbLocation::File(self.sqlite_path(dir)),
            Backend::Postgres(db) => DbLocation::Postgres(db.url()),
        }
    }

    fn sqlite_path(&self, dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("service.db")
    }

    /// An ephemeral-style configuration (builtin engine at pace 0) on this backend.
    pub fn config(&self) -> ServiceConfig {
        let mut config = ServiceConfig::ephemeral(0);
        config.db = self.location();
        config
    }

    /// Rows of integer columns.
    pub async fn ints(&self, sql: &str, params: &[i64]) -> Vec<Vec<i64>> {
        match self {
            Backend::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(self.sqlite_path(dir)).unwrap();
                let mut stmt = conn.prepare(sql).unwrap();
                let n = stmt.column_count();
                stmt.query_map(rusqlite::params_from_iter(params), |r| {
                    (0..n).map(|i| r.get::<_, i64>(i)).collect()
                })
                .unwrap()
                .map(Result::unwrap)
                .collect()
            }
            Backend::Postgres(db) => {
                let client = db.client().await;
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                client
                    .query(sql, &params)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| (0..r.len()).map(|i| r.get::<_, i64>(i)).collect())
                    .collect()
            }
        }
    }

    /// The one integer `sql` selects.
    pub async fn int(&self, sql: &str, params: &[i64]) -> i64 {
        self.ints(sql, params).await[0][0]
    }

    /// Rows of text columns, with one text parameter.
    pub async fn texts(&self, sql: &str, param: &str) -> Vec<Vec<String>> {
        match self {
            Backend::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(self.sqlite_path(dir)).unwrap();
                let mut stmt = conn.prepare(sql).unwrap();
                let n = stmt.column_count();
                stmt.query_map([param], |r| (0..n).map(|i| r.get::<_, String>(i)).collect())
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            Backend::Postgres(db) => db
                .client()
                .await
                .query(sql, &[&param])
                .await
                .unwrap()
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get::<_, String>(i)).collect())
                .collect(),
        }
    }

    /// Runs one statement with integer parameters.
    pub async fn execute(&self, sql: &str, params: &[i64]) {
        match self {
            Backend::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(self.sqlite_path(dir)).unwrap();
                conn.execute(sql, rusqlite::params_from_iter(params))
                    .unwrap();
            }
            Backend::Postgres(db) => {
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                db.client().await.execute(sql, &params).await.unwrap();
            }
        }
    }
}

/// Runs `async fn $name(backend: Backend)` as two tests, `$name::sqlite` and `$name::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name($crate::service::backends::Backend::sqlite().await).await
            }
            #[tokio::test]
            async fn postgres() {
                super::$name($crate::service::backends::Backend::postgres().await).await
            }
        }
    )*};
}
