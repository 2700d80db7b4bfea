//! Bootstrap of onesided's own launcher: how its ranks find each other and learn of failures.
//!
//! The launcher (`onesided run`) runs a [`Hub`], a TCP server on `127.0.0.1` (or on
//! `--boot-addr`), and starts every rank with the environment variables below. Each rank reads
//! them with [`JobEnv::from_env`], connects with [`BootClient::connect`] and runs one allgather
//! through the hub, in which the ranks exchange their collective-network cards (`crate::pm`);
//! the job's collectives then run over the ranks' own connections. The hub also tells the ranks
//! when a rank of the job failed, so that nobody waits forever for a dead peer.
//!
//! The wire format is documented in the `wire` module: length-prefixed binary frames, shared with
//! the collective network.

pub mod client;
#[cfg(feature = "launcher")]
mod gather;
#[cfg(feature = "launcher")]
pub mod hub;
#[cfg(feature = "launcher")]
mod paced;
pub(crate) mod wire;

pub use client::{BootClient, JobEnv};
#[cfg(feature = "launcher")]
pub use hub::Hub;

/// Environment variable holding the rank of the process, `0..size`.
pub const ENV_RANK: &str = "ONESIDED_RANK";
/// Environment variable holding the number of ranks of the job.
pub const ENV_SIZE: &str = "ONESIDED_SIZE";
/// Environment variable holding the hub address, `IP:PORT` (`127.0.0.1` unless `--boot-addr`).
pub const ENV_BOOT: &str = "ONESIDED_BOOT";
/// Environment variable holding the job secret: 64 hex digits (32 random bytes).
pub const ENV_SECRET: &str = "ONESIDED_SECRET";
/// Environment variable holding the job id `<launcher pid>-<8 hex digits>`, which names the
/// job's shared-memory segments `/dev/shm/onesided-<job>-...`.
pub const ENV_JOB: &str = "ONESIDED_JOB";
/// Environment variable holding the node name, set only when the launcher simulates several
/// nodes (`--simulate-nodes`); ranks with different node names must not share memory.
pub const ENV_NODE: &str = "ONESIDED_NODE";

/// Length in bytes of the job secret.
pub const SECRET_LEN: usize = 32;

/// The job secret: random bytes every connection to the hub must present.
pub type Secret = [u8; SECRET_LEN];

/// `N` random bytes from the kernel.
pub fn random<const N: usize>() -> crate::error::Result<[u8; N]> {
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .map_err(|e| crate::error::Error::os("reading /dev/urandom", e))?;
    Ok(b)
}

/// Compares secrets in time independent of where they differ.
pub(crate) fn same_secret(a: &Secret, b: &Secret) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Lower-case hex encoding of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Decodes a secret from exactly `2 * SECRET_LEN` hex digits (either case).
pub(crate) fn secret_from_hex(hex: &str) -> Option<Secret> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * SECRET_LEN {
        return None;
    }
    let mut secret = [0u8; SECRET_LEN];
    for (byte, pair) in secret.iter_mut().zip(digits.chunks_exact(2)) {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        *byte = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(secret)
}

#[cfg(test)]
mod tests {
    use super::{secret_from_hex, to_hex};

    #[test]
    fn hex_round_trip() {
        let secret: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        let hex = to_hex(&secret);
        assert_eq!(hex.len(), 64);
        assert_eq!(secret_from_hex(&hex), Some(secret));
        assert_eq!(secret_from_hex(&hex.to_uppercase()), Some(secret));
        assert_eq!(secret_from_hex(&hex[1..]), None);
        assert_eq!(secret_from_hex(&format!("x{}", &hex[1..])), None);
    }
}
