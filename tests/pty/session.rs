//! A user's session with the real binary on the embedded service.

use super::harness::{Convo, contains, keys};

#[test]
fn type_a_message_and_see_the_streamed_reply() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    convo.type_text("hello from the pty");
    convo.send(keys::ENTER);
    convo.wait_text("you ·");
    // The reply comes from the builtin engine; its header shows the tokens once complete.
    let screen = convo.wait_for("a complete reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    assert!(screen.contains("hello from the pty"), "{screen}");
    // The usage gauges moved: at least the requests of this run are counted.
    convo.wait_for("usage numbers", |s| {
        s.contains("req ") && !s.contains("req ─────────── 0/")
    });
    // Tab twice to the transcript, `y` copies the last reply with OSC 52.
    convo.send(keys::TAB);
    convo.send(keys::TAB);
    convo.wait_text("y copy");
    convo.send(b"y");
    convo.wait_text("to the terminal's clipboard (OSC 52;");
    assert!(
        contains(&convo.output(), b"\x1b]52;c;"),
        "an OSC 52 sequence was written"
    );
    assert!(convo.quit(), "convo exits 0");
}

#[test]
fn inside_tmux_a_copy_that_tmux_does_not_take_goes_through_its_passthrough() {
    let home = tempfile::tempdir().unwrap();
    // A tmux session that does not exist: `tmux load-buffer` fails (or tmux is not installed).
    let tmux = std::ffi::OsStr::new("/nonexistent/tmux-socket,1,0");
    let mut convo = Convo::start_with_env(home.path(), 100, 30, &[("TMUX", tmux)]);
    convo.wait_text("● builtin (no model)");
    convo.type_text("copy me");
    convo.send(keys::ENTER);
    convo.wait_for("a complete reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    convo.send(keys::TAB);
    convo.send(keys::TAB);
    convo.wait_text("y copy");
    convo.send(b"y");
    convo.wait_text("delivery cannot be");
    assert!(
        contains(&convo.output(), b"\x1bPtmux;\x1b\x1b]52;c;"),
        "OSC 52 wrapped in tmux's passthrough"
    );
    assert!(convo.quit(), "convo exits 0");
}

#[test]
fn a_bad_key_binding_is_refused_with_the_field_named() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "[keys]\nnew_session = \"<Ctrl-Nope>\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .env_clear()
        .env("HOME", home.path())
        .env("CONVO_CONFIG", &config)
        .env("CONVO_DATA_DIR", home.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("keys.new_session") && stderr.contains("Nope"),
        "{stderr}"
    );
}

#[test]
fn two_commands_on_one_key_are_refused_naming_both() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "[keys]\nsend = \"<Ctrl-n>\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .env_clear()
        .env("HOME", home.path())
        .env("CONVO_CONFIG", &config)
        .env("CONVO_DATA_DIR", home.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("keys.send") && stderr.contains("keys.new_session"),
        "{stderr}"
    );
}

#[test]
fn a_second_convo_on_the_same_data_dir_says_one_is_running() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("CONVO_DATA_DIR", home.path().join("data"))
        .env("TERM", "xterm-256color")
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another convo is already running") && stderr.contains("pid"),
        "{stderr}"
    );
    // The first one goes on as before.
    assert!(convo.quit(), "convo exits 0");
}

#[test]
fn delete_a_session_with_the_keyboard() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    convo.type_text("first session message");
    convo.send(keys::ENTER);
    convo.wait_for("the first reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    convo.send(keys::CTRL_N);
    convo.wait_text("A new session.");
    convo.type_text("second session message");
    convo.send(keys::ENTER);
    convo.wait_for("the second reply", |s| {
        s.contains("second session message")
            && s.lines()
                .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    // Sessions pane, down to the older session, delete, confirm.
    convo.send(keys::TAB);
    convo.send(keys::DOWN);
    convo.send(keys::DELETE);
    convo.wait_text("Delete session?");
    let screen = convo.wait_text("first session message");
    assert!(
        screen.contains("Delete “first session message”"),
        "{screen}"
    );
    convo.send(b"y");
    convo.wait_for("the session to go", |s| {
        s.contains("deleted") && !s.contains("Delete session?")
    });
    // Only the notice still names it; the list has the other session alone.
    let screen = convo.wait_for("the list without it", |s| {
        s.matches("first session mess").count() == 1
    });
    assert!(
        screen.contains("deleted “first session message”"),
        "{screen}"
    );
    let listed = screen
        .lines()
        .filter(|l| l.contains("just now ·") || l.contains(" ago ·"))
        .count();
    assert_eq!(listed, 1, "one session left:\n{screen}");
    assert!(screen.contains("second session message"), "{screen}");
    convo.send(b"q");
    assert!(convo.wait_exit());
}

#[test]
fn quitting_restores_the_terminal_and_keeps_the_draft() {
    let home = tempfile::tempdir().unwrap();
    {
        let mut convo = Convo::start(home.path(), 80, 24);
        convo.wait_text("/ 10000");
        convo.type_text("an unsent draft");
        convo.wait_text("an unsent draft");
        assert!(convo.quit());
        let restored = convo.restored();
        assert!(!restored.alternate_screen, "{restored:?}");
        assert!(!restored.cursor_hidden, "{restored:?}");
        assert!(!restored.mouse_captured, "{restored:?}");
        assert!(!restored.bracketed_paste, "{restored:?}");
        assert!(restored.left_alternate_screen, "{restored:?}");
    }
    // Everything typed is still there after starting again.
    let mut convo = Convo::start(home.path(), 80, 24);
    convo.wait_text("an unsent draft");
    assert!(convo.quit());
    let log = std::fs::read_to_string(home.path().join("data/convo.log")).unwrap_or_default();
    assert!(!log.contains("service_live_"), "no key in the log");
}

#[test]
fn a_signal_from_outside_quits_as_ctrl_c_does() {
    for signal in ["TERM", "HUP", "INT"] {
        let home = tempfile::tempdir().unwrap();
        let draft = format!("typed before SIG{signal}");
        {
            let mut convo = Convo::start(home.path(), 80, 24);
            convo.wait_text("/ 10000");
            convo.type_text(&draft);
            convo.wait_text(&draft);
            // At once, before the typing pauses long enough for the draft to be saved.
            convo.signal(signal);
            assert!(convo.wait_exit(), "SIG{signal}: a clean exit");
            let restored = convo.restored();
            assert!(!restored.alternate_screen, "SIG{signal}: {restored:?}");
            assert!(!restored.mouse_captured, "SIG{signal}: {restored:?}");
            assert!(restored.left_alternate_screen, "SIG{signal}: {restored:?}");
        }
        let mut convo = Convo::start(home.path(), 80, 24);
        convo.wait_text(&draft);
        assert!(convo.quit());
    }
}

#[test]
fn the_layout_follows_a_resize() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 80, 24);
    convo.wait_text("● builtin (no model)");
    // Narrow: usage is a band at the top.
    let screen = convo.wait_text("req ");
    assert!(!screen.contains("Usage"), "{screen}");
    convo.resize(200, 60);
    // Wide: usage gets its own column, and the status bar moves to the last row.
    let screen = convo.wait_for("the wide layout", |s| {
        s.contains("Usage")
            && s.lines()
                .nth(59)
                .is_some_and(|l| l.contains("builtin (no model)"))
    });
    assert!(screen.lines().count() >= 60, "{screen}");
    convo.resize(80, 24);
    convo.wait_for("the narrow layout again", |s| {
        !s.contains("Usage")
            && s.lines()
                .nth(23)
                .is_some_and(|l| l.contains("builtin (no model)"))
    });
    assert!(convo.quit());
}

#[test]
fn a_draft_survives_kill_9_once_the_edits_pause() {
    let home = tempfile::tempdir().unwrap();
    {
        let mut convo = Convo::start(home.path(), 80, 24);
        convo.wait_text("/ 10000");
        convo.type_text("typed, then the power went");
        convo.wait_text("typed, then the power went");
        // Wait for the debounced save to reach the store (read from outside, as the
        // restarted app will), then kill without any chance to save on the way out.
        let store =
            convo_client::local_store::Store::open(&home.path().join("data/convo.db")).unwrap();
        let start = std::time::Instant::now();
        loop {
            let saved = store
                .last_open_session()
                .unwrap()
                .and_then(|id| store.draft(&id).unwrap());
            if saved.as_deref() == Some("typed, then the power went") {
                break;
            }
            assert!(
                start.elapsed() < super::harness::GUARD,
                "the draft never reached the store: {saved:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        convo.kill_9();
    }
    let mut convo = Convo::start(home.path(), 80, 24);
    convo.wait_text("typed, then the power went");
    assert!(convo.quit());
}

/// With a model installed, the TUI answers with it: the status bar names it and the reply
/// is the model's (the local engine's tests run it in `tests/service/local_model.rs`).
#[test]
#[cfg(feature = "local-model")]
fn with_a_model_installed_the_local_model_answers() {
    let model = std::env::var_os("CONVO_TEST_MODEL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            convo_client::config::default_data_dir()
                .expect("a data dir")
                .join("models/SmolLM2-135M-Instruct.gguf")
        });
    assert!(
        model.is_file(),
        "{} is missing: run scripts/fetch-model.sh",
        model.display()
    );
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("data/models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(&model, models.join("SmolLM2-135M-Instruct.gguf")).unwrap();
    // Greedy sampling: the same reply every run (with a fresh seed per reply, the small model
    // sometimes leaves Paris out).
    let config = home.path().join("greedy.toml");
    std::fs::write(&config, "[engine]\ntemperature = 0.0\n").unwrap();
    let mut convo = Convo::start_with_env(
        home.path(),
        100,
        30,
        &[("CONVO_CONFIG", config.as_os_str())],
    );
    convo.wait_text("● local · SmolLM2-135M-Instruct");
    convo.type_text("What is the capital of France?");
    convo.send(keys::ENTER);
    let screen = convo.wait_for("the model's reply", |s| {
        s.contains("Paris")
            && s.lines()
                .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    assert!(
        !screen.contains("No language model is installed"),
        "{screen}"
    );
    assert!(convo.quit(), "convo exits 0");
}

#[test]
fn title_and_export_a_session_from_the_composer() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    convo.type_text("a question worth keeping");
    convo.send(keys::ENTER);
    convo.wait_for("a complete reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    convo.type_text("/title Pty export test");
    convo.send(keys::ENTER);
    let screen = convo.wait_text("title set: “Pty export test”");
    assert!(
        screen.lines().any(|l| l.contains("● Pty export test")),
        "the list shows the new title:\n{screen}"
    );
    // The TUI runs in `home`: the file goes there, named after the title.
    convo.type_text("/export");
    convo.send(keys::ENTER);
    convo.wait_text("exported 2 messages to ./pty-export-test.md");
    let md = std::fs::read_to_string(home.path().join("pty-export-test.md")).unwrap();
    assert!(md.starts_with("# Pty export test\n"), "{md}");
    assert!(
        md.contains("## user · ") && md.contains("a question worth keeping"),
        "{md}"
    );
    assert!(md.contains("## assistant · "), "{md}");
    // A second export never replaces the first.
    convo.type_text("/export");
    convo.send(keys::ENTER);
    convo.wait_text("exported 2 messages to ./pty-export-test-2.md");
    assert!(home.path().join("pty-export-test-2.md").exists());
    // A path of one's own, relative to the current directory.
    convo.type_text("/export kept.md");
    convo.send(keys::ENTER);
    convo.wait_text("exported 2 messages to ./kept.md");
    assert_eq!(
        std::fs::read_to_string(home.path().join("kept.md")).unwrap(),
        md
    );
    assert!(convo.quit(), "convo exits 0");
}
