//! `convo accounts`: every account of a deployment against its plan, for an operator (the
//! admin endpoints of `convo serve --admin-key`; docs/client.md, "Operators"). Needs the admin
//! key (`CONVO_ADMIN_KEY` or `[connection] admin_key`) and a base URL: like every one-shot
//! command it never embeds the service (the TUI's F4 shows the embedded service's accounts).

use std::process::ExitCode;

use comfy_table::Cell;

use super::{codes, connect, fail, fail_api, out, print_json, sanitize, table};
use convo_client::api::admin::{AccountsQuery, NO_ADMIN_KEY};
use convo_client::api::{AccountSort, AdminAccounts};
use convo_client::format::group_digits;
use convo_wire::exit;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SortArg {
    Share,
    Requests,
    Tokens,
    Name,
}

impl From<SortArg> for AccountSort {
    fn from(s: SortArg) -> Self {
        match s {
            SortArg::Share => AccountSort::Share,
            SortArg::Requests => AccountSort::Requests,
            SortArg::Tokens => AccountSort::Tokens,
            SortArg::Name => AccountSort::Name,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct AccountsArgs {
    /// Order: share of the nearest limit, requests, tokens (descending) or name
    #[arg(long, value_enum, default_value = "share")]
    pub sort: SortArg,
    /// Only the accounts matching this text (a key hint, a tier or an account id)
    #[arg(long, value_name = "Q")]
    pub filter: Option<String>,
    /// At most this many accounts
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub limit: u64,
    /// Print the AdminAccounts object as JSON
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: AccountsArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let (_config, client) = match connect(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if !client.has_admin_key() {
        return fail(exit::USAGE_ERROR, codes::CONFIG, NO_ADMIN_KEY);
    }
    let query = AccountsQuery {
        sort: args.sort.into(),
        limit: Some(args.limit),
        offset: 0,
        q: args.filter,
    };
    match client.admin_accounts(&query).await {
        Ok(Some(page)) if args.json => print_json(&page),
        Ok(Some(page)) => {
            out(render(&page));
            ExitCode::SUCCESS
        }
        Ok(None) => fail(
            exit::SERVICE_ERROR,
            "unsupported",
            "this server has no admin endpoints (GET /v1/admin/accounts)",
        ),
        Err(e) => fail_api(&e),
    }
}

/// The human-readable table, and how many accounts matched.
pub fn render(page: &AdminAccounts) -> String {
    let mut t = table(
        &[
            "account", "tier", "keys", "requests", "tokens", "sessions", "share",
        ],
        &[3, 4, 5, 6],
    );
    for a in &page.accounts {
        let hints: Vec<String> = a
            .key_hints
            .iter()
            .map(|h| format!("…{}", sanitize(h)))
            .collect();
        t.add_row(vec![
            Cell::new(sanitize(&a.name)),
            Cell::new(sanitize(&a.tier)),
            Cell::new(hints.join(" ")),
            Cell::new(format!(
                "{} / {}",
                group_digits(a.requests.used),
                group_digits(a.requests.limit)
            )),
            Cell::new(format!(
                "{} / {}",
                group_digits(a.tokens.used),
                group_digits(a.tokens.limit)
            )),
            Cell::new(format!(
                "{} / {}",
                group_digits(a.sessions.active),
                group_digits(a.sessions.limit)
            )),
            Cell::new(format!("{:.0} %", a.share * 100.0)),
        ]);
    }
    format!(
        "billing period: {} – {}\n{t}\n{} of {}\n",
        sanitize(&page.billing_period.start),
        sanitize(&page.billing_period.end),
        convo_client::format::counted(page.accounts.len() as u64, "account"),
        group_digits(page.total)
    )
}
