//! `convo fork`: a new session holding a session's history up to one of its messages (the
//! last by default), made by the service (`POST /v1/sessions/{id}/fork`, an extension) and
//! kept in the local store with where it came from.
use std::process::ExitCode;

use super::{codes, fail, fail_api, out, print_json, record, resolve_session_id, session_server};
use convo_client::api::{Message, new_session_id};
use convo_client::local_store::StoredMessage;
use convo_wire::exit;

/// What a server without the extension is told.
pub const CANNOT_FORK: &str =
    "this server cannot fork sessions (it has no POST /v1/sessions/{id}/fork; `convo serve` has)";

#[derive(Debug, clap::Args)]
pub struct ForkArgs {
    /// The session to fork: its id, the start of its id, or its title
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The message the fork ends with (user or assistant), by the server's id (`GET
    /// /v1/sessions/{id}/messages` lists them); default: the session's last message
    #[arg(long, value_name = "MESSAGE_ID")]
    pub at: Option<String>,
    /// Print the new session as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: ForkArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (client, store) = match session_server(&global).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    // A whole id passes as it is: the session may be another device's, not filed here yet.
    let source = match resolve_session_id(&store, &args.session).await {
        Ok((id, _)) => id,
        Err(code) => return code,
    };
    let at = match args.at.as_deref().map(str::trim) {
        Some("") => {
            return fail(
                exit::USAGE_ERROR,
                codes::INVALID_ARGUMENT,
                "--at needs a message id",
            );
        }
        Some(id) => id.to_string(),
        None => match client.session_messages(&source).await {
            Ok(Some(messages)) => match messages.last() {
                Some(m) => m.message_id.clone(),
                None => {
                    return fail(
                        exit::SERVICE_ERROR,
                        "message_not_found",
                        format_args!("session {source} has no message on the server to fork at"),
                    );
                }
            },
            Ok(None) => return fail(exit::SERVICE_ERROR, "unsupported", CANNOT_FORK),
            Err(e) => return fail_api(&e),
        },
    };
    let new_id = new_session_id();
    let summary = match client.fork(&source, &at, &new_id).await {
        Ok(Some(summary)) => summary,
        Ok(None) => return fail(exit::SERVICE_ERROR, "unsupported", CANNOT_FORK),
        Err(e) => return fail_api(&e),
    };
    // The copied history, so that `export`, `search` and the TUI have it at once.
    let copied: Vec<Message> = match client.session_messages(&summary.session_id).await {
        Ok(Some(messages)) => messages,
        Ok(None) | Err(_) => Vec::new(),
    };
    let (id, from, message) = (summary.session_id.clone(), source.clone(), at.clone());
    record(store, "the fork", move |s| {
        for m in &copied {
            s.append_message(&id, &StoredMessage::from_reply(m))?;
        }
        s.set_forked_from(&id, &from, &message)
    })
    .await;
    if args.json {
        return print_json(&summary);
    }
    out(format!(
        "forked {source} at {at} into {} ({})\n",
        summary.session_id,
        convo_client::format::counted(summary.message_count, "message")
    ));
    ExitCode::SUCCESS
}
