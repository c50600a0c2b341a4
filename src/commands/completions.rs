//! `convo completions SHELL`: the shell's completion script for every subcommand and flag,
//! generated from the command line's definition (clap_complete).
use std::process::ExitCode;

use super::out;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete in
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Prints the script for `command` (the whole command line, from `cli`).
pub fn run(args: CompletionsArgs, mut command: clap::Command) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "convo", &mut script);
    out(String::from_utf8_lossy(&script));
    ExitCode::SUCCESS
}
