//! Integration tests of the client library (`convo_client::api`, `convo_client::local_store`): against test
//! servers that made other choices than the local service (§4.3), and against the local
//! service in-process.

mod client {
    mod account_stream;
    mod admin;
    pub mod fake_admin;
    mod forks;
    mod local_service;
    mod other_server;
    mod stream;
    mod support;
}

#[path = "support/killable.rs"]
mod killable;

#[path = "support/refused.rs"]
mod refused;

// The service tests' two stores; not every helper is needed here.
#[allow(dead_code)]
#[path = "service/backends.rs"]
mod backends;
