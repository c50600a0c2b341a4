//! The rules of the session extensions: what a title the service stores may be, which
//! messages undoing the last exchange removes (and what becomes of the `Idempotency-Key`
//! records of the sends it undid), and which a fork copies.

use convo_wire::{ErrorBody, ErrorEnvelope, Message, Role};

use crate::Recorded;

/// Longest title the service stores, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// The title to store for `text`: trimmed, non-empty, at most [`MAX_TITLE_CHARS`]
/// characters and without control characters (a line break included); else why not.
pub fn check_title(text: &str) -> Result<String, String> {
    let title = text.trim();
    if title.is_empty() {
        return Err("title must not be empty".to_string());
    }
    let chars = title.chars().count();
    if chars > MAX_TITLE_CHARS {
        return Err(format!(
            "title is {chars} characters long; the maximum is {MAX_TITLE_CHARS}"
        ));
    }
    if let Some(c) = title.chars().find(|c| c.is_control()) {
        return Err(format!(
            "title must not contain control characters (found U+{:04X})",
            c as u32
        ));
    }
    Ok(title.to_string())
}

/// Where the last exchange of a conversation (its messages' roles, oldest first) starts: at
/// its last user message. Undoing it removes that message and everything after it (its reply,
/// and a system message sent after it); `None` when there is no user message to undo.
pub fn last_exchange_start(roles: &[Role]) -> Option<usize> {
    roles.iter().rposition(|r| *r == Role::User)
}

/// The error code a send retried with the `Idempotency-Key` of an exchange that was undone
/// is answered with (409).
pub const EXCHANGE_UNDONE: &str = "exchange_undone";

/// What undoing an exchange makes of its session's `Idempotency-Key` records, given as (key,
/// recorded answer), when `removed` are the ids of the messages it removed: the records to
/// write over, each with its new answer. A send's recorded answer is its reply (200, or the
/// 202 naming the reply to come); when that reply was removed, a retry of the send must
/// neither replay a reply that is gone nor send the message again behind the user's back, so
/// the key answers 409 [`EXCHANGE_UNDONE`] for the rest of its 24 hours. Records of other
/// exchanges are left as they are.
pub fn records_after_undo(
    records: &[(String, Recorded)],
    removed: &[String],
) -> Vec<(String, Recorded)> {
    records
        .iter()
        .filter(|(_, recorded)| {
            serde_json::from_str::<Message>(&recorded.body)
                .is_ok_and(|reply| removed.contains(&reply.message_id))
        })
        .map(|(key, _)| (key.clone(), undone_answer()))
        .collect()
}

/// The answer recorded for a key whose exchange was undone: 409 [`EXCHANGE_UNDONE`].
pub fn undone_answer() -> Recorded {
    let envelope = ErrorEnvelope {
        error: ErrorBody::new(
            EXCHANGE_UNDONE,
            "the exchange this Idempotency-Key sent was undone \
             (DELETE /v1/sessions/{sessionId}/messages/last); to send the message again, \
             send it with a new key",
        ),
    };
    Recorded {
        status: 409,
        body: serde_json::to_string(&envelope).expect("an error envelope serialises"),
    }
}

/// How many messages of a conversation (its message ids, oldest first) a fork at
/// `message_id` copies: those up to and including it, whatever its role. `None` when the
/// conversation has no such message.
pub fn fork_length<S: AsRef<str>>(message_ids: &[S], message_id: &str) -> Option<usize> {
    message_ids
        .iter()
        .position(|id| id.as_ref() == message_id)
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(id: &str, status: u16) -> Recorded {
        let message = Message {
            message_id: id.into(),
            session_id: "session_a".into(),
            role: Role::Assistant,
            content: "hi".into(),
            tokens: 1,
            created_at: "2026-11-26T00:00:00Z".into(),
            finish_reason: None,
        };
        Recorded {
            status,
            body: serde_json::to_string(&message).unwrap(),
        }
    }

    #[test]
    fn an_undo_turns_the_keys_of_the_replies_it_removed_into_exchange_undone() {
        let records = vec![
            ("kept".to_string(), reply("msg_1", 200)),
            ("undone".to_string(), reply("msg_3", 200)),
            ("streamed".to_string(), reply("msg_5", 202)),
            (
                "odd".to_string(),
                Recorded {
                    status: 200,
                    body: "not json".into(),
                },
            ),
        ];
        let removed = ["msg_2", "msg_3", "msg_4", "msg_5"].map(String::from);
        let written = records_after_undo(&records, &removed);
        let keys: Vec<&str> = written.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["undone", "streamed"]);
        for (_, answer) in &written {
            assert_eq!(answer.status, 409);
            let envelope: ErrorEnvelope = serde_json::from_str(&answer.body).unwrap();
            assert_eq!(envelope.error.code, EXCHANGE_UNDONE);
        }
        assert!(records_after_undo(&records, &[]).is_empty());
    }

    #[test]
    fn a_fork_copies_up_to_and_including_its_message() {
        let ids = ["m1", "m2", "m3", "m4"];
        assert_eq!(fork_length(&ids, "m1"), Some(1));
        assert_eq!(fork_length(&ids, "m2"), Some(2));
        assert_eq!(fork_length(&ids, "m4"), Some(4));
        assert_eq!(fork_length(&ids, "m5"), None);
        assert_eq!(fork_length::<&str>(&[], "m1"), None);
    }

    #[test]
    fn the_last_exchange_starts_at_the_last_user_message() {
        use Role::{Assistant as A, System as S, User as U};
        assert_eq!(last_exchange_start(&[U, A, U, A]), Some(2));
        assert_eq!(last_exchange_start(&[S, A, U, A, S, A]), Some(2));
        assert_eq!(last_exchange_start(&[U]), Some(0));
        assert_eq!(last_exchange_start(&[S, A]), None);
        assert_eq!(last_exchange_start(&[]), None);
    }

    #[test]
    fn a_title_is_trimmed_and_kept() {
        assert_eq!(
            check_title("  Trip plans \u{e9} "),
            Ok("Trip plans \u{e9}".into())
        );
        assert_eq!(
            check_title(&"x".repeat(MAX_TITLE_CHARS)).map(|t| t.len()),
            Ok(MAX_TITLE_CHARS)
        );
    }

    #[test]
    fn blank_long_and_control_titles_are_refused() {
        assert!(check_title(" \t\n ").unwrap_err().contains("empty"));
        assert!(
            check_title(&"x".repeat(MAX_TITLE_CHARS + 1))
                .unwrap_err()
                .contains("maximum")
        );
        assert!(check_title("a\nb").unwrap_err().contains("U+000A"));
        assert!(check_title("a\u{1b}[31mb").unwrap_err().contains("U+001B"));
    }
}
