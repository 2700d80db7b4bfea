//! The calls of an endpoint as its owner makes and serves them (the machinery is `mail.rs`):
//! serve peers' calls with a [`Serve`], learn which peer is which rank, and call a peer and
//! wait for its answer.

use crate::endpoint::Endpoint;
use crate::error::FiError;
use crate::mail::{Mail, Serve};
use crate::patience::{Patience, Waiting};
use crate::peer::Peer;
use crate::sys;
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
        let Some(mail) = self.core.mail.get() else {
            return Err(FiError::with_detail(
                "call",
                sys::FI_ENOSYS as i32,
                "this endpoint does not serve calls".into(),
            ));
        };
        if body.iter().map(|p| p.len()).sum::<usize>() > crate::CALL_MAX {
            return Err(FiError::new("call", -(sys::FI_EMSGSIZE as i64)));
        }
        self.core.touch();
        self.launch(keep_waiting);
        let id = mail.open_call();
        let mut patience = Patience::new(&self.core, keep_waiting).knocking(peer.index);
        let sent = loop {
            match mail.request(&self.core.track, peer, from, id, body) {
                Ok(Some(slot)) => break slot,
                Ok(None) => {
                    self.core.poll();
                    if let Err(e) = patience.tick("call") {
                        mail.give_up(id);
                        return Err(e);
                    }
                }
                Err(e) => {
                    mail.give_up(id);
                    return Err(e);
                }
            }
        };
        // An injected request has no slot: a failure to deliver it shows as a dead peer.
        let (mut outcome, mut seen) = (None, None);
        let answer = loop {
            self.core.poll();
            let arrived = mail.arrived();
            if seen != Some(arrived) {
                seen = Some(arrived);
                if let Some(answer) = mail.answer(id) {
                    patience.done();
                    break Ok(answer);
                }
            }
            if let (Some(slot), None) = (sent, &outcome) {
                outcome = self.core.track().take(slot);
            }
            if let Some((_, Some(text))) = &outcome {
                break Err(FiError::with_detail(
                    "call",
                    sys::FI_EIO as i32,
                    text.clone(),
                ));
            }
            if let Err(e) = patience.tick("call") {
                break Err(e);
            }
        };
        if answer.is_err() {
            mail.give_up(id);
        }
        if let (Some(slot), None) = (sent, outcome) {
            let kept = self.core.track().abandon(slot);
            drop(kept);
        }
        answer
    }
}
