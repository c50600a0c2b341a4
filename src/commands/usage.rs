//! `convo usage`: the current billing period against the plan's limits.
use std::process::ExitCode;

use comfy_table::Cell;

use super::{connect, fail_api, out, print_json, sanitize, table};
use convo_client::api::Usage;
use convo_client::format::group_digits;

#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// Print the Usage object as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: UsageArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (_config, client) = match connect(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.usage().await {
        Ok(usage) if args.json => print_json(&usage),
        Ok(usage) => {
            out(render(&usage));
            ExitCode::SUCCESS
        }
        Err(e) => fail_api(&e),
    }
}

/// The human-readable report.
pub fn render(u: &Usage) -> String {
    let mut t = table(&["", "used", "limit", "used %"], &[1, 2, 3]);
    for (name, used, limit, pct) in [
        (
            "requests",
            u.requests.used,
            u.requests.limit,
            u.requests.percentage,
        ),
        ("tokens", u.tokens.used, u.tokens.limit, u.tokens.percentage),
        (
            "sessions",
            u.sessions.active,
            u.sessions.limit,
            u.sessions.percentage,
        ),
    ] {
        t.add_row(vec![
            Cell::new(name),
            Cell::new(group_digits(used)),
            Cell::new(group_digits(limit)),
            Cell::new(format!("{pct:.1} %")),
        ]);
    }
    let context = match u.context {
        Some(c) => format!(
            "context window: {} tokens per session\n",
            group_digits(c.max_tokens)
        ),
        None => String::new(),
    };
    format!(
        "tier: {}\nbilling period: {} – {}\n{context}{t}\n",
        sanitize(&u.tier),
        sanitize(&u.billing_period.start),
        sanitize(&u.billing_period.end)
    )
}
