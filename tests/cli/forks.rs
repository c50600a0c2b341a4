//! `convo fork` and `convo undo` from the binary, against the local service started
//! in-process and against a server without the extensions.

use convo_service::{RunningService, ServiceConfig};

use super::fake;
use super::support::{Run, Sandbox};

async fn start() -> RunningService {
    convo_service::start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts")
}

async fn run(s: &Sandbox, svc: &RunningService, args: &[&str]) -> Run {
    let base = svc.base_url();
    s.run_env(
        args,
        &[
            ("CONVO_BASE_URL", base.as_str()),
            ("CONVO_API_KEY", svc.api_key.as_str()),
        ],
    )
    .await
}

/// A session with two exchanges, made with `convo send`; its id.
async fn two_exchanges(s: &Sandbox, svc: &RunningService) -> String {
    let hi = run(s, svc, &["send", "first question"]).await.expect(0);
    let id = hi
        .stderr
        .trim()
        .strip_prefix("new session: ")
        .unwrap()
        .to_string();
    run(s, svc, &["send", "--session", &id, "second question"])
        .await
        .expect(0);
    id
}

#[tokio::test]
async fn fork_by_an_id_prefix_at_the_last_or_a_chosen_message() {
    let svc = start().await;
    let s = Sandbox::new();
    let id = two_exchanges(&s, &svc).await;
    let prefix = &id[..12];

    // Default: at the last message, the whole history.
    let forked = run(&s, &svc, &["fork", prefix, "--json"])
        .await
        .expect(0)
        .json();
    let new_id = forked["sessionId"].as_str().unwrap().to_string();
    assert_ne!(new_id, id);
    assert_eq!(forked["messageCount"], 4);
    assert_eq!(forked["forkedFrom"]["sessionId"], id.as_str());
    // The local store has it (export reads only the store), with its origin.
    let export = run(&s, &svc, &["export", &new_id, "--json"])
        .await
        .expect(0)
        .json();
    assert_eq!(export["messages"].as_array().unwrap().len(), 4, "{export}");
    // The list says which session is the fork (it keeps its source's title).
    let listed = run(&s, &svc, &["sessions", "--json"])
        .await
        .expect(0)
        .json();
    let of = |sid: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["sessionId"] == sid)
            .cloned()
            .unwrap_or_else(|| panic!("{sid} in {listed}"))
    };
    assert_eq!(of(&new_id)["forkedFrom"], id.as_str());
    assert!(of(&id).get("forkedFrom").is_none(), "{listed}");
    let table = run(&s, &svc, &["sessions"]).await.expect(0).stdout;
    let fork_row = table.lines().find(|l| l.contains(&new_id)).unwrap();
    assert!(
        table.contains("forked from") && fork_row.contains(&id),
        "{table}"
    );

    // --at the first message (a user message): one message.
    let at = forked["forkedFrom"]["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listed: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/v1/sessions/{id}/messages", svc.base_url()))
        .bearer_auth(&svc.api_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["messages"][3]["messageId"],
        at.as_str(),
        "the last one"
    );
    let first = listed["messages"][0]["messageId"].as_str().unwrap();
    let text = run(&s, &svc, &["fork", &id, "--at", first]).await.expect(0);
    assert!(
        text.stdout
            .starts_with(&format!("forked {id} at {first} into session_"))
            && text.stdout.contains("(1 message)"),
        "{}",
        text.stdout
    );

    // Errors: an unknown message (exit 1, the service's code), an unknown session, --at "".
    let bad = run(&s, &svc, &["fork", &id, "--at", "msg_nope", "--json"])
        .await
        .expect(1);
    let err: serde_json::Value = serde_json::from_str(bad.stderr.trim()).unwrap();
    assert_eq!(err["error"]["code"], "message_not_found", "{}", bad.stderr);
    let none = run(&s, &svc, &["fork", "session_nothere"]).await.expect(1);
    assert!(
        none.stderr
            .contains("no session `session_nothere` in the local store"),
        "{}",
        none.stderr
    );
    run(&s, &svc, &["fork", &id, "--at", " "]).await.expect(2);
}

#[tokio::test]
async fn undo_removes_the_last_exchange_here_and_on_the_service() {
    let svc = start().await;
    let s = Sandbox::new();
    let id = two_exchanges(&s, &svc).await;

    let undone = run(&s, &svc, &["undo", &id[..14], "--json"])
        .await
        .expect(0)
        .json();
    assert_eq!(undone["sessionId"], id.as_str());
    assert_eq!(undone["removedMessageIds"].as_array().unwrap().len(), 2);
    let export = run(&s, &svc, &["export", &id, "--json"])
        .await
        .expect(0)
        .json();
    let contents: Vec<&str> = export["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents.len(), 2, "{export}");
    assert_eq!(contents[0], "first question");

    let text = run(&s, &svc, &["undo", &id]).await.expect(0);
    assert_eq!(
        text.stdout,
        format!("removed the last exchange of {id} (2 messages)\n")
    );
    let nothing = run(&s, &svc, &["undo", &id]).await.expect(1);
    assert!(
        nothing.stderr.contains("message_not_found"),
        "{}",
        nothing.stderr
    );
}

/// A session another device made (another data dir): its whole id is enough for `fork` and
/// `undo`, though this local store has never heard of it; a start of it is not.
#[tokio::test]
async fn another_devices_session_is_forked_and_undone_by_its_whole_id() {
    let svc = start().await;
    let id = two_exchanges(&Sandbox::new(), &svc).await;
    let s = Sandbox::new();
    let unknown = run(&s, &svc, &["undo", &id[..14]]).await.expect(1);
    assert!(
        unknown.stderr.contains("in the local store"),
        "{}",
        unknown.stderr
    );

    let forked = run(&s, &svc, &["fork", &id, "--json"])
        .await
        .expect(0)
        .json();
    assert_eq!(forked["forkedFrom"]["sessionId"], id.as_str(), "{forked}");
    let undone = run(&s, &svc, &["undo", &id, "--json"])
        .await
        .expect(0)
        .json();
    assert_eq!(undone["sessionId"], id.as_str());
    assert_eq!(undone["removedMessageIds"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_server_without_the_extensions_is_named_and_nothing_is_lost() {
    // A server with the seed's interface only (no list, history, fork or undo): the session
    // is its own, made there with `convo send`.
    let base = fake::start().await;
    let s = Sandbox::new();
    let env = [
        ("CONVO_BASE_URL", base.as_str()),
        ("CONVO_API_KEY", fake::KEY),
    ];
    let sent = s.run_env(&["send", "first question"], &env).await.expect(0);
    let id = sent
        .stderr
        .trim()
        .strip_prefix("new session: ")
        .unwrap()
        .to_string();
    let fork = s.run_env(&["fork", &id], &env).await.expect(1);
    assert!(
        fork.stderr.contains("this server cannot fork sessions"),
        "{}",
        fork.stderr
    );
    let undo = s.run_env(&["undo", &id, "--json"], &env).await.expect(1);
    let err: serde_json::Value = serde_json::from_str(undo.stderr.trim()).unwrap();
    assert_eq!(err["error"]["code"], "unsupported", "{}", undo.stderr);
    // The local transcript is untouched.
    let export = s
        .run_env(&["export", &id, "--json"], &env)
        .await
        .expect(0)
        .json();
    assert_eq!(export["messages"].as_array().unwrap().len(), 2, "{export}");
}

#[tokio::test]
async fn a_session_written_on_another_device_exports_whole() {
    let svc = start().await;
    let laptop = Sandbox::new();
    let id = two_exchanges(&laptop, &svc).await;
    // This device knows the session from the list only: none of its messages.
    let s = Sandbox::new();
    run(&s, &svc, &["sessions"]).await.expect(0);
    // The texts of the session's messages as `convo export --json` writes them here.
    let exported = || async {
        let export = run(&s, &svc, &["export", &id, "--json"])
            .await
            .expect(0)
            .json();
        export["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().to_string())
            .collect::<Vec<String>>()
    };
    let messages = exported().await;
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[2], "second question");
    // The laptop goes on; this device's export follows, without a message twice.
    run(&laptop, &svc, &["send", "--session", &id, "third question"])
        .await
        .expect(0);
    let messages = exported().await;
    assert_eq!(messages.len(), 6, "{messages:?}");
    assert_eq!(messages[4], "third question");
    // With the server gone, the store's copy is exported, and stderr says where it came from.
    let (base, key) = (svc.base_url(), svc.api_key.clone());
    svc.shutdown().await;
    let env = [
        ("CONVO_BASE_URL", base.as_str()),
        ("CONVO_API_KEY", key.as_str()),
    ];
    let offline = s.run_env(&["export", &id], &env).await.expect(0);
    assert!(
        offline.stdout.contains(" · 6 messages · "),
        "{}",
        offline.stdout
    );
    assert!(
        offline.stdout.contains("third question"),
        "{}",
        offline.stdout
    );
    assert!(
        offline
            .stderr
            .contains("from the server, so the export holds what this device's store has"),
        "{}",
        offline.stderr
    );
}
