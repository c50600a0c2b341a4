//! Exit codes of every subcommand (docs/design.md, "Exit codes"). A leaf module: the API
//! client, the commands, the TUI and the service all map their outcomes onto these.

pub const OK: u8 = 0;
pub const SERVICE_ERROR: u8 = 1;
pub const USAGE_ERROR: u8 = 2;
pub const NETWORK_ERROR: u8 = 3;
