//! `convo title`: give a session a title of your own, or go back to the first message's.
//! Kept in the local store only (the interface has no titles).
use std::process::ExitCode;

use serde::Serialize;

use super::{codes, fail, find_session, in_store, local_store, out, print_json, sanitize};
use convo_wire::exit;

#[derive(Debug, clap::Args)]
pub struct TitleArgs {
    /// The session: its id, the start of its id, or its title
    #[arg(value_name = "SESSION_ID")]
    pub session: String,
    /// The new title (words are joined with spaces); none clears it, so that the first
    /// message titles the session again
    #[arg(value_name = "TEXT")]
    pub text: Vec<String>,
    /// Print the session's id and title as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TitleJson<'a> {
    session_id: &'a str,
    title: Option<&'a str>,
    title_set: bool,
}

pub async fn run(args: TitleArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let store = match local_store(&global) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let session = match find_session(&store, &args.session).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let text = args.text.join(" ");
    let id = session.id.clone();
    let set = in_store(store, move |s| {
        s.set_title(&id, Some(text.as_str()).filter(|t| !t.trim().is_empty()))
    })
    .await;
    let record = match set {
        Ok(Some(r)) => r,
        // Deleted between the look-up and now.
        Ok(None) => {
            return fail(
                exit::SERVICE_ERROR,
                codes::SESSION_NOT_FOUND,
                format_args!("session {} is not in the local store", session.id),
            );
        }
        Err(code) => return code,
    };
    if args.json {
        return print_json(&TitleJson {
            session_id: &record.id,
            title: record.title.as_deref(),
            title_set: record.title_set,
        });
    }
    let title = sanitize(
        record
            .title
            .as_deref()
            .unwrap_or(convo_client::export::UNTITLED),
    )
    .into_owned();
    if record.title_set {
        out(format!("{}: “{title}”\n", record.id));
    } else {
        out(format!(
            "{}: title cleared, the first message's again: “{title}”\n",
            record.id
        ));
    }
    ExitCode::SUCCESS
}
