//! `convo export`, `convo title`, `convo completions` and `convo man` end to end: the local
//! store filled through the library, the binary run with no server at all.

use convo_client::api::Role;
use convo_client::local_store::{MessageStatus, Store, StoredMessage};

use super::support::{Run, Sandbox};

const A: &str = "session_k1zbxTbfvBIJHLxy";

/// A sandbox whose store holds session A: a question, a reply whose code fence was never
/// closed (cut short), and a last message that failed. The configured server is dead.
fn sandbox() -> Sandbox {
    let s = Sandbox::new();
    let store = Store::open(&s.home().join("data").join("convo.db")).unwrap();
    store
        .append_message(A, &StoredMessage::user(Role::User, "Show me a loop"))
        .unwrap();
    let mut reply = StoredMessage::user(Role::Assistant, "Here:\n\n```rust\nloop {\n    tick();");
    reply.message_id = Some("msg_1".into());
    reply.status = MessageStatus::Interrupted;
    store.append_message(A, &reply).unwrap();
    store
        .append_message(
            A,
            &StoredMessage::user(Role::User, "and a while?").with_status(MessageStatus::Failed),
        )
        .unwrap();
    s
}

async fn run(s: &Sandbox, args: &[&str]) -> Run {
    let data = s.home().join("data");
    s.run_env(
        args,
        // No server configured: the sessions are the embedded service's (the store was filled
        // through `Store::open`), and export and title read the local store only.
        &[("CONVO_DATA_DIR", data.to_str().unwrap())],
    )
    .await
}

#[tokio::test]
async fn export_prints_markdown_with_a_heading_per_message() {
    let s = sandbox();
    let out = run(&s, &["export", A]).await.expect(0);
    let md = out.stdout;
    assert!(
        md.starts_with("# Show me a loop\n\nSession `session_k1zbxTbfvBIJHLxy` · started "),
        "{md}"
    );
    assert!(md.contains(" · 3 messages · "), "{md}");
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(headings.len(), 3, "{md}");
    assert!(
        headings[0].starts_with("## user · ") && headings[0].ends_with(" tokens"),
        "{md}"
    );
    assert!(
        headings[1].starts_with("## assistant · ") && headings[1].ends_with(" · interrupted"),
        "{md}"
    );
    assert!(headings[2].ends_with(" · failed"), "{md}");
    // The fence the reply left open is closed before the next heading.
    assert!(
        md.contains("```rust\nloop {\n    tick();\n```\n\n## user"),
        "{md}"
    );
    // A start of the id, or the title, names the session too.
    assert_eq!(run(&s, &["export", "k1zb"]).await.expect(0).stdout, md);
    assert_eq!(
        run(&s, &["export", "show me a LOOP"])
            .await
            .expect(0)
            .stdout,
        md
    );
}

#[tokio::test]
async fn export_as_json_lists_the_messages_with_their_fields() {
    let s = sandbox();
    let out = run(&s, &["export", A, "--format", "json"]).await.expect(0);
    let v = out.json();
    assert_eq!(v["sessionId"], A);
    assert_eq!(v["title"], "Show me a loop");
    assert_eq!(v["titleSet"], false);
    let messages = v["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["messageId"], serde_json::Value::Null);
    assert!(messages[0]["tokens"].as_u64().unwrap() > 0);
    assert_eq!(messages[1]["messageId"], "msg_1");
    assert_eq!(messages[1]["status"], "interrupted");
    assert_eq!(
        messages[1]["content"],
        "Here:\n\n```rust\nloop {\n    tick();"
    );
    assert_eq!(messages[2]["status"], "failed");
    assert!(messages[2]["createdAt"].as_str().unwrap().ends_with('Z'));
    let short = run(&s, &["export", A, "--json"]).await.expect(0);
    assert_eq!(short.json(), v);
}

#[tokio::test]
async fn export_to_a_file_is_private_and_never_replaces_one_without_force() {
    let s = sandbox();
    let file = s.home().join("loop.md");
    let path = file.to_str().unwrap();
    let out = run(&s, &["export", A, "-o", path]).await.expect(0);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr
            .contains(&format!("exported 3 messages to {path}")),
        "{}",
        out.stderr
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.starts_with("# Show me a loop\n"), "{written}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    std::fs::write(&file, "mine").unwrap();
    let refused = run(&s, &["export", A, "-o", path]).await.expect(2);
    assert!(
        refused.stderr.contains("already exists") && refused.stderr.contains("--force"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let refused = run(&s, &["export", A, "--json", "-o", path])
        .await
        .expect(2);
    assert_eq!(refused.error_json()["code"], "file_exists");
    // -o names a file, not a directory.
    let home = s.home().to_str().unwrap().to_string();
    let out = run(&s, &["export", A, "-o", &home, "--force"])
        .await
        .expect(2);
    assert!(out.stderr.contains("is a directory"), "{}", out.stderr);

    run(
        &s,
        &["export", A, "--format", "json", "-o", path, "--force"],
    )
    .await
    .expect(0);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["sessionId"], A);
    // Nothing else was left in the directory (the temporary file was renamed).
    let strays: Vec<_> = std::fs::read_dir(s.home())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
}

#[tokio::test]
async fn export_of_an_unknown_session_is_session_not_found() {
    let s = sandbox();
    let out = run(&s, &["export", "session_AAAAAAAAAAAAAAAA"])
        .await
        .expect(1);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr
            .contains("no session `session_AAAAAAAAAAAAAAAA` in the local store")
            && out.stderr.contains("convo sessions"),
        "{}",
        out.stderr
    );
    let out = run(&s, &["export", "nothing-like-it", "--json"])
        .await
        .expect(1);
    let e = out.error_json();
    assert_eq!(e["code"], "session_not_found", "{e}");
    // A deleted session is gone from the store: it says so.
    Store::open(&s.home().join("data").join("convo.db"))
        .unwrap()
        .mark_deleted(A)
        .unwrap();
    let out = run(&s, &["export", A, "--format", "json"]).await.expect(1);
    let e = out.error_json();
    assert_eq!(e["code"], "session_not_found");
    assert!(
        e["message"].as_str().unwrap().contains("was deleted"),
        "{e}"
    );
    // A bad format is a usage error.
    let out = run(&s, &["export", A, "--format", "pdf", "--json"])
        .await
        .expect(2);
    assert_eq!(out.error_json()["code"], "invalid_argument");
}

#[tokio::test]
async fn title_renames_a_session_in_the_list_and_the_export() {
    let s = sandbox();
    let out = run(&s, &["title", A, "Loops", "in", "Rust"])
        .await
        .expect(0);
    assert!(out.stdout.contains("“Loops in Rust”"), "{}", out.stdout);
    let listed = run(&s, &["sessions", "--json"]).await.expect(0).json();
    assert_eq!(listed[0]["title"], "Loops in Rust");
    let md = run(&s, &["export", A]).await.expect(0).stdout;
    assert!(md.starts_with("# Loops in Rust\n"), "{md}");
    // And the new title finds the session.
    run(&s, &["export", "loops in rust"]).await.expect(0);
    let cleared = run(&s, &["title", A, "--json"]).await.expect(0).json();
    assert_eq!(
        cleared,
        serde_json::json!({"sessionId": A, "title": "Show me a loop", "titleSet": false})
    );
    let out = run(&s, &["title", "session_AAAAAAAAAAAAAAAA", "x"])
        .await
        .expect(1);
    assert!(out.stderr.contains("no session"), "{}", out.stderr);
}

#[tokio::test]
async fn completions_for_every_shell_name_the_subcommands() {
    let s = Sandbox::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = s.run(&["completions", shell]).await.expect(0);
        for word in ["export", "sessions", "completions", "--format"] {
            assert!(
                out.stdout.contains(word),
                "{shell}: no {word} in\n{}",
                out.stdout
            );
        }
    }
    let out = s.run(&["completions", "tcsh"]).await.expect(2);
    assert!(out.stderr.contains("tcsh"), "{}", out.stderr);
}

#[tokio::test]
async fn man_prints_the_page_or_writes_one_per_command() {
    let s = Sandbox::new();
    let page = s.run(&["man"]).await.expect(0).stdout;
    // roff: after the string definitions that clap_mangen puts first, the title line.
    let first_macro = page
        .lines()
        .find(|l| !l.starts_with(".ie") && !l.starts_with(".el"));
    assert!(
        first_macro.is_some_and(|l| l.starts_with(".TH convo 1")),
        "{}",
        &page[..page.len().min(300)]
    );
    assert!(page.contains(".SH SUBCOMMANDS"), "no subcommands section");
    for word in ["convo", "export", "completions", "sessions"] {
        assert!(page.contains(word), "no {word} in the page");
    }
    let dir = s.home().join("man");
    let out = s.run(&["man", "-o", dir.to_str().unwrap()]).await.expect(0);
    assert!(out.stdout.contains("convo.1"), "{}", out.stdout);
    let main = std::fs::read_to_string(dir.join("convo.1")).unwrap();
    assert!(main.contains("\n.TH convo 1"));
    let export = std::fs::read_to_string(dir.join("convo-export.1")).unwrap();
    assert!(
        export.contains("\\-\\-force") || export.contains("--force"),
        "{export}"
    );
}

/// The TUI keeps a session nothing was sent to yet (its new session, for its draft): no server
/// has it, and `convo sessions` leaves it out, with or without `--all-targets`.
#[tokio::test]
async fn a_session_nothing_was_sent_to_is_not_listed() {
    let s = sandbox();
    let store = Store::open(&s.home().join("data").join("convo.db")).unwrap();
    const NEW: &str = "session_NEWNEWNEWNEWNEWN";
    store.upsert_session(NEW, chrono::Utc::now()).unwrap();
    store.save_draft(NEW, "half a thought").unwrap();
    for args in [
        &["sessions", "--json"][..],
        &["sessions", "--all-targets", "--json"],
    ] {
        let listed = run(&s, args).await.expect(0).json();
        let ids: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["sessionId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [A], "{args:?}");
    }
    // Still in the store, its draft kept.
    assert_eq!(store.draft(NEW).unwrap().as_deref(), Some("half a thought"));
}
