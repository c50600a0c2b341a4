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

/// Proptest cases: the default given, or `PROPTEST_CASES` for a longer run.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
