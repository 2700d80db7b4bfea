//! The target side of served accumulates (`served`): each request that arrives at this
//! endpoint applied to registered memory under one lock, and answered.

use crate::protocol::served::{self, Request, Status};
use onesided_fabric as fi;
use std::sync::Mutex;

/// The target side: every request to this endpoint applied under one lock.
#[derive(Debug, Default)]
pub(super) struct Server {
    applying: Mutex<()>,
}

impl fi::Serve for Server {
    fn serve(&self, request: &[u8], memory: &fi::Memory<'_>, answer: &mut Vec<u8>) {
        let Some((r, operands)) = Request::decode(request) else {
            return served::answer(Status::Malformed, answer);
        };
        let start = answer.len();
        served::answer(Status::Done, answer);
        // Applied in several holds, the whole run must lie in registered memory before any
        // piece of it is applied (in one, its own update checks that).
        let mut applied = !r.in_pieces() || memory.update(r.key, r.addr, r.len(), |_| ());
        for (piece, at) in r.pieces() {
            if !applied {
                break;
            }
            let _held = self.applying.lock().unwrap_or_else(|p| p.into_inner());
            applied = memory.update(piece.key, piece.addr, piece.len(), |target| {
                piece.apply(&operands[at], target, answer);
            });
        }
        if !applied {
            answer.truncate(start);
            served::answer(Status::Range, answer);
        }
    }
}
