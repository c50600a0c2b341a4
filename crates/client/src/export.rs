//! A session's transcript as a file: Markdown for people, JSON for programs (`convo export`,
//! the TUI's `/export`). Everything comes from the local store, so a session exports the same
//! whether its server is up, down or gone.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::api::FinishReason;
use crate::local_store::{MessageStatus, SessionRecord, Store, StoreError, StoredMessage};
use crate::sanitize::strip_controls;

/// The heading of a session that has no title (no message yet, none given).
pub const UNTITLED: &str = "Untitled session";

/// A session and its messages, oldest first, as the local store keeps them.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub session: SessionRecord,
    pub messages: Vec<StoredMessage>,
}

/// A session found in the local store ([`Store::find_session`]) with its messages.
pub fn load(store: &Store, session: SessionRecord) -> Result<Transcript, StoreError> {
    let messages = store.transcript(&session.id)?;
    Ok(Transcript { session, messages })
}

// ---- Markdown ---------------------------------------------------------------------------------

/// The transcript as Markdown: a title heading, a line with the session's id, then per message
/// a heading `## role · time · tokens` (and `· interrupted` or `· failed` when it did not
/// complete; `· stopped` or `· cut by a limit` for a reply the service says so of) followed
/// by its text as written. A message whose text would swallow what follows
/// it (a code fence left open) has its fence closed; failing that, the text goes inside a
/// fence of its own. Control characters and escape sequences are removed (tabs and line
/// breaks kept): the file is meant to be read, in a terminal too.
pub fn markdown(t: &Transcript) -> String {
    let mut out = String::new();
    let title = t.session.title.as_deref().map(strip_controls);
    let title = title.as_deref().unwrap_or(UNTITLED);
    let _ = writeln!(out, "# {}\n", title.replace(['\n', '\r'], " "));
    let _ = writeln!(
        out,
        "Session `{}` · started {} · {} · {}\n",
        t.session.id,
        time(t.session.created_at),
        crate::format::counted(t.messages.len() as u64, "message"),
        crate::format::counted(t.session.tokens, "token"),
    );
    for m in &t.messages {
        let _ = write!(
            out,
            "## {} · {} · {}",
            m.role.as_str(),
            time(m.created_at),
            crate::format::counted(m.tokens, "token")
        );
        match m.status {
            MessageStatus::Complete => {}
            MessageStatus::Interrupted => out.push_str(" · interrupted"),
            MessageStatus::Failed => out.push_str(" · failed"),
        }
        match m.finish_reason {
            Some(FinishReason::Stopped) => out.push_str(" · stopped"),
            Some(FinishReason::Length) => out.push_str(" · cut by a limit"),
            Some(FinishReason::Stop) | None => {}
        }
        out.push_str("\n\n");
        // Safe to `cat`: no control characters but line breaks and tabs, no bidi overrides.
        let body = strip_controls(&m.content);
        let body = body.trim_end_matches(['\n', ' ']);
        if body.trim().is_empty() {
            out.push_str("_(no text)_\n\n");
        } else {
            out.push_str(&self_contained(body));
            out.push_str("\n\n");
        }
    }
    // One newline at the end of the file.
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// `1 message`, `12 messages`.
pub fn messages(n: usize) -> String {
    crate::format::counted(n as u64, "message")
}

fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// `body` such that a heading after it (past a blank line) is still a heading: as it is when
/// it already is; with its open code fence closed; else inside a fence of its own, made of more
/// tildes than any run of tildes in it.
fn self_contained(body: &str) -> Cow<'_, str> {
    if !swallows_what_follows(body) {
        return Cow::Borrowed(body);
    }
    if let Some(fence) = last_open_fence(body) {
        let closed = format!("{body}\n{fence}");
        if !swallows_what_follows(&closed) {
            return Cow::Owned(closed);
        }
    }
    let longest = body.split(|c| c != '~').map(str::len).max().unwrap_or(0);
    let fence = "~".repeat((longest + 1).max(3));
    Cow::Owned(format!("{fence}\n{body}\n{fence}"))
}

/// Whether a heading put after `body` (with a blank line between) would be taken into one of
/// its blocks: an unclosed code fence, an HTML block or comment left open.
fn swallows_what_follows(body: &str) -> bool {
    use pulldown_cmark::{Event, Parser, Tag};
    let probe = format!("{body}\n\n# probe\n");
    let at = body.len() + 2;
    !Parser::new(&probe)
        .into_offset_iter()
        .any(|(event, range)| {
            matches!(event, Event::Start(Tag::Heading { .. })) && range.start == at
        })
}

/// The fence (say ```` ``` ```` or `~~~~`) of the last fenced code block at the top level of
/// `body`.
fn last_open_fence(body: &str) -> Option<String> {
    use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag};
    let mut depth = 0usize;
    let mut last = None;
    for (event, range) in Parser::new(body).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) if depth == 0 => {
                last = Some(range.start);
                depth += 1;
            }
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let opening = body[last?..].trim_start_matches(' ');
    let c = opening.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    Some(opening.chars().take_while(|&x| x == c).collect())
}

// ---- JSON -------------------------------------------------------------------------------------

/// The transcript as JSON (`convo export --format json`): the session's fields and its
/// messages with theirs, the text exactly as stored.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptJson<'a> {
    pub session_id: &'a str,
    pub title: Option<&'a str>,
    /// The title is the user's (`/title`), not the first message's.
    pub title_set: bool,
    pub created_at: String,
    pub last_activity: String,
    pub tokens: u64,
    pub messages: Vec<MessageJson<'a>>,
}

/// One message in [`TranscriptJson`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageJson<'a> {
    /// The server's id (replies; `null` for messages this client sent).
    pub message_id: Option<&'a str>,
    pub role: &'a str,
    pub content: &'a str,
    pub tokens: u64,
    pub created_at: String,
    /// `complete`, `interrupted` or `failed`.
    pub status: &'a str,
    /// How a reply ended, as the service said (`stop`, `length`, `stopped`); absent when
    /// it did not say, and on messages that are not replies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<&'static str>,
}

pub fn json(t: &Transcript) -> TranscriptJson<'_> {
    let at = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    TranscriptJson {
        session_id: &t.session.id,
        title: t.session.title.as_deref(),
        title_set: t.session.title_set,
        created_at: at(t.session.created_at),
        last_activity: at(t.session.last_activity),
        tokens: t.session.tokens,
        messages: t
            .messages
            .iter()
            .map(|m| MessageJson {
                message_id: m.message_id.as_deref(),
                role: m.role.as_str(),
                content: &m.content,
                tokens: m.tokens,
                created_at: at(m.created_at),
                status: m.status.as_str(),
                finish_reason: m.finish_reason.map(FinishReason::as_str),
            })
            .collect(),
    }
}

// ---- files ------------------------------------------------------------------------------------

/// A file name from a session's title: lower case, letters and digits kept, every other run of
/// characters one `-`, at most 60 characters, `.md` added; the session's id when the title
/// leaves nothing (`my-title.md`, `session_k1zbxTbfvBIJHLxy.md`).
pub fn file_name(title: Option<&str>, session_id: &str) -> String {
    let mut stem = String::new();
    for c in title.unwrap_or("").chars() {
        if c.is_alphanumeric() {
            stem.extend(c.to_lowercase());
        } else if !stem.is_empty() && !stem.ends_with('-') {
            stem.push('-');
        }
        if stem.chars().count() >= 60 {
            break;
        }
    }
    let stem = stem.trim_end_matches('-');
    let stem = if stem.is_empty() {
        session_id.replace(['/', '\\'], "-")
    } else {
        stem.to_string()
    };
    format!("{stem}.md")
}

/// Where `/export [PATH]` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Into this directory, under the name from the title (`-2`, `-3` added when taken).
    Dir(PathBuf),
    /// This file, which must not exist yet.
    File(PathBuf),
}

/// The target of `/export` with `arg` (`None`: the current directory `cwd`): `~` and `~/…` are
/// the home directory, a relative path is taken from `cwd`, and a directory (one that exists,
/// or a path ending with `/`) gets the name from the title.
pub fn target(arg: Option<&str>, cwd: &Path, home: Option<&Path>) -> Target {
    let Some(arg) = arg.map(str::trim).filter(|a| !a.is_empty()) else {
        return Target::Dir(cwd.to_path_buf());
    };
    let expanded = match (arg, home) {
        ("~", Some(h)) => h.to_path_buf(),
        (a, Some(h)) if a.starts_with("~/") => h.join(&a[2..]),
        (a, _) => PathBuf::from(a),
    };
    let path = cwd.join(expanded);
    if arg.ends_with('/') || arg == "~" || path.is_dir() {
        Target::Dir(path)
    } else {
        Target::File(path)
    }
}

/// Writes `bytes` at `target` (privately and atomically, [`crate::private_file`]) and returns
/// the path written. In a directory the file is `name`, or `name-2`, `name-3`… when taken; a
/// file named outright is never replaced (`AlreadyExists`).
pub fn write_new(target: &Target, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    match target {
        Target::File(path) => {
            crate::private_file::write_private_atomic(path, bytes, false)?;
            Ok(path.clone())
        }
        Target::Dir(dir) => {
            let (stem, ext) = match name.rsplit_once('.') {
                Some((s, e)) if !s.is_empty() => (s, format!(".{e}")),
                _ => (name, String::new()),
            };
            for n in 1..=1000 {
                let path = if n == 1 {
                    dir.join(name)
                } else {
                    dir.join(format!("{stem}-{n}{ext}"))
                };
                match crate::private_file::write_private_atomic(&path, bytes, false) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                    Ok(()) => return Ok(path),
                }
            }
            Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{name} and 999 numbered copies exist in {}", dir.display()),
            ))
        }
    }
}

/// `path` as the user reads it: `./name.md` under `cwd`, else as it is.
pub fn shown(path: &Path, cwd: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => format!("./{}", rel.display()),
        _ => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Role;
    use chrono::TimeZone;

    fn at(min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 25, 6, min, 0).unwrap()
    }

    fn message(role: Role, content: &str, tokens: u64, status: MessageStatus) -> StoredMessage {
        StoredMessage {
            role,
            content: content.into(),
            tokens,
            created_at: at(10),
            message_id: (role == Role::Assistant).then(|| "msg_1".to_string()),
            status,
            finish_reason: None,
        }
    }

    fn transcript(messages: Vec<StoredMessage>) -> Transcript {
        Transcript {
            session: SessionRecord {
                id: "session_k1zbxTbfvBIJHLxy".into(),
                title: Some("Rust lifetimes".into()),
                title_set: false,
                created_at: at(9),
                last_activity: at(11),
                tokens: messages.iter().map(|m| m.tokens).sum(),
                deleted: false,
                target: "embedded".into(),
                forked_from: None,
            },
            messages,
        }
    }

    #[test]
    fn markdown_has_a_heading_per_message_and_keeps_code_blocks() {
        let t = transcript(vec![
            message(
                Role::User,
                "What does 'static mean?",
                12,
                MessageStatus::Complete,
            ),
            message(
                Role::Assistant,
                "It means this:\n\n```rust\nfn f() -> &'static str { \"hi\" }\n```\n",
                1,
                MessageStatus::Interrupted,
            ),
            message(Role::User, "again\u{1b}[31m red", 3, MessageStatus::Failed),
        ]);
        let md = markdown(&t);
        assert_eq!(
            md,
            "# Rust lifetimes\n\n\
             Session `session_k1zbxTbfvBIJHLxy` · started 2026-11-25 06:09 UTC · 3 messages · 16 tokens\n\n\
             ## user · 2026-11-25 06:10 UTC · 12 tokens\n\n\
             What does 'static mean?\n\n\
             ## assistant · 2026-11-25 06:10 UTC · 1 token · interrupted\n\n\
             It means this:\n\n```rust\nfn f() -> &'static str { \"hi\" }\n```\n\n\
             ## user · 2026-11-25 06:10 UTC · 3 tokens · failed\n\n\
             again[31m red\n"
        );
    }

    /// The top-level headings of `md`, as text.
    fn headings(md: &str) -> Vec<String> {
        use pulldown_cmark::{Event, Parser, Tag, TagEnd};
        let mut out = Vec::new();
        let mut current: Option<String> = None;
        for event in Parser::new(md) {
            match event {
                Event::Start(Tag::Heading { .. }) => current = Some(String::new()),
                Event::Text(t) | Event::Code(t) => {
                    if let Some(c) = current.as_mut() {
                        c.push_str(&t);
                    }
                }
                Event::End(TagEnd::Heading(_)) => out.extend(current.take()),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn a_message_cannot_swallow_the_next_heading() {
        for content in [
            "look:\n```python\nprint('never closed')",
            "~~~~\nfour tildes, open",
            "<!-- a comment left open",
            "<pre>\nopen pre",
            "```\nclosed with fewer\n``",
            "- list\n  ```\n  fenced in a list item",
        ] {
            let t = transcript(vec![
                message(Role::Assistant, content, 1, MessageStatus::Complete),
                message(Role::User, "next", 1, MessageStatus::Complete),
            ]);
            let md = markdown(&t);
            let h = headings(&md);
            assert_eq!(h.len(), 3, "{content:?} gave:\n{md}\nheadings {h:?}");
            assert!(h[2].starts_with("user ·"), "{content:?} gave:\n{md}");
            assert!(md.contains(content.lines().last().unwrap()), "{md}");
        }
        // An open fence is closed with its own fence, not wrapped.
        let t = transcript(vec![message(
            Role::Assistant,
            "```rust\nfn main() {}",
            1,
            MessageStatus::Complete,
        )]);
        assert!(
            markdown(&t).ends_with("```rust\nfn main() {}\n```\n"),
            "{}",
            markdown(&t)
        );
        // Headings of a message's own stay as they are.
        let t = transcript(vec![message(
            Role::Assistant,
            "# Own heading\ntext",
            1,
            MessageStatus::Complete,
        )]);
        assert!(markdown(&t).contains("\n# Own heading\ntext\n"));
    }

    #[test]
    fn an_empty_session_and_an_empty_message_still_read_well() {
        let mut t = transcript(vec![message(Role::Assistant, "", 0, MessageStatus::Failed)]);
        t.session.title = None;
        let md = markdown(&t);
        assert!(md.starts_with("# Untitled session\n"), "{md}");
        assert!(md.ends_with("· failed\n\n_(no text)_\n"), "{md}");
    }

    #[test]
    fn json_lists_the_messages_with_their_fields() {
        let t = transcript(vec![
            message(Role::User, "hi\u{1b}", 2, MessageStatus::Complete),
            message(Role::Assistant, "hello", 5, MessageStatus::Interrupted),
        ]);
        let v = serde_json::to_value(json(&t)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "sessionId": "session_k1zbxTbfvBIJHLxy",
                "title": "Rust lifetimes",
                "titleSet": false,
                "createdAt": "2026-11-25T06:09:00.000Z",
                "lastActivity": "2026-11-25T06:11:00.000Z",
                "tokens": 7,
                "messages": [
                    {"messageId": null, "role": "user", "content": "hi\u{1b}", "tokens": 2,
                     "createdAt": "2026-11-25T06:10:00.000Z", "status": "complete"},
                    {"messageId": "msg_1", "role": "assistant", "content": "hello", "tokens": 5,
                     "createdAt": "2026-11-25T06:10:00.000Z", "status": "interrupted"}
                ]
            })
        );
    }

    #[test]
    fn a_stopped_or_cut_reply_says_so_in_both_formats() {
        let reply = |finish| StoredMessage {
            finish_reason: Some(finish),
            ..message(Role::Assistant, "some words", 2, MessageStatus::Complete)
        };
        let t = transcript(vec![
            reply(FinishReason::Stopped),
            reply(FinishReason::Length),
            reply(FinishReason::Stop),
        ]);
        let h = headings(&markdown(&t));
        assert!(h[1].ends_with("2 tokens · stopped"), "{h:?}");
        assert!(h[2].ends_with("2 tokens · cut by a limit"), "{h:?}");
        assert!(h[3].ends_with("2 tokens"), "{h:?}");
        let v = serde_json::to_value(json(&t)).unwrap();
        let reasons: Vec<_> = v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["finishReason"].clone())
            .collect();
        assert_eq!(reasons, ["stopped", "length", "stop"]);
    }

    #[test]
    fn file_names_come_from_the_title() {
        let id = "session_k1zbxTbfvBIJHLxy";
        assert_eq!(file_name(Some("My Title"), id), "my-title.md");
        assert_eq!(
            file_name(Some("../../etc/passwd: **now**!"), id),
            "etc-passwd-now.md"
        );
        assert_eq!(file_name(Some("Café à Lisbon"), id), "café-à-lisbon.md");
        assert_eq!(file_name(Some("///"), id), "session_k1zbxTbfvBIJHLxy.md");
        assert_eq!(file_name(None, id), "session_k1zbxTbfvBIJHLxy.md");
        let long = file_name(Some(&"word ".repeat(40)), id);
        assert!(
            long.chars().count() <= 63 && !long.contains("-.md"),
            "{long}"
        );
    }

    #[test]
    fn targets_resolve_against_the_current_and_home_directories() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let home = Path::new("/home/me");
        assert_eq!(target(None, cwd, Some(home)), Target::Dir(cwd.into()));
        assert_eq!(target(Some("  "), cwd, None), Target::Dir(cwd.into()));
        assert_eq!(
            target(Some("notes.md"), cwd, None),
            Target::File(cwd.join("notes.md"))
        );
        assert_eq!(
            target(Some("~/x.md"), cwd, Some(home)),
            Target::File(home.join("x.md"))
        );
        assert_eq!(target(Some("~"), cwd, Some(home)), Target::Dir(home.into()));
        assert_eq!(
            target(Some("/abs/dir/"), cwd, None),
            Target::Dir("/abs/dir/".into())
        );
        std::fs::create_dir(cwd.join("sub")).unwrap();
        assert_eq!(target(Some("sub"), cwd, None), Target::Dir(cwd.join("sub")));
    }

    #[test]
    fn writing_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = Target::Dir(dir.path().into());
        let first = write_new(&target, "t.md", b"one").unwrap();
        let second = write_new(&target, "t.md", b"two").unwrap();
        let third = write_new(&target, "t.md", b"three").unwrap();
        assert_eq!(first, dir.path().join("t.md"));
        assert_eq!(second, dir.path().join("t-2.md"));
        assert_eq!(third, dir.path().join("t-3.md"));
        assert_eq!(std::fs::read(&first).unwrap(), b"one");
        assert_eq!(shown(&second, dir.path()), "./t-2.md");
        assert_eq!(shown(Path::new("/x/y.md"), dir.path()), "/x/y.md");
        let named = Target::File(first.clone());
        let e = write_new(&named, "ignored", b"four").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&first).unwrap(), b"one");
    }
}
