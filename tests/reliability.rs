//! Reliability and security tests (docs/reliability.md): network faults through a
//! fault-injecting proxy, durability of the local store, hostile input on both sides, the
//! fuzz corpus on stable, and a short load run.

mod reliability {
    pub mod proxy;
    pub mod tui;
    mod tui_log;

    mod client_hostile;
    mod connections;
    mod corpus;
    mod durability;
    mod kill9;
    mod load;
    pub mod loadgen;
    mod network;
    mod service_hostile;
}

/// The fake OpenAI-compatible upstream of the service tests, reused as it is.
#[allow(dead_code)]
#[path = "service/upstream.rs"]
mod upstream;

/// The service tests' helpers (a service on 127.0.0.1:0, requests, WebSocket events).
#[allow(dead_code)]
#[path = "service/common.rs"]
mod common;

/// The pty harness of the whole-binary tests.
#[allow(dead_code)]
#[path = "pty/harness.rs"]
mod harness;
