//! `convo sessions`: the configured server's sessions (the target's, `convo_client::target`):
//! from the server where it lists them (`GET /v1/sessions`), merged into the local store;
//! from the local store alone otherwise. `--all-targets`: every server's in the store.
use std::process::ExitCode;

use chrono::Utc;
use comfy_table::Cell;
use serde::Serialize;

use super::{
    in_store, load_config, open_store, out, print_json, sanitize, store_command_client, table, warn,
};
use convo_client::api::Client;
use convo_client::config::Config;
use convo_client::format::group_digits;
use convo_client::local_store::{ServiceSessions, SessionRecord, Store};

#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Print the sessions as a JSON array
    #[arg(long)]
    pub json: bool,
    /// List the sessions of every server in the local store, with a column saying whose
    /// (without asking any server)
    #[arg(long)]
    pub all_targets: bool,
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
    /// The session it was forked from, for a fork.
    #[serde(skip_serializing_if = "Option::is_none")]
    forked_from: Option<&'a str>,
    /// With `--all-targets`: the server (and key) the session belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
}

pub async fn run(args: SessionsArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let config = match load_config(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let store = match open_store(&config) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut refreshed = Refreshed::Current;
    let listed = if args.all_targets {
        in_store(store, |s| s.list_all_sessions()).await
    } else {
        refreshed = refresh(&config, &store).await;
        in_store(store, |s| {
            let label = s.target().label().to_string();
            s.list_sessions()
                .map(|l| l.into_iter().map(|r| (r, label.clone())).collect())
        })
        .await
    };
    let sessions: Vec<(SessionRecord, String)> = match listed {
        // Not the TUI's new session nothing was sent to yet: no server has it.
        Ok(s) => s.into_iter().filter(|(r, _)| !r.is_unsent()).collect(),
        Err(code) => return code,
    };
    if args.json {
        let out: Vec<SessionJson<'_>> = sessions
            .iter()
            .map(|(s, target)| SessionJson {
                session_id: &s.id,
                title: s.title.as_deref(),
                created_at: s.created_at.to_rfc3339(),
                last_activity: s.last_activity.to_rfc3339(),
                tokens: s.tokens,
                forked_from: s.forked_from.as_deref(),
                target: args.all_targets.then_some(target.as_str()),
            })
            .collect();
        return print_json(&out);
    }
    if sessions.is_empty() {
        match refreshed {
            Refreshed::Current => eprintln!("no sessions yet: start one with `convo send \"hi\"`"),
            Refreshed::StoreOnly => eprintln!("no sessions of this server in the local store"),
        }
        return ExitCode::SUCCESS;
    }
    if args.all_targets {
        out(render_all(&sessions));
    } else {
        let only: Vec<SessionRecord> = sessions.into_iter().map(|(r, _)| r).collect();
        out(render(&only));
    }
    ExitCode::SUCCESS
}

/// Whether the store's list is the server's ([`refresh`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refreshed {
    /// The server's list is merged in, or there is no server (or it has no list to give).
    Current,
    /// The server could not be asked (unreachable, the key refused, an unusable
    /// configuration): the store's list alone, said in a warning.
    StoreOnly,
}

/// With a server configured: its list merged into the store (`Store::merge_service`), and
/// the titles given here that it does not have yet sent to it. A server without the list
/// changes nothing; one that fails, or a configuration that cannot reach it, leaves the
/// store's list, with a warning.
pub(crate) async fn refresh(config: &Config, store: &Store) -> Refreshed {
    let not_shown = |e: &dyn std::fmt::Display| {
        warn(format_args!(
            "the server's list of sessions is not shown ({e}); this is the local store's"
        ));
        Refreshed::StoreOnly
    };
    let client = match store_command_client(config) {
        None => return Refreshed::Current,
        Some(Ok(c)) => c,
        Some(Err(e)) => return not_shown(&e),
    };
    let asked_at = Utc::now();
    let list = match client.list_sessions().await {
        Ok(Some(list)) => list,
        Ok(None) => return Refreshed::Current,
        Err(e) => return not_shown(&e),
    };
    let merged = in_store(store.clone(), move |s| {
        s.merge_service(ServiceSessions::All {
            sessions: &list.sessions,
            asked_at,
            database_id: list.database_id.as_deref(),
            deleted: list.deleted_session_ids.as_deref(),
        })
    })
    .await;
    let Ok(merged) = merged else {
        return Refreshed::StoreOnly;
    };
    if let Some(archived) = &merged.archived {
        warn(archived);
    }
    for (id, title) in merged.titles_to_send {
        send_title(&client, store, &id, &title).await;
    }
    Refreshed::Current
}

/// Sends a title given here to the server (`PATCH`), and notes that it has it. A failure
/// is a warning: the title stays here and is sent again next time.
pub(crate) async fn send_title(client: &Client, store: &Store, id: &str, title: &str) {
    match client.set_title(id, title).await {
        Ok(Some(_)) => {
            let (i, t) = (id.to_string(), title.to_string());
            super::record(store.clone(), "the title sent", move |s| {
                s.title_sent(&i, &t)
            })
            .await;
        }
        Ok(None) => {}
        Err(e) => warn(format_args!(
            "the title of {id} is kept here but the server did not take it: {e}"
        )),
    }
}

/// The human-readable list. A fork says which session it was forked from (a `forked from`
/// column, shown when one of them is a fork: a fork keeps its source's title).
pub fn render(sessions: &[SessionRecord]) -> String {
    let rows: Vec<(&SessionRecord, Option<&str>)> = sessions.iter().map(|s| (s, None)).collect();
    render_rows(&rows, false)
}

/// The list of every target's sessions, with whose each is.
pub fn render_all(sessions: &[(SessionRecord, String)]) -> String {
    let rows: Vec<(&SessionRecord, Option<&str>)> = sessions
        .iter()
        .map(|(s, t)| (s, Some(t.as_str())))
        .collect();
    render_rows(&rows, true)
}

fn render_rows(sessions: &[(&SessionRecord, Option<&str>)], with_target: bool) -> String {
    let forks = sessions.iter().any(|(s, _)| s.forked_from.is_some());
    let mut header = vec!["session"];
    if with_target {
        header.push("target");
    }
    header.push("title");
    if forks {
        header.push("forked from");
    }
    header.extend(["last activity", "tokens"]);
    let mut t = table(&header, &[header.len() - 1]);
    for (s, target) in sessions {
        let mut row = vec![Cell::new(&s.id)];
        if with_target {
            row.push(Cell::new(sanitize(target.unwrap_or(""))));
        }
        row.push(Cell::new(sanitize(s.title.as_deref().unwrap_or(""))));
        if forks {
            row.push(Cell::new(s.forked_from.as_deref().unwrap_or("")));
        }
        row.extend([
            Cell::new(s.last_activity.format("%Y-%m-%d %H:%M UTC")),
            Cell::new(group_digits(s.tokens)),
        ]);
        t.add_row(row);
    }
    format!("{t}\n")
}
