//! `convo metrics` (scaffolding: replaced by the client-library work).
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct MetricsArgs {}

pub async fn run(_args: MetricsArgs, _global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo metrics: not built yet");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
