//! Copying a reply (`copy_reply`) or one code block of it (`copy_code`): with one block it is
//! copied at once; with several the transcript numbers them and a number chooses (the
//! dialogs' code choice), OSC 52 either way.

use super::{App, Command, Level};
use crate::dialogs::CodeChoice;
use crate::render::transcript::EntryId;

impl App {
    /// `copy_reply`: the selected message, else the last reply, to the clipboard.
    pub(super) fn copy_reply(&mut self, out: &mut Vec<Command>) {
        let target = self.transcript.copy_target();
        let (Some(open), Some(idx)) = (self.transcript.session(), target) else {
            self.notify(Level::Warn, "nothing to copy yet");
            return;
        };
        let content = open.content(idx).to_string();
        let n = content.chars().count();
        out.push(Command::CopyToClipboard(content));
        self.notify(
            Level::Info,
            format!("sent {n} characters to the terminal's clipboard {DELIVERY_UNKNOWN}"),
        );
    }

    /// `copy_code`: copies the message's only code block, or asks which one.
    pub(super) fn copy_code(&mut self, out: &mut Vec<Command>) {
        let target = self.transcript.copy_target();
        let (Some(open), Some(idx)) = (self.transcript.session(), target) else {
            self.notify(Level::Warn, "nothing to copy yet");
            return;
        };
        let entry = open.items[idx].entry;
        let blocks = open.transcript.code_blocks(entry);
        match blocks.len() {
            0 => self.notify(Level::Info, "this reply has no code blocks"),
            1 => self.copy_block(&blocks, 1, out),
            count => {
                let session_id = open.id.clone();
                self.dialogs.choose_code(CodeChoice {
                    session_id,
                    entry,
                    count,
                    typed: String::new(),
                });
                let area = self.transcript_area();
                self.transcript.reveal_code_blocks(entry, area);
            }
        }
    }

    /// The code choice in progress, if it is of the open session.
    pub fn code_choice(&self) -> Option<&CodeChoice> {
        self.dialogs.code_choice(self.open_id())
    }

    /// Copies block `n` (from 1) of `entry`, chosen by number.
    pub(super) fn copy_block_of(&mut self, entry: EntryId, n: usize, out: &mut Vec<Command>) {
        let blocks = self
            .transcript
            .session()
            .map(|o| o.transcript.code_blocks(entry))
            .unwrap_or_default();
        self.copy_block(&blocks, n, out);
    }

    fn copy_block(&mut self, blocks: &[String], n: usize, out: &mut Vec<Command>) {
        let Some(code) = n.checked_sub(1).and_then(|i| blocks.get(i)) else {
            self.notify(Level::Warn, format!("there is no code block {n}"));
            return;
        };
        let lines = code.split('\n').count();
        out.push(Command::CopyToClipboard(code.clone()));
        self.notify(
            Level::Info,
            format!(
                "sent code block {n} ({}) to the clipboard {DELIVERY_UNKNOWN}",
                convo_client::format::counted(lines as u64, "line")
            ),
        );
    }
}

/// What a copy says of its delivery: the terminal (or tmux) takes OSC 52 without an answer,
/// and may drop it (tmux's default `set-clipboard external` does, outside its passthrough).
pub const DELIVERY_UNKNOWN: &str = "(OSC 52; delivery cannot be confirmed)";

/// The bytes that put `text` on the clipboard: OSC 52, and inside tmux (`$TMUX` set) wrapped
/// in tmux's passthrough (`ESC P tmux; … ESC \`, each ESC of the sequence doubled), which
/// tmux hands to the outer terminal when `allow-passthrough` is on. (The terminal loop first
/// tries `tmux load-buffer -w -`, which works whatever that option says.)
pub fn clipboard_sequence(text: &str, in_tmux: bool) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(text);
    let osc = format!("\x1b]52;c;{b64}\x07");
    if in_tmux {
        format!("\x1bPtmux;{}\x1b\\", osc.replace('\x1b', "\x1b\x1b"))
    } else {
        osc
    }
}

#[cfg(test)]
mod tests {
    use super::clipboard_sequence;

    #[test]
    fn osc52_is_wrapped_for_tmux_with_its_escapes_doubled() {
        assert_eq!(clipboard_sequence("hi", false), "\x1b]52;c;aGk=\x07");
        assert_eq!(
            clipboard_sequence("hi", true),
            "\x1bPtmux;\x1b\x1b]52;c;aGk=\x07\x1b\\"
        );
    }
}
