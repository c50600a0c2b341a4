//! The subcommands end to end against the fake service: output for people and for `jq`,
//! exit codes, errors on stderr, and the local store.

use super::fake::{self, KEY, WALLET_TOKEN};
use super::support::Sandbox;
use crate::refused::refused_addr;

fn env(base: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CONVO_BASE_URL", base.to_string()),
        ("CONVO_API_KEY", KEY.to_string()),
    ]
}

async fn run(s: &Sandbox, args: &[&str], env: &[(&'static str, String)]) -> super::support::Run {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    s.run_env(args, &env).await
}

#[tokio::test]
async fn send_sessions_and_delete_twice() {
    let base = fake::start().await;
    let e = env(&base);
    let s = Sandbox::new();

    let sent = run(&s, &["send", "hi there\nsecond line"], &e)
        .await
        .expect(0);
    assert_eq!(sent.stdout, "echo (user): hi there\nsecond line\n");
    let id = sent
        .stderr
        .trim()
        .strip_prefix("new session: ")
        .unwrap_or_else(|| panic!("{}", sent.stderr))
        .to_string();
    assert!(convo_client::api::is_valid_session_id(&id), "{id}");

    // A second message to the same session, as a system message with metadata, as JSON.
    let again = run(
        &s,
        &[
            "send",
            "--session",
            &id,
            "--role",
            "system",
            "--metadata",
            r#"{"tag":"x"}"#,
            "--json",
            "be brief",
        ],
        &e,
    )
    .await
    .expect(0);
    let m = again.json();
    assert_eq!(m["sessionId"], id.as_str());
    assert_eq!(m["role"], "assistant");
    assert_eq!(m["content"], r#"echo (system): be brief {"tag":"x"}"#);
    assert!(
        m.get("extra").is_none(),
        "unknown fields are not passed through"
    );
    assert!(again.stderr.is_empty(), "{}", again.stderr);

    // The configured server's sessions (the fake lists none: from the local store).
    let listed = run(&s, &["sessions", "--json"], &e).await.expect(0);
    let list = listed.json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["sessionId"], id.as_str());
    assert_eq!(list[0]["title"], "hi there");
    assert!(list[0]["tokens"].as_u64().unwrap() >= 8, "{list}");
    let table = run(&s, &["sessions"], &e).await.expect(0);
    assert!(
        table.stdout.contains(&id) && table.stdout.contains("hi there"),
        "{}",
        table.stdout
    );

    let deleted = run(&s, &["delete", &id], &e).await.expect(0);
    assert_eq!(deleted.stdout, format!("deleted {id}\n"));
    let twice = run(&s, &["delete", &id], &e).await.expect(1);
    assert_eq!(twice.stderr, "convo: session_not_found: no such session\n");
    assert!(twice.stdout.is_empty());

    let listed = run(&s, &["sessions", "--json"], &e).await.expect(0);
    assert_eq!(listed.json(), serde_json::json!([]));

    // Sending to the deleted session: the local store knows it is gone, exit 1.
    let gone = run(&s, &["send", "--session", &id, "anyone?"], &e)
        .await
        .expect(1);
    assert!(
        gone.stderr
            .starts_with(&format!("convo: session {id} was deleted: ")),
        "{}",
        gone.stderr
    );
    // With --new the service is asked, and says so.
    let gone = run(&s, &["send", "--new", "--session", &id, "anyone?"], &e)
        .await
        .expect(1);
    assert_eq!(
        gone.stderr,
        "convo: session_not_found: session was deleted\n"
    );
}

#[tokio::test]
async fn send_reads_stdin_and_streams_by_falling_back() {
    let base = fake::start().await;
    let e = env(&base);
    let env: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let s = Sandbox::new();
    let run = s
        .run_stdin(
            &[
                "send",
                "--stream",
                "--new",
                "--session",
                "session_AAAAAAAAAAAAAAAA",
            ],
            &env,
            "from stdin\n",
        )
        .await
        .expect(0);
    assert_eq!(run.stdout, "echo (user): from stdin\n");
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let json = s
        .run_stdin(
            &[
                "send",
                "--stream",
                "--json",
                "--session",
                "session_AAAAAAAAAAAAAAAA",
            ],
            &env,
            "again",
        )
        .await
        .expect(0);
    assert_eq!(json.json()["content"], "echo (user): again");
}

#[tokio::test]
async fn typed_errors_exit_1_with_the_code_on_stderr() {
    let base = fake::start().await;
    let s = Sandbox::new();
    let overflow = run(&s, &["send", "overflow"], &env(&base)).await.expect(1);
    assert!(
        overflow.stderr.ends_with(
            "convo: context_overflow: enable compression or clear history (9001/8192 tokens)\n"
        ),
        "{}",
        overflow.stderr
    );
    let bad_key = [
        ("CONVO_BASE_URL", base.clone()),
        ("CONVO_API_KEY", "service_live_wrong".to_string()),
    ];
    let unauthorized = run(&s, &["usage"], &bad_key).await.expect(1);
    assert_eq!(
        unauthorized.stderr,
        "convo: unauthorized: unknown API key (check CONVO_API_KEY / --api-key)\n"
    );
    let e = env(&base);
    let unknown = run(&s, &["wallet", "wal_nope", "--token", WALLET_TOKEN], &e)
        .await
        .expect(1);
    assert_eq!(unknown.stderr, "convo: wallet_not_found: no such wallet\n");
    let no_token = run(&s, &["wallet", "wal_main"], &e).await.expect(2);
    assert!(
        no_token.stderr.contains("no wallet token"),
        "{}",
        no_token.stderr
    );
}

#[tokio::test]
async fn usage_metrics_and_wallet_print_tables_and_json() {
    let base = fake::start().await;
    let e = env(&base);
    let s = Sandbox::new();

    let usage = run(&s, &["usage"], &e).await.expect(0);
    assert!(usage.stdout.contains("tier: pro"), "{}", usage.stdout);
    assert!(
        usage.stdout.contains("1,234") && usage.stdout.contains("50,000"),
        "{}",
        usage.stdout
    );
    assert!(usage.stdout.contains("2.5 %"), "{}", usage.stdout);
    let usage = run(&s, &["usage", "--json"], &e).await.expect(0).json();
    assert_eq!(usage["requests"]["limit"], 50000);

    let metrics = run(
        &s,
        &[
            "metrics",
            "--start",
            "2026-11-01",
            "--end",
            "2026-11-08T12:00:00Z",
            "--granularity",
            "week",
            "--json",
        ],
        &e,
    )
    .await
    .expect(0)
    .json();
    assert_eq!(metrics["period"]["start"], "2026-11-01T00:00:00Z");
    assert_eq!(metrics["period"]["end"], "2026-11-08T12:00:00Z");
    assert_eq!(metrics["period"]["granularity"], "week");
    let table = run(&s, &["metrics"], &e).await.expect(0);
    assert!(
        table.stdout.contains("average session duration"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("42.5 s") && table.stdout.contains("1,200"),
        "{}",
        table.stdout
    );

    let mut with_token = e.clone();
    with_token.push(("CONVO_WALLET_TOKEN", WALLET_TOKEN.to_string()));
    let wallet = run(&s, &["wallet", "wal_main"], &with_token)
        .await
        .expect(0);
    let out = &wallet.stdout;
    assert!(
        out.contains("Treasury") && out.contains("USDC") && out.contains("Mad Lads"),
        "{out}"
    );
    assert!(out.contains("150.50"), "USD total: {out}");
    assert!(
        !out.contains('\u{1b}'),
        "escape sequences from the server are stripped: {out:?}"
    );
    let json = run(&s, &["wallet", "wal_main", "--json"], &with_token)
        .await
        .expect(0)
        .json();
    assert_eq!(json["balance"], 12.5);
    assert_eq!(json["nfts"][0]["floorPrice"], 80.0);
}

#[tokio::test]
async fn bad_input_is_a_usage_error() {
    let base = fake::start().await;
    let e = env(&base);
    let s = Sandbox::new();
    let cases: &[(&[&str], &str)] = &[
        (
            &["send", "--metadata", "[1]", "x"],
            "--metadata must be a JSON object",
        ),
        (
            &["send", "--metadata", "{oops", "x"],
            "--metadata is not valid JSON",
        ),
        (
            &["send", "--session", "session_short", "x"],
            "is not a session id",
        ),
        (&["send", "   "], "the message is empty"),
        (
            &["metrics", "--start", "2026-12-01", "--end", "2026-11-01"],
            "is after --end",
        ),
        (&["metrics", "--start", "yesterday"], "is not a date"),
        (
            &["metrics", "--granularity", "fortnight"],
            "unknown granularity",
        ),
        (
            &["send", "--role", "assistant", "x"],
            "invalid value 'assistant'",
        ),
    ];
    for (args, want) in cases {
        let run = run(&s, args, &e).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
    let long = "x".repeat(10_001);
    let run2 = run(&s, &["send", &long], &e).await.expect(2);
    assert!(run2.stderr.contains("10001 characters"), "{}", run2.stderr);
    let none = s
        .run_stdin(&["send"], &[("CONVO_BASE_URL", base.as_str())], "")
        .await
        .expect(2);
    assert!(
        none.stderr.contains("the message is empty"),
        "{}",
        none.stderr
    );
}

#[tokio::test]
async fn without_a_server_commands_say_what_to_do() {
    let s = Sandbox::new();
    // (`convo usage` and `convo metrics` read the embedded service's data instead, and
    // `send`, `fork`, `undo` and `delete` run on it: tests/cli/usage.rs, tests/cli/embedded.rs.)
    let cancel = s
        .run(&["cancel", "session_abcdefgh12345678"])
        .await
        .expect(2);
    assert!(
        cancel
            .stderr
            .starts_with("convo: no base URL configured, and no convo TUI runs"),
        "{}",
        cancel.stderr
    );
    for args in [&["wallet", "w"][..], &["accounts"]] {
        let run = s.run(args).await.expect(2);
        assert_eq!(
            run.stderr,
            "convo: no base URL configured: start `convo serve` and set CONVO_BASE_URL, or use the TUI which embeds the service\n",
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn a_dead_server_is_exit_3_in_one_line() {
    let (_refusing, addr) = refused_addr();
    let base = format!("http://{addr}");
    let s = Sandbox::new();
    for args in [
        &["send", "hi"][..],
        &["send", "--stream", "hi"],
        &["usage"],
        &["delete", "session_abcdefgh12345678"],
    ] {
        let run = run(
            &s,
            args,
            &[
                ("CONVO_BASE_URL", base.clone()),
                ("CONVO_API_KEY", KEY.into()),
            ],
        )
        .await;
        assert_eq!(run.code, 3, "{args:?}: {}", run.stderr);
        let err: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| !l.starts_with("new session: "))
            .collect();
        assert_eq!(err.len(), 1, "{args:?}: {}", run.stderr);
        assert!(
            err[0].starts_with("convo: network error: cannot connect to http://127.0.0.1:"),
            "{}",
            err[0]
        );
        assert!(!run.stderr.contains("panicked") && !run.stderr.contains("backtrace"));
    }
    // A failed first message does not leave a session behind, on any target.
    let listed = s
        .run(&["sessions", "--json", "--all-targets"])
        .await
        .expect(0);
    assert_eq!(listed.json(), serde_json::json!([]));
}

#[tokio::test]
async fn a_key_is_not_sent_over_plain_http_to_another_host() {
    let s = Sandbox::new();
    let env = [
        ("CONVO_BASE_URL", "http://192.0.2.1:8080".to_string()),
        ("CONVO_API_KEY", KEY.to_string()),
    ];
    let run = run(&s, &["usage"], &env).await.expect(2);
    assert_eq!(
        run.stderr,
        "convo: refusing to send the API key over plain http:// to 192.0.2.1; use https://, a loopback address, or --allow-insecure\n"
    );
}

#[tokio::test]
async fn with_json_errors_are_one_json_object_on_stderr() {
    let base = fake::start().await;
    let e = env(&base);
    let s = Sandbox::new();

    // From the service: its code and message, and the figures it sent.
    let gone = run(&s, &["delete", "--json", "session_abcdefgh12345678"], &e)
        .await
        .expect(1);
    assert_eq!(
        gone.error_json(),
        serde_json::json!({"code": "session_not_found", "message": "no such session"})
    );
    let bad_key = [
        ("CONVO_BASE_URL", base.clone()),
        ("CONVO_API_KEY", "service_live_wrong".to_string()),
    ];
    let refused = run(&s, &["usage", "--json"], &bad_key).await.expect(1);
    assert_eq!(
        refused.error_json(),
        serde_json::json!({"code": "unauthorized",
            "message": "unknown API key (check CONVO_API_KEY / --api-key)"})
    );
    let overflow = run(&s, &["send", "--json", "overflow"], &e).await.expect(1);
    let err = overflow.error_json();
    assert_eq!(err["code"], "context_overflow");
    assert_eq!(
        (err["currentTokens"].as_u64(), err["maxTokens"].as_u64()),
        (Some(9001), Some(8192))
    );
    let quota = run(&s, &["send", "--json", "--stream", "quota"], &e)
        .await
        .expect(1);
    let err = quota.error_json();
    assert_eq!(err["code"], "quota_exceeded");
    assert_eq!(err["limit"], "requests");
    assert_eq!(err["resetAt"], "2026-12-01T00:00:00Z");
    assert_eq!(err["retryAfter"], 864000);
    let unknown = run(
        &s,
        &["wallet", "--json", "wal_nope", "--token", WALLET_TOKEN],
        &e,
    )
    .await
    .expect(1);
    assert_eq!(
        unknown.error_json(),
        serde_json::json!({"code": "wallet_not_found", "message": "no such wallet", "status": 404})
    );

    // On this side: stable codes, the exit codes of old.
    let (_refusing, addr) = refused_addr();
    let dead = vec![
        ("CONVO_BASE_URL", format!("http://{addr}")),
        ("CONVO_API_KEY", KEY.to_string()),
    ];
    for args in [
        &["usage", "--json"][..],
        &["send", "--json", "hi"],
        &["send", "--json", "--stream", "hi"],
        &["delete", "--json", "session_abcdefgh12345678"],
        &["metrics", "--json", "--series", "--granularity", "day"],
    ] {
        let failed = run(&s, args, &dead).await;
        assert_eq!(failed.code, 3, "{args:?}: {}", failed.stderr);
        let err = if args.contains(&"--series") {
            // The series prints what it has (every bucket failed) on stdout first.
            let line = failed.stderr.trim_end();
            assert_eq!(failed.stderr.lines().count(), 1, "{}", failed.stderr);
            serde_json::from_str::<serde_json::Value>(line).unwrap()["error"].clone()
        } else {
            failed.error_json()
        };
        assert_eq!(err["code"], "network", "{args:?}: {err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("cannot connect to http://127.0.0.1:"),
            "{args:?}: {err}"
        );
    }
    /// Arguments, environment, the code, part of the message.
    type Case<'a> = (
        &'a [&'a str],
        &'a [(&'static str, String)],
        &'a str,
        &'a str,
    );
    let cases: &[Case] = &[
        (
            &["send", "--json", "--session", "bad", "x"],
            &e,
            "invalid_argument",
            "is not a session id",
        ),
        (
            &["send", "--json", "   "],
            &e,
            "invalid_argument",
            "the message is empty",
        ),
        (
            &[
                "metrics",
                "--json",
                "--start",
                "2026-12-01",
                "--end",
                "2026-11-01",
            ],
            &e,
            "invalid_argument",
            "is after --end",
        ),
        // Clap's own usage errors too, once --json is among the arguments.
        (
            &["metrics", "--json", "--start", "yesterday"],
            &e,
            "invalid_argument",
            "is not a date",
        ),
        (
            &["usage", "--json", "--bogus"],
            &e,
            "invalid_argument",
            "unexpected argument '--bogus'",
        ),
        // A message on several lines keeps them all (here, the argument that is missing).
        (
            &["send", "--json", "--new", "x"],
            &e,
            "invalid_argument",
            "the following required arguments were not provided: --session <SESSION_ID>",
        ),
        (
            &["cancel", "--json", "session_abcdefgh12345678"],
            &[],
            "config",
            "no base URL configured",
        ),
    ];
    for (args, env, code, message) in cases {
        let failed = run(&s, args, env).await.expect(2);
        let err = failed.error_json();
        assert_eq!(err["code"], *code, "{args:?}: {err}");
        assert!(
            err["message"].as_str().unwrap().contains(message),
            "{args:?}: {err}"
        );
    }
    // Without --json, clap's message is as clap prints it.
    let plain = run(&s, &["usage", "--bogus"], &e).await.expect(2);
    assert!(
        plain
            .stderr
            .starts_with("error: unexpected argument '--bogus'"),
        "{}",
        plain.stderr
    );
}

#[cfg(unix)]
#[tokio::test]
async fn with_json_warnings_are_json_too() {
    use std::os::unix::fs::PermissionsExt;
    let base = fake::start().await;
    let s = Sandbox::new();
    // A config file holding a key, readable by others: a warning.
    let file = s.home().join("convo.toml");
    std::fs::write(
        &file,
        format!("[connection]\nbase_url = \"{base}\"\napi_key = \"{KEY}\"\n"),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = file.to_str().unwrap();

    // A success: the warning as a JSON line of its own; no `new session:` line.
    let ok = s
        .run(&["--config", config, "send", "--json", "hi"])
        .await
        .expect(0);
    assert_eq!(ok.json()["role"], "assistant");
    let lines: Vec<serde_json::Value> = ok
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 1, "{}", ok.stderr);
    assert!(
        lines[0]["warning"]["message"]
            .as_str()
            .unwrap()
            .contains("chmod 600"),
        "{}",
        ok.stderr
    );

    // A failure: one object, the warning inside it.
    let failed = s
        .run(&[
            "--config",
            config,
            "delete",
            "--json",
            "session_abcdefgh12345678",
        ])
        .await
        .expect(1);
    let err = failed.error_json();
    assert_eq!(err["code"], "session_not_found");
    assert!(
        err["warnings"][0].as_str().unwrap().contains("chmod 600"),
        "{err}"
    );

    // Without --json, as before: text lines.
    let plain = s.run(&["--config", config, "usage"]).await.expect(0);
    assert!(
        plain.stderr.starts_with("convo: warning: "),
        "{}",
        plain.stderr
    );
}

/// A send whose reply takes longer than `request_timeout_ms` waits for it (up to
/// `reply_timeout_ms`, ten minutes by default): a local model may write for minutes.
#[tokio::test]
async fn a_send_waits_for_a_slow_reply_longer_than_for_other_requests() {
    let base = fake::start().await;
    let e = env(&base);
    let s = Sandbox::new();
    let config = |reply_ms: u128| {
        let path = s.home().join(format!("reply-{reply_ms}.toml"));
        std::fs::write(
            &path,
            format!(
                "[connection]\nrequest_timeout_ms = {}\nreply_timeout_ms = {reply_ms}\nmax_retries = 0\n",
                fake::SLOW_REPLY.as_millis() / 4
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    };
    let patient = config(fake::SLOW_REPLY.as_millis() * 10);
    let sent = run(&s, &["--config", &patient, "send", "slow"], &e)
        .await
        .expect(0);
    assert_eq!(sent.stdout, "echo (user): slow\n");
    // The other requests keep the short timeout; a reply timeout shorter than the reply
    // gives up as before.
    let hasty = config(fake::SLOW_REPLY.as_millis() / 4);
    let late = run(&s, &["--config", &hasty, "send", "slow"], &e)
        .await
        .expect(convo_wire::exit::NETWORK_ERROR.into());
    assert!(
        late.stderr.contains("did not answer in time"),
        "{}",
        late.stderr
    );
}
