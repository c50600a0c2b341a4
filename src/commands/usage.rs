//! `convo usage`: the current billing period against the plan's limits, of the configured
//! server's account, or with no base URL of the embedded service's local account (read from
//! the data dir as the TUI runs it: `convo_tui::embedded::start_for_reading`).
use std::process::ExitCode;

use comfy_table::Cell;

use super::{client_for, codes, fail, fail_api, load_config, out, print_json, sanitize, table};
use convo_client::api::Usage;
use convo_client::config::Config;
use convo_client::format::group_digits;
use convo_wire::exit;

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
    if config.connection.base_url.is_none() {
        return embedded(&args, &config).await;
    }
    let client = match client_for(&config) {
        Ok(client) => client,
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

/// The usage of the embedded service's local account, from the data dir (a TUI may be running
/// on it: `start_for_reading` says why that is safe). Its context window is left out: it is the
/// model's, known only once a TUI has loaded it.
async fn embedded(args: &UsageArgs, config: &Config) -> ExitCode {
    let data_dir = &config.paths.data_dir;
    let (service, client) = match convo_tui::embedded::start_for_reading(data_dir).await {
        Ok(started) => started,
        Err(e) => {
            return fail(
                exit::USAGE_ERROR,
                codes::STORE,
                format_args!(
                    "no base URL configured, and the embedded service's data in {} cannot be read: {e}",
                    data_dir.display()
                ),
            );
        }
    };
    let usage = client.usage().await;
    service.shutdown().await;
    match usage {
        Ok(usage) => {
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
