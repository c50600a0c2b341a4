//! The composer's slash commands.

use super::*;

impl App {
    /// Enter in the composer: a slash command or a message.
    pub(super) fn submit(&mut self, out: &mut Vec<Command>) {
        let text = self.composer_text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        if let Some(cmd) = trimmed.strip_prefix('/').filter(|c| !c.starts_with('/')) {
            let (name, arg) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
            let arg = arg.trim();
            match name {
                "new" => {
                    self.composer = new_composer();
                    self.new_session(arg.to_string(), out);
                }
                "delete" => {
                    // The text stays in the composer until the dialog is confirmed.
                    if let Some(open) = &self.open {
                        let title = self.sessions.iter().find(|s| s.id == open.id)
                            .map(|s| s.title.clone()).unwrap_or_else(|| open.id.clone());
                        self.overlay = Some(Overlay::ConfirmDelete { session_id: open.id.clone(), title, from_composer: true });
                    }
                }
                "system" if !arg.is_empty() => {
                    let arg = arg.to_string();
                    self.send(arg, Role::System, out);
                }
                "system" => self.notify(Level::Warn, "usage: /system TEXT"),
                "meta" if arg.is_empty() => {
                    self.metadata = None;
                    self.composer = new_composer();
                    self.notify(Level::Info, "metadata cleared");
                }
                "meta" => match serde_json::from_str::<Value>(arg) {
                    Ok(v @ Value::Object(_)) => {
                        self.metadata = Some(v);
                        self.composer = new_composer();
                        self.notify(Level::Info, "metadata set for the next message");
                    }
                    Ok(_) => self.notify(Level::Error, "/meta needs a JSON object, like /meta {\"topic\":\"rust\"}"),
                    Err(e) => self.notify(Level::Error, format!("/meta: invalid JSON: {e}")),
                },
                "help" => {
                    self.composer = new_composer();
                    self.overlay = Some(Overlay::Help { scroll: 0 });
                }
                "metrics" => {
                    self.composer = new_composer();
                    self.open_metrics(out);
                }
                "wallet" => {
                    self.composer = new_composer();
                    let id = (!arg.is_empty()).then(|| arg.to_string());
                    self.open_wallet(id.as_deref(), out);
                }
                "quit" | "q" => {
                    self.composer = new_composer();
                    self.quit(out);
                }
                other => self.notify(
                    Level::Error,
                    format!("unknown command /{other}: try /new, /delete, /system, /meta, /metrics, /wallet, /help, /quit (// sends a literal /)"),
                ),
            }
            return;
        }
        let text = match text.trim().strip_prefix("//") {
            Some(rest) => format!("/{rest}"),
            None => text.trim().to_string(),
        };
        let role = self.role;
        self.send(text, role, out);
    }
}
