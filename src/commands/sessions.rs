//! `convo sessions` (scaffolding: replaced by the client-library work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct SessionsArgs {}

pub async fn run(_args: SessionsArgs, _global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo sessions: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
