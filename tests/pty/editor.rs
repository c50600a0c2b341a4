//! Ctrl-g: the draft edited in `$EDITOR`, a scripted editor in place of a person.

use std::path::{Path, PathBuf};

use super::harness::{Convo, keys};

/// Writes an executable `#!/bin/sh` script and returns its path.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn ctrl_g_edits_the_draft_in_the_editor_and_keeps_it_unsent() {
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("editor.log");
    // The editor notes the file it got and its mode, edits it, and reads one line typed on
    // the keyboard: the TUI must have let go of the terminal for that line to reach it.
    let editor = script(
        home.path(),
        "editor.sh",
        &format!(
            "echo \"$1 $(ls -l \"$1\" | cut -c1-10)\" > '{log}'\n\
             edited=$(sed 's/typed/edited/' \"$1\")\n\
             printf '%s\\n' \"$edited\" > \"$1\"\n\
             printf 'editor waiting: '\n\
             IFS= read -r line\n\
             printf '%s\\n' \"$line\" >> \"$1\"\n",
            log = log.display()
        ),
    );
    let mut convo = Convo::start_with_env(home.path(), 100, 30, &[("EDITOR", editor.as_os_str())]);
    convo.wait_text("● builtin (no model)");
    convo.type_text("typed draft");
    convo.wait_text("typed draft");
    convo.send(keys::CTRL_G);
    convo.wait_text("editor waiting:");
    convo.type_text("a line from the keyboard");
    convo.send(keys::ENTER);
    let screen = convo.wait_for("the edited draft in the composer", |s| {
        s.contains("edited draft") && s.contains("a line from the keyboard")
    });
    assert!(
        screen.contains("A new session."),
        "back on the TUI, nothing sent: {screen}"
    );
    assert!(!screen.contains("you ·"), "nothing was sent: {screen}");
    assert!(convo.restored().alternate_screen, "the TUI is back");
    // The draft file was private and is gone.
    let noted = std::fs::read_to_string(&log).unwrap();
    let (path, mode) = noted.trim().rsplit_once(' ').unwrap();
    assert_eq!(mode, "-rw-------", "{noted}");
    assert!(path.ends_with(".md"), "{noted}");
    assert!(
        Path::new(path).starts_with(home.path().join("data")),
        "{noted}"
    );
    assert!(!Path::new(path).exists(), "the draft file is removed");
    // Typing goes on at the end of the edited text.
    convo.type_text(" and more");
    convo.wait_text("a line from the keyboard and more");
    // It is the session's draft: it is there after a restart.
    assert!(convo.quit(), "convo exits 0");
    let convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("edited draft");
    convo.wait_text("a line from the keyboard and more");
}

#[test]
fn a_failing_editor_keeps_the_draft_and_says_why() {
    let home = tempfile::tempdir().unwrap();
    let editor = script(home.path(), "broken-editor", "echo broken >&2\nexit 3\n");
    let mut convo = Convo::start_with_env(home.path(), 100, 30, &[("EDITOR", editor.as_os_str())]);
    convo.wait_text("● builtin (no model)");
    convo.type_text("my precious draft");
    convo.wait_text("my precious draft");
    convo.send(keys::CTRL_G);
    let screen = convo.wait_text("exited with status 3: draft unchanged");
    assert!(screen.contains("my precious draft"), "{screen}");
    assert!(!screen.contains("you ·"), "nothing was sent: {screen}");
    // The keys work again: Esc clears the message, typing goes on.
    convo.send(b"\x1b");
    convo.wait_for("the message cleared", |s| !s.contains("exited with status"));
    convo.type_text("!");
    convo.wait_text("my precious draft!");
    assert!(convo.quit(), "convo exits 0");
}
