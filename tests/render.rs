//! Tests of the render path: sanitiser properties, markdown rendering, the transcript cache
//! against an uncached render, and snapshots of rendered samples.
#[path = "render/generate.rs"]
mod generate;
#[path = "render/markdown.rs"]
mod markdown;
#[path = "render/sanitize.rs"]
mod sanitize;
#[path = "render/snapshots.rs"]
mod snapshots;
#[path = "render/transcript.rs"]
mod transcript;
