//! `convo cancel`: stop a reply being generated (`POST
//! /v1/sessions/{id}/messages/{messageId}/cancel`, an extension). The service keeps the text so
//! far as the reply, marked `stopped`. Without a message id, the reply the session is
//! generating is found: the stored history ends with a message that has no reply yet, and the
//! session's stream names that reply (its `snapshot` on connect).
use std::process::ExitCode;
use std::time::Duration;

use super::{fail, fail_api, out, print_json, resolve_session_id};
use convo_client::api::{
    Cancelled, Client, Role, SessionStream, StreamEvent, StreamTiming, StreamUpdate, Update,
};
use convo_wire::exit;

/// What a server without the extension is told.
pub const CANNOT_CANCEL: &str = "this server cannot stop a reply (it has no POST \
     /v1/sessions/{id}/messages/{messageId}/cancel; `convo serve` has)";
/// The error code when the session generates no reply.
const NO_REPLY_RUNNING: &str = "no_reply_running";
/// How long the session's stream may take to name the reply it generates.
const NAMED_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  convo cancel session_abcdefgh12345678\n  convo cancel session_abcdefgh12345678 msg_AbCdEf0123456789\n  convo send --stream --json \"write an essay\" (the reply's messageId is on the 202)"
)]
pub struct CancelArgs {
    /// The session: its id, the start of its id, or its title
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The reply to stop (its messageId); without it, the reply the session is generating
    #[arg(value_name = "MESSAGE")]
    pub message: Option<String>,
    /// Print the service's answer as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: CancelArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (client, store) = match super::running_server(&global).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    // A whole id passes as it is: the session may be another device's, not filed here yet.
    let session = match resolve_session_id(&store, &args.session).await {
        Ok((id, _)) => id,
        Err(code) => return code,
    };
    let message = match args.message {
        Some(message) => message,
        None => match running_reply(&client, &session).await {
            Ok(message) => message,
            Err(code) => return code,
        },
    };
    let cancelled = match client.cancel(&session, &message).await {
        Ok(Some(cancelled)) => cancelled,
        Ok(None) => return fail(exit::SERVICE_ERROR, "unsupported", CANNOT_CANCEL),
        // Not an error: what was asked for has happened, by itself.
        Err(e) if e.code() == "reply_finished" => Cancelled {
            session_id: session.clone(),
            message_id: message,
            stopping: false,
        },
        Err(e) => return fail_api(&e),
    };
    if args.json {
        return print_json(&cancelled);
    }
    if cancelled.stopping {
        out(format!(
            "stopping {} of {session}: the text so far is kept as the reply\n",
            cancelled.message_id
        ));
    } else {
        out(format!(
            "{} of {session} had already ended: nothing to stop\n",
            cancelled.message_id
        ));
    }
    ExitCode::SUCCESS
}

/// The id of the reply `session` is generating: its stored history ends with a message that
/// has no reply yet, and the session's stream names the reply on connect (or one that started
/// since). Exit 1 when it generates none.
async fn running_reply(client: &Client, session: &str) -> Result<String, ExitCode> {
    let (_stream, mut updates) =
        SessionStream::connect_with(client.options().clone(), session, StreamTiming::one_shot());
    // Connected first, so that a reply running when the history is read is on the stream.
    loop {
        match updates.recv().await {
            Some(Update::Connected) => break,
            Some(Update::Event(_))
            | Some(Update::Disconnected {
                retry_in: Some(_), ..
            }) => {}
            Some(Update::Disconnected { error, .. }) => return Err(fail_api(&error)),
            Some(Update::Unsupported) | None => {
                return Err(fail(
                    exit::SERVICE_ERROR,
                    "unsupported",
                    "this server has no session stream to name the running reply: give its \
                     MESSAGE id",
                ));
            }
        }
    }
    let history = match client.session_messages(session).await {
        Ok(Some(history)) => history,
        Ok(None) => {
            return Err(fail(
                exit::SERVICE_ERROR,
                "unsupported",
                "this server cannot list a session's messages to find the running reply: give \
                 its MESSAGE id",
            ));
        }
        Err(e) => return Err(fail_api(&e)),
    };
    // A reply being generated is not in the history; the message it answers is.
    let awaits_reply = history.last().is_some_and(|m| m.role != Role::Assistant);
    let named = if awaits_reply {
        tokio::time::timeout(NAMED_WITHIN, next_reply(&mut updates))
            .await
            .map_err(|_| {
                fail(
                    exit::SERVICE_ERROR,
                    NO_REPLY_RUNNING,
                    format_args!(
                        "{session}'s last message has no reply yet, but the service named no \
                         reply in flight within {} s: give its MESSAGE id",
                        NAMED_WITHIN.as_secs()
                    ),
                )
            })?
    } else {
        // A reply that started after the history was read may be on the stream already.
        let mut named = None;
        while let Ok(update) = updates.try_recv() {
            named = named.or_else(|| reply_of(update));
        }
        named
    };
    named.ok_or_else(|| {
        fail(
            exit::SERVICE_ERROR,
            NO_REPLY_RUNNING,
            format_args!("{session} is generating no reply: nothing to stop"),
        )
    })
}

/// The next reply the session's stream speaks of; `None` when the stream ends. A reply that
/// ended meanwhile is named too: the cancel then says it had ended.
async fn next_reply(updates: &mut tokio::sync::mpsc::Receiver<StreamUpdate>) -> Option<String> {
    while let Some(update) = updates.recv().await {
        match update {
            Update::Disconnected { retry_in: None, .. } | Update::Unsupported => return None,
            other => {
                if let Some(id) = reply_of(other) {
                    return Some(id);
                }
            }
        }
    }
    None
}

/// The reply an update of the session's stream is about, if any.
fn reply_of(update: StreamUpdate) -> Option<String> {
    match update {
        Update::Event(
            StreamEvent::Started { message_id, .. }
            | StreamEvent::Snapshot { message_id, .. }
            | StreamEvent::Progress { message_id, .. }
            | StreamEvent::Delta { message_id, .. }
            | StreamEvent::Error { message_id, .. },
        ) => Some(message_id),
        Update::Event(StreamEvent::Done { message }) => Some(message.message_id),
        _ => None,
    }
}
