//! Integration tests of the local service over real HTTP and WebSocket on 127.0.0.1:0.

mod service {
    pub mod backends;
    pub mod common;

    mod account_stream;
    mod admin;
    mod admin_processes;
    mod admission;
    pub mod binary;
    mod cancel;
    #[cfg(feature = "local-model")]
    mod deletion_processes;
    mod deletion_replicas;
    mod http;
    mod jwt;
    #[cfg(feature = "local-model")]
    mod local_model;
    #[cfg(feature = "local-model")]
    mod local_model_state;
    #[cfg(feature = "local-model")]
    mod local_model_turns;
    mod metrics;
    mod openai;
    mod openapi;
    mod pg_batches;
    mod pg_counters;
    mod pg_deletion;
    mod pg_grants;
    mod pg_history;
    mod pg_lock_wait;
    mod pg_lost_replica;
    pub mod pg_proxy;
    mod pg_restart;
    mod pg_silent_server;
    mod pg_unended_turns;
    mod relay_heal;
    mod relay_settle;
    mod replica_harness;
    mod replica_processes;
    mod replica_stop;
    mod replicas;
    mod session_list;
    mod sessions_ext;
    mod storage;
    mod stream;
    mod totals;
    #[cfg(feature = "local-model")]
    mod undo_state;
    mod upstream;
}

#[path = "support/refused.rs"]
mod refused;
