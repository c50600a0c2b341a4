//! `convo config`: the effective configuration, keys redacted, and where it comes from.
use std::process::ExitCode;

use super::{load_config, out};

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Print only the config file's path
    #[arg(long)]
    pub path: bool,
}

pub async fn run(args: ConfigArgs, global: convo_client::config::GlobalArgs) -> ExitCode {
    let config = match load_config(&global) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if args.path {
        out(format!("{}\n", config.paths.config_file.display()));
        return ExitCode::SUCCESS;
    }
    let presence = if config.paths.config_file_present {
        ""
    } else {
        " (not present: built-in defaults apply)"
    };
    let mut text = format!(
        "# config file: {}{presence}\n# data dir: {}\n\
         # precedence: built-in defaults < config file < environment < flags\n",
        config.paths.config_file.display(),
        config.paths.data_dir.display()
    );
    if let Err(e) = config.check_transport() {
        text.push_str(&format!("# warning: {e}\n"));
    }
    text.push_str(&config.to_redacted_toml());
    out(text);
    ExitCode::SUCCESS
}
