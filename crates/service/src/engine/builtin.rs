//! The offline engine: deterministic replies built from the conversation itself (what was
//! asked, how many messages and tokens so far), in markdown, streamed word by word. A reply
//! is cut (`Finish::Length`) where the context window leaves no more room, as a model's
//! would be; its first word always comes.

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::{EngineError, EngineEvent, Finish, ReplyEngine, ReplyRequest};
use convo_wire::Role;

pub struct BuiltinEngine {
    pace: Duration,
}

impl BuiltinEngine {
    pub fn new(pace_ms: u64) -> Self {
        BuiltinEngine {
            pace: Duration::from_millis(pace_ms),
        }
    }
}

impl ReplyEngine for BuiltinEngine {
    fn name(&self) -> &'static str {
        "builtin"
    }

    fn label(&self) -> String {
        "builtin (no model)".into()
    }

    fn reply<'a>(
        &'a self,
        request: ReplyRequest,
        out: mpsc::Sender<EngineEvent>,
    ) -> BoxFuture<'a, Result<Finish, EngineError>> {
        async move {
            let text = compose(&request);
            let room = request
                .max_context_tokens
                .saturating_sub(request.context_tokens);
            let (pieces, finish) = within(words(&text), room);
            if self.pace.is_zero() && !request.streamed {
                // Nothing to pace and nobody watching: the reply in one piece.
                let _ = out.send(EngineEvent::Text(pieces.concat())).await;
                return Ok(finish);
            }
            for (i, piece) in pieces.into_iter().enumerate() {
                if i > 0 && !self.pace.is_zero() {
                    tokio::time::sleep(self.pace).await;
                }
                if out.send(piece.into()).await.is_err() {
                    break;
                }
            }
            Ok(finish)
        }
        .boxed()
    }
}

/// The leading `pieces` that fit in `room` tokens (counted piece by piece; the first always),
/// and how the reply ends: `Length` when some were left out.
fn within(pieces: Vec<&str>, room: u64) -> (Vec<&str>, Finish) {
    let mut used = 0;
    for (i, piece) in pieces.iter().enumerate() {
        let tokens = convo_tokens::count(piece);
        if i > 0 && used + tokens > room {
            let kept = pieces[..i].to_vec();
            return (kept, Finish::Length { tokens: used });
        }
        used += tokens;
    }
    (pieces, Finish::Complete)
}

/// Splits `text` into pieces of one word plus the whitespace after it; they concatenate to `text`.
pub fn words(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            pieces.push(&text[start..i]);
            start = i;
            in_space = false;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

const CODE_WORDS: &[&str] = &[
    "code",
    "function",
    "snippet",
    "program",
    "script",
    "implement",
    "rust",
    "python",
    "example",
];

fn asks_for_code(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("```")
        || lower
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| CODE_WORDS.contains(&w))
}

/// `n thing` or `n things`.
fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// True when `word` is one of the words of `text` (any case).
fn mentions(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case(word))
}

fn is_greeting(text: &str) -> bool {
    let first = text
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_lowercase();
    ["hi", "hello", "hey", "hallo", "bonjour", "hola"].contains(&first.as_str())
}

/// `text` on one line, without markdown markers that would break the surrounding emphasis,
/// cut at `max_chars`.
fn quote(text: &str, max_chars: usize) -> String {
    let one_line = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(['*', '`', '_'], "");
    if one_line.chars().count() <= max_chars {
        one_line
    } else {
        let cut: String = one_line.chars().take(max_chars).collect();
        format!("{}…", cut.trim_end())
    }
}

/// The reply text for `request` (deterministic: same conversation, same reply).
pub fn compose(request: &ReplyRequest) -> String {
    let history = &request.history;
    let asked = history
        .iter()
        .rev()
        .find(|m| m.role != Role::Assistant)
        .map(|m| m.content.as_str())
        .unwrap_or("");
    let count = |role| history.iter().filter(|m| m.role == role).count();
    let (users, systems, assistants) = (
        count(Role::User),
        count(Role::System),
        count(Role::Assistant),
    );
    let percent = if request.max_context_tokens == 0 {
        0.0
    } else {
        request.context_tokens as f64 / request.max_context_tokens as f64 * 100.0
    };
    let words_asked = asked.split_whitespace().count();

    let mut text = String::new();
    if is_greeting(asked) && users <= 1 {
        text.push_str("Hello! ");
    }
    text.push_str(
        "I am **convo's offline engine**: no language model runs here, so I answer from the \
         conversation itself.\n\n",
    );
    text.push_str(&format!(
        "You said: *\"{}\"* ({}).\n\n",
        quote(asked, 160),
        plural(words_asked, "word")
    ));
    text.push_str("This session so far:\n\n");
    text.push_str(&format!(
        "- **{}** {}: {users} from you{}, {assistants} from me\n",
        history.len(),
        if history.len() == 1 {
            "message"
        } else {
            "messages"
        },
        if systems > 0 {
            format!(", {systems} system")
        } else {
            String::new()
        }
    ));
    text.push_str(&format!(
        "- **{}** of {} context tokens used ({percent:.1} %)\n",
        request.context_tokens, request.max_context_tokens
    ));
    if let Some(first) = history.iter().find(|m| m.role == Role::User)
        && users > 1
    {
        text.push_str(&format!(
            "- it began with *\"{}\"*\n",
            quote(&first.content, 60)
        ));
    }
    let earlier: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
        .rev()
        .skip(1)
        .take(3)
        .collect();
    if !earlier.is_empty() {
        text.push_str("\nMost recently before this, you said:\n\n");
        for said in earlier {
            text.push_str(&format!("1. *\"{}\"*\n", quote(said, 80)));
        }
    }
    if asked.trim_end().ends_with('?') {
        text.push_str(
            "\nThat is a question I cannot look up offline; a model behind the `openai` engine \
             can answer it.\n",
        );
    }
    if asks_for_code(asked) && mentions(asked, "python") {
        let escaped = quote(asked, 60).replace('\\', "\\\\").replace('"', "\\\"");
        text.push_str(&format!(
            "\nYou asked for code; here is a small Python program that measures your message:\n\n\
             ```python\nmessage = \"{escaped}\"\nwords = len(message.split())\n\
             print(f\"{{words}} words, {{len(message)}} characters\")\n```\n"
        ));
    } else if asks_for_code(asked) {
        let escaped = quote(asked, 60).replace('\\', "\\\\").replace('"', "\\\"");
        text.push_str(&format!(
            "\nYou asked for code; here is a small Rust program that measures your message:\n\n\
             ```rust\nfn main() {{\n    let message = \"{escaped}\";\n    let words = message.split_whitespace().count();\n    \
             println!(\"{{}} words, {{}} characters\", words, message.chars().count());\n}}\n```\n"
        ));
    }
    text.push_str(
        "\nThese are canned replies. For real answers, install a model with `convo model pull \
         NAME` (`convo model list --available` lists them) and start convo (or `convo serve`) \
         again: it answers with the installed model. Or run `convo serve --engine openai` \
         against an OpenAI-compatible server (Ollama, llama.cpp, vLLM).",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use convo_core::HistoryEntry;

    #[test]
    fn a_reply_is_cut_where_the_context_leaves_no_room() {
        let pieces = words("one two three four five");
        let (all, finish) = within(pieces.clone(), 1000);
        assert_eq!(all, pieces);
        assert_eq!(finish, Finish::Complete);
        let room = convo_tokens::count("one ") + convo_tokens::count("two ");
        let (cut, finish) = within(pieces.clone(), room);
        assert_eq!(cut.concat(), "one two ");
        assert_eq!(finish, Finish::Length { tokens: room });
        // The first word comes even with no room at all.
        let (first, finish) = within(pieces, 0);
        assert_eq!(first, vec!["one "]);
        assert_eq!(
            finish,
            Finish::Length {
                tokens: convo_tokens::count("one ")
            }
        );
    }

    fn request(texts: &[(Role, &str)]) -> ReplyRequest {
        ReplyRequest {
            session_id: "session_abcdefgh12345678".into(),
            history: texts
                .iter()
                .map(|(role, t)| HistoryEntry {
                    role: *role,
                    content: t.to_string(),
                    tokens: 3,
                })
                .collect(),
            context_tokens: 3 * texts.len() as u64,
            max_context_tokens: 8192,
            streamed: false,
        }
    }

    async fn pieces(engine: &BuiltinEngine, request: ReplyRequest) -> Vec<String> {
        let (tx, mut rx) = mpsc::channel(1024);
        engine.reply(request, tx).await.unwrap();
        let mut out = Vec::new();
        while let Some(EngineEvent::Text(piece)) = rx.recv().await {
            out.push(piece);
        }
        out
    }

    /// Word by word when someone may watch or there is a pace; one piece otherwise. The text
    /// is the same either way.
    #[tokio::test]
    async fn a_reply_nobody_watches_at_pace_0_comes_in_one_piece() {
        let asked = request(&[(Role::User, "What is a monad?")]);
        let text = compose(&asked);
        let instant = BuiltinEngine::new(0);
        assert_eq!(pieces(&instant, asked.clone()).await, vec![text.clone()]);
        let watched = ReplyRequest {
            streamed: true,
            ..asked.clone()
        };
        let streamed = pieces(&instant, watched).await;
        assert_eq!(streamed, words(&text));
        assert!(streamed.len() > 5);
        let paced = pieces(&BuiltinEngine::new(1), asked).await;
        assert_eq!(paced, words(&text));
    }

    /// The canned reply says how to get real ones: a model, which convo and `convo serve` use
    /// once installed (`--engine auto`), or another server.
    #[test]
    fn the_reply_names_the_pull_and_the_restart() {
        let text = compose(&request(&[(Role::User, "What is a monad?")]));
        for needle in [
            "start convo (or `convo serve`) again",
            "convo model pull",
            "convo model list --available",
            "--engine openai",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
    }

    #[test]
    fn words_concatenate_to_the_text() {
        let text = "Hello  world\n\n- item *one*\n```rust\nfn x() {}\n```";
        assert_eq!(words(text).concat(), text);
        assert_eq!(words("a b"), ["a ", "b"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn replies_say_what_they_are_and_answer_from_the_conversation() {
        let r = compose(&request(&[(Role::User, "What is a monad?")]));
        assert!(r.contains("offline engine"));
        assert!(r.contains("What is a monad?"));
        assert!(r.contains("**1** message:"));
        assert!(!r.contains("```"));
        let again = compose(&request(&[(Role::User, "What is a monad?")]));
        assert_eq!(r, again, "deterministic");
    }

    #[test]
    fn later_turns_recall_earlier_messages_and_questions_are_named() {
        let r = compose(&request(&[
            (Role::User, "Hello there"),
            (Role::Assistant, "..."),
            (Role::User, "I like **bold** ideas"),
            (Role::Assistant, "..."),
            (Role::User, "Why is the sky blue?"),
        ]));
        assert!(!r.starts_with("Hello!"), "only the first turn greets back");
        assert!(r.contains("1. *\"I like bold ideas\"*\n1. *\"Hello there\"*"));
        assert!(r.contains("question I cannot look up offline"));
        assert!(r.contains("it began with *\"Hello there\"*"));
        assert!(compose(&request(&[(Role::User, "hi!")])).starts_with("Hello! "));
    }

    #[test]
    fn code_requests_get_a_fenced_block() {
        let r = compose(&request(&[(Role::User, "show me some code \"quoted\"")]));
        assert!(r.contains("```rust\n"));
        assert!(r.contains("\\\"quoted\\\""));
    }

    #[test]
    fn counts_are_in_good_grammar_and_code_comes_in_the_language_asked_for() {
        let one = compose(&request(&[(Role::User, "hello")]));
        assert!(one.contains("(1 word)"), "{one}");
        assert!(one.contains("**1** message:"), "{one}");
        let py = compose(&request(&[(
            Role::User,
            "write python code to count words",
        )]));
        assert!(py.contains("```python") && !py.contains("```rust"), "{py}");
        let rs = compose(&request(&[(Role::User, "write some code please")]));
        assert!(rs.contains("```rust"), "{rs}");
    }

    #[test]
    fn builtin_replies_split_as_tiktoken_splits_them() {
        let said = [
            "Hello from wrk: how do lifetimes work in Rust?",
            "write python code to count words",
            "show me some code \"quoted\" please",
            "hi!",
        ];
        let mut history = Vec::new();
        for text in said {
            history.push(HistoryEntry {
                role: Role::User,
                content: text.into(),
                tokens: 3,
            });
            let reply = compose(&ReplyRequest {
                session_id: "session_abcdefgh12345678".into(),
                history: history.clone(),
                context_tokens: 42,
                max_context_tokens: 8192,
                streamed: false,
            });
            let tiktoken = tiktoken_rs::o200k_base_singleton()
                .encode_ordinary(&reply)
                .len() as u64;
            assert_eq!(convo_tokens::count(&reply), tiktoken, "{reply:?}");
            history.push(HistoryEntry {
                role: Role::Assistant,
                content: reply,
                tokens: 3,
            });
        }
    }
}
