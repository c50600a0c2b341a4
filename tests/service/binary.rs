//! `convo serve` and `convo token` as a user runs them.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};

pub(super) const BIN: &str = env!("CARGO_BIN_EXE_convo");
const CLIENT_KEY: &str = "service_live_clientKeyOfAnotherOne";

/// Starts `command` (a `convo serve`) with its stdout and stderr piped; returns the child, the
/// base URL from the one line it prints, and the rest of its stdout.
pub(super) fn started(command: &mut Command) -> (Child, String, BufReader<ChildStdout>) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let base = line
        .trim_end()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, base, stdout)
}

/// `convo serve` with the builtin engine on a free port and the database `db`, taking no key
/// from the environment.
fn serve_on(db: &std::path::Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .args([
            "serve",
            "--engine",
            "builtin",
            "--addr",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(db)
        .env_remove("CONVO_SERVE_API_KEYS");
    command
}

/// A runtime for the test's HTTP client.
fn client_runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Runtime::new().unwrap()
}

/// Everything the (stopped) child wrote to stderr.
pub(super) fn stderr_of(child: &mut Child) -> String {
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

#[test]
fn serve_prints_one_line_serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("svc.db");
    let (mut child, base, mut stdout) = started(
        serve_on(&db)
            .args(["--engine-pace-ms", "0"])
            // The client's key (for another deployment) is not a key this service accepts.
            .env("CONVO_API_KEY", CLIENT_KEY)
            .env_remove("CONVO_JWT_SECRET"),
    );
    assert!(base.starts_with("http://127.0.0.1:"));

    let runtime = client_runtime();
    let health = runtime.block_on(async {
        reqwest::get(format!("{base}/healthz"))
            .await
            .unwrap()
            .status()
    });
    assert_eq!(health, 200);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "", "exactly one line on stdout");
    let stderr = stderr_of(&mut child);
    let key_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("service_live_"))
        .collect();
    assert_eq!(
        key_lines.len(),
        1,
        "the generated key is printed once: {stderr}"
    );
    assert!(!stderr.contains(&CLIENT_KEY[13..]), "{stderr}");
    // The WAL was checkpointed on the way out: the database is consistent and complete.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

/// `convo serve` on a SQLite file given no key keeps the one it made beside the database: a
/// restart serves the same account, its sessions with it, and names the key without printing
/// it again. A key file holding no valid key stops the start, naming the file, and is kept.
#[test]
fn a_generated_key_is_kept_beside_the_database_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("svc.db");
    let serve = || {
        let mut command = serve_on(&db);
        command.env_remove("CONVO_API_KEY");
        command
    };
    let stop = |mut child: Child| -> String {
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(child.wait().unwrap().success());
        stderr_of(&mut child)
    };
    let runtime = client_runtime();
    let http = reqwest::Client::new();
    let sessions = |base: &str, key: &str| {
        let request = http
            .get(format!("{base}/v1/sessions"))
            .bearer_auth(key)
            .send();
        runtime.block_on(async {
            request
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        })
    };

    let (child, base, _stdout) = started(&mut serve());
    let send = http
        .post(format!(
            "{base}/v1/sessions/session_keptKeyAcross123/messages"
        ))
        .json(&serde_json::json!({"content": "kept"}));
    // The key as the file keeps it; the first start printed it whole.
    let key_file = dir.path().join("svc.db.key");
    let key = std::fs::read_to_string(&key_file).unwrap();
    let status = runtime.block_on(async { send.bearer_auth(&key).send().await.unwrap().status() });
    assert_eq!(status, 200);
    let stderr = stop(child);
    assert!(
        stderr.contains(&format!(
            "API key (pro, kept in {} for the next starts): {key}",
            key_file.display()
        )),
        "{stderr}"
    );
    // The JWT secret is kept beside it too, named, not printed.
    let secret_file = dir.path().join("svc.db.jwt-secret");
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    assert!(
        stderr.contains(&format!(
            "JWT secret: made and kept in {}",
            secret_file.display()
        )) && !stderr.contains(&secret),
        "{stderr}"
    );
    #[cfg(unix)]
    for file in [&key_file, &secret_file] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let token = convo_service::jwt::mint(&secret, "alice", 600);

    let (child, base, _stdout) = started(&mut serve());
    let listed = sessions(&base, &key);
    assert_eq!(
        listed["sessions"][0]["sessionId"], "session_keptKeyAcross123",
        "{listed}"
    );
    // A wallet token signed before the restart is still good.
    let wallet = http
        .get(format!("{base}/v1/wallets/staker"))
        .bearer_auth(&token)
        .send();
    let status = runtime.block_on(async { wallet.await.unwrap().status() });
    assert_eq!(status, 200);
    let stderr = stop(child);
    assert!(!stderr.contains(&key), "not printed again: {stderr}");
    assert!(
        stderr.contains("API key (pro): the one kept in ")
            && stderr.contains("JWT secret: the one kept in "),
        "{stderr}"
    );

    std::fs::write(&key_file, "oops\n").unwrap();
    let out = serve().output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("svc.db.key holds no valid key"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), "oops\n");

    // A database in a directory that does not exist is refused, and the directory not made.
    let missing = dir.path().join("no-such-dir");
    let out = serve_on(&missing.join("svc.db")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!missing.exists());
}

#[test]
fn serve_takes_repeated_api_keys_with_tiers() {
    let k1 = "service_live_AAAAbbbbCCCCdddd1111";
    let k2 = "service_live_EEEEffffGGGGhhhh2222";
    let (mut child, base, _stdout) = started(
        Command::new(BIN)
            .args([
                "serve",
                "--engine",
                "builtin",
                "--addr",
                "127.0.0.1:0",
                "--db",
                ":memory:",
                "--jwt-secret",
                "s",
            ])
            .args([
                "--api-key",
                &format!("{k1}=free"),
                "--api-key",
                &format!("{k2}=enterprise"),
            ])
            .env_remove("CONVO_SERVE_API_KEYS")
            .env_remove("CONVO_API_KEY"),
    );
    let runtime = client_runtime();
    let tiers: Vec<String> = runtime.block_on(async {
        let http = reqwest::Client::new();
        let mut tiers = Vec::new();
        for key in [k1, k2] {
            let usage: serde_json::Value = http
                .get(format!("{base}/v1/analytics/usage"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            tiers.push(usage["tier"].as_str().unwrap().to_string());
        }
        tiers
    });
    assert_eq!(tiers, ["free", "enterprise"]);
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let stderr = stderr_of(&mut child);
    assert!(
        !stderr.contains("AAAAbbbb") && !stderr.contains("EEEEffff"),
        "keys never printed: {stderr}"
    );
}

#[test]
fn bad_serve_arguments_exit_2_without_echoing_the_key() {
    let out = Command::new(BIN)
        .args([
            "serve",
            "--engine",
            "builtin",
            "--db",
            ":memory:",
            "--api-key",
            "service_live_tooShortKey9",
        ])
        .env_remove("CONVO_SERVE_API_KEYS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("service_live_…Key9"), "{stderr}");
    assert!(!stderr.contains("tooShortKey9"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn token_prints_a_verifiable_jwt() {
    let out = Command::new(BIN)
        .args([
            "token", "--secret", "s3cret", "--sub", "alice", "--ttl", "120",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap();
    let claims = convo_service::jwt::verify("s3cret", token.trim()).unwrap();
    assert_eq!(claims.sub, "alice");
    assert_eq!(claims.exp - claims.iat, 120);
    let out = Command::new(BIN)
        .args([
            "token", "--secret", "s3cret", "--sub", "alice", "--ttl", "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Every request is logged to stderr. Nobody reading it (a full pipe, a paused terminal)
/// must not hold requests, nor the stop: the log is written by a thread of its own. A pipe
/// holds 64 KiB, about 500 of these lines; before, the request that found it full never
/// finished.
#[test]
fn a_stderr_nobody_reads_holds_neither_requests_nor_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base, _stdout) = started(
        serve_on(&dir.path().join("svc.db"))
            .args(["--api-key", "service_live_AAAAbbbbCCCCdddd1111"])
            .env_remove("RUST_LOG"),
    );

    let runtime = client_runtime();
    let answered = runtime.block_on(async {
        let client = reqwest::Client::new();
        let all = async {
            for _ in 0..3_000 {
                let status = client
                    .get(format!("{base}/healthz"))
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert_eq!(status, 200);
            }
        };
        // A guard, not a timing assertion: 3,000 local requests take a few seconds.
        tokio::time::timeout(std::time::Duration::from_secs(120), all).await
    });

    // SIGTERM with stderr still full and unread: the service stops all the same.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let started = std::time::Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break Some(exit);
        }
        // A guard, not a timing assertion.
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let stderr = stderr_of(&mut child);
    assert!(
        answered.is_ok(),
        "requests stalled behind the unread stderr"
    );
    let exit = exit.expect("SIGTERM did not stop the service while its stderr was full");
    assert!(exit.success(), "{exit:?}");
    assert!(
        stderr.contains("/healthz"),
        "{} bytes of stderr",
        stderr.len()
    );
}
