//! `convo search TEXT`: the stored messages of the configured server's sessions (its target,
//! `convo_client::target`) that hold the words typed, from the local store's full-text index
//! (no server needed); with `--fetch`, the sessions written on another device are read from
//! the server first.
use std::process::ExitCode;

use serde::Serialize;

use super::{client_for, codes, fail, in_store, load_config, open_store, out, print_json, warn};
use convo_client::config::Config;
use convo_client::local_store::SearchHit;
use convo_client::local_store::Store;
use convo_wire::exit;

/// Hits listed when `--limit` is not given.
pub const DEFAULT_LIMIT: u32 = 20;

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// The words to look for: every word must be in the message, as a word or the start of
    /// one; case and accents are ignored, and FTS syntax is searched as plain text
    #[arg(required = true, num_args = 1.., value_name = "TEXT")]
    pub text: Vec<String>,
    /// Print the hits as a JSON array
    #[arg(long)]
    pub json: bool,
    /// List at most N hits, best first
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
    /// Search the sessions of every server in the local store, not only the configured one's;
    /// each hit names its server
    #[arg(long)]
    pub all_targets: bool,
    /// First read from the configured server the sessions whose messages this device has
    /// none of (written on another device and not opened here), so that they are searched too
    /// (one request each, once: their messages stay in the local store)
    #[arg(long)]
    pub fetch: bool,
}

/// One hit in `--json` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HitJson<'a> {
    session_id: &'a str,
    session_title: Option<&'a str>,
    message_id: Option<&'a str>,
    role: &'a str,
    created_at: String,
    snippet: String,
    /// With `--all-targets`: the server the session belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
}

pub async fn run(args: SearchArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let text = args.text.join(" ");
    if convo_client::local_store::fts_query(&text).is_none() {
        return fail(
            exit::USAGE_ERROR,
            codes::INVALID_ARGUMENT,
            format_args!("nothing to search for in {text:?}: give at least one word"),
        );
    }
    let config = match load_config(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let store = match open_store(&config) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if args.fetch
        && let Err(code) = fetch_unsearched(&config, &store).await
    {
        return code;
    }
    let unsearched = match in_store(store.clone(), |s| s.unsearched_sessions()).await {
        Ok(ids) => ids.len(),
        Err(code) => return code,
    };
    if unsearched > 0 {
        warn(format_args!(
            "{} of this server listed here {} no messages in the local store (written on another device and not opened here) and {} not searched: --fetch reads {} from the server first",
            convo_client::format::counted(unsearched as u64, "session"),
            if unsearched == 1 { "has" } else { "have" },
            if unsearched == 1 { "was" } else { "were" },
            if unsearched == 1 { "it" } else { "them" },
        ));
    }
    let limit = args.limit as usize;
    let all_targets = args.all_targets;
    // Each hit with the label of its target, asked for with --all-targets.
    let hits: Vec<(SearchHit, Option<String>)> = match in_store(store, move |s| {
        if all_targets {
            s.search_all_targets(&text, limit)
                .map(|hits| hits.into_iter().map(|(h, t)| (h, Some(t))).collect())
        } else {
            s.search(&text, limit)
                .map(|hits| hits.into_iter().map(|h| (h, None)).collect())
        }
    })
    .await
    {
        Ok(h) => h,
        Err(code) => return code,
    };
    if args.json {
        let out: Vec<HitJson<'_>> = hits
            .iter()
            .map(|(h, target)| HitJson {
                session_id: &h.session_id,
                session_title: h.session_title.as_deref(),
                message_id: h.message_id.as_deref(),
                role: h.role.as_str(),
                created_at: h.created_at.to_rfc3339(),
                snippet: h.snippet_text(),
                target: target.as_deref(),
            })
            .collect();
        return print_json(&out);
    }
    if hits.is_empty() {
        out("no matches\n");
        return ExitCode::SUCCESS;
    }
    out(render(&hits));
    ExitCode::SUCCESS
}

/// `--fetch`: the server's list merged into the store, then the history of every session the
/// store has no message of read into it (`super::catch_up`). No server configured: exit 2;
/// a session that cannot be read is a warning, and the search goes on without it.
async fn fetch_unsearched(config: &Config, store: &Store) -> Result<(), ExitCode> {
    let client = client_for(config)?;
    super::sessions::refresh(config, store).await;
    let ids = in_store(store.clone(), |s| s.unsearched_sessions()).await?;
    for id in ids {
        if let Err(e) = super::catch_up(&client, store, &id).await {
            warn(format_args!(
                "could not read {id} from the server, so it is not searched: {e}"
            ));
        }
    }
    Ok(())
}

/// The human-readable list: per hit, a line naming the session, the time and the role, and
/// the snippet indented under it.
pub fn render(hits: &[(SearchHit, Option<String>)]) -> String {
    let mut text = String::new();
    for (h, target) in hits {
        let title = h.session_title.as_deref().unwrap_or("(untitled)");
        let on = target
            .as_deref()
            .map(|t| format!(" · on {}", convo_client::sanitize::sanitize(t)))
            .unwrap_or_default();
        text.push_str(&format!(
            "{} · {} · {} · {}{on}\n    {}\n",
            convo_client::sanitize::sanitize(title),
            h.created_at.format("%Y-%m-%d %H:%M UTC"),
            h.role.as_str(),
            h.session_id,
            h.snippet_text(),
        ));
    }
    text
}
