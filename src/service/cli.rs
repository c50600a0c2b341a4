//! `convo serve` and `convo token` (scaffolding: replaced by the service work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

#[derive(Debug, clap::Args)]
pub struct TokenArgs {}

pub async fn serve(_args: ServeArgs) -> ExitCode {
    eprintln!("convo serve: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}

pub fn token(_args: TokenArgs) -> ExitCode {
    eprintln!("convo token: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
