//! What one rank publishes about its window to the others over the fabric, and its encoding.

use crate::codec::{Dec, Enc};
use crate::error::Result;
use onesided_fabric as fi;

/// What one rank publishes: its endpoint addresses and the keys of its control block and window
/// memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FabricKey {
    pub(super) name: Vec<u8>,
    /// The address for ranks on its node, where its endpoint has one (else empty).
    pub(super) near: Vec<u8>,
    pub(super) ctrl: fi::RegionKey,
    pub(super) data: fi::RegionKey,
    pub(super) len: usize,
    /// The address of the window memory modulo 8, so that origins know which elements are
    /// aligned in memory (the key's base is an offset where the MR mode has no VIRT_ADDR).
    pub(super) lead: u64,
    /// The accumulates this rank's provider runs natively (`NativeOps::bits`).
    pub(super) native: u64,
    /// This rank serves accumulates (`served.rs`): every rank must, or none.
    pub(super) served: bool,
    /// The window's tag in this rank's notices, which a notified put's write carries
    /// (`transport/notices.rs`); 0 where its endpoint takes none.
    pub(super) notify: u32,
}

fn enc_region(e: Enc, k: &fi::RegionKey) -> Enc {
    e.u64(k.base).bytes(&k.key).u64(k.raw as u64)
}

fn dec_region(d: &mut Dec<'_>) -> Result<fi::RegionKey> {
    Ok(fi::RegionKey {
        base: d.u64()?,
        key: d.bytes()?.to_vec(),
        raw: d.u64()? != 0,
    })
}

impl FabricKey {
    pub(super) fn encode(&self) -> Vec<u8> {
        let e = Enc::new().bytes(&self.name).bytes(&self.near);
        let e = enc_region(e, &self.ctrl);
        enc_region(e, &self.data)
            .u64(self.len as u64)
            .u64(self.lead)
            .u64(self.native)
            .u64(self.served as u64)
            .u64(u64::from(self.notify))
            .finish()
    }

    pub(super) fn decode(b: &[u8]) -> Result<FabricKey> {
        let mut d = Dec::new(b);
        Ok(FabricKey {
            name: d.bytes()?.to_vec(),
            near: d.bytes()?.to_vec(),
            ctrl: dec_region(&mut d)?,
            data: dec_region(&mut d)?,
            len: d.usize()?,
            lead: d.u64()?,
            native: d.u64()?,
            served: d.u64()? != 0,
            notify: u32::try_from(d.u64()?).unwrap_or(0),
        })
    }
}
