//! `convo send` (scaffolding: replaced by the client-library work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct SendArgs {}

pub async fn run(_args: SendArgs, _global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo send: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
