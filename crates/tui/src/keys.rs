//! Key bindings: one named field per command, defaults from the `[keys]` section of
//! `assets/config.toml`, overridable by the user's config file (a file overrides only what it
//! names).
//!
//! A key spec is either a single character (`"d"`, `"?"`, `"/"`) or a bracketed name with
//! optional modifiers (`"<Enter>"`, `"<Ctrl-n>"`, `"<Alt-Enter>"`, `"<Shift-Tab>"`, `"<F2>"`).
//! A binding is one spec or a list of them.
//!
//! ```
//! use convo_tui::keys::{KeyBindings, KeySpec};
//! let spec: KeySpec = "<Ctrl-n>".parse().unwrap();
//! assert_eq!(spec.to_string(), "Ctrl-n");
//! let keys = KeyBindings::default();
//! assert!(keys.new_session.contains(&spec));
//! ```

use std::fmt;
use std::str::FromStr;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The built-in defaults, the same file `config` layers the user's file over.
const DEFAULT_CONFIG: &str = convo_client::config::DEFAULT_CONFIG;

/// An error in the `[keys]` section; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    #[error("keys.{field}: {message}")]
    Field { field: String, message: String },
    #[error("keys.{0}: unknown command (see `convo config` for the list)")]
    UnknownCommand(String),
    #[error(
        "keys.{first} and keys.{second} are both bound to {key} ({context}); bind one of them \
         to another key"
    )]
    Conflict {
        key: String,
        first: &'static str,
        second: &'static str,
        context: &'static str,
    },
}

/// One key with its modifiers, as written in the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeySpec {
    pub code: KeyCode,
    pub modifiers: KeyModifiers,
}

impl KeySpec {
    pub const fn new(code: KeyCode, modifiers: KeyModifiers) -> Self {
        KeySpec { code, modifiers }
    }

    /// Whether two specs name the same key as the terminal reports it (`<Ctrl-N>` is
    /// `<Ctrl-n>`, `<BackTab>` is `<Shift-Tab>`).
    pub fn same_key(&self, other: &KeySpec) -> bool {
        normalize(self.code, self.modifiers) == normalize(other.code, other.modifiers)
    }

    /// Whether a key event from the terminal is this key. Shift is part of a character
    /// (`?` arrives as Shift+`?` on some terminals), so it is ignored for characters;
    /// Shift-Tab arrives as `BackTab`.
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        let (code, mods) = normalize(ev.code, ev.modifiers);
        let (want_code, want_mods) = normalize(self.code, self.modifiers);
        code == want_code && mods == want_mods
    }
}

fn normalize(code: KeyCode, mods: KeyModifiers) -> (KeyCode, KeyModifiers) {
    let mods = mods & (KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT);
    match code {
        KeyCode::BackTab => (KeyCode::Tab, mods | KeyModifiers::SHIFT),
        KeyCode::Char(c) => {
            let mut mods = mods - KeyModifiers::SHIFT;
            // Ctrl+letter is case-insensitive: terminals report Ctrl-N as Ctrl+'n'.
            let c = if mods.contains(KeyModifiers::CONTROL) {
                c.to_ascii_lowercase()
            } else {
                c
            };
            if c == ' ' {
                mods -= KeyModifiers::SHIFT;
            }
            (KeyCode::Char(c), mods)
        }
        other => (other, mods),
    }
}

impl FromStr for KeySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.chars().count() == 1 {
            let c = s.chars().next().unwrap_or(' ');
            return Ok(KeySpec::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
        let inner = s
            .strip_prefix('<')
            .and_then(|r| r.strip_suffix('>'))
            .ok_or_else(|| {
                format!(
                    "`{s}` is not a key: write one character like \"d\" or a name like \"<Ctrl-n>\""
                )
            })?;
        let mut rest = inner;
        let mut modifiers = KeyModifiers::NONE;
        loop {
            let lower = rest.to_ascii_lowercase();
            let (m, len) = if lower.starts_with("ctrl-") {
                (KeyModifiers::CONTROL, 5)
            } else if lower.starts_with("alt-") {
                (KeyModifiers::ALT, 4)
            } else if lower.starts_with("shift-") {
                (KeyModifiers::SHIFT, 6)
            } else if lower.starts_with("meta-") {
                (KeyModifiers::ALT, 5)
            } else if (lower.starts_with("c-")
                || lower.starts_with("a-")
                || lower.starts_with("s-"))
                && rest.len() > 2
            {
                let m = match lower.as_bytes()[0] {
                    b'c' => KeyModifiers::CONTROL,
                    b'a' => KeyModifiers::ALT,
                    _ => KeyModifiers::SHIFT,
                };
                (m, 2)
            } else {
                break;
            };
            modifiers |= m;
            rest = &rest[len..];
        }
        let code =
            parse_key_name(rest).ok_or_else(|| format!("unknown key name `{rest}` in `{s}`"))?;
        Ok(KeySpec::new(code, modifiers))
    }
}

fn parse_key_name(name: &str) -> Option<KeyCode> {
    if name.chars().count() == 1 {
        return name.chars().next().map(KeyCode::Char);
    }
    let lower = name.to_ascii_lowercase();
    let code = match lower.as_str() {
        "enter" | "return" | "cr" => KeyCode::Enter,
        "esc" | "escape" => KeyCode::Esc,
        "tab" => KeyCode::Tab,
        "backtab" => KeyCode::BackTab,
        "backspace" | "bs" => KeyCode::Backspace,
        "delete" | "del" => KeyCode::Delete,
        "insert" | "ins" => KeyCode::Insert,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        "pageup" | "pgup" => KeyCode::PageUp,
        "pagedown" | "pgdn" | "pgdown" => KeyCode::PageDown,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "space" => KeyCode::Char(' '),
        "lt" => KeyCode::Char('<'),
        "gt" => KeyCode::Char('>'),
        "minus" => KeyCode::Char('-'),
        _ => {
            let n: u8 = lower.strip_prefix('f')?.parse().ok()?;
            if (1..=24).contains(&n) {
                KeyCode::F(n)
            } else {
                return None;
            }
        }
    };
    Some(code)
}

impl fmt::Display for KeySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.modifiers.contains(KeyModifiers::CONTROL) {
            f.write_str("Ctrl-")?;
        }
        if self.modifiers.contains(KeyModifiers::ALT) {
            f.write_str("Alt-")?;
        }
        if self.modifiers.contains(KeyModifiers::SHIFT) {
            f.write_str("Shift-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("Space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("Enter"),
            KeyCode::Esc => f.write_str("Esc"),
            KeyCode::Tab => f.write_str("Tab"),
            KeyCode::BackTab => f.write_str("Shift-Tab"),
            KeyCode::Backspace => f.write_str("Backspace"),
            KeyCode::Delete => f.write_str("Delete"),
            KeyCode::Insert => f.write_str("Insert"),
            KeyCode::Home => f.write_str("Home"),
            KeyCode::End => f.write_str("End"),
            KeyCode::PageUp => f.write_str("PgUp"),
            KeyCode::PageDown => f.write_str("PgDn"),
            KeyCode::Up => f.write_str("Up"),
            KeyCode::Down => f.write_str("Down"),
            KeyCode::Left => f.write_str("Left"),
            KeyCode::Right => f.write_str("Right"),
            KeyCode::F(n) => write!(f, "F{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// One or more keys bound to a command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Binding(pub Vec<KeySpec>);

impl Binding {
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        self.0.iter().any(|k| k.matches(ev))
    }

    pub fn contains(&self, spec: &KeySpec) -> bool {
        self.0.contains(spec)
    }

    /// The keys as shown in the help overlay and the status bar: `?/F1`.
    pub fn label(&self) -> String {
        self.0
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The first key, for short hints.
    pub fn first_label(&self) -> String {
        self.0.first().map(|k| k.to_string()).unwrap_or_default()
    }

    /// The first key of the binding that works while typing (not a plain character).
    pub fn typing_label(&self) -> String {
        self.0
            .iter()
            .find(|k| !matches!(k.code, KeyCode::Char(_)) || !k.modifiers.is_empty())
            .map(|k| k.to_string())
            .unwrap_or_else(|| self.first_label())
    }

    fn parse(field: &str, value: &toml::Value) -> Result<Self, KeysError> {
        let err = |message: String| KeysError::Field {
            field: field.to_string(),
            message,
        };
        let specs: Vec<&str> = match value {
            toml::Value::String(s) => vec![s.as_str()],
            toml::Value::Array(items) => items
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        err(format!(
                            "expected key specs as strings, found {}",
                            v.type_str()
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
            other => {
                return Err(err(format!(
                    "expected a key spec like \"<Ctrl-n>\" or a list of them, found {}",
                    other.type_str()
                )));
            }
        };
        if specs.is_empty() {
            return Err(err("needs at least one key".to_string()));
        }
        specs
            .into_iter()
            .map(|s| s.parse::<KeySpec>().map_err(&err))
            .collect::<Result<Vec<_>, _>>()
            .map(Binding)
    }
}

macro_rules! bindings {
    ($( $(#[$doc:meta])* $field:ident => $desc:literal ),* $(,)?) => {
        /// Every command's keys. One named field per command; the help overlay lists them in
        /// this order with their descriptions.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct KeyBindings {
            $( $(#[$doc])* pub $field: Binding, )*
        }

        impl KeyBindings {
            /// The command names, as written in `[keys]`.
            pub const COMMANDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// `(command, description, binding)` for every command, in help order.
            pub fn describe(&self) -> Vec<(&'static str, &'static str, &Binding)> {
                vec![$((stringify!($field), $desc, &self.$field)),*]
            }

            /// Overlays the fields named in `table` onto `self`.
            fn overlay(&mut self, table: &toml::Table) -> Result<(), KeysError> {
                for (name, value) in table {
                    match name.as_str() {
                        $(stringify!($field) => self.$field = Binding::parse(name, value)?,)*
                        other => return Err(KeysError::UnknownCommand(other.to_string())),
                    }
                }
                Ok(())
            }

            fn empty() -> Self {
                KeyBindings { $($field: Binding::default(),)* }
            }

            fn missing(&self) -> Option<&'static str> {
                $(if self.$field.0.is_empty() { return Some(stringify!($field)); })*
                None
            }
        }
    };
}

/// The character a key types, when it is one to type: a character without Ctrl or Alt (Shift
/// gives the capital). The letters the views read as their own (`x`, `s`, `1`–`4`) and the
/// search queries are typed this way.
pub fn typed_char(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c)
            if !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(c)
        }
        _ => None,
    }
}

bindings! {
    /// Send the composer's text (or run its slash command).
    send => "send (queued during a reply)",
    /// Insert a newline in the composer.
    newline => "new line",
    new_session => "new session",
    focus_next => "next pane",
    focus_prev => "previous pane",
    delete_session => "delete session",
    toggle_role => "role user/system",
    copy_reply => "copy reply (OSC 52)",
    move_up => "previous item",
    move_down => "next item",
    open_session => "open session",
    scroll_up => "scroll up",
    scroll_down => "scroll down",
    scroll_top => "scroll to top",
    scroll_bottom => "to the end, follow",
    filter_sessions => "filter sessions",
    metrics_view => "metrics view",
    wallet_view => "wallet view",
    /// The accounts view of an operator (F4; docs/tui.md, "Accounts").
    accounts_view => "accounts view",
    help => "this help",
    back => "close / unfollow",
    stop_or_quit => "stop stream / quit",
    quit => "quit (not in composer)",
    confirm => "confirm dialog",
    cancel => "cancel dialog",
    refresh => "refresh usage",
    recall_previous => "last sent message (empty composer)",
    recall_next => "next sent message (recalled)",
    /// Open `$VISUAL`/`$EDITOR` on the composer's draft (`src/tui/editor.rs`).
    edit_in_editor => "edit draft in $EDITOR",
    /// Copy one code block of the selected reply; with several, choose by number.
    copy_code => "copy a code block",
    search => "search the transcript",
    search_next => "next match",
    search_prev => "previous match",
    search_sessions => "search all sessions",
    /// Select a message of the transcript (the last): Up/Down move, Esc leaves.
    select_message => "select a message",
    /// Fork the session at the selected message (user or assistant).
    fork_message => "fork at the selected message",
    /// Edit the selected user message: fork just before it, its text in the composer.
    edit_message => "edit the selected message",
}

impl KeyBindings {
    /// The built-in defaults from `assets/config.toml`.
    pub fn defaults() -> Result<Self, KeysError> {
        let table: toml::Table = DEFAULT_CONFIG.parse().map_err(|e| KeysError::Field {
            field: "*".to_string(),
            message: format!("built-in defaults do not parse: {e}"),
        })?;
        let keys = table
            .get("keys")
            .and_then(|k| k.as_table())
            .cloned()
            .unwrap_or_default();
        let mut bindings = KeyBindings::empty();
        bindings.overlay(&keys)?;
        if let Some(field) = bindings.missing() {
            return Err(KeysError::Field {
                field: field.to_string(),
                message: "has no default in assets/config.toml".to_string(),
            });
        }
        Ok(bindings)
    }

    /// The defaults with the user's `[keys]` table laid over them. Errors name the field, or
    /// both fields when two commands that act in the same place share a key.
    pub fn from_table(table: &toml::Table) -> Result<Self, KeysError> {
        let mut bindings = Self::defaults()?;
        bindings.overlay(table)?;
        bindings.check_conflicts()?;
        Ok(bindings)
    }

    /// Commands that are looked up in the same place (see `src/tui/app/input.rs`): the
    /// global ones act in every pane, so they are part of each pane's set; a dialog reads
    /// only its own keys. The same key may serve two commands of different places
    /// (`Enter` sends in the composer and opens in the sessions pane).
    fn contexts<'a>(&'a self) -> [(&'static str, Vec<(&'static str, &'a Binding)>); 6] {
        let global = [
            ("stop_or_quit", &self.stop_or_quit),
            ("new_session", &self.new_session),
            ("toggle_role", &self.toggle_role),
            ("focus_next", &self.focus_next),
            ("focus_prev", &self.focus_prev),
            ("scroll_up", &self.scroll_up),
            ("scroll_down", &self.scroll_down),
            ("help", &self.help),
            ("metrics_view", &self.metrics_view),
            ("wallet_view", &self.wallet_view),
            ("accounts_view", &self.accounts_view),
            ("back", &self.back),
            ("edit_in_editor", &self.edit_in_editor),
            ("search", &self.search),
            ("select_message", &self.select_message),
        ];
        let with_global =
            |own: &[(&'static str, &'a Binding)]| -> Vec<(&'static str, &'a Binding)> {
                global.iter().copied().chain(own.iter().copied()).collect()
            };
        [
            (
                "in the composer",
                with_global(&[
                    ("send", &self.send),
                    ("newline", &self.newline),
                    ("recall_previous", &self.recall_previous),
                    ("recall_next", &self.recall_next),
                    ("scroll_top", &self.scroll_top),
                    ("scroll_bottom", &self.scroll_bottom),
                ]),
            ),
            (
                "in the sessions pane",
                with_global(&[
                    ("move_up", &self.move_up),
                    ("move_down", &self.move_down),
                    ("open_session", &self.open_session),
                    ("delete_session", &self.delete_session),
                    ("filter_sessions", &self.filter_sessions),
                    ("search_sessions", &self.search_sessions),
                    ("quit", &self.quit),
                    ("refresh", &self.refresh),
                    ("scroll_top", &self.scroll_top),
                    ("scroll_bottom", &self.scroll_bottom),
                ]),
            ),
            (
                "in the transcript",
                with_global(&[
                    ("move_up", &self.move_up),
                    ("move_down", &self.move_down),
                    ("copy_reply", &self.copy_reply),
                    ("quit", &self.quit),
                    ("copy_code", &self.copy_code),
                    ("fork_message", &self.fork_message),
                    ("edit_message", &self.edit_message),
                    ("refresh", &self.refresh),
                    ("scroll_top", &self.scroll_top),
                    ("scroll_bottom", &self.scroll_bottom),
                ]),
            ),
            (
                "in a dialog",
                vec![
                    ("confirm", &self.confirm),
                    ("cancel", &self.cancel),
                    ("stop_or_quit", &self.stop_or_quit),
                    ("new_session", &self.new_session),
                ],
            ),
            (
                "in the search bar",
                vec![
                    ("search_next", &self.search_next),
                    ("search_prev", &self.search_prev),
                    ("search", &self.search),
                    ("back", &self.back),
                    ("stop_or_quit", &self.stop_or_quit),
                    ("scroll_up", &self.scroll_up),
                    ("scroll_down", &self.scroll_down),
                    ("scroll_top", &self.scroll_top),
                    ("scroll_bottom", &self.scroll_bottom),
                    ("help", &self.help),
                ],
            ),
            (
                "in the search hits",
                vec![
                    ("move_up", &self.move_up),
                    ("move_down", &self.move_down),
                    ("open_session", &self.open_session),
                    // Reads the sessions of other devices the search could not see.
                    ("focus_next", &self.focus_next),
                    ("back", &self.back),
                    ("stop_or_quit", &self.stop_or_quit),
                ],
            ),
        ]
    }

    /// The first key two commands of one place share, as a config error naming both.
    fn check_conflicts(&self) -> Result<(), KeysError> {
        for (context, commands) in self.contexts() {
            for (i, (first, a)) in commands.iter().enumerate() {
                for (second, b) in &commands[i + 1..] {
                    if let Some(spec) = a.0.iter().find(|x| b.0.iter().any(|y| x.same_key(y))) {
                        return Err(KeysError::Conflict {
                            key: format!("<{spec}>"),
                            first,
                            second,
                            context,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

impl Default for KeyBindings {
    fn default() -> Self {
        // The defaults are compiled in and covered by a unit test, so this cannot fail in a
        // released binary; fall back to nothing bound rather than panic.
        Self::defaults().unwrap_or_else(|_| KeyBindings::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn parses_single_characters() {
        let k: KeySpec = "d".parse().unwrap();
        assert_eq!(k, KeySpec::new(KeyCode::Char('d'), KeyModifiers::NONE));
        let k: KeySpec = "?".parse().unwrap();
        assert_eq!(k.code, KeyCode::Char('?'));
        let k: KeySpec = "<".parse().unwrap();
        assert_eq!(k.code, KeyCode::Char('<'));
    }

    #[test]
    fn parses_named_keys_with_modifiers() {
        let k: KeySpec = "<Ctrl-n>".parse().unwrap();
        assert_eq!(k, KeySpec::new(KeyCode::Char('n'), KeyModifiers::CONTROL));
        let k: KeySpec = "<Alt-Enter>".parse().unwrap();
        assert_eq!(k, KeySpec::new(KeyCode::Enter, KeyModifiers::ALT));
        let k: KeySpec = "<ctrl-alt-Delete>".parse().unwrap();
        assert_eq!(
            k,
            KeySpec::new(KeyCode::Delete, KeyModifiers::CONTROL | KeyModifiers::ALT)
        );
        let k: KeySpec = "<F2>".parse().unwrap();
        assert_eq!(k.code, KeyCode::F(2));
        let k: KeySpec = "<Ctrl-->".parse().unwrap();
        assert_eq!(k, KeySpec::new(KeyCode::Char('-'), KeyModifiers::CONTROL));
        let k: KeySpec = "<PageUp>".parse().unwrap();
        assert_eq!(k.code, KeyCode::PageUp);
        let k: KeySpec = "<C-x>".parse().unwrap();
        assert_eq!(k, KeySpec::new(KeyCode::Char('x'), KeyModifiers::CONTROL));
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        assert!(
            "Ctrl-n"
                .parse::<KeySpec>()
                .unwrap_err()
                .contains("not a key")
        );
        assert!(
            "<Hyper-x>"
                .parse::<KeySpec>()
                .unwrap_err()
                .contains("Hyper-x")
        );
        assert!("<F99>".parse::<KeySpec>().is_err());
        assert!("<>".parse::<KeySpec>().is_err());
        assert!("".parse::<KeySpec>().is_err());
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "<Ctrl-n>",
            "<Alt-Enter>",
            "<F2>",
            "<Shift-Tab>",
            "<PageUp>",
            "?",
            "d",
        ] {
            let k: KeySpec = s.parse().unwrap();
            let shown = k.to_string();
            let again: KeySpec = if shown.chars().count() == 1 {
                shown.parse().unwrap()
            } else {
                format!("<{shown}>").parse().unwrap()
            };
            assert_eq!(k, again, "{s} shown as {shown}");
        }
    }

    #[test]
    fn matching_is_lenient_about_shift_on_characters_and_backtab() {
        let q: KeySpec = "?".parse().unwrap();
        assert!(q.matches(&key(KeyCode::Char('?'), KeyModifiers::SHIFT)));
        assert!(q.matches(&key(KeyCode::Char('?'), KeyModifiers::NONE)));
        let st: KeySpec = "<Shift-Tab>".parse().unwrap();
        assert!(st.matches(&key(KeyCode::BackTab, KeyModifiers::SHIFT)));
        assert!(st.matches(&key(KeyCode::BackTab, KeyModifiers::NONE)));
        let cn: KeySpec = "<Ctrl-n>".parse().unwrap();
        assert!(cn.matches(&key(KeyCode::Char('n'), KeyModifiers::CONTROL)));
        assert!(!cn.matches(&key(KeyCode::Char('n'), KeyModifiers::NONE)));
        let d: KeySpec = "d".parse().unwrap();
        assert!(!d.matches(&key(KeyCode::Char('D'), KeyModifiers::SHIFT)));
        assert!(!d.matches(&key(KeyCode::Char('d'), KeyModifiers::CONTROL)));
    }

    #[test]
    fn defaults_cover_every_command() {
        let keys = KeyBindings::defaults().expect("assets/config.toml [keys] parses");
        assert!(keys.send.matches(&key(KeyCode::Enter, KeyModifiers::NONE)));
        assert!(
            keys.newline
                .matches(&key(KeyCode::Enter, KeyModifiers::ALT))
        );
        assert!(keys.help.matches(&key(KeyCode::F(1), KeyModifiers::NONE)));
        assert_eq!(keys.describe().len(), KeyBindings::COMMANDS.len());
    }

    #[test]
    fn user_table_overrides_only_what_it_names() {
        let table: toml::Table = "new_session = \"<Ctrl-t>\"\nhelp = [\"<F1>\"]"
            .parse()
            .unwrap();
        let keys = KeyBindings::from_table(&table).unwrap();
        assert_eq!(keys.new_session.label(), "Ctrl-t");
        assert_eq!(keys.help.label(), "F1");
        assert_eq!(keys.send.label(), "Enter");
    }

    #[test]
    fn errors_name_the_field() {
        let table: toml::Table = "send = \"<Bogus>\"".parse().unwrap();
        let err = KeyBindings::from_table(&table).unwrap_err().to_string();
        assert!(err.starts_with("keys.send:"), "{err}");
        let table: toml::Table = "sned = \"x\"".parse().unwrap();
        let err = KeyBindings::from_table(&table).unwrap_err().to_string();
        assert!(err.contains("keys.sned"), "{err}");
        let table: toml::Table = "quit = 3".parse().unwrap();
        let err = KeyBindings::from_table(&table).unwrap_err().to_string();
        assert!(
            err.contains("keys.quit") && err.contains("integer"),
            "{err}"
        );
        let table: toml::Table = "quit = []".parse().unwrap();
        assert!(KeyBindings::from_table(&table).is_err());
    }

    #[test]
    fn two_commands_of_one_place_on_one_key_are_refused_naming_both() {
        let keys = KeyBindings::defaults().unwrap();
        assert_eq!(keys.check_conflicts(), Ok(()), "the defaults share no key");
        let refused = |toml: &str| {
            let table: toml::Table = toml.parse().unwrap();
            KeyBindings::from_table(&table).unwrap_err().to_string()
        };
        let e = refused("send = \"<Ctrl-n>\"");
        assert!(
            e.contains("keys.new_session")
                && e.contains("keys.send")
                && e.contains("<Ctrl-n>")
                && e.contains("composer"),
            "{e}"
        );
        // Spelled differently, the same key: Ctrl+N arrives as Ctrl+n.
        let e = refused("copy_reply = \"<Ctrl-N>\"");
        assert!(e.contains("copy_reply") && e.contains("new_session"), "{e}");
        // Of a list, any key that collides counts.
        let e = refused("cancel = [\"n\", \"y\"]");
        assert!(
            e.contains("confirm") && e.contains("cancel") && e.contains("dialog"),
            "{e}"
        );
        // The keys added for issue 17 are checked like the others.
        let e = refused("copy_code = \"y\"");
        assert!(
            e.contains("copy_reply") && e.contains("copy_code") && e.contains("transcript"),
            "{e}"
        );
        let e = refused("edit_in_editor = \"<Ctrl-r>\"");
        assert!(
            e.contains("toggle_role") && e.contains("edit_in_editor"),
            "{e}"
        );
        // The search bar's keys are checked among themselves.
        let e = refused("search_prev = \"n\"");
        assert!(
            e.contains("search_next") && e.contains("search_prev") && e.contains("search bar"),
            "{e}"
        );
        let e = refused("search_sessions = \"d\"");
        assert!(
            e.contains("delete_session") && e.contains("search_sessions"),
            "{e}"
        );
        // Keys of different places may be shared, as Enter is by send and open_session.
        let table: toml::Table = "delete_session = \"y\"\nquit = \"<Ctrl-q>\""
            .parse()
            .unwrap();
        assert!(KeyBindings::from_table(&table).is_ok());
    }
}
