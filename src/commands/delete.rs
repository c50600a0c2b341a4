//! `convo delete`: delete a session and its whole history.
use std::process::ExitCode;

use super::{connect_with_store, fail_api, out, print_json, record, resolve_session_id};
use convo_client::api::ApiError;

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// The session: its id, the start of its id, or its title (among the configured
    /// server's sessions in the local store; a whole id the store does not know is sent as
    /// it is)
    #[arg(value_name = "SESSION_ID")]
    pub session_id: String,
    /// Print the service's answer as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: DeleteArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (client, store) = match connect_with_store(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let session_id = match resolve_session_id(&store, &args.session_id).await {
        Ok((id, _)) => id,
        Err(code) => return code,
    };
    let result = client.delete_session(&session_id).await;
    // Deleted now or long ago: either way the local copy goes too.
    if matches!(result, Ok(_) | Err(ApiError::SessionNotFound { .. })) {
        let id = session_id.clone();
        record(store, "the deletion", move |s| s.mark_deleted(&id)).await;
    }
    match result {
        Ok(deleted) if args.json => print_json(&deleted),
        Ok(deleted) => {
            out(format!("deleted {}\n", deleted.session_id));
            ExitCode::SUCCESS
        }
        Err(e) => fail_api(&e),
    }
}
