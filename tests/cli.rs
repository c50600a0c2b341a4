//! Whole-binary tests of the one-shot subcommands and the configuration: each runs
//! `convo` with a temporary HOME and XDG dirs, so nothing touches the real user's files.

mod cli {
    mod accounts;
    mod cancel;
    mod commands;
    mod config;
    mod embedded;
    mod export;
    mod fake;
    mod forks;
    mod local_service;
    mod models;
    mod search;
    mod stream_lost;
    mod support;
    mod targets;
    mod usage;
}

#[allow(dead_code)]
#[path = "client/fake_admin.rs"]
mod fake_admin;

#[path = "support/refused.rs"]
mod refused;

/// The reliability tests' TCP proxy: one address in front of a server that is replaced.
#[allow(dead_code)]
#[path = "reliability/proxy.rs"]
mod proxy;
