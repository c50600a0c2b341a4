//! `convo wallet`: a wallet's details.
use std::process::ExitCode;

use super::{Credential, connect, fail_with_credential, out, print_json};
use convo_client::api::{Client, Wallet};

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
                &self.token.as_deref().map(convo_client::config::redact_key),
            )
            .field("json", &self.json)
            .finish()
    }
}

pub async fn run(args: WalletArgs, mut global: convo_client::config::GlobalArgs) -> ExitCode {
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
        Err(e) => fail_with_credential(&e, Credential::WalletToken),
    }
}

/// The human-readable report: the wallet view's sections (`series::wallet_report`).
pub fn render(w: &Wallet) -> String {
    super::series::wallet_report(w)
}
