//! What one rank publishes about its window to the others over direct verbs, and its encoding.

use crate::codec::{Dec, Enc};
use crate::error::Result;
use onesided_verbs as ib;

/// What one rank publishes: its port address, the queue pair it prepared for each rank of the
/// window (0 where the two are connected already) and those of its lanes, and the keys of its
/// control block and window memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct VerbsKey {
    pub(super) port: ib::PortAddress,
    /// By communicator rank.
    pub(super) qpns: Vec<u32>,
    /// By communicator rank: the queue pair each of its lanes prepared for that rank, in lane
    /// order (none where the two are connected already, or it has no lanes).
    pub(super) lanes: Vec<Vec<u32>>,
    pub(super) ctrl: ib::RegionKey,
    pub(super) data: ib::RegionKey,
    pub(super) len: usize,
    /// Its device runs 8-byte atomics.
    pub(super) atomics: bool,
    /// The window's tag in this rank's notices, which a notified put's immediate data carries
    /// (`transport/notices.rs`); 0 where it takes none.
    pub(super) notify: u32,
    /// Its waiters sleep on its completion channel: a signal to it is followed by a wake
    /// (`Endpoint::wake`), which every rank's queue pair to it has receives for.
    pub(super) wakes: bool,
}

/// Queue pair numbers as bytes.
fn qpn_bytes(qpns: &[u32]) -> Vec<u8> {
    qpns.iter().flat_map(|q| q.to_le_bytes()).collect()
}

/// Queue pair numbers from their bytes.
fn qpns_of(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn enc_region(e: Enc, k: &ib::RegionKey) -> Enc {
    e.u64(k.addr).u64(k.rkey.into())
}

fn dec_region(d: &mut Dec<'_>) -> Result<ib::RegionKey> {
    Ok(ib::RegionKey {
        addr: d.u64()?,
        rkey: d.u64()? as u32,
    })
}

impl VerbsKey {
    pub(super) fn encode(&self) -> Vec<u8> {
        let gid = self.port.gid.map_or_else(Vec::new, |g| g.to_vec());
        let e = Enc::new()
            .u64(self.port.lid.into())
            .bytes(&gid)
            .u64(self.port.mtu.into())
            .bytes(&qpn_bytes(&self.qpns))
            .u64(self.lanes.len() as u64);
        let e = self.lanes.iter().fold(e, |e, l| e.bytes(&qpn_bytes(l)));
        let e = enc_region(e, &self.ctrl);
        enc_region(e, &self.data)
            .u64(self.len as u64)
            .u64(self.atomics.into())
            .u64(self.notify.into())
            .u64(self.wakes.into())
            .finish()
    }

    pub(super) fn decode(b: &[u8]) -> Result<VerbsKey> {
        let mut d = Dec::new(b);
        let lid = d.u64()? as u16;
        let gid = d.bytes()?;
        let mtu = d.u64()? as u32;
        let qpns = qpns_of(d.bytes()?);
        let lanes = (0..d.usize()?)
            .map(|_| d.bytes().map(qpns_of))
            .collect::<Result<Vec<_>>>()?;
        Ok(VerbsKey {
            port: ib::PortAddress {
                lid,
                gid: <[u8; 16]>::try_from(gid).ok(),
                mtu,
            },
            qpns,
            lanes,
            ctrl: dec_region(&mut d)?,
            data: dec_region(&mut d)?,
            len: d.usize()?,
            atomics: d.u64()? != 0,
            notify: u32::try_from(d.u64()?).unwrap_or(0),
            wakes: d.u64()? != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_survives_its_encoding() {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 10, 9, 0, 1]);
        for gid in [Some(gid), None] {
            let k = VerbsKey {
                port: ib::PortAddress {
                    lid: 7,
                    gid,
                    mtu: 1024,
                },
                qpns: vec![17, 0, 4_000_000],
                lanes: vec![vec![5, 6], vec![], vec![7, 4_000_001]],
                ctrl: ib::RegionKey {
                    addr: 0x7f00_0000_1000,
                    rkey: 0xdead_beef,
                },
                data: ib::RegionKey::default(),
                len: 4096,
                atomics: true,
                notify: 0x7f_ffff,
                wakes: gid.is_some(),
            };
            assert_eq!(VerbsKey::decode(&k.encode()).unwrap(), k);
        }
    }
}
