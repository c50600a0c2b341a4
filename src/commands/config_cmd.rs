//! `convo config` (scaffolding: replaced by the client-library work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {}

pub async fn run(_args: ConfigArgs, _global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo config: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
