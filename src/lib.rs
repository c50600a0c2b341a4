//! convo: a keyboard-first terminal chat client for the Conversational Session Service,
//! with a conformant local implementation of that service.
#![deny(unsafe_code)] // allowed in one module: render::cells

pub mod api;
pub mod cli;
pub mod commands;
pub mod config;
pub mod exit;
pub mod export;
pub mod format;
pub mod keys;
pub mod models;
pub mod private_file;
pub mod render;
pub mod series;
pub mod service;
pub mod store;
pub mod tokens;
pub mod tui;
