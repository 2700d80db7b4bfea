//! A handler of calls for the tests that make them (`calls.rs`, `rings.rs`).

use onesided_fabric::{Memory, Serve};

/// Adds the call's bytes, as u64s, to the u64s at the key and address it names (16 bytes of
/// header: key, address), and answers with the old values; an empty answer where the range is
/// not registered.
pub struct Adder;

impl Serve for Adder {
    fn serve(&self, request: &[u8], memory: &Memory<'_>, answer: &mut Vec<u8>) {
        let word = |at: usize| u64::from_le_bytes(request[at..at + 8].try_into().unwrap());
        let (key, addr, operands) = (word(0), word(8), &request[16..]);
        let mut old = Vec::new();
        let done = memory.update(key, addr, operands.len(), |target| {
            old.extend_from_slice(target);
            for (t, o) in target.chunks_exact_mut(8).zip(operands.chunks_exact(8)) {
                let v = u64::from_le_bytes(t.try_into().unwrap())
                    + u64::from_le_bytes(o.try_into().unwrap());
                t.copy_from_slice(&v.to_le_bytes());
            }
        });
        if done {
            answer.extend_from_slice(&old);
        }
    }
}
