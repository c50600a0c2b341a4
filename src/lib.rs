//! convo: a keyboard-first terminal chat client for the Conversational Session Service,
//! with a conformant local implementation of that service.
#![forbid(unsafe_code)]

pub mod cli;
pub mod commands;

#[cfg(test)]
mod architecture;
