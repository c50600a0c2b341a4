//! Command-line parsing and dispatch. Each subcommand's arguments and behaviour live in the
//! module that owns it: `service::cli` for `serve` and `token`, `commands::*` for the client
//! subcommands, `tui` for the interactive client (no subcommand).

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use convo_wire::exit;

#[derive(Debug, Parser)]
#[command(
    name = "convo",
    version,
    about = "A fast, keyboard-first terminal chat client for the Conversational Session Service",
    long_about = "With no subcommand, opens the chat TUI. With no base URL configured, convo starts \
                  the embedded local service and connects to it; send, fork, undo and delete then \
                  use the running TUI's service, or start one for the command."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: convo_client::config::GlobalArgs,
    #[command(subcommand)]
    pub command: Option<CliCommand>,
}

// Parsed once per run: the size of `serve`'s flags costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Run the local Conversational Session Service.
    Serve(convo_service::cli::ServeArgs),
    /// Mint an HS256 JWT for the wallet endpoint of a local service.
    Token(convo_service::cli::TokenArgs),
    /// Send one message and print the reply.
    Send(crate::commands::send::SendArgs),
    /// Delete a session and its whole history.
    Delete(crate::commands::delete::DeleteArgs),
    /// Show usage of the current billing period against the plan's limits.
    Usage(crate::commands::usage::UsageArgs),
    /// List a deployment's accounts against their plans (needs the admin key).
    Accounts(crate::commands::accounts::AccountsArgs),
    /// Show metrics over a date range.
    Metrics(crate::commands::metrics::MetricsArgs),
    /// Show a wallet's details.
    Wallet(crate::commands::wallet::WalletArgs),
    /// List the configured server's sessions (--all-targets: every server's in the local store).
    Sessions(crate::commands::sessions::SessionsArgs),
    /// Search the messages of the configured server's sessions in the local store.
    Search(crate::commands::search::SearchArgs),
    /// Write a session's transcript as Markdown or JSON, from the local store.
    ///
    /// With a server configured, the store first gets from it the session's messages it lacks
    /// (written on another device); without one, or with the server down, the store alone is
    /// written.
    Export(crate::commands::export::ExportArgs),
    /// Give a session a title of your own, or clear it (back to the first message's).
    Title(crate::commands::title::TitleArgs),
    /// Fork a session: a new one with its history up to a message (the last by default).
    Fork(crate::commands::fork::ForkArgs),
    /// Remove a session's last exchange (its last message and the reply).
    Undo(crate::commands::undo::UndoArgs),
    /// Stop a reply being generated; the text so far is kept as the reply.
    Cancel(crate::commands::cancel::CancelArgs),
    /// Print the effective configuration (key redacted) and the config file's path.
    Config(crate::commands::config_cmd::ConfigArgs),
    /// Manage the local GGUF models: list, import, rm, pull.
    Model(crate::commands::model::ModelArgs),
    /// Print the completion script for a shell.
    Completions(crate::commands::completions::CompletionsArgs),
    /// Print the manual page (roff), or write one per command into a directory.
    Man(crate::commands::man::ManArgs),
}

impl CliCommand {
    /// True when the command was asked for `--json` output: its errors and warnings then go
    /// to stderr as JSON too.
    pub fn wants_json(&self) -> bool {
        use crate::commands::model::ModelCommand;
        match self {
            CliCommand::Send(a) => a.json,
            CliCommand::Delete(a) => a.json,
            CliCommand::Usage(a) => a.json,
            CliCommand::Accounts(a) => a.json,
            CliCommand::Metrics(a) => a.json,
            CliCommand::Wallet(a) => a.json,
            CliCommand::Sessions(a) => a.json,
            CliCommand::Search(a) => a.json,
            CliCommand::Model(a) => matches!(a.command, ModelCommand::List { json: true, .. }),
            CliCommand::Export(a) => a.format() == crate::commands::export::Format::Json,
            CliCommand::Title(a) => a.json,
            CliCommand::Fork(a) => a.json,
            CliCommand::Undo(a) => a.json,
            CliCommand::Cancel(a) => a.json,
            CliCommand::Serve(_)
            | CliCommand::Token(_)
            | CliCommand::Config(_)
            | CliCommand::Completions(_)
            | CliCommand::Man(_) => false,
        }
    }
}

/// The command line, parsed. A usage error (unknown flag, bad value) is printed by clap as
/// usual, or, when `--json` is among the arguments, as the JSON error object with the code
/// `invalid_argument`; both exit with 2.
fn parse() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let parsed = hide_empty_env_values(Cli::command())
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m));
    match parsed {
        Ok(cli) => Ok(cli),
        Err(e) => {
            let asked_for_json = args
                .iter()
                .skip(1)
                .take_while(|a| *a != "--")
                .any(|a| a == "--json");
            let shown = matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            if !asked_for_json || shown {
                e.exit();
            }
            crate::commands::set_json_stderr(true);
            let rendered = e.render().to_string();
            Err(crate::commands::fail(
                exit::USAGE_ERROR,
                crate::commands::codes::INVALID_ARGUMENT,
                usage_error_message(&rendered),
            ))
        }
    }
}

/// The message of clap's rendered usage error on one line: its first paragraph (the lines
/// before the first blank one, which is where a tip or the usage follows), without the
/// `error: ` prefix.
fn usage_error_message(rendered: &str) -> String {
    let first: Vec<&str> = rendered
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let message = first.join(" ");
    match message.strip_prefix("error: ") {
        Some(rest) => rest.to_string(),
        None if message.is_empty() => "invalid arguments".to_string(),
        None => message,
    }
}

/// `cmd` with the values of unset and empty environment variables left out of `--help`: clap
/// shows `[env: CONVO_BASE_URL=]` for both, as if the variable were set to nothing, where the
/// configuration takes either as "not set"; a variable with a value still shows it.
fn hide_empty_env_values(mut cmd: clap::Command) -> clap::Command {
    let empty: Vec<clap::Id> = cmd
        .get_arguments()
        .filter(|a| {
            a.get_env()
                .is_some_and(|name| std::env::var_os(name).is_none_or(|v| v.is_empty()))
        })
        .map(|a| a.get_id().clone())
        .collect();
    for id in empty {
        cmd = cmd.mut_arg(id, |a| a.hide_env_values(true));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, hide_empty_env_values);
    }
    cmd
}

pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    crate::commands::set_json_stderr(cli.command.as_ref().is_some_and(CliCommand::wants_json));
    // One process-wide TLS provider for reqwest and tokio-tungstenite.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return crate::commands::fail(
                exit::USAGE_ERROR,
                crate::commands::codes::IO,
                format_args!("cannot start the async runtime: {e}"),
            );
        }
    };
    let global = cli.global;
    let code = runtime.block_on(async move {
        match cli.command {
            None => convo_tui::run(global).await,
            Some(CliCommand::Serve(args)) => {
                convo_service::cli::serve(args, global.data_dir()).await
            }
            Some(CliCommand::Token(args)) => convo_service::cli::token(args),
            Some(CliCommand::Send(args)) => crate::commands::send::run(args, global).await,
            Some(CliCommand::Delete(args)) => crate::commands::delete::run(args, global).await,
            Some(CliCommand::Usage(args)) => crate::commands::usage::run(args, global).await,
            Some(CliCommand::Accounts(args)) => crate::commands::accounts::run(args, global).await,
            Some(CliCommand::Metrics(args)) => crate::commands::metrics::run(args, global).await,
            Some(CliCommand::Wallet(args)) => crate::commands::wallet::run(args, global).await,
            Some(CliCommand::Sessions(args)) => crate::commands::sessions::run(args, global).await,
            Some(CliCommand::Config(args)) => crate::commands::config_cmd::run(args, global).await,
            Some(CliCommand::Model(args)) => crate::commands::model::run(args, global).await,
            Some(CliCommand::Export(args)) => crate::commands::export::run(args, global).await,
            Some(CliCommand::Title(args)) => crate::commands::title::run(args, global).await,
            Some(CliCommand::Fork(args)) => crate::commands::fork::run(args, global).await,
            Some(CliCommand::Undo(args)) => crate::commands::undo::run(args, global).await,
            Some(CliCommand::Cancel(args)) => crate::commands::cancel::run(args, global).await,
            Some(CliCommand::Completions(args)) => {
                crate::commands::completions::run(args, Cli::command())
            }
            Some(CliCommand::Man(args)) => crate::commands::man::run(args, Cli::command()),
            Some(CliCommand::Search(args)) => crate::commands::search::run(args, global).await,
        }
    });
    runtime.block_on(crate::commands::stop_embedded());
    crate::commands::flush_warnings();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_flags_do_not_clash_with_any_subcommand() {
        use clap::CommandFactory;
        // Panics on a flag defined twice in a subcommand, e.g. `serve --api-key`.
        Cli::command().debug_assert();
    }

    #[test]
    fn the_global_api_key_reaches_every_subcommand() {
        use clap::Parser;
        for args in [
            &[
                "convo",
                "serve",
                "--api-key",
                "service_live_abcdefghijklmnop1234",
            ][..],
            &[
                "convo",
                "--api-key",
                "service_live_abcdefghijklmnop1234",
                "serve",
            ],
            &[
                "convo",
                "usage",
                "--api-key",
                "service_live_abcdefghijklmnop1234",
            ],
        ] {
            let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(
                cli.global.api_key.as_deref(),
                Some("service_live_abcdefghijklmnop1234"),
                "{args:?}"
            );
        }
    }

    #[test]
    fn help_shows_no_value_for_an_unset_variable() {
        let cmd = clap::Command::new("x")
            .arg(
                clap::Arg::new("url")
                    .long("url")
                    .env("CONVO_TEST_NEVER_SET_1F3A"),
            )
            .subcommand(
                clap::Command::new("sub").arg(
                    clap::Arg::new("db")
                        .long("db")
                        .env("CONVO_TEST_NEVER_SET_9B2C"),
                ),
            );
        let mut cmd = hide_empty_env_values(cmd);
        let help = cmd.render_help().to_string();
        assert!(help.contains("[env: CONVO_TEST_NEVER_SET_1F3A]"), "{help}");
        let sub = cmd
            .find_subcommand_mut("sub")
            .unwrap()
            .render_help()
            .to_string();
        assert!(sub.contains("[env: CONVO_TEST_NEVER_SET_9B2C]"), "{sub}");
        // The same command as clap builds it shows an empty value.
        let mut plain = clap::Command::new("x").arg(
            clap::Arg::new("url")
                .long("url")
                .env("CONVO_TEST_NEVER_SET_1F3A"),
        );
        assert!(plain.render_help().to_string().contains("_1F3A=]"));
    }
}
