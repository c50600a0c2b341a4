//! `convo search`: the local store's full-text index, with no server running.

use super::support::Sandbox;
use convo_client::api::Role;
use convo_client::local_store::{Store, StoredMessage};

/// A sandbox whose local store holds two sessions, one of them deleted.
fn seeded() -> (Sandbox, String) {
    let s = Sandbox::new();
    let data = s.home().join("data-dir");
    let store = Store::open(&data.join("convo.db")).unwrap();
    store
        .append_message(
            "session_aaaaaaaaaaaaaaaa",
            &StoredMessage::user(Role::User, "How do **Rust** lifetimes work?"),
        )
        .unwrap();
    let mut reply = StoredMessage::user(
        Role::Assistant,
        "A lifetime names the scope where a reference is valid.",
    );
    reply.message_id = Some("msg_0123456789abcdef".into());
    store
        .append_message("session_aaaaaaaaaaaaaaaa", &reply)
        .unwrap();
    store
        .append_message(
            "session_bbbbbbbbbbbbbbbb",
            &StoredMessage::user(Role::User, "lifetime secrets of a deleted session"),
        )
        .unwrap();
    store.mark_deleted("session_bbbbbbbbbbbbbbbb").unwrap();
    (s, data.to_string_lossy().into_owned())
}

#[tokio::test]
async fn search_lists_hits_for_people_and_as_json() {
    let (s, data) = seeded();
    let env = [("CONVO_DATA_DIR", data.as_str())];

    let json = s
        .run_env(&["search", "lifetime", "--json"], &env)
        .await
        .expect(0);
    let hits = json.json();
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    for hit in hits {
        assert_eq!(hit["sessionId"], "session_aaaaaaaaaaaaaaaa");
        assert_eq!(hit["sessionTitle"], "How do Rust lifetimes work?");
        assert!(hit["createdAt"].as_str().unwrap().contains('T'), "{hit}");
        assert!(
            hit["snippet"].as_str().unwrap().contains("ifetime"),
            "{hit}"
        );
    }
    let reply = hits.iter().find(|h| h["role"] == "assistant").unwrap();
    assert_eq!(reply["messageId"], "msg_0123456789abcdef");
    assert_eq!(
        reply["snippet"],
        "A lifetime names the scope where a reference is valid."
    );
    let question = hits.iter().find(|h| h["role"] == "user").unwrap();
    assert!(question["messageId"].is_null(), "{question}");

    let limited = s
        .run_env(&["search", "lifetime", "--json", "--limit", "1"], &env)
        .await
        .expect(0);
    assert_eq!(limited.json().as_array().unwrap().len(), 1);

    let human = s
        .run_env(&["search", "scope", "valid"], &env)
        .await
        .expect(0);
    assert!(
        human.stdout.starts_with("How do Rust lifetimes work? · ")
            && human
                .stdout
                .contains("assistant · session_aaaaaaaaaaaaaaaa\n")
            && human.stdout.contains("\n    A lifetime names the scope"),
        "{}",
        human.stdout
    );
}

#[tokio::test]
async fn no_match_is_success_and_syntax_is_text() {
    let (s, data) = seeded();
    let env = [("CONVO_DATA_DIR", data.as_str())];
    let none = s.run_env(&["search", "secrets"], &env).await.expect(0);
    assert_eq!(none.stdout, "no matches\n");
    let none = s
        .run_env(&["search", "secrets", "--json"], &env)
        .await
        .expect(0);
    assert_eq!(none.json(), serde_json::json!([]));
    for text in [
        "\"lifetime",
        "lifetime*",
        "NEAR(lifetime",
        "-lifetime",
        "AND",
        "(a OR",
    ] {
        // A word starting with `-` comes after `--`, as in every command line.
        let found = s
            .run_env(&["search", "--json", "--", text], &env)
            .await
            .expect(0);
        assert!(found.json().is_array(), "{text}");
    }
}

#[tokio::test]
async fn bad_input_is_a_usage_error() {
    let (s, data) = seeded();
    let env = [("CONVO_DATA_DIR", data.as_str())];
    let empty = s
        .run_env(&["search", "--json", "* -"], &env)
        .await
        .expect(2);
    let error: serde_json::Value = serde_json::from_str(empty.stderr.trim()).unwrap();
    assert_eq!(error["error"]["code"], "invalid_argument");
    assert!(empty.stdout.is_empty());
    let missing = s.run_env(&["search"], &env).await.expect(2);
    assert!(missing.stderr.contains("TEXT"), "{}", missing.stderr);
    let zero = s
        .run_env(&["search", "x", "--limit", "0", "--json"], &env)
        .await
        .expect(2);
    assert!(zero.stderr.contains("invalid_argument"), "{}", zero.stderr);
}

/// A session written on another device (another data dir) is listed here without its
/// messages: `convo search` says it was not searched, and `--fetch` reads it first.
#[tokio::test]
async fn a_session_written_on_another_device_is_searched_after_fetch() {
    let svc = convo_service::start(
        convo_service::ServiceConfig::ephemeral(1),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("service starts");
    let (base, key) = (svc.base_url(), svc.api_key.clone());
    let env = [
        ("CONVO_BASE_URL", base.as_str()),
        ("CONVO_API_KEY", key.as_str()),
    ];
    let laptop = Sandbox::new();
    laptop
        .run_env(&["send", "the lighthouse keeper's logbook"], &env)
        .await
        .expect(0);
    let phone = Sandbox::new();
    phone.run_env(&["sessions"], &env).await.expect(0);

    let before = phone.run_env(&["search", "logbook"], &env).await.expect(0);
    assert_eq!(before.stdout, "no matches\n");
    assert_eq!(
        before.stderr,
        "convo: warning: 1 session of this server listed here has no messages in the \
         local store (written on another device and not opened here) and was not searched: \
         --fetch reads it from the server first\n"
    );
    let fetched = phone
        .run_env(&["search", "--fetch", "--json", "logbook"], &env)
        .await
        .expect(0);
    let hits = fetched.json();
    // The message, and the builtin engine's reply, which quotes it.
    let roles: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["role"].as_str().unwrap())
        .collect();
    assert!(roles.contains(&"user"), "{hits}");
    assert!(fetched.stderr.is_empty(), "{}", fetched.stderr);
    // Its messages stay here: found again without fetching, and nothing is left unsearched.
    svc.shutdown().await;
    let again = phone.run_env(&["search", "logbook"], &env).await.expect(0);
    assert!(
        again
            .stdout
            .starts_with("the lighthouse keeper's logbook · "),
        "{}",
        again.stdout
    );
    assert!(again.stderr.is_empty(), "{}", again.stderr);
}
