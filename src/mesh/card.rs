//! A rank's card: where its collective-network listener can be reached. Published through the
//! process manager at start-up; peers look it up when they first need to connect.

use crate::codec::{Dec, Enc};
use crate::error::Result;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where one rank listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Card {
    /// Node identity (ranks with the same one reach each other over loopback).
    pub(crate) node: String,
    /// TCP port of the listener, bound on every IPv4 address of the host.
    pub(crate) port: u16,
    /// The host's IPv4 addresses other than loopback, in the order peers try them.
    pub(crate) addrs: Vec<Ipv4Addr>,
}

impl Card {
    /// The card of a listener on `port` of this host, node `node`.
    pub(crate) fn here(node: &str, port: u16) -> Card {
        Card {
            node: node.to_owned(),
            port,
            addrs: host_addrs(),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        self.addrs
            .iter()
            .fold(
                Enc::new()
                    .str(&self.node)
                    .u64(u64::from(self.port))
                    .u64(self.addrs.len() as u64),
                |e, a| e.u64(u64::from(a.to_bits())),
            )
            .finish()
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Card> {
        let mut d = Dec::new(b);
        let node = d.str()?;
        let port = d.u64()? as u16;
        let n = d.usize()?.min(64);
        let addrs = (0..n)
            .map(|_| Ok(Ipv4Addr::from_bits(d.u64()? as u32)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Card { node, port, addrs })
    }

    /// The addresses to try, in order, from a rank on node `from`: loopback first on the same
    /// node, last elsewhere (a wrong listener is refused by the handshake, which names the rank).
    pub(crate) fn targets(&self, from: &str) -> Vec<SocketAddr> {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mut ips: Vec<IpAddr> = self.addrs.iter().copied().map(IpAddr::V4).collect();
        if self.node == from {
            ips.insert(0, lo);
        } else {
            ips.push(lo);
        }
        ips.into_iter()
            .map(|ip| SocketAddr::new(ip, self.port))
            .collect()
    }
}

/// This host's IPv4 addresses of interfaces that are up, loopback excepted.
fn host_addrs() -> Vec<Ipv4Addr> {
    use nix::net::if_::InterfaceFlags;
    let Ok(ifs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut addrs: Vec<Ipv4Addr> = ifs
        .filter(|i| {
            i.flags.contains(InterfaceFlags::IFF_UP)
                && !i.flags.contains(InterfaceFlags::IFF_LOOPBACK)
        })
        .filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
        .filter(|ip| !ip.is_loopback())
        .collect();
    addrs.dedup();
    addrs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_round_trip_and_order_their_targets() {
        let card = Card {
            node: "n1".into(),
            port: 4711,
            addrs: vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 168, 1, 2)],
        };
        assert_eq!(Card::decode(&card.encode()).unwrap(), card);
        let same = card.targets("n1");
        assert_eq!(same[0], "127.0.0.1:4711".parse().unwrap());
        assert_eq!(same.len(), 3);
        let other = card.targets("n2");
        assert_eq!(other[0], "10.0.0.1:4711".parse().unwrap());
        assert_eq!(other[2], "127.0.0.1:4711".parse().unwrap());
        assert!(Card::decode(&card.encode()[..5]).is_err());
    }

    #[test]
    fn this_host_has_no_loopback_in_its_card() {
        assert!(Card::here("x", 1).addrs.iter().all(|a| !a.is_loopback()));
    }
}
