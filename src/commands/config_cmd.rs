//! `convo config`: the effective configuration, keys redacted, and where it comes from.
use std::process::ExitCode;

use super::load_config;

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Print only the config file's path
    #[arg(long)]
    pub path: bool,
}

pub async fn run(args: ConfigArgs, global: crate::config::GlobalArgs) -> ExitCode {
    let config = match load_config(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if args.path {
        println!("{}", config.paths.config_file.display());
        return ExitCode::SUCCESS;
    }
    let presence = if config.paths.config_file_present {
        ""
    } else {
        " (not present: built-in defaults apply)"
    };
    println!(
        "# config file: {}{presence}",
        config.paths.config_file.display()
    );
    println!("# data dir: {}", config.paths.data_dir.display());
    println!("# precedence: built-in defaults < config file < environment < flags");
    if let Err(e) = config.check_transport() {
        println!("# warning: {e}");
    }
    print!("{}", config.to_redacted_toml());
    ExitCode::SUCCESS
}
