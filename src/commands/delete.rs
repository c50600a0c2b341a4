//! `convo delete`: delete a session and its whole history, after a question on a terminal.
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use super::{
    codes, fail, fail_api, out, print_json, record, resolve_session_id, sanitize, session_server,
};
use convo_client::api::ApiError;
use convo_client::local_store::SessionRecord;
use convo_wire::exit;

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
    /// Delete without asking (on a terminal, convo asks first; elsewhere it never asks)
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub async fn run(args: DeleteArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (client, store) = match session_server(&global).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (session_id, known) = match resolve_session_id(&store, &args.session_id).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    // Someone at a terminal confirms what a prefix or a title chose; a script is not asked.
    let asks = !args.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if asks {
        match confirm(&session_id, known.as_ref()).await {
            Ok(true) => {}
            Ok(false) => {
                eprintln!("kept {session_id}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                return fail(
                    exit::USAGE_ERROR,
                    codes::IO,
                    format_args!("cannot read the answer: {e}"),
                );
            }
        }
    }
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

/// Asks on stderr whether to delete the session (its title and token total when the store
/// knows it) and reads the answer from stdin: `y` or `yes` deletes, anything else (Enter
/// too) keeps it.
async fn confirm(session_id: &str, known: Option<&SessionRecord>) -> std::io::Result<bool> {
    let what = match known {
        Some(r) => format!(
            "{session_id} “{}” ({} tokens)",
            sanitize(r.title.as_deref().unwrap_or("untitled")),
            r.tokens
        ),
        None => session_id.to_string(),
    };
    let mut err = std::io::stderr();
    write!(err, "delete {what} and its whole history? [y/N] ")?;
    err.flush()?;
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(std::io::Error::other)??;
    Ok(is_yes(&answer))
}

fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_yes_deletes() {
        for yes in ["y", "Y", "yes\n", " YES "] {
            assert!(super::is_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yess", "delete"] {
            assert!(!super::is_yes(no), "{no:?}");
        }
    }
}
