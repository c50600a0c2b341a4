//! The draft edited in `$VISUAL`/`$EDITOR`: asking for the editor, and taking back what it
//! saved (`tui::editor` runs it).

use super::{App, Command, Focus, Level};
use crate::editor::EditorOutcome;

impl App {
    /// `edit_in_editor`: the loop hands the terminal to the editor on the composer's text.
    pub(super) fn open_editor(&mut self, out: &mut Vec<Command>) {
        self.focus = Focus::Composer;
        self.sessions_pane.stop_filtering();
        out.push(Command::EditInEditor {
            draft: self.composer_text(),
        });
    }

    /// The editor closed: what it saved replaces the draft (not sent; the cursor at its end,
    /// saved in the store at once, Ctrl-Z twice brings the old text back). A failure says why and
    /// leaves the draft as it was; so does text saved unchanged.
    pub(super) fn on_editor_closed(&mut self, outcome: EditorOutcome, out: &mut Vec<Command>) {
        match outcome {
            EditorOutcome::Failed(why) => self.notify(Level::Error, why),
            EditorOutcome::Saved(text) => {
                if text == self.composer_text() {
                    return;
                }
                // Replacing a selection of everything keeps the old text in the undo history.
                self.composer.replace_undoably(&text);
                self.composer.set_send_error(None);
                self.save_draft(out);
            }
        }
    }
}
