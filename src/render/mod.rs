//! Markdown to styled lines, wrapping with a per-message cache, and sanitising untrusted text.
