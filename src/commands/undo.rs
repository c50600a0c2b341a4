//! `convo undo`: remove a session's last exchange (its last user message and the reply) on
//! the service (`DELETE /v1/sessions/{id}/messages/last`, an extension) and in the local
//! store. Refused while a reply is being generated.
use std::process::ExitCode;

use super::{fail, fail_api, out, print_json, record, resolve_session_id, session_server};
use convo_wire::exit;

/// What a server without the extension is told.
pub const CANNOT_UNDO: &str =
    "this server cannot undo (it has no DELETE /v1/sessions/{id}/messages/last; `convo serve` has)";

#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// The session: its id, the start of its id, or its title
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// Print the service's answer as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: UndoArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (client, store) = match session_server(&global).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    // A whole id passes as it is: the session may be another device's, not filed here yet.
    let session = match resolve_session_id(&store, &args.session).await {
        Ok((id, _)) => id,
        Err(code) => return code,
    };
    let undone = match client.undo(&session).await {
        Ok(Some(undone)) => undone,
        Ok(None) => return fail(exit::SERVICE_ERROR, "unsupported", CANNOT_UNDO),
        Err(e) => return fail_api(&e),
    };
    let id = session.clone();
    record(store, "the undo", move |s| {
        s.remove_last_exchange(&id).map(|_| ())
    })
    .await;
    if args.json {
        return print_json(&undone);
    }
    out(format!(
        "removed the last exchange of {session} ({})\n",
        convo_client::format::counted(undone.removed_message_ids.len() as u64, "message")
    ));
    ExitCode::SUCCESS
}
