//! What the composer's slash commands do to the app ([`SlashCommand`] parses them).

use serde_json::Value;

use super::{App, Command, Level, StoreOp};
use crate::dialogs::Overlay;
use crate::slash::SlashCommand;
use convo_client::api::Role;

/// `/meta` with JSON that is not an object.
const META_NEEDS_OBJECT: &str = "/meta needs a JSON object, like /meta {\"topic\":\"rust\"}";

impl App {
    /// Enter in the composer: a slash command or a message.
    pub(super) fn submit(&mut self, out: &mut Vec<Command>) {
        let text = self.composer_text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        match SlashCommand::parse(trimmed) {
            Some(Ok(cmd)) => self.run_slash(cmd, out),
            Some(Err(name)) => self.notify(Level::Error, SlashCommand::unknown(&name)),
            None => {
                let text = match trimmed.strip_prefix("//") {
                    Some(rest) => format!("/{rest}"),
                    None => trimmed.to_string(),
                };
                let role = self.composer.role();
                self.send(text, role, out);
            }
        }
    }

    fn run_slash(&mut self, cmd: SlashCommand, out: &mut Vec<Command>) {
        match cmd {
            SlashCommand::New(draft) => {
                self.composer.clear();
                self.new_session(draft, out);
            }
            SlashCommand::Delete => {
                // The text stays in the composer until the dialog is confirmed.
                if let Some(open) = self.transcript.session() {
                    let title = self
                        .sessions_pane
                        .get(&open.id)
                        .map_or_else(|| open.id.clone(), |s| s.title.clone());
                    self.dialogs.open(Overlay::ConfirmDelete {
                        session_id: open.id.clone(),
                        title,
                        from_composer: true,
                    });
                }
            }
            SlashCommand::System(text) if text.is_empty() => {
                self.notify(Level::Warn, "usage: /system TEXT")
            }
            SlashCommand::System(text) => self.send(text, Role::System, out),
            SlashCommand::Meta(json) if json.is_empty() => {
                self.composer.set_metadata(None);
                self.composer.clear();
                self.notify(Level::Info, "metadata cleared");
            }
            SlashCommand::Meta(json) => match serde_json::from_str::<Value>(&json) {
                Ok(v @ Value::Object(_)) => {
                    self.composer.set_metadata(Some(v));
                    self.composer.clear();
                    self.notify(Level::Info, "metadata set for the next message");
                }
                Ok(_) => self.notify(Level::Error, META_NEEDS_OBJECT),
                Err(e) => self.notify(Level::Error, format!("/meta: invalid JSON: {e}")),
            },
            SlashCommand::Help => {
                self.composer.clear();
                self.dialogs.help();
            }
            SlashCommand::Metrics => {
                self.composer.clear();
                self.open_metrics(out);
            }
            SlashCommand::Kept => {
                self.composer.clear();
                self.open_kept(out);
            }
            SlashCommand::Wallet(id) => {
                self.composer.clear();
                self.open_wallet(id.as_deref(), out);
            }
            SlashCommand::Quit => {
                self.composer.clear();
                self.quit(out);
            }
            SlashCommand::Retry => self.retry(out),
            SlashCommand::Title(text) => {
                let Some(session_id) = self.open_id().map(str::to_string) else {
                    return self.notify(Level::Warn, "/title: no session is open");
                };
                self.composer.clear();
                // The store cleans the text and answers with the title as kept
                // (`AppEvent::TitleChanged`).
                let title = convo_client::local_store::user_title(&text);
                out.push(Command::Persist(StoreOp::SetTitle { session_id, title }));
            }
            SlashCommand::Export(path) => {
                let Some(session_id) = self.open_id().map(str::to_string) else {
                    return self.notify(Level::Warn, "/export: no session is open");
                };
                self.composer.clear();
                out.push(Command::Export { session_id, path });
            }
            SlashCommand::Undo => self.undo(out),
            SlashCommand::Continue => {
                if self.open_id().is_none() {
                    return self.notify(Level::Warn, "/continue: no session is open");
                }
                // The command stays in the composer until the prompt is sent (`send` clears
                // it): while a reply is coming it waits for it, queued like a message.
                let prompt = crate::transcript_pane::reply_marks::CONTINUE_PROMPT;
                self.send(prompt.to_string(), Role::User, out);
            }
            SlashCommand::Search(text) if text.is_empty() => {
                self.notify(Level::Warn, "usage: /search TEXT")
            }
            SlashCommand::Search(text) => {
                self.composer.clear();
                let done = self.transcript.open_hits(text);
                self.on_transcript(done, None, out);
            }
        }
    }
}
