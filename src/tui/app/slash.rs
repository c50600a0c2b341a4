//! The composer's slash commands: one list ([`SlashCommand::LIST`]) that parsing, the help
//! overlay and the "unknown command" notice all read.

use super::*;

/// A line typed in the composer that starts with one `/` (`//` sends a literal `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    /// `/new [TEXT]`: a new session, TEXT as its draft.
    New(String),
    /// `/delete`: delete the open session (after a confirmation).
    Delete,
    /// `/system TEXT`: send TEXT with the system role (empty: a usage notice).
    System(String),
    /// `/meta JSON`: metadata for the next message (empty: clear it).
    Meta(String),
    Metrics,
    /// `/wallet [ID]`: the wallet view, fetching ID if given.
    Wallet(Option<String>),
    Help,
    /// `/quit` or `/q`.
    Quit,
}

/// `/meta` with JSON that is not an object.
const META_NEEDS_OBJECT: &str = "/meta needs a JSON object, like /meta {\"topic\":\"rust\"}";

impl SlashCommand {
    /// Every command as the help shows it: (usage, what it does).
    pub const LIST: &[(&str, &str)] = &[
        ("/new [TEXT]", "new session, TEXT as draft"),
        ("/delete", "delete this session"),
        ("/system TEXT", "send TEXT as system"),
        ("/meta JSON", "metadata, next message"),
        ("/metrics", "metrics view (F2)"),
        ("/wallet [ID]", "wallet view (F3)"),
        ("/help", "this help"),
        ("/quit", "quit"),
    ];

    /// The command in `text` (already trimmed): `None` when it is a message (no leading `/`,
    /// or `//`), `Some(Err(name))` for an unknown command.
    pub fn parse(text: &str) -> Option<Result<SlashCommand, String>> {
        let cmd = text.strip_prefix('/').filter(|c| !c.starts_with('/'))?;
        let (name, arg) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
        let arg = arg.trim().to_string();
        Some(Ok(match name {
            "new" => SlashCommand::New(arg),
            "delete" => SlashCommand::Delete,
            "system" => SlashCommand::System(arg),
            "meta" => SlashCommand::Meta(arg),
            "metrics" => SlashCommand::Metrics,
            "wallet" => SlashCommand::Wallet((!arg.is_empty()).then_some(arg)),
            "help" => SlashCommand::Help,
            "quit" | "q" => SlashCommand::Quit,
            other => return Some(Err(other.to_string())),
        }))
    }

    /// The notice for an unknown command `/name`, listing the known ones.
    pub fn unknown(name: &str) -> String {
        let names: Vec<&str> = Self::LIST
            .iter()
            .map(|(usage, _)| usage.split(' ').next().unwrap_or(usage))
            .collect();
        format!(
            "unknown command /{name}: try {} (// sends a literal /)",
            names.join(", ")
        )
    }
}

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
                let role = self.role;
                self.send(text, role, out);
            }
        }
    }

    fn run_slash(&mut self, cmd: SlashCommand, out: &mut Vec<Command>) {
        match cmd {
            SlashCommand::New(draft) => {
                self.composer = new_composer();
                self.new_session(draft, out);
            }
            SlashCommand::Delete => {
                // The text stays in the composer until the dialog is confirmed.
                if let Some(open) = &self.open {
                    let title = (self.sessions.iter().find(|s| s.id == open.id))
                        .map_or_else(|| open.id.clone(), |s| s.title.clone());
                    self.overlay = Some(Overlay::ConfirmDelete {
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
                self.metadata = None;
                self.composer = new_composer();
                self.notify(Level::Info, "metadata cleared");
            }
            SlashCommand::Meta(json) => match serde_json::from_str::<Value>(&json) {
                Ok(v @ Value::Object(_)) => {
                    self.metadata = Some(v);
                    self.composer = new_composer();
                    self.notify(Level::Info, "metadata set for the next message");
                }
                Ok(_) => self.notify(Level::Error, META_NEEDS_OBJECT),
                Err(e) => self.notify(Level::Error, format!("/meta: invalid JSON: {e}")),
            },
            SlashCommand::Help => {
                self.composer = new_composer();
                self.overlay = Some(Overlay::Help { scroll: 0 });
            }
            SlashCommand::Metrics => {
                self.composer = new_composer();
                self.open_metrics(out);
            }
            SlashCommand::Wallet(id) => {
                self.composer = new_composer();
                self.open_wallet(id.as_deref(), out);
            }
            SlashCommand::Quit => {
                self.composer = new_composer();
                self.quit(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_arguments() {
        let p = |s| SlashCommand::parse(s);
        assert_eq!(p("hello"), None);
        assert_eq!(p("//not a command"), None);
        assert_eq!(
            p("/new  a draft "),
            Some(Ok(SlashCommand::New("a draft".into())))
        );
        assert_eq!(p("/wallet"), Some(Ok(SlashCommand::Wallet(None))));
        assert_eq!(
            p("/wallet w1"),
            Some(Ok(SlashCommand::Wallet(Some("w1".into()))))
        );
        assert_eq!(p("/q"), Some(Ok(SlashCommand::Quit)));
        assert_eq!(p("/nope x"), Some(Err("nope".into())));
    }

    #[test]
    fn the_unknown_notice_lists_every_command() {
        assert_eq!(
            SlashCommand::unknown("x"),
            "unknown command /x: try /new, /delete, /system, /meta, /metrics, /wallet, /help, /quit (// sends a literal /)"
        );
    }
}
