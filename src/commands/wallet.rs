//! `convo wallet` (scaffolding: replaced by the client-library work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct WalletArgs {}

pub async fn run(_args: WalletArgs, _global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo wallet: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
