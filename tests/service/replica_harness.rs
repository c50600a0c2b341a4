//! `convo serve` processes on one PostgreSQL database, as the replica tests start and drive
//! them from the outside (HTTP, WebSocket, signals). Each process's stdout and stderr are read
//! by a thread of its own into a buffer, so a chatty replica never blocks on a full pipe and
//! its log is there to print: a test that fails (panics) while a replica is alive prints that
//! replica's log when the replica is dropped.

use std::io::Read;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use reqwest::StatusCode;
use serde_json::Value;

use super::backends::TestDb;
use super::binary::{BIN, started};
use super::common::{Ws, json as body_json, ws_connect};

/// The JWT secret every replica of a test shares.
const SECRET: &str = "a-jwt-secret-shared-by-every-replica";

/// A `convo serve` process; killed (SIGKILL) if still running when dropped.
pub struct Replica {
    pub child: Child,
    pub base: String,
    pub http: reqwest::Client,
    key: &'static str,
    log: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- log of the replica at {}:\n{}", self.base, self.log());
        }
    }
}

/// Copies everything `from` writes into `log`, on a thread of its own, until it closes.
fn drain(mut from: impl Read + Send + 'static, log: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => log
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend_from_slice(&buf[..n]),
            }
        }
    })
}

/// What a replica may be started with besides its database, key, pace and lease.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// More accounts: `--api-key KEY[=TIER]` each.
    pub more_keys: Vec<String>,
    /// `--admin-key`: the operator's endpoints and `/metrics` on.
    pub admin_key: Option<String>,
    /// `--engine local` on this model (greedy, replies of 8 tokens) with this data dir (its
    /// saved states in `DIR/kv`), instead of the builtin engine at `pace_ms`.
    pub local_model: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Replica {
    /// A replica on `db` taking `key`, generating at `pace_ms` per token, with the lease of
    /// `lease_ms` (the service's default when `None`).
    pub fn start(db: &TestDb, key: &'static str, pace_ms: u64, lease_ms: Option<u64>) -> Replica {
        Replica::start_with(db, key, pace_ms, lease_ms, &Options::default())
    }

    /// [`Replica::start`] with more keys or an admin key.
    pub fn start_with(
        db: &TestDb,
        key: &'static str,
        pace_ms: u64,
        lease_ms: Option<u64>,
        options: &Options,
    ) -> Replica {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--api-key", key])
            .args(["--jwt-secret", SECRET]);
        match &options.local_model {
            None => command.args([
                "--engine",
                "builtin",
                "--engine-pace-ms",
                &pace_ms.to_string(),
            ]),
            Some((model, data_dir)) => command
                .args([
                    "--engine",
                    "local",
                    "--temperature",
                    "0",
                    "--max-reply-tokens",
                    "8",
                ])
                .arg("--model")
                .arg(model)
                .env("CONVO_DATA_DIR", data_dir),
        };
        command
            .env_remove("CONVO_SERVE_API_KEYS")
            .env_remove("CONVO_SERVE_ADMIN_KEY")
            .env_remove("CONVO_SERVE_LEASE_MS")
            .env("CONVO_SERVE_DB", db.url());
        for more in &options.more_keys {
            command.args(["--api-key", more]);
        }
        if let Some(admin) = &options.admin_key {
            command.args(["--admin-key", admin]);
        }
        if let Some(ms) = lease_ms {
            command.env("CONVO_SERVE_LEASE_MS", ms.to_string());
        }
        let (mut child, base, stdout) = started(&mut command);
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let readers = vec![drain(stderr, log.clone()), drain(stdout, log.clone())];
        Replica {
            child,
            base,
            http: reqwest::Client::new(),
            key,
            log,
            readers,
        }
    }

    /// What the process wrote to stderr (and to stdout after its first line) so far; all of
    /// it once the process has been killed or has exited.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// SIGKILL, then waits for the process and for its log to be read to the end.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
    }

    /// Waits for the process to exit (after a signal) and for its log.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let status = self.child.wait().unwrap();
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        status
    }

    /// Sends `signal` (`-TERM`, …) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub async fn post(&self, sid: &str, body: Value) -> (StatusCode, Value) {
        self.post_as(self.key, sid, body).await
    }

    /// A send with `credential` as the bearer.
    pub async fn post_as(&self, credential: &str, sid: &str, body: Value) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("{}/v1/sessions/{sid}/messages", self.base))
            .bearer_auth(credential)
            .json(&body)
            .send()
            .await
            .expect("request");
        body_json(resp).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.get_as(self.key, path).await
    }

    /// A GET with `credential` (an API key, the admin key) as the bearer; the body as JSON.
    pub async fn get_as(&self, credential: &str, path: &str) -> (StatusCode, Value) {
        body_json(self.get_raw(credential, path).await).await
    }

    /// A GET with `credential` as the bearer, the answer as it came (`/metrics` is text).
    pub async fn get_raw(&self, credential: &str, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(credential)
            .send()
            .await
            .expect("request")
    }

    /// A streamed send (202); the id of the reply.
    pub async fn start_reply(&self, sid: &str, text: &str) -> String {
        let (status, accepted) = self
            .post(sid, serde_json::json!({"content": text, "stream": true}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
        accepted["messageId"].as_str().unwrap().to_string()
    }

    /// `/metrics` with `admin` (the replica's `--admin-key`), parsed.
    pub async fn metrics(&self, admin: &str) -> prometheus_parse::Scrape {
        let resp = self.get_raw(admin, "/metrics").await;
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{text}");
        super::metrics::parse(&text)
    }

    /// `DELETE /v1/sessions/{sid}`: the status.
    pub async fn delete(&self, sid: &str) -> StatusCode {
        self.http
            .delete(format!("{}/v1/sessions/{sid}", self.base))
            .bearer_auth(self.key)
            .send()
            .await
            .expect("request")
            .status()
    }

    /// The session's messages.
    pub async fn history(&self, sid: &str) -> Vec<Value> {
        let (status, body) = self.get(&format!("/v1/sessions/{sid}/messages")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["messages"].as_array().unwrap().clone()
    }

    /// The account stream, `GET /v1/stream`.
    pub async fn account_ws(&self) -> Ws {
        let url = format!("{}/v1/stream", self.base.replace("http://", "ws://"));
        ws_connect(&url, self.key).await
    }

    pub async fn ws(&self, sid: &str) -> Ws {
        let url = format!(
            "{}/v1/sessions/{sid}/stream",
            self.base.replace("http://", "ws://")
        );
        ws_connect(&url, self.key).await
    }
}
