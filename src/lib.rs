//! convo: a keyboard-first terminal chat client for the Conversational Session Service,
//! with a conformant local implementation of that service.
#![deny(unsafe_code)] // allowed in one module: render::cells

pub mod api;
pub mod cli;
pub mod commands;
pub mod config;
pub mod keys;
pub mod render;
pub mod service;
pub mod store;
pub mod tui;
