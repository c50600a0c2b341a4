#![no_main]

use libfuzzer_sys::fuzz_target;

// Each binary uses one of the shared functions.
#[allow(dead_code)]
#[path = "../targets.rs"]
mod targets;

fuzz_target!(|data: &[u8]| targets::stream_event(data));
