//! The render path: untrusted text → sanitised → markdown → styled, wrapped lines, and the
//! transcript that caches those lines per entry and width so a frame costs O(visible lines).
//!
//! - server text is sanitised first (`convo_client::sanitize`: escape sequences, controls and bidi
//!   overrides stripped);
//! - [`markdown`]: markdown → [`ratatui::text::Line`]s at a width ([`markdown::render_markdown`]);
//! - [`transcript`]: [`Transcript`], the model of the transcript pane with its caches;
//! - [`style`]: the colour roles; [`wrap`], [`highlight`] and `table`: the pieces markdown is
//!   made of.
mod cells;
pub mod heights;
pub mod highlight;
pub mod markdown;
pub mod style;
mod table;
pub mod transcript;
pub mod wrap;

pub use convo_client::sanitize::{sanitize, sanitize_bytes};
pub use markdown::{Document, render_markdown};
pub use transcript::{Entry, EntryId, EntryState, Transcript, TranscriptView};
