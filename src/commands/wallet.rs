//! `convo wallet`: a wallet's details.
use std::process::ExitCode;

use comfy_table::Cell;

use super::{connect, fail_api, out, print_json, sanitize, table};
use crate::api::{Client, Wallet};

#[derive(clap::Args)]
#[command(after_help = "Example (local service):\n  \
                        export CONVO_WALLET_TOKEN=$(convo token --secret \"$SECRET\" --sub me)\n  \
                        convo wallet WALLET_ID --json | jq .balance")]
pub struct WalletArgs {
    /// The wallet to show
    #[arg(value_name = "WALLET_ID")]
    pub wallet_id: String,
    /// JWT bearer token for the wallet endpoint (overrides CONVO_WALLET_TOKEN)
    #[arg(long, value_name = "JWT")]
    pub token: Option<String>,
    /// Print the Wallet object as JSON
    #[arg(long)]
    pub json: bool,
}

impl std::fmt::Debug for WalletArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalletArgs")
            .field("wallet_id", &self.wallet_id)
            .field(
                "token",
                &self.token.as_deref().map(crate::config::redact_key),
            )
            .field("json", &self.json)
            .finish()
    }
}

pub async fn run(args: WalletArgs, mut global: crate::config::GlobalArgs) -> ExitCode {
    if let Some(t) = args.token.clone() {
        global.wallet_token = Some(t);
    }
    let (_config, client): (_, Client) = match connect(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.wallet(&args.wallet_id).await {
        Ok(w) if args.json => print_json(&w),
        Ok(w) => {
            out(render(&w));
            ExitCode::SUCCESS
        }
        Err(e) => fail_api(&e),
    }
}

fn money(v: f64) -> String {
    format!("{v:.2}")
}

/// The human-readable report.
pub fn render(w: &Wallet) -> String {
    let mut out = String::new();
    let mut t = table(&["wallet", ""], &[]);
    let list = |v: &[String]| {
        if v.is_empty() {
            "–".to_string()
        } else {
            v.iter()
                .map(|s| sanitize(s).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for (k, v) in [
        ("id", sanitize(&w.wallet_id).into_owned()),
        ("alias", sanitize(&w.alias).into_owned()),
        ("address", sanitize(&w.address).into_owned()),
        ("balance", format!("{}", w.balance)),
        ("risk score", format!("{}", w.risk_score)),
        ("risk factors", list(&w.risk_factors)),
        ("tags", list(&w.tags)),
    ] {
        t.add_row(vec![Cell::new(k), Cell::new(v)]);
    }
    out.push_str(&format!("{t}\n"));
    if !w.token_accounts.is_empty() {
        let mut t = table(&["symbol", "mint", "balance", "USD value"], &[2, 3]);
        for a in &w.token_accounts {
            t.add_row(vec![
                Cell::new(sanitize(&a.symbol)),
                Cell::new(sanitize(&a.mint)),
                Cell::new(a.balance),
                Cell::new(money(a.usd_value)),
            ]);
        }
        let total: f64 = w.token_accounts.iter().map(|a| a.usd_value).sum();
        t.add_row(vec![
            Cell::new("total"),
            Cell::new(""),
            Cell::new(""),
            Cell::new(money(total)),
        ]);
        out.push_str(&format!("token accounts\n{t}\n"));
    }
    if !w.nfts.is_empty() {
        let mut t = table(&["name", "collection", "mint", "floor price"], &[3]);
        for n in &w.nfts {
            t.add_row(vec![
                Cell::new(sanitize(&n.name)),
                Cell::new(sanitize(&n.collection)),
                Cell::new(sanitize(&n.mint)),
                Cell::new(n.floor_price),
            ]);
        }
        out.push_str(&format!("NFTs\n{t}\n"));
    }
    out
}
