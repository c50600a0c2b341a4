//! The one-shot client subcommands, one file each.

pub mod config_cmd;
pub mod delete;
pub mod metrics;
pub mod send;
pub mod sessions;
pub mod usage;
pub mod wallet;
