//! `convo delete` (scaffolding: replaced by the client-library work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {}

pub async fn run(_args: DeleteArgs, _global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo delete: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
