//! Layered configuration (scaffolding: replaced by the client-library work).

/// Flags that apply to every command.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GlobalArgs {}
