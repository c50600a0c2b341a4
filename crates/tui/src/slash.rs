//! The composer's slash commands: one list ([`SlashCommand::LIST`]) that parsing, the help
//! overlay and the "unknown command" notice all read. What each does is `App`'s business
//! (`app/slash.rs`).

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
    /// `/retry`: send the last user message again.
    Retry,
    /// `/title [TEXT]`: the open session's title (empty: back to the first message's).
    Title(String),
    /// `/export [PATH]`: the open session as Markdown, into PATH or the current directory.
    Export(Option<String>),
    /// `/search TEXT`: the messages of every session holding TEXT.
    Search(String),
    /// `/undo`: remove the last exchange (on servers with the extension).
    Undo,
    /// `/continue`: ask for the rest of a reply cut by a limit (sends
    /// `transcript_pane::reply_marks::CONTINUE_PROMPT` as a user message).
    Continue,
    /// `/kept`: the sessions the local store keeps aside (the server no longer has them).
    Kept,
}

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
        ("/retry", "send the last message again"),
        ("/title [TEXT]", "rename session (none: clear)"),
        ("/export [PATH]", "session to a Markdown file"),
        ("/search TEXT", "search all sessions"),
        ("/undo", "remove the last exchange"),
        ("/continue", "the rest of a cut reply"),
        ("/kept", "kept sessions the server lost"),
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
            "retry" => SlashCommand::Retry,
            "title" => SlashCommand::Title(arg),
            "export" => SlashCommand::Export((!arg.is_empty()).then_some(arg)),
            "search" => SlashCommand::Search(arg),
            "undo" => SlashCommand::Undo,
            "continue" => SlashCommand::Continue,
            "kept" => SlashCommand::Kept,
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
        assert_eq!(
            p("/title  My  plan "),
            Some(Ok(SlashCommand::Title("My  plan".into())))
        );
        assert_eq!(p("/title"), Some(Ok(SlashCommand::Title(String::new()))));
        assert_eq!(p("/export"), Some(Ok(SlashCommand::Export(None))));
        assert_eq!(
            p("/export ~/notes/a b.md"),
            Some(Ok(SlashCommand::Export(Some("~/notes/a b.md".into()))))
        );
        assert_eq!(p("/nope x"), Some(Err("nope".into())));
        assert_eq!(
            p("/search  rust lifetimes "),
            Some(Ok(SlashCommand::Search("rust lifetimes".into())))
        );
    }

    #[test]
    fn the_unknown_notice_lists_every_command() {
        assert_eq!(
            SlashCommand::unknown("x"),
            "unknown command /x: try /new, /delete, /system, /meta, /metrics, /wallet, /help, /quit, /retry, /title, /export, /search, /undo, /continue, /kept (// sends a literal /)"
        );
    }
}
