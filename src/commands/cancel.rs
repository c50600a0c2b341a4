//! `convo cancel`: stop a reply being generated (`POST
//! /v1/sessions/{id}/messages/{messageId}/cancel`, an extension). The service keeps the text so
//! far as the reply, marked `stopped`.
use std::process::ExitCode;

use super::{connect_with_store, fail, fail_api, find_session, out, print_json};
use convo_wire::exit;

/// What a server without the extension is told.
pub const CANNOT_CANCEL: &str = "this server cannot stop a reply (it has no POST \
     /v1/sessions/{id}/messages/{messageId}/cancel; `convo serve` has)";

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  convo cancel session_abcdefgh12345678 msg_AbCdEf0123456789\n  convo send --stream --json \"write an essay\" (the reply's messageId is on the 202)"
)]
pub struct CancelArgs {
    /// The session: its id, the start of its id, or its title
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The reply to stop (its messageId)
    #[arg(value_name = "MESSAGE")]
    pub message: String,
    /// Print the service's answer as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: CancelArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (client, store) = match connect_with_store(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let session = match find_session(&store, &args.session).await {
        Ok(s) => s.id,
        Err(code) => return code,
    };
    let cancelled = match client.cancel(&session, &args.message).await {
        Ok(Some(cancelled)) => cancelled,
        Ok(None) => return fail(exit::SERVICE_ERROR, "unsupported", CANNOT_CANCEL),
        Err(e) => return fail_api(&e),
    };
    if args.json {
        return print_json(&cancelled);
    }
    out(format!(
        "stopping {} of {session}: the text so far is kept as the reply\n",
        cancelled.message_id
    ));
    ExitCode::SUCCESS
}
