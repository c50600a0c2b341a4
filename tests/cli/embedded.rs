//! The one-shot commands that change sessions (`send`, `fork`, `undo`, `delete`) with no base
//! URL configured: they run on the embedded service of the data dir, started for the command
//! as the TUI starts it and stopped after it (docs/client.md, "With no server configured").

use std::sync::Mutex;

use convo_tui::embedded::{self, RunningService};

use super::support::Sandbox;

#[tokio::test]
async fn with_no_base_url_the_session_commands_run_on_the_embedded_service() {
    let s = Sandbox::new();
    let sent = s.run(&["send", "hello there", "--json"]).await.expect(0);
    let reply = sent.json();
    assert_eq!(reply["role"], "assistant", "{reply}");
    assert!(!reply["content"].as_str().unwrap().is_empty(), "{reply}");
    let id = reply["sessionId"].as_str().unwrap().to_string();
    // No model in this data dir: the builtin engine answers, and stderr says why.
    assert!(
        sent.stderr.contains("No language model is installed"),
        "{}",
        sent.stderr
    );

    // The session outlives the command: the next one goes on with it, streamed.
    let again = s
        .run(&["send", "--session", &id, "--stream", "and again"])
        .await
        .expect(0);
    assert!(!again.stdout.trim().is_empty(), "{}", again.stderr);
    let listed = s.run(&["sessions", "--json"]).await.expect(0).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["sessionId"], id.as_str());
    // The local account's usage, as `convo usage` reads it, counts them.
    let usage = s.run(&["usage", "--json"]).await.expect(0).json();
    assert_eq!(usage["sessions"]["active"], 1, "{usage}");
    assert!(usage["tokens"]["used"].as_u64().unwrap() > 0, "{usage}");

    let fork = s.run(&["fork", &id, "--json"]).await.expect(0).json();
    assert_eq!(fork["messageCount"], 4, "{fork}");
    let undone = s.run(&["undo", &id]).await.expect(0);
    assert!(undone.stdout.contains("2 messages"), "{}", undone.stdout);
    let export = s.run(&["export", &id]).await.expect(0);
    assert!(export.stdout.contains("hello there"), "{}", export.stdout);
    assert!(!export.stdout.contains("and again"), "{}", export.stdout);
    s.run(&["delete", &id]).await.expect(0);
    let gone = s
        .run(&["delete", &id, "--json"])
        .await
        .expect(1)
        .error_json();
    assert_eq!(gone["code"], "session_not_found", "{gone}");
}

#[tokio::test]
async fn an_engine_the_embedded_service_cannot_have_is_a_config_error() {
    let s = Sandbox::new();
    let file = s.default_config_file();
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "[engine]\nkind = \"local\"\n").unwrap();
    let failed = s.run(&["send", "hi", "--json"]).await.expect(2);
    let err = failed.error_json();
    assert_eq!(err["code"], "config", "{err}");
    // The engine's problem, not a missing server.
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("model"), "{err}");
    assert!(!message.contains("base URL"), "{err}");
    // Nothing was sent, so the store has no session.
    let listed = s.run(&["sessions", "--json"]).await.expect(0).json();
    assert_eq!(listed, serde_json::json!([]));
}

/// With a TUI running on the data dir, the commands use its embedded service (which shows
/// what they do as it happens) instead of starting a second one on the same database; when it
/// stops, or its address file is stale, they start their own again.
#[tokio::test]
async fn with_a_tui_running_the_commands_use_its_service() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = Sandbox::new();
    let data = s.home().join("convo-data");
    let dir = data.to_str().unwrap();
    let env = [("CONVO_DATA_DIR", dir)];
    let own_service = "No language model is installed";

    // The embedded service as the TUI starts it (the builtin engine: no hint of its own).
    let slot: Mutex<Option<RunningService>> = Mutex::new(None);
    let (base, _key) = super::usage::start_embedded(&data, &slot).await;
    let advertised = data.join(embedded::ADDRESS_FILE);
    assert_eq!(
        format!("http://{}", std::fs::read_to_string(&advertised).unwrap()),
        base
    );
    let sent = s.run_env(&["send", "hi", "--json"], &env).await.expect(0);
    assert!(!sent.stderr.contains(own_service), "{}", sent.stderr);
    let reply = sent.json();
    let id = reply["sessionId"].as_str().unwrap().to_string();
    // `convo cancel` reaches it too (here a reply that has ended: nothing to stop).
    let cancel = s
        .run_env(&["cancel", &id, reply["messageId"].as_str().unwrap()], &env)
        .await
        .expect(0);
    assert!(
        cancel.stdout.contains("had already ended"),
        "{}",
        cancel.stdout
    );

    // The TUI ends: its file goes, and the next command starts a service of its own.
    let service = slot.lock().unwrap().take().unwrap();
    embedded::withdraw();
    service.shutdown().await;
    assert!(!advertised.exists());
    // No TUI: no service a reply could be running in for `convo cancel` to reach.
    let cancel = s.run_env(&["cancel", &id], &env).await.expect(2);
    assert!(
        cancel.stderr.contains("no convo TUI runs"),
        "{}",
        cancel.stderr
    );
    let alone = s
        .run_env(&["send", "--session", &id, "again"], &env)
        .await
        .expect(0);
    assert!(alone.stderr.contains(own_service), "{}", alone.stderr);

    // A file a TUI that crashed left behind names an address nothing answers on: ignored.
    let (_refusing, dead) = crate::refused::refused_addr();
    std::fs::write(&advertised, dead.to_string()).unwrap();
    let stale = s
        .run_env(&["send", "--session", &id, "once more"], &env)
        .await
        .expect(0);
    assert!(stale.stderr.contains(own_service), "{}", stale.stderr);
}
