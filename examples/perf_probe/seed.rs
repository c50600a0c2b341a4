//! Seeding a data dir with a long history.

use super::*;

pub(crate) fn seed(data_dir: &Path, count: usize) -> Result<()> {
    use convo_client::api::Role;
    use convo_client::local_store::{MessageStatus, Store, StoredMessage};

    std::fs::create_dir_all(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let store = Store::open(&data_dir.join("convo.db")).map_err(|e| e.to_string())?;
    let session = "session_perf000000010000";
    let start = chrono::Utc::now() - chrono::Duration::seconds(count as i64 * 30);
    let began = Instant::now();
    for i in 0..count {
        let user = i % 2 == 0;
        let content = if i + 1 == count {
            // The last message is what `rss` waits for: the transcript is drawn at its end.
            format!("Last one, number {i}: perf-marker-last")
        } else if user {
            seeded_question(i)
        } else {
            seeded_reply(i)
        };
        let message = StoredMessage {
            role: if user { Role::User } else { Role::Assistant },
            tokens: (content.len() / 4) as u64,
            content,
            created_at: start + chrono::Duration::seconds(i as i64 * 30),
            message_id: (!user).then(|| format!("msg_perf{i:020}")),
            status: MessageStatus::Complete,
            finish_reason: None,
        };
        store
            .append_message(session, &message)
            .map_err(|e| e.to_string())?;
    }
    store
        .set_last_open_session(session)
        .map_err(|e| e.to_string())?;
    let bytes = std::fs::metadata(data_dir.join("convo.db"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "seeded {count} messages into {} ({:.1} MB) in {:.1} s; session {session}",
        data_dir.join("convo.db").display(),
        bytes as f64 / 1e6,
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

pub(crate) fn seeded_question(i: usize) -> String {
    const QUESTIONS: [&str; 4] = [
        "How do I share state between tokio tasks without holding a lock across an await?",
        "What is the difference between `&str` and `String`, and when should a function take each?",
        "Can you explain lifetimes in trait objects, e.g. `Box<dyn Fn() + 'a>`?",
        "Why does my iterator chain allocate? I only call `map`, `filter` and `collect` once.",
    ];
    format!("{} (question {i})", QUESTIONS[i / 2 % QUESTIONS.len()])
}

/// A reply of realistic shape: paragraphs, a list, and every third one a code block.
pub(crate) fn seeded_reply(i: usize) -> String {
    let mut s = format!(
        "Reply {i}. The short answer is that **ownership** decides who frees a value, and \
         *borrowing* lets others look at it for a while without taking it. The compiler checks \
         both at compile time, so there is no cost at run time.\n\n\
         - keep the lock guard in a block that ends before the `.await`\n\
         - or send messages to one task that owns the state\n\
         - measure before reaching for `Arc<Mutex<_>>` everywhere\n"
    );
    if i % 3 == 1 {
        s.push_str(
            "\n```rust\nlet total: u64 = items\n    .iter()\n    .filter(|m| m.role == Role::User)\n    \
             .map(|m| m.tokens)\n    .sum();\nprintln!(\"{total}\");\n```\n",
        );
    }
    s.push_str("\nDoes that answer it?");
    s
}
