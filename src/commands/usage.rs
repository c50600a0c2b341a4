//! `convo usage` (scaffolding: replaced by the client-library work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct UsageArgs {}

pub async fn run(_args: UsageArgs, _global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo usage: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
