//! Composing in `$VISUAL`/`$EDITOR` (the `edit_in_editor` key): which editor, the private
//! file the draft is written to, running the editor, and what its exit and file say. The loop
//! that owns the terminal (`tui::run`) hands the terminal over around [`run`] and gives the
//! [`EditorOutcome`] to the app, which puts the text in the composer.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// The editor used when neither `VISUAL` nor `EDITOR` is set.
pub const FALLBACK_EDITOR: &str = "vi";

/// What editing the draft gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditorOutcome {
    /// The text the editor saved, ready for the composer (one trailing newline taken off).
    Saved(String),
    /// Why the draft stays as it was (`editor vi exited with status 1: draft unchanged`).
    Failed(String),
}

/// The editor command: `VISUAL`, else `EDITOR`, else `vi`; empty values do not count. It
/// may hold arguments (`code --wait`): the shell runs it ([`command`]).
pub fn choose(visual: Option<String>, editor: Option<String>) -> String {
    [visual, editor]
        .into_iter()
        .flatten()
        .map(|e| e.trim().to_string())
        .find(|e| !e.is_empty())
        .unwrap_or_else(|| FALLBACK_EDITOR.to_string())
}

/// The editor of this process's environment.
pub fn from_env() -> String {
    choose(std::env::var("VISUAL").ok(), std::env::var("EDITOR").ok())
}

/// A draft written for the editor: `draft-<pid>-<random>.md` in `dir`, mode 0600, removed
/// when dropped.
#[derive(Debug)]
pub struct DraftFile {
    path: PathBuf,
}

impl DraftFile {
    /// Writes `draft` to a new private file in `dir`. A draft that is not empty ends with a
    /// newline in the file, as editors write text files, so that saving it untouched gives
    /// back the same draft ([`from_editor`] takes one newline off).
    pub fn create(dir: &Path, draft: &str) -> std::io::Result<DraftFile> {
        use std::io::Write;
        std::fs::create_dir_all(dir)?;
        let mut attempts = 0;
        loop {
            let path = dir.join(format!(
                "draft-{}-{:08x}.md",
                std::process::id(),
                rand::random::<u32>()
            ));
            match convo_client::private_file::options()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    // From here on the file is removed however this ends.
                    let draft_file = DraftFile { path };
                    file.write_all(draft.as_bytes())?;
                    if !draft.is_empty() && !draft.ends_with('\n') {
                        file.write_all(b"\n")?;
                    }
                    file.flush()?;
                    return Ok(draft_file);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 8 => {
                    attempts += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the editor left in the file, as composer text; or why it cannot be used.
    pub fn read_back(&self) -> Result<String, String> {
        let bytes = std::fs::read(&self.path)
            .map_err(|e| format!("cannot read the edited draft: {e}: draft unchanged"))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| "the edited draft is not UTF-8 text: draft unchanged".to_string())?;
        Ok(from_editor(&text))
    }
}

impl Drop for DraftFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the draft file");
        }
    }
}

/// A saved file as composer text: one trailing newline (which editors add) taken off, line
/// ends as `\n`, and no control characters but tabs (an escape sequence typed in the editor
/// would otherwise reach the terminal when the composer is drawn).
pub fn from_editor(saved: &str) -> String {
    let text = saved
        .strip_suffix("\r\n")
        .or_else(|| saved.strip_suffix('\n'))
        .unwrap_or(saved);
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

/// The editor's name for messages: its command without control characters.
pub fn display_name(editor: &str) -> String {
    editor.chars().filter(|c| !c.is_control()).collect()
}

/// The process that edits `file` with `editor`: on Unix the shell runs `editor "$1"`, so a
/// command with arguments or quotes works as it does for git; elsewhere the command is split
/// on whitespace.
pub fn command(editor: &str, file: &Path) -> tokio::process::Command {
    #[cfg(unix)]
    {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{editor} \"$@\""))
            .arg(editor)
            .arg(file);
        cmd
    }
    #[cfg(not(unix))]
    {
        let mut words = editor.split_whitespace();
        let mut cmd = tokio::process::Command::new(words.next().unwrap_or(FALLBACK_EDITOR));
        cmd.args(words).arg(file);
        cmd
    }
}

/// Runs the editor on `file` with the terminal (which the caller handed over) and waits for
/// it. An interrupt (Ctrl-C in an editor that leaves it to the terminal) reaches `convo` too;
/// the TUI takes those signals itself (`tui::signals`) and drops the ones typed meanwhile.
pub async fn run(editor: &str, file: &Path) -> std::io::Result<ExitStatus> {
    command(editor, file).status().await
}

/// Why an editor that ended with `status` leaves the draft unchanged; `None` when it
/// succeeded.
pub fn failure(editor: &str, status: ExitStatus) -> Option<String> {
    if status.success() {
        return None;
    }
    let name = display_name(editor);
    Some(match status.code() {
        // The shell's codes for a command it could not find or run.
        #[cfg(unix)]
        Some(127) => format!("editor {name} not found (set VISUAL or EDITOR): draft unchanged"),
        #[cfg(unix)]
        Some(126) => format!("editor {name} cannot be run: draft unchanged"),
        Some(code) => format!("editor {name} exited with status {code}: draft unchanged"),
        None => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                match status.signal() {
                    Some(sig) => {
                        format!("editor {name} was killed by signal {sig}: draft unchanged")
                    }
                    None => format!("editor {name} failed: draft unchanged"),
                }
            }
            #[cfg(not(unix))]
            {
                format!("editor {name} failed: draft unchanged")
            }
        }
    })
}

/// The outcome of an editor run: what it saved, or why the draft stays.
pub fn outcome(editor: &str, run: std::io::Result<ExitStatus>, file: &DraftFile) -> EditorOutcome {
    let status = match run {
        Ok(status) => status,
        Err(e) => {
            return EditorOutcome::Failed(format!(
                "cannot start editor {}: {e}: draft unchanged",
                display_name(editor)
            ));
        }
    };
    if let Some(why) = failure(editor, status) {
        return EditorOutcome::Failed(why);
    }
    match file.read_back() {
        Ok(text) => EditorOutcome::Saved(text),
        Err(why) => EditorOutcome::Failed(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visual_wins_over_editor_and_vi_is_the_fallback() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(choose(s("code --wait"), s("nano")), "code --wait");
        assert_eq!(choose(None, s("emacs -nw")), "emacs -nw");
        assert_eq!(choose(s("  "), s("nano")), "nano");
        assert_eq!(choose(s(""), s("")), "vi");
        assert_eq!(choose(None, None), "vi");
    }

    #[test]
    fn one_trailing_newline_goes_and_controls_are_dropped() {
        assert_eq!(from_editor("hello\n"), "hello");
        assert_eq!(from_editor("hello\n\n"), "hello\n");
        assert_eq!(from_editor("a\r\nb\r\n"), "a\nb");
        assert_eq!(from_editor("no newline"), "no newline");
        assert_eq!(
            from_editor("tab\there\x1b[31m red\x07"),
            "tab\there[31m red"
        );
        assert_eq!(from_editor(""), "");
    }

    #[cfg(unix)]
    #[test]
    fn the_draft_file_is_private_ends_in_a_newline_and_is_removed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = DraftFile::create(dir.path(), "first line\nsecond").unwrap();
        let path = file.path().to_path_buf();
        assert!(path.extension().is_some_and(|e| e == "md"), "{path:?}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "first line\nsecond\n"
        );
        // Saved untouched, it gives back the same draft.
        assert_eq!(file.read_back().unwrap(), "first line\nsecond");
        drop(file);
        assert!(!path.exists());
        let empty = DraftFile::create(dir.path(), "").unwrap();
        assert_eq!(std::fs::read_to_string(empty.path()).unwrap(), "");
        assert_eq!(empty.read_back().unwrap(), "");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn an_editor_with_arguments_runs_and_failures_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let file = DraftFile::create(dir.path(), "draft").unwrap();
        // A command with arguments and quotes, as `code --wait` is.
        let editor = "printf '%s\\n' 'edited text' >";
        let status = run(editor, file.path()).await;
        assert_eq!(
            outcome(editor, status, &file),
            EditorOutcome::Saved("edited text".into())
        );
        let status = run("exit 3;", file.path()).await;
        assert_eq!(
            outcome("exit 3;", status, &file),
            EditorOutcome::Failed("editor exit 3; exited with status 3: draft unchanged".into())
        );
        let missing = "convo-no-such-editor-anywhere";
        let status = run(missing, file.path()).await;
        match outcome(missing, status, &file) {
            EditorOutcome::Failed(why) => assert!(
                why.starts_with("editor convo-no-such-editor-anywhere not found"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        // An editor that removes the file: the draft stays, and says why.
        let status = run("rm", file.path()).await;
        match outcome("rm", status, &file) {
            EditorOutcome::Failed(why) => {
                assert!(why.starts_with("cannot read the edited draft"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }
}
