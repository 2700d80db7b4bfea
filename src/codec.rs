//! A small byte encoding for what ranks exchange at set-up (window descriptions, remote keys):
//! little-endian integers and length-prefixed strings and byte strings.

use crate::error::{Error, ErrorClass, Result};

/// Builds an encoded message.
#[derive(Debug, Default)]
pub(crate) struct Enc(Vec<u8>);

impl Enc {
    pub(crate) fn new() -> Enc {
        Enc(Vec::new())
    }

    pub(crate) fn u64(mut self, v: u64) -> Enc {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn bytes(self, b: &[u8]) -> Enc {
        let mut e = self.u64(b.len() as u64);
        e.0.extend_from_slice(b);
        e
    }

    pub(crate) fn str(self, s: &str) -> Enc {
        self.bytes(s.as_bytes())
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Reads an encoded message; a short or malformed message is an internal error.
#[derive(Debug)]
pub(crate) struct Dec<'a>(&'a [u8]);

fn short() -> Error {
    Error::new(ErrorClass::Intern, "malformed set-up message from a peer")
}

impl<'a> Dec<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Dec<'a> {
        Dec(b)
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>().ok_or_else(short)?;
        self.0 = rest;
        Ok(u64::from_le_bytes(*head))
    }

    pub(crate) fn usize(&mut self) -> Result<usize> {
        usize::try_from(self.u64()?).map_err(|_| short())
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.usize()?;
        if n > self.0.len() {
            return Err(short());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub(crate) fn str(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| short())
    }

    /// Whether everything has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_input() {
        let b = Enc::new().u64(7).str("node").bytes(&[1, 2]).finish();
        let mut d = Dec::new(&b);
        assert_eq!(d.u64().unwrap(), 7);
        assert_eq!(d.str().unwrap(), "node");
        assert_eq!(d.bytes().unwrap(), &[1, 2]);
        assert!(d.u64().is_err());
        let mut d = Dec::new(&b[..12]);
        d.u64().unwrap();
        assert!(d.str().is_err());
    }
}
