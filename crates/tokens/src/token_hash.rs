// FNV-1a (64-bit) of a token's bytes: where `build.rs` puts each o200k token in its slot table
// and where `tokens::rank` looks for it. Both `include!` this file, so they cannot disagree.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
