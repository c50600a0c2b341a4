//! Full-text search over the stored messages of every session (the FTS5 index
//! `messages_fts`, created and kept by triggers in the store's migrations).
//!
//! The text typed is never FTS5 syntax: each word becomes a quoted prefix term
//! ([`fts_query`]), so `"`, `*`, `-`, `AND`, `NEAR` or parentheses are searched as text
//! (and punctuation, which the tokenizer does not index, is ignored).

use chrono::{DateTime, Utc};
use rusqlite::params;

use super::{Store, StoreError, title_of};
use crate::api::Role;

/// Marks the start and the end of a matched word in the snippet SQLite returns: characters
/// of the private use area, which message text does not hold in practice (and which the
/// sanitiser would not let through anyway).
const MARK_START: char = '\u{E000}';
const MARK_END: char = '\u{E001}';
/// Tokens of context a snippet shows around the match.
const SNIPPET_TOKENS: i64 = 16;

/// One stored message that matches a search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub session_id: String,
    /// The session's title, as [`Store::list_sessions`] gives it.
    pub session_title: Option<String>,
    /// The message's place in its session's transcript (0 = the first message): the index
    /// of its item when the session is opened.
    pub position: usize,
    /// The service's id of the message (replies; `None` for what this client sent).
    pub message_id: Option<String>,
    pub role: Role,
    pub created_at: DateTime<Utc>,
    /// A short part of the message around the match, on one line, sanitised; the matched
    /// words are the parts marked `matched`.
    pub snippet: Vec<SnippetPart>,
}

/// A piece of a snippet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnippetPart {
    pub text: String,
    pub matched: bool,
}

impl SearchHit {
    /// The snippet as plain text.
    pub fn snippet_text(&self) -> String {
        self.snippet.iter().map(|p| p.text.as_str()).collect()
    }
}

/// The FTS5 query for what a user typed: every word a quoted prefix term (`"word"*`), all
/// of them required. Words without a letter or digit (which the index does not hold) are
/// left out; `None` when no word is left, which matches nothing.
pub fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .map(|w| format!("\"{}\"*", w.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// A snippet's markdown as the text it shows: `**bold**` is `bold`, a list item or a heading
/// its words, a link its text, code its code. The snippet is a cut from the middle of a
/// message, so markup cut in two (a lone `**`) stays as written.
fn plain_text(markdown: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, TagEnd};
    let mut out = String::new();
    for event in Parser::new_ext(
        markdown,
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES,
    ) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                out.push_str(&t)
            }
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            // Between blocks a space, so that words of two of them do not run together.
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::BlockQuote(_)
                | TagEnd::TableCell
                | TagEnd::TableRow
                | TagEnd::TableHead,
            ) => out.push(' '),
            _ => {}
        }
    }
    out
}

/// Splits SQLite's snippet at the marks, its markdown shown as text ([`plain_text`]),
/// sanitised, its runs of whitespace made one space (a space between a match and its context
/// belongs to the context).
fn snippet_parts(raw: &str) -> Vec<SnippetPart> {
    let plain = plain_text(raw);
    let mut pieces = Vec::new();
    let mut rest = plain.as_str();
    while let Some(start) = rest.find(MARK_START) {
        pieces.push((&rest[..start], false));
        let after = &rest[start + MARK_START.len_utf8()..];
        let end = after.find(MARK_END).unwrap_or(after.len());
        pieces.push((&after[..end], true));
        rest = after.get(end + MARK_END.len_utf8()..).unwrap_or("");
    }
    pieces.push((rest, false));
    let mut parts: Vec<SnippetPart> = Vec::new();
    let mut space = false;
    for (piece, matched) in pieces {
        for c in crate::sanitize::sanitize(piece).chars() {
            if c.is_whitespace() {
                space = true;
                continue;
            }
            if std::mem::take(&mut space) && !parts.is_empty() {
                match parts.last_mut() {
                    Some(last) if !last.matched || matched => last.text.push(' '),
                    _ => parts.push(SnippetPart {
                        text: " ".into(),
                        matched: false,
                    }),
                }
            }
            match parts.last_mut() {
                Some(last) if last.matched == matched => last.text.push(c),
                _ => parts.push(SnippetPart {
                    text: c.to_string(),
                    matched,
                }),
            }
        }
    }
    parts
}

impl Store {
    /// The stored messages of this target's sessions not deleted that hold every word of `text` (as a
    /// word or the start of one, case and accents ignored), best match first, at most
    /// `limit`. Text with no word in it matches nothing.
    pub fn search(&self, text: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let hits = self.search_in(text, limit, Some(self.target.id()))?;
        Ok(hits.into_iter().map(|(hit, _)| hit).collect())
    }

    /// As [`Store::search`], over the sessions of every target (`convo search --all-targets`),
    /// each hit with the label of its target (`embedded`, or the server and the start of the
    /// key's hash).
    pub fn search_all_targets(
        &self,
        text: &str,
        limit: usize,
    ) -> Result<Vec<(SearchHit, String)>, StoreError> {
        self.search_in(text, limit, None)
    }

    /// This target's sessions, not deleted, that the service lists with tokens but whose
    /// messages the store has none of (written on another device and not opened here), most
    /// recent first: [`Store::search`] does not see them until their messages come in
    /// ([`Store::catch_up`]).
    pub fn unsearched_sessions(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT s.id FROM sessions s
                 WHERE s.target = ?1 AND s.deleted = 0 AND s.tokens > 0
                     AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id)
                 ORDER BY s.last_activity DESC, s.id",
            )
            .map_err(|e| self.err(e))?;
        let ids = stmt
            .query_map(params![self.target.id()], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        Ok(ids)
    }

    /// The search, over one target's sessions or (`None`) every target's.
    fn search_in(
        &self,
        text: &str,
        limit: usize,
        target: Option<&str>,
    ) -> Result<Vec<(SearchHit, String)>, StoreError> {
        let Some(query) = fts_query(text) else {
            return Ok(Vec::new());
        };
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT m.session_id, s.title, m.message_id, m.role, m.created_at,
                     snippet(messages_fts, 0, ?3, ?4, '…', ?5),
                     (SELECT count(*) FROM messages p
                      WHERE p.session_id = m.session_id AND p.id < m.id),
                     coalesce(t.label, s.target)
                 FROM messages_fts
                 JOIN messages m ON m.id = messages_fts.rowid
                 JOIN sessions s ON s.id = m.session_id
                 LEFT JOIN targets t ON t.id = s.target
                 WHERE messages_fts MATCH ?1 AND s.deleted = 0
                     AND (?6 IS NULL OR s.target = ?6)
                 ORDER BY rank, m.id DESC
                 LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                params![
                    query,
                    i64::try_from(limit).unwrap_or(i64::MAX),
                    MARK_START.to_string(),
                    MARK_END.to_string(),
                    SNIPPET_TOKENS,
                    target,
                ],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, i64>(6)?,
                        r.get::<_, String>(7)?,
                    ))
                },
            )
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (session_id, title, message_id, role, created, snippet, position, label) =
                row.map_err(|e| self.err(e))?;
            let hit = SearchHit {
                session_id,
                session_title: title.and_then(|t| title_of(&t)),
                position: position.max(0) as usize,
                message_id,
                role: role.parse().map_err(|_| self.corrupt("role", &role))?,
                created_at: self.time("created_at", &created)?,
                snippet: snippet_parts(snippet.as_deref().unwrap_or("")),
            };
            out.push((hit, label));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_store::{MessageStatus, StoredMessage};
    use chrono::TimeZone;

    fn msg(role: Role, content: &str, t: i64) -> StoredMessage {
        StoredMessage {
            role,
            content: content.into(),
            tokens: 1,
            created_at: Utc.timestamp_opt(1_700_000_000 + t, 0).unwrap(),
            message_id: None,
            status: MessageStatus::Complete,
            finish_reason: None,
        }
    }

    fn found(s: &Store, text: &str) -> Vec<(String, usize)> {
        let mut hits: Vec<_> = s
            .search(text, 50)
            .unwrap()
            .into_iter()
            .map(|h| (h.session_id, h.position))
            .collect();
        hits.sort();
        hits
    }

    #[test]
    fn the_bundled_sqlite_has_fts5() {
        let s = Store::in_memory().unwrap();
        let options: Vec<String> = {
            let conn = s.lock();
            let mut stmt = conn.prepare("PRAGMA compile_options").unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        assert!(options.iter().any(|o| o == "ENABLE_FTS5"), "{options:?}");
    }

    #[test]
    fn search_finds_words_and_prefixes_case_and_accents_ignored() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::User, "What are Rust lifetimes?", 0))
            .unwrap();
        s.append_message(
            "session_a",
            &msg(Role::Assistant, "A lifetime names a scope. Café!", 1),
        )
        .unwrap();
        s.append_message("session_b", &msg(Role::User, "Trip to Lisbon", 2))
            .unwrap();
        assert_eq!(
            found(&s, "LIFETIME"),
            [("session_a".into(), 0), ("session_a".into(), 1)]
        );
        assert_eq!(found(&s, "cafe"), [("session_a".into(), 1)]);
        assert_eq!(found(&s, "lisb"), [("session_b".into(), 0)]);
        assert_eq!(found(&s, "rust scope"), []);
        assert_eq!(found(&s, "names scope"), [("session_a".into(), 1)]);
        let hit = &s.search("scope", 10).unwrap()[0];
        assert_eq!(hit.role, Role::Assistant);
        assert_eq!(
            hit.session_title.as_deref(),
            Some("What are Rust lifetimes?")
        );
        assert!(
            hit.snippet
                .iter()
                .any(|p| p.matched && p.text.eq_ignore_ascii_case("scope")),
            "{:?}",
            hit.snippet
        );
        assert_eq!(hit.snippet_text(), "A lifetime names a scope. Café!");
    }

    #[test]
    fn fts_syntax_typed_is_searched_as_text() {
        let s = Store::in_memory().unwrap();
        s.append_message(
            "session_a",
            &msg(Role::User, "use a AND b (or NEAR) \"quoted\" -x *y", 0),
        )
        .unwrap();
        for text in [
            "\"",
            "\"\"",
            "*",
            "-",
            "(",
            ")",
            "()",
            "AND",
            "OR",
            "NOT",
            "NEAR",
            "a AND",
            "\"quoted",
            "quoted\"",
            "-x",
            "*y",
            "y*",
            "NEAR(a b)",
            "col:a",
            "^a",
            "+",
            "'",
            ":",
            "{a}",
            "a OR",
            "a NOT b",
            "   ",
            "",
        ] {
            let result = s.search(text, 10);
            assert!(result.is_ok(), "{text:?}: {result:?}");
        }
        assert_eq!(found(&s, "\"quoted"), [("session_a".into(), 0)]);
        assert_eq!(found(&s, "AND"), [("session_a".into(), 0)]);
        assert_eq!(found(&s, "NEAR)"), [("session_a".into(), 0)]);
        assert_eq!(found(&s, "-x"), [("session_a".into(), 0)]);
        assert_eq!(found(&s, "***"), []);
        assert_eq!(fts_query("a \"b\" *"), Some("\"a\"* \"\"\"b\"\"\"*".into()));
        assert_eq!(fts_query("- * ()"), None);
    }

    #[test]
    fn replaced_and_updated_messages_are_searched_as_they_are_now() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::User, "hi", 0))
            .unwrap();
        let mut cut = msg(Role::Assistant, "partial answer about otters", 1)
            .with_status(MessageStatus::Interrupted);
        cut.message_id = Some("msg_1".into());
        s.append_message("session_a", &cut).unwrap();
        let mut whole = msg(Role::Assistant, "a whole answer about beavers", 1);
        whole.message_id = Some("msg_1".into());
        s.append_message("session_a", &whole).unwrap();
        assert_eq!(found(&s, "otters"), []);
        assert_eq!(found(&s, "beavers"), [("session_a".into(), 1)]);
        let hit = &s.search("beavers", 10).unwrap()[0];
        assert_eq!(hit.message_id.as_deref(), Some("msg_1"));

        let row = s
            .append_message("session_a", &msg(Role::Assistant, "stream start", 2))
            .unwrap();
        s.update_message(row, &msg(Role::Assistant, "stream end: weasels", 3))
            .unwrap();
        assert_eq!(found(&s, "start"), []);
        assert_eq!(found(&s, "weasels"), [("session_a".into(), 2)]);
    }

    #[test]
    fn sessions_listed_without_messages_here_are_unsearched_until_caught_up() {
        use crate::local_store::ServiceSessions;
        use convo_wire::Message;
        use convo_wire::sessions::SessionSummary;
        let s = Store::in_memory().unwrap();
        let listed = |id: &str, t: &str| SessionSummary {
            session_id: id.into(),
            created_at: t.into(),
            last_activity_at: t.into(),
            message_count: 2,
            tokens: 30,
            title: Some("from the laptop".into()),
            forked_from: None,
        };
        // Two sessions another device wrote, listed here; one this device wrote; one with
        // nothing sent yet; one deleted.
        for (id, t) in [
            ("session_OLDEROLDEROLDER1", "2026-11-26T10:00:00Z"),
            ("session_NEWERNEWERNEWER1", "2026-11-26T11:00:00Z"),
        ] {
            s.merge_service(ServiceSessions::One(&listed(id, t)))
                .unwrap();
        }
        s.append_message(
            "session_HEREHEREHEREHERE",
            &msg(Role::User, "lighthouse", 0),
        )
        .unwrap();
        s.upsert_session("session_UNSENTUNSENTUNSE", Utc::now())
            .unwrap();
        s.merge_service(ServiceSessions::One(&listed(
            "session_GONEGONEGONEGONE",
            "2026-11-26T12:00:00Z",
        )))
        .unwrap();
        s.mark_deleted("session_GONEGONEGONEGONE").unwrap();
        assert_eq!(
            s.unsearched_sessions().unwrap(),
            ["session_NEWERNEWERNEWER1", "session_OLDEROLDEROLDER1"]
        );
        assert_eq!(found(&s, "keeper"), []);
        // Its history read from the service: searched, and no longer listed as unsearched.
        let history: Vec<Message> = [(Role::User, "the keeper"), (Role::Assistant, "a lamp")]
            .into_iter()
            .enumerate()
            .map(|(i, (role, text))| Message {
                message_id: format!("msg_{i}"),
                session_id: "session_NEWERNEWERNEWER1".into(),
                role,
                content: text.into(),
                tokens: 15,
                created_at: "2026-11-26T11:00:00Z".into(),
                finish_reason: None,
            })
            .collect();
        s.catch_up("session_NEWERNEWERNEWER1", &history).unwrap();
        assert_eq!(
            found(&s, "keeper"),
            [("session_NEWERNEWERNEWER1".into(), 0)]
        );
        assert_eq!(
            s.unsearched_sessions().unwrap(),
            ["session_OLDEROLDEROLDER1"]
        );
    }

    #[test]
    fn deleted_sessions_are_not_found() {
        let s = Store::in_memory().unwrap();
        s.append_message("session_a", &msg(Role::User, "secret plans", 0))
            .unwrap();
        s.append_message("session_b", &msg(Role::User, "public plans", 1))
            .unwrap();
        s.mark_deleted("session_a").unwrap();
        assert_eq!(found(&s, "plans"), [("session_b".into(), 0)]);
        assert_eq!(found(&s, "secret"), []);
        // A session marked deleted whose rows somehow remain is not listed either.
        s.lock()
            .execute("UPDATE sessions SET deleted = 1 WHERE id = 'session_b'", [])
            .unwrap();
        assert_eq!(found(&s, "plans"), []);
    }

    /// Whether any file in `dir` (the database, its WAL and shared memory) holds `word`.
    fn files_hold(dir: &std::path::Path, word: &str) -> bool {
        std::fs::read_dir(dir).unwrap().any(|entry| {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            bytes.windows(word.len()).any(|w| w == word.as_bytes())
        })
    }

    #[test]
    fn a_deleted_session_leaves_no_word_in_the_index_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("convo.db")).unwrap();
        let word = "xylophonequartzsecret";
        s.append_message(
            "session_a",
            &msg(Role::User, &format!("the {word} plan"), 0),
        )
        .unwrap();
        s.append_message("session_b", &msg(Role::User, "keep me", 1))
            .unwrap();
        assert_eq!(found(&s, word), [("session_a".into(), 0)]);
        s.mark_deleted("session_a").unwrap();
        assert!(
            !files_hold(dir.path(), word),
            "a deleted word is still in the store's files"
        );
        assert_eq!(found(&s, "keep"), [("session_b".into(), 0)]);
    }

    /// An undone exchange leaves the store's files as a deleted session does: the message and
    /// its words in the index, in the database, its WAL and shared memory.
    #[test]
    fn an_undone_exchange_leaves_no_word_in_the_store_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("convo.db")).unwrap();
        let word = "marimbaquartzsecret";
        s.append_message("session_a", &msg(Role::User, "keep me", 0))
            .unwrap();
        s.append_message(
            "session_a",
            &msg(Role::User, &format!("the {word} plan"), 1),
        )
        .unwrap();
        assert_eq!(found(&s, word), [("session_a".into(), 1)]);
        assert_eq!(s.remove_last_exchange("session_a").unwrap(), 1);
        assert_eq!(found(&s, word), []);
        assert!(
            !files_hold(dir.path(), word),
            "an undone word is still in the store's files"
        );
        assert_eq!(found(&s, "keep"), [("session_a".into(), 0)]);
    }

    #[test]
    fn a_store_made_before_the_index_is_indexed_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        {
            // The schema of the first version only, with a message in it.
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(crate::local_store::MIGRATIONS[0])
                .unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO sessions (id, title, created_at, last_activity)
                 VALUES ('session_old', 'old', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
                [],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO messages (session_id, role, content, tokens, created_at, status)
                 VALUES ('session_old', 'user', 'kept from before', 3,
                         '2026-01-01T00:00:00.000Z', 'complete')",
                [],
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(found(&s, "before"), [("session_old".into(), 0)]);
    }

    #[test]
    fn results_are_limited_and_positions_count_the_session_messages() {
        let s = Store::in_memory().unwrap();
        for i in 0..30 {
            s.append_message("session_a", &msg(Role::User, &format!("word {i}"), i))
                .unwrap();
        }
        assert_eq!(s.search("word", 7).unwrap().len(), 7);
        assert_eq!(found(&s, "17"), [("session_a".into(), 17)]);
    }

    #[test]
    fn snippets_show_the_text_not_the_markdown() {
        let raw = "…You said: *\"and a \u{E000}static\u{E001} one\"* (7 words).\n\n- **3 messages**\n- `code` and [a link](https://x.org)\n\n## Head";
        let text: String = snippet_parts(raw).iter().map(|p| p.text.as_str()).collect();
        assert_eq!(
            text,
            "…You said: \"and a static one\" (7 words). 3 messages code and a link Head"
        );
        let matched: Vec<_> = snippet_parts(raw)
            .into_iter()
            .filter(|p| p.matched)
            .collect();
        assert_eq!(matched.len(), 1);
        assert_eq!(matched[0].text, "static");
    }

    #[test]
    fn snippets_are_one_clean_line_with_the_match_marked() {
        let parts = snippet_parts("a \u{1b}[31mred\n\n \u{E000}Word\u{E001}  next\t…");
        let text: String = parts.iter().map(|p| p.text.as_str()).collect();
        assert!(!text.contains('\u{1b}') && !text.contains('\n'), "{text:?}");
        assert_eq!(
            parts.iter().filter(|p| p.matched).collect::<Vec<_>>(),
            [&SnippetPart {
                text: "Word".into(),
                matched: true
            }]
        );
        assert!(text.ends_with("next …"), "{text:?}");
    }
}
