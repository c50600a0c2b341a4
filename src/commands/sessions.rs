//! `convo sessions`: the sessions this client knows, from the local store (the interface
//! has no list endpoint).
use std::process::ExitCode;

use comfy_table::Cell;
use serde::Serialize;

use super::{in_store, local_store, out, print_json, sanitize, table};
use convo_client::format::group_digits;
use convo_client::local_store::SessionRecord;

#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Print the sessions as a JSON array
    #[arg(long)]
    pub json: bool,
}

/// One session in `--json` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionJson<'a> {
    session_id: &'a str,
    title: Option<&'a str>,
    created_at: String,
    last_activity: String,
    tokens: u64,
}

pub async fn run(args: SessionsArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let store = match local_store(&global) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let sessions = match in_store(store, |s| s.list_sessions()).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    if args.json {
        let out: Vec<SessionJson<'_>> = sessions
            .iter()
            .map(|s| SessionJson {
                session_id: &s.id,
                title: s.title.as_deref(),
                created_at: s.created_at.to_rfc3339(),
                last_activity: s.last_activity.to_rfc3339(),
                tokens: s.tokens,
            })
            .collect();
        return print_json(&out);
    }
    if sessions.is_empty() {
        eprintln!("no sessions yet: start one with `convo send \"hi\"`");
        return ExitCode::SUCCESS;
    }
    out(render(&sessions));
    ExitCode::SUCCESS
}

/// The human-readable list.
pub fn render(sessions: &[SessionRecord]) -> String {
    let mut t = table(&["session", "title", "last activity", "tokens"], &[3]);
    for s in sessions {
        t.add_row(vec![
            Cell::new(&s.id),
            Cell::new(sanitize(s.title.as_deref().unwrap_or(""))),
            Cell::new(s.last_activity.format("%Y-%m-%d %H:%M UTC")),
            Cell::new(group_digits(s.tokens)),
        ]);
    }
    format!("{t}\n")
}
