//! Two devices on one service: two `convo` TUIs (two data dirs) against one `convo serve`
//! (started in-process), each in its own pseudo-terminal. A session made on one shows in the
//! other's sessions pane through the account stream, with no request from the other.

use std::ffi::OsStr;

use convo_service::ServiceConfig;

use super::harness::{Convo, keys};

#[test]
fn a_session_made_on_one_device_shows_on_the_other() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let service = runtime
        .block_on(convo_service::start(
            ServiceConfig::ephemeral(0),
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    let base = service.base_url().to_string();
    let env = [
        ("CONVO_BASE_URL", OsStr::new(&base)),
        ("CONVO_API_KEY", OsStr::new(&service.api_key)),
    ];
    let (home_one, home_two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut one = Convo::start_with_env(home_one.path(), 100, 30, &env);
    let mut two = Convo::start_with_env(home_two.path(), 100, 30, &env);
    // Both connected, their new session open (its stream live), the usage shown.
    for convo in [&one, &two] {
        convo.wait_for("ready", |s| s.contains("● live") && s.contains("/50k"));
    }
    one.type_text("lisbon trip");
    one.send(keys::ENTER);
    one.wait_text("you ·");
    let screen = two.wait_text("lisbon trip");
    assert!(
        !screen.contains("you ·"),
        "only the list changed on the other device: {screen}"
    );
    one.send(keys::CTRL_C);
    two.send(keys::CTRL_C);
    assert!(one.wait_exit());
    assert!(two.wait_exit());
    runtime.block_on(service.shutdown());
}
