//! Keys never in the TUI's log (issue 6, item 4): the real binary in a pty, pointed by its
//! config file at a service that refuses its key, and its log file read afterwards.

use convo_service::{ServiceConfig, generate_api_key};

use crate::harness::Convo;

#[test]
fn a_refused_key_is_not_written_to_the_tui_log() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let svc = rt
        .block_on(convo_service::start(
            ServiceConfig::ephemeral(0),
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    let wrong = generate_api_key();
    let home = tempfile::tempdir().unwrap();
    let config_dir = home.path().join(".config/convo");
    std::fs::create_dir_all(&config_dir).unwrap();
    let config = config_dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[connection]\nbase_url = \"{}\"\napi_key = \"{wrong}\"\n",
            svc.base_url()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text(&svc.base_url());
    // The usage poll and the stream are refused with 401.
    let screen = convo.wait_text("unauthorized");
    assert!(
        !screen.contains(&wrong[14..]),
        "the key is not shown:\n{screen}"
    );
    assert!(convo.quit());
    let log_path = home.path().join("data/convo.log");
    let log = std::fs::read_to_string(&log_path).expect("the TUI writes its log");
    assert!(!log.contains(&wrong), "the key is in the log:\n{log}");
    assert!(!log.contains(&wrong[14..]), "its secret part is in the log");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&log_path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the log is private");
    }
    drop(rt);
}
