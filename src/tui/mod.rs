//! The interactive client (scaffolding: replaced by the TUI work).
use std::process::ExitCode;

pub async fn run(_global: crate::config::GlobalArgs) -> ExitCode {
    eprintln!("convo: the TUI is not built yet; see `convo --help`");
    ExitCode::from(crate::cli::exit::USAGE_ERROR)
}
