//! Command-line parsing and dispatch. Each subcommand's arguments and behaviour live in the
//! module that owns it: `service::cli` for `serve` and `token`, `commands::*` for the client
//! subcommands, `tui` for the interactive client (no subcommand).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::exit;

#[derive(Debug, Parser)]
#[command(
    name = "convo",
    version,
    about = "A fast, keyboard-first terminal chat client for the Conversational Session Service",
    long_about = "With no subcommand, opens the chat TUI. With no base URL configured, convo starts \
                  the embedded local service and connects to it."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: crate::config::GlobalArgs,
    #[command(subcommand)]
    pub command: Option<CliCommand>,
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Run the local Conversational Session Service.
    Serve(crate::service::cli::ServeArgs),
    /// Mint an HS256 JWT for the wallet endpoint of a local service.
    Token(crate::service::cli::TokenArgs),
    /// Send one message and print the reply.
    Send(crate::commands::send::SendArgs),
    /// Delete a session and its whole history.
    Delete(crate::commands::delete::DeleteArgs),
    /// Show usage of the current billing period against the plan's limits.
    Usage(crate::commands::usage::UsageArgs),
    /// Show metrics over a date range.
    Metrics(crate::commands::metrics::MetricsArgs),
    /// Show a wallet's details.
    Wallet(crate::commands::wallet::WalletArgs),
    /// List the sessions this client knows.
    Sessions(crate::commands::sessions::SessionsArgs),
    /// Print the effective configuration (key redacted) and the config file's path.
    Config(crate::commands::config_cmd::ConfigArgs),
    /// Manage the local GGUF models: list, import, rm, pull.
    Model(crate::commands::model::ModelArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // One process-wide TLS provider for reqwest and tokio-tungstenite.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("convo: cannot start the async runtime: {e}");
            return ExitCode::from(exit::USAGE_ERROR);
        }
    };
    let global = cli.global;
    runtime.block_on(async move {
        match cli.command {
            None => crate::tui::run(global).await,
            Some(CliCommand::Serve(args)) => {
                crate::service::cli::serve(args, global.data_dir.clone()).await
            }
            Some(CliCommand::Token(args)) => crate::service::cli::token(args),
            Some(CliCommand::Send(args)) => crate::commands::send::run(args, global).await,
            Some(CliCommand::Delete(args)) => crate::commands::delete::run(args, global).await,
            Some(CliCommand::Usage(args)) => crate::commands::usage::run(args, global).await,
            Some(CliCommand::Metrics(args)) => crate::commands::metrics::run(args, global).await,
            Some(CliCommand::Wallet(args)) => crate::commands::wallet::run(args, global).await,
            Some(CliCommand::Sessions(args)) => crate::commands::sessions::run(args, global).await,
            Some(CliCommand::Config(args)) => crate::commands::config_cmd::run(args, global).await,
            Some(CliCommand::Model(args)) => crate::commands::model::run(args, global).await,
        }
    })
}
