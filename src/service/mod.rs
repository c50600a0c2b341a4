//! The local Conversational Session Service. No ratatui here.

pub mod cli;
