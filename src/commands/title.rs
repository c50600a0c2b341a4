//! `convo title`: give a session a title of your own, or go back to the first message's.
//! Kept in the local store, and sent to a configured server that has titles (`PATCH
//! /v1/sessions/{id}`, an extension of `convo serve`) so that every device lists the session
//! by the same words; the seed's interface has none.
use std::process::ExitCode;

use serde::Serialize;

use super::{
    codes, fail, find_session, in_store, load_config, open_store, out, print_json, sanitize,
};
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
    let config = match load_config(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let store = match open_store(&config) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // Where the server lists sessions, those of other devices can be titled too.
    super::sessions::refresh(&config, &store).await;
    let session = match find_session(&store, &args.session).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let text = args.text.join(" ");
    let id = session.id.clone();
    let set = in_store(store.clone(), move |s| {
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
    if let Some(title) = record.title.as_deref().filter(|_| record.title_set)
        && config.connection.base_url.is_some()
        && let Ok(client) = convo_client::api::ClientOptions::from_config(&config)
            .and_then(convo_client::api::Client::new)
    {
        super::sessions::send_title(&client, &store, &record.id, title).await;
    }
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
