//! `convo usage`: the current billing period against the plan's limits, of the configured
//! server's account, or with no base URL of the embedded service's local account (read from
//! the data dir as the TUI runs it: `account_reader.rs`).
use std::process::ExitCode;

use comfy_table::Cell;

use super::account_reader::AccountReader;
use super::{fail_api, load_config, out, print_json, sanitize, table};
use convo_client::api::Usage;
use convo_client::format::group_digits;

#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// Print the Usage object as JSON
    #[arg(long)]
    pub json: bool,
}

/// `--json` on the embedded service: the Usage object as it is, and one more field saying
/// whose usage it is.
#[derive(serde::Serialize)]
struct EmbeddedUsage<'a> {
    #[serde(flatten)]
    usage: &'a Usage,
    /// Always true: the embedded service's local account, not a subscription.
    embedded: bool,
}

pub async fn run(args: UsageArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let config = match load_config(&global) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let reader = match AccountReader::start(&config).await {
        Ok(reader) => reader,
        Err(code) => return code,
    };
    let usage = reader.client.usage().await;
    let embedded = reader.is_embedded();
    reader.finish().await;
    match usage {
        // The embedded service's context window is the model's, known only once a TUI has
        // loaded it: left out.
        Ok(usage) if embedded => {
            let usage = Usage {
                context: None,
                ..usage
            };
            if args.json {
                print_json(&EmbeddedUsage {
                    usage: &usage,
                    embedded: true,
                })
            } else {
                let label = convo_tui::embedded::plan_label(&sanitize(&usage.tier));
                out(format!("{label}\n{}", render(&usage)));
                ExitCode::SUCCESS
            }
        }
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
