//! `convo search TEXT`: the stored messages of the configured server's sessions (its target,
//! `convo_client::target`) that hold the words typed, from the local store's full-text index
//! (no server needed).
use std::process::ExitCode;

use serde::Serialize;

use super::{codes, fail, in_store, local_store, out, print_json};
use convo_client::local_store::SearchHit;
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
    let store = match local_store(&global) {
        Ok(s) => s,
        Err(code) => return code,
    };
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
