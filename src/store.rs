//! The client's local store (scaffolding: replaced by the client-library work).
