//! The hash of a program name, shared by the build script (which lays the names out in the
//! index's open-addressing slots) and the lookup. Short ASCII keys, looked up a dozen times per
//! command: SipHash or a binary search over the sorted names would cost more than the rest of a
//! lookup. The keys are the table's own names, so no input can choose collisions that matter.

/// The hash of `name`.
pub(crate) fn name_hash(name: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = 0u64;
    let mut chunks = name.as_bytes().chunks_exact(8);
    for c in &mut chunks {
        let word = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ word).wrapping_mul(K);
    }
    for &b in chunks.remainder() {
        h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
    }
    h
}
