//! `convo delete`: delete a session and its whole history.
use std::process::ExitCode;

use super::{check_session_id, connect, fail_api, open_store, out, print_json, record};
use convo_client::api::ApiError;

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// The session to delete
    #[arg(value_name = "SESSION_ID")]
    pub session_id: String,
    /// Print the service's answer as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: DeleteArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    if let Err(code) = check_session_id(&args.session_id) {
        return code;
    }
    let (config, client) = match connect(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let store = match open_store(&config) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let result = client.delete_session(&args.session_id).await;
    // Deleted now or long ago: either way the local copy goes too.
    if matches!(result, Ok(_) | Err(ApiError::SessionNotFound { .. })) {
        let id = args.session_id.clone();
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
