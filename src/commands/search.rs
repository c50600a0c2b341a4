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
    let hits = match in_store(store, move |s| s.search(&text, limit)).await {
        Ok(h) => h,
        Err(code) => return code,
    };
    if args.json {
        let out: Vec<HitJson<'_>> = hits
            .iter()
            .map(|h| HitJson {
                session_id: &h.session_id,
                session_title: h.session_title.as_deref(),
                message_id: h.message_id.as_deref(),
                role: h.role.as_str(),
                created_at: h.created_at.to_rfc3339(),
                snippet: h.snippet_text(),
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
pub fn render(hits: &[SearchHit]) -> String {
    let mut text = String::new();
    for h in hits {
        let title = h.session_title.as_deref().unwrap_or("(untitled)");
        text.push_str(&format!(
            "{} · {} · {} · {}\n    {}\n",
            convo_client::sanitize::sanitize(title),
            h.created_at.format("%Y-%m-%d %H:%M UTC"),
            h.role.as_str(),
            h.session_id,
            h.snippet_text(),
        ));
    }
    text
}
