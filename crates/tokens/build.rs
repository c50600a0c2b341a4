//! Writes the o200k token tables in a compact form for `src/tokens.rs`, from
//! tiktoken-rs's own tables (a build dependency only). At run time tiktoken's `CoreBPE` cost
//! about 45 MB of heap (hash maps of 200,000 `Vec<u8>`s, both ways); these are about 4 MB,
//! part of the binary, and read where they lie.
//!
//! Three files in `OUT_DIR`, little-endian:
//! - `o200k_bytes.bin`: every ordinary token's bytes, by rank, one after another;
//! - `o200k_offsets.bin`: `u32` offsets into it, one per rank and one past the last;
//! - `o200k_slots.bin`: an open-addressing table of `u32` (rank + 1, 0 when empty), a power of
//!   two long, found by FNV-1a of the bytes and then probed linearly (`tokens::rank` reads it
//!   the same way).

use std::{env, fs, path::PathBuf};

include!("src/token_hash.rs");

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/token_hash.rs");
    let bpe = tiktoken_rs::o200k_base().expect("tiktoken-rs's o200k tables");
    let specials: Vec<Vec<u8>> = bpe
        .special_tokens()
        .into_iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    // Ordinary ranks are 0..n with no gap (checked): the rank of a token is its index.
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    loop {
        let rank = tokens.len() as u32;
        match bpe.decode_bytes(&[rank]) {
            Ok(bytes) if !specials.contains(&bytes) => tokens.push(bytes),
            _ => break,
        }
    }
    assert!(tokens.len() > 199_000, "only {} o200k tokens", tokens.len());
    for rank in tokens.len() as u32..tokens.len() as u32 + 100 {
        if let Ok(bytes) = bpe.decode_bytes(&[rank]) {
            assert!(specials.contains(&bytes), "o200k rank {rank} is past a gap");
        }
    }

    let mut bytes = Vec::new();
    let mut offsets = Vec::with_capacity((tokens.len() + 1) * 4);
    for token in &tokens {
        offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        bytes.extend_from_slice(token);
    }
    offsets.extend_from_slice(&(bytes.len() as u32).to_le_bytes());

    let len = (tokens.len() * 2).next_power_of_two();
    let mut slots = vec![0u32; len];
    for (rank, token) in tokens.iter().enumerate() {
        let mut i = fnv1a(token) as usize & (len - 1);
        while slots[i] != 0 {
            i = (i + 1) & (len - 1);
        }
        slots[i] = rank as u32 + 1;
    }
    let slots: Vec<u8> = slots.iter().flat_map(|s| s.to_le_bytes()).collect();

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    fs::write(out.join("o200k_bytes.bin"), bytes).expect("write o200k_bytes.bin");
    fs::write(out.join("o200k_offsets.bin"), offsets).expect("write o200k_offsets.bin");
    fs::write(out.join("o200k_slots.bin"), slots).expect("write o200k_slots.bin");
}
