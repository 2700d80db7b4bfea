//! The calls of an endpoint as its owner makes and serves them (the machinery is `mail.rs`):
//! serve peers' calls with a [`Serve`], learn which peer is which rank, and call a peer and
//! wait for its answer.

use crate::CALL_MAX;
use crate::endpoint::Endpoint;
use crate::error::FiError;
use crate::mail::{Mail, Serve};
use crate::patience::{Patience, Waiting};
use crate::peer::Peer;
use crate::sys;
use crate::track::Slot;
use std::sync::Arc;

impl Endpoint {
    /// Answer the calls peers make with `serve`, and take answers to calls of this endpoint
    /// ([`Endpoint::call`]); the first `serve` given stays. Not where the provider demands
    /// registered local buffers (`FI_MR_LOCAL`): the receives are not registered.
    pub fn serve_calls(&self, serve: Arc<dyn Serve>) -> Result<(), FiError> {
        if self.local_mr {
            return Err(FiError::with_detail(
                "calls",
                sys::FI_ENOSYS as i32,
                "the provider demands registered local buffers (FI_MR_LOCAL)".into(),
            ));
        }
        if self.core.mail.get().is_some() {
            return Ok(());
        }
        let c = &self.core;
        let mail = Mail::open(
            &c.out,
            c.serve.as_ref(),
            &c.pool,
            c.virt_addr(),
            serve,
            self.inject,
        )?;
        // Only the owning thread opens it; a second `set` cannot happen.
        let _ = self.core.mail.set(mail);
        Ok(())
    }

    /// Note that `peer` is rank `rank` of this endpoint's world, for answers to its calls.
    pub fn know_rank(&self, rank: u32, peer: Peer) {
        if let Some(mail) = self.core.mail.get() {
            mail.know(rank, peer);
        }
    }

    /// The longest body a call carries in one message of the provider's eager protocol (at
    /// most [`crate::CALL_MAX`]): longer ones go by rxm's rendezvous, a round trip more.
    pub fn call_eager_max(&self) -> usize {
        let provider = self.core.domain.provider().name();
        let buffer = std::env::var("FI_OFI_RXM_BUFFER_SIZE").ok();
        eager_max(&provider, buffer.as_deref())
    }

    /// Call `peer` (which serves calls) as rank `from` with a body of `parts` one after the
    /// other, and wait for its answer; `keep_waiting` as in a flush. At most
    /// [`crate::CALL_MAX`] bytes of body.
    pub fn call(
        &self,
        peer: Peer,
        from: u32,
        body: &[&[u8]],
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Vec<u8>, FiError> {
        let mut answers = self.calls(peer, from, &[body], 1, keep_waiting)?;
        answers
            .pop()
            .ok_or_else(|| FiError::new("call", -(sys::FI_EIO as i64)))
    }

    /// [`Endpoint::call`] for each of `bodies`, up to `in_flight` of them outstanding at once
    /// (1 to 4, `CALLS_IN_FLIGHT`): the answers, in the order of the bodies. The peer serves
    /// them in the order they arrive; a failure of one ends the wait for all.
    pub fn calls(
        &self,
        peer: Peer,
        from: u32,
        bodies: &[&[&[u8]]],
        in_flight: usize,
        keep_waiting: &dyn Fn() -> Waiting,
    ) -> Result<Vec<Vec<u8>>, FiError> {
        let in_flight = in_flight.clamp(1, CALLS_IN_FLIGHT);
        let Some(mail) = self.core.mail.get() else {
            return Err(FiError::with_detail(
                "call",
                sys::FI_ENOSYS as i32,
                "this endpoint does not serve calls".into(),
            ));
        };
        let too_long = |body: &&[&[u8]]| body.iter().map(|p| p.len()).sum::<usize>() > CALL_MAX;
        if bodies.iter().any(too_long) {
            return Err(FiError::new("call", -(sys::FI_EMSGSIZE as i64)));
        }
        self.core.touch();
        self.launch(keep_waiting);
        let mut patience = Patience::new(&self.core, keep_waiting).knocking(peer.index);
        let mut open: Vec<Open> = Vec::new();
        let mut answers: Vec<Option<Vec<u8>>> = vec![None; bodies.len()];
        let (mut next, mut seen) = (0, None);
        let result = loop {
            // Send while there is room.
            if next < bodies.len() && open.len() < in_flight {
                let id = mail.open_call();
                match mail.request(&self.core.track, peer, from, id, bodies[next]) {
                    Ok(Some(sent)) => {
                        open.push(Open {
                            index: next,
                            id,
                            sent,
                            failure: None,
                        });
                        next += 1;
                        continue;
                    }
                    Ok(None) => mail.give_up(id),
                    Err(e) => {
                        mail.give_up(id);
                        break Err(e);
                    }
                }
            }
            self.core.poll();
            let arrived = mail.arrived();
            if seen != Some(arrived) {
                seen = Some(arrived);
                open.retain(|call| match mail.answer(call.id) {
                    Some(answer) => {
                        answers[call.index] = Some(answer);
                        call.settle(self);
                        false
                    }
                    None => true,
                });
            }
            if next == bodies.len() && open.is_empty() {
                patience.done();
                break Ok(());
            }
            // An injected request has no slot: a failure to deliver it shows as a dead peer.
            let failed = open.iter_mut().find_map(|call| call.failed(self));
            if let Some(text) = failed {
                break Err(FiError::with_detail("call", sys::FI_EIO as i32, text));
            }
            if let Err(e) = patience.tick("call") {
                break Err(e);
            }
        };
        for call in open {
            mail.give_up(call.id);
            call.settle(self);
        }
        result?;
        answers
            .into_iter()
            .map(|a| a.ok_or_else(|| FiError::new("call", -(sys::FI_EIO as i64))))
            .collect()
    }
}

/// Most calls [`Endpoint::calls`] keeps outstanding at once: half the receives a peer posts
/// for them, so that two callers at once still find receives posted.
const CALLS_IN_FLIGHT: usize = crate::mail::SLOTS / 2;

/// rxm's buffer size where `FI_OFI_RXM_BUFFER_SIZE` is not set (libfabric 1.17).
const RXM_BUFFER: usize = 16 << 10;
/// A margin below rxm's buffer size: in libfabric 1.17 a message of up to the buffer size went
/// eager (measured in steps of 8 bytes), its header kept apart; the margin covers a version
/// whose header (64-104 bytes in 1.17's `struct rxm_pkt`) shares the buffer.
const RXM_HEADER: usize = 256;

/// [`Endpoint::call_eager_max`] over `provider`, with `FI_OFI_RXM_BUFFER_SIZE` set to `buffer`
/// (libfabric reads it as it loads, so the value is the same here).
fn eager_max(provider: &str, buffer: Option<&str>) -> usize {
    if !provider.contains("ofi_rxm") {
        return CALL_MAX;
    }
    let buffer = buffer
        .and_then(|b| b.trim().parse().ok())
        .unwrap_or(RXM_BUFFER);
    let body = buffer.saturating_sub(RXM_HEADER + crate::mail::ENVELOPE);
    body.clamp(crate::mail::ENVELOPE, CALL_MAX)
}

/// A call whose answer has not come yet.
struct Open {
    /// Its body's place among the bodies.
    index: usize,
    id: u64,
    /// The slot of its request's send, where the request was not injected.
    sent: Option<Slot>,
    /// The send's failure, once it failed.
    failure: Option<String>,
}

impl Open {
    /// The text of the request's failed send, once known.
    fn failed(&mut self, ep: &Endpoint) -> Option<String> {
        if let Some(slot) = self.sent
            && let Some((kept, failure)) = ep.core.track().take(slot)
        {
            drop(kept);
            self.sent = None;
            self.failure = failure;
        }
        self.failure.clone()
    }

    /// Nobody will look at the request's send again: free its slot now or when it settles.
    fn settle(&self, ep: &Endpoint) {
        if let Some(slot) = self.sent {
            let kept = ep.core.track().abandon(slot);
            drop(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rxm_buffers_bound_the_eager_body() {
        let envelope = crate::mail::ENVELOPE;
        assert_eq!(eager_max("tcp;ofi_rxm", None), (16 << 10) - 256 - envelope);
        assert_eq!(
            eager_max("verbs;ofi_rxm", Some("8192")),
            8192 - 256 - envelope
        );
        assert_eq!(eager_max("tcp;ofi_rxm", Some("1048576")), CALL_MAX);
        assert_eq!(
            eager_max("tcp;ofi_rxm", Some("100")),
            envelope,
            "never nothing"
        );
        assert_eq!(
            eager_max("tcp;ofi_rxm", Some("many")),
            (16 << 10) - 256 - envelope
        );
        assert_eq!(eager_max("shm", Some("8192")), CALL_MAX, "not rxm's");
    }
}
