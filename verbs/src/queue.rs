//! The verbs objects an endpoint is made of, each closed on drop after what depends on it: a
//! protection domain ([`Pd`]), a completion channel ([`Channel`]) and the completion queue
//! ([`Cq`]) it reports on, a shared receive queue ([`Srq`]), and reliable-connected queue
//! pairs ([`Qp`]) with their state changes (RESET, INIT, RTR, RTS, ERR).

use crate::device::{Context, mtu_of};
use crate::error::VerbsError;
use crate::sys;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// What a queue pair lets its peer do to this side's memory regions (the regions grant it too).
const REMOTE_ACCESS: u32 =
    sys::IBV_ACCESS_REMOTE_WRITE | sys::IBV_ACCESS_REMOTE_READ | sys::IBV_ACCESS_REMOTE_ATOMIC;

/// A protection domain of an opened device.
pub(crate) struct Pd {
    pub(crate) ctx: Arc<Context>,
    pub(crate) raw: *mut sys::ibv_pd,
}

// SAFETY: a protection domain of a context that is `Send` and `Sync`; libibverbs lets any
// thread create queue pairs and register memory on it at once. Freed once, when the last `Arc`
// of it is dropped.
unsafe impl Send for Pd {}
// SAFETY: as for `Send`.
unsafe impl Sync for Pd {}

impl Pd {
    pub(crate) fn alloc(ctx: Arc<Context>) -> Result<Arc<Pd>, VerbsError> {
        // SAFETY: `ctx.raw` is an open context.
        let raw = unsafe { (ctx.lib.alloc_pd)(ctx.raw) };
        if raw.is_null() {
            return Err(VerbsError::last(format!("ibv_alloc_pd on {}", ctx.name)));
        }
        Ok(Arc::new(Pd { ctx, raw }))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; every queue pair and region of the domain holds an
        // `Arc` of it, so none is left when it is freed.
        unsafe { (self.ctx.lib.dealloc_pd)(self.raw) };
    }
}

/// A completion channel: the descriptor a thread sleeps on until an armed completion queue
/// gets an entry ([`Cq::arm`], [`Channel::wait`]).
pub(crate) struct Channel {
    ctx: Arc<Context>,
    raw: *mut sys::ibv_comp_channel,
}

// SAFETY: a completion channel of a context that is `Send` and `Sync`; libibverbs lets any
// thread use it. Shared through `Arc` by the endpoint that sleeps on it and the completion
// queue reporting on it, destroyed once, after that queue.
unsafe impl Send for Channel {}
// SAFETY: as for `Send`.
unsafe impl Sync for Channel {}

impl Channel {
    /// A channel of `ctx` whose descriptor does not block (`None` where the device gives
    /// none: its waiters nap instead).
    pub(crate) fn create(ctx: Arc<Context>) -> Option<Channel> {
        // SAFETY: `ctx.raw` is an open context.
        let raw = unsafe { (ctx.lib.create_comp_channel)(ctx.raw) };
        if raw.is_null() {
            return None;
        }
        let channel = Channel { ctx, raw };
        // SAFETY: `fd` is the descriptor the channel owns; plain fcntl calls on it.
        let rc = unsafe {
            let fd = (*raw).fd;
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK)
        };
        (rc >= 0).then_some(channel)
    }

    /// Sleep until the queue armed on this channel reports an entry, or `timeout` passes;
    /// whether it reported one (its event taken and acknowledged).
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> Result<bool, VerbsError> {
        // SAFETY: `raw` is a live channel.
        let fd = unsafe { (*self.raw).fd };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.kind() {
                std::io::ErrorKind::Interrupted => Ok(false),
                _ => Err(VerbsError::last("poll on the completion channel")),
            };
        }
        let mut reported = false;
        loop {
            let mut cq = std::ptr::null_mut();
            let mut context = std::ptr::null_mut();
            // SAFETY: `raw` is a live channel whose descriptor does not block; the out
            // pointers are valid.
            if unsafe { (self.ctx.lib.get_cq_event)(self.raw, &mut cq, &mut context) } != 0 {
                return Ok(reported);
            }
            // SAFETY: `cq` is the live queue the event came from, acknowledged once before it
            // is destroyed (as `ibv_destroy_cq` requires).
            unsafe { (self.ctx.lib.ack_cq_events)(cq, 1) };
            reported = true;
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_comp_channel; the queue reporting on it is destroyed
        // first (the endpoint's field order).
        unsafe { (self.ctx.lib.destroy_comp_channel)(self.raw) };
    }
}

/// A completion queue.
pub(crate) struct Cq {
    ctx: Arc<Context>,
    pub(crate) raw: *mut sys::ibv_cq,
    /// Entries it holds.
    pub(crate) size: u32,
    /// The channel it reports on, destroyed after it.
    _channel: Option<Arc<Channel>>,
}

// SAFETY: a completion queue of a context that is `Send` and `Sync`; libibverbs lets any
// thread poll it or create queue pairs that complete on it. Shared through `Arc` by an endpoint,
// which polls it, and its lanes, whose queue pairs complete their receives on it; destroyed once,
// after every queue pair that completes on it.
unsafe impl Send for Cq {}
// SAFETY: as for `Send`.
unsafe impl Sync for Cq {}

impl Cq {
    /// A queue of `size` entries (at least), reporting on `channel` where there is one.
    pub(crate) fn create(
        ctx: Arc<Context>,
        size: u32,
        channel: Option<&Arc<Channel>>,
    ) -> Result<Cq, VerbsError> {
        let size = size.max(1);
        let reports = channel.cloned();
        let channel = channel.map_or(std::ptr::null_mut(), |c| c.raw);
        // SAFETY: `ctx.raw` is an open context; `channel` is null or a live channel of it,
        // which outlives the queue; vector 0.
        let raw =
            unsafe { (ctx.lib.create_cq)(ctx.raw, size as i32, std::ptr::null_mut(), channel, 0) };
        if raw.is_null() {
            return Err(VerbsError::last(format!("ibv_create_cq of {size} entries")));
        }
        // SAFETY: `raw` is the queue just created; `cqe` is what the device gave.
        let size = unsafe { (*raw).cqe }.max(1) as u32;
        Ok(Cq {
            ctx,
            raw,
            size,
            _channel: reports,
        })
    }

    /// Move up to `room.len()` completions into `room`, which need not be initialized (zeroing
    /// 16 entries cost a completion's wait about 60 instructions); the completions moved.
    #[inline]
    pub(crate) fn poll<'w>(
        &self,
        room: &'w mut [MaybeUninit<sys::ibv_wc>],
    ) -> Result<&'w [sys::ibv_wc], VerbsError> {
        let len = room.len().min(i32::MAX as usize);
        // SAFETY: `raw` is a live queue whose context's operation table has `poll_cq` (what the
        // inline `ibv_poll_cq` calls); `room` has space for the `len` entries asked, which the
        // provider writes without reading (`MaybeUninit<T>` has `T`'s layout).
        let n = unsafe {
            let poll = (*self.ctx.raw).ops.poll_cq.unwrap_unchecked();
            poll(self.raw, len as i32, room.as_mut_ptr().cast())
        };
        let n = usize::try_from(n).map_err(|_| VerbsError::new("ibv_poll_cq", libc::EIO))?;
        let filled = &room[..n.min(len)];
        // SAFETY: the provider initialized the first `n` entries (at most the `len` asked), and
        // `MaybeUninit<T>` has `T`'s layout.
        Ok(unsafe { &*(filled as *const [MaybeUninit<sys::ibv_wc>] as *const [sys::ibv_wc]) })
    }

    /// Ask for an event on its channel at the next entry it gets (`ibv_req_notify_cq`): an
    /// entry already there raises none, so the caller polls after this.
    pub(crate) fn arm(&self) -> Result<(), VerbsError> {
        // SAFETY: `ctx.raw` is an open context; its operation table is read, not changed.
        let arm = unsafe { (*self.ctx.raw).ops.req_notify_cq }
            .ok_or_else(|| VerbsError::new("ibv_req_notify_cq", libc::EOPNOTSUPP))?;
        // SAFETY: `raw` is a live queue of that context; this is what the inline
        // `ibv_req_notify_cq` calls.
        let rc = unsafe { arm(self.raw, 0) };
        if rc != 0 {
            return Err(VerbsError::new("ibv_req_notify_cq", rc));
        }
        Ok(())
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq; every queue pair completing on it holds it (an
        // endpoint and its lanes drop their queue pairs first), and every event of its channel
        // was acknowledged when taken. The channel goes after it (a field).
        unsafe { (self.ctx.lib.destroy_cq)(self.raw) };
    }
}

/// How a queue pair reaches its peer's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAddress {
    /// The peer port's LID (InfiniBand).
    pub lid: u16,
    /// The peer port's GID, where packets carry a global route header (RoCE); `None` on
    /// InfiniBand within a subnet.
    pub gid: Option<[u8; 16]>,
    /// The peer port's active MTU in bytes (the path takes the smaller of both ends).
    pub mtu: u32,
}

/// A shared receive queue of entries without buffers: each is consumed by a write with
/// immediate data of the peer of any queue pair attached to it, whose completion reports the
/// immediate data here.
pub(crate) struct Srq {
    pd: Arc<Pd>,
    raw: *mut sys::ibv_srq,
    /// Entries it holds.
    pub(crate) depth: u32,
}

// SAFETY: a shared receive queue of a protection domain that is `Send` and `Sync`; libibverbs
// lets any thread post to it, and queue pairs of any thread take from it. Shared through `Arc`
// by an endpoint and its lanes, destroyed once, after every queue pair attached to it.
unsafe impl Send for Srq {}
// SAFETY: as for `Send`.
unsafe impl Sync for Srq {}

impl Srq {
    /// A shared receive queue of up to `depth` entries (fewer where the device grants fewer),
    /// empty; `None` where the device makes none (it has no shared receive queues).
    pub(crate) fn create(pd: Arc<Pd>, depth: u32) -> Option<Srq> {
        let mut attr = sys::ibv_srq_init_attr {
            attr: sys::ibv_srq_attr {
                max_wr: depth,
                max_sge: 1,
                srq_limit: 0,
            },
            ..Default::default()
        };
        // SAFETY: `pd.raw` is a live domain; the call writes the capacity granted into `attr`.
        let raw = unsafe { (pd.ctx.lib.create_srq)(pd.raw, &mut attr) };
        if raw.is_null() {
            return None;
        }
        Some(Srq {
            pd,
            raw,
            depth: attr.attr.max_wr.min(depth),
        })
    }

    /// Post one entry, whose completion carries `wr_id`.
    pub(crate) fn post_receive(&self, wr_id: u64) -> Result<(), VerbsError> {
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: `raw` is a live shared receive queue whose context's operation table has
        // `post_srq_recv` (what the inline `ibv_post_srq_recv` calls); the request names no
        // memory.
        let rc = unsafe {
            let post = (*self.pd.ctx.raw).ops.post_srq_recv.unwrap_unchecked();
            post(self.raw, &mut wr, &mut bad)
        };
        if rc != 0 {
            return Err(VerbsError::new("ibv_post_srq_recv", rc));
        }
        Ok(())
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_srq and destroyed once, after the queue pairs attached
        // to it (the endpoint's field order); its domain outlives it through `pd`. It does not
        // block, as a queue pair's destroy does not.
        unsafe { (self.pd.ctx.lib.destroy_srq)(self.raw) };
    }
}

/// A reliable-connected queue pair. Its send queue carries RDMA writes, reads and atomics; its
/// receives come from the endpoint's shared receive queue, where it has one.
pub(crate) struct Qp {
    pd: Arc<Pd>,
    pub(crate) raw: *mut sys::ibv_qp,
    /// Work requests its send queue holds.
    pub(crate) depth: u32,
    /// The largest write it sends inline.
    pub(crate) max_inline: u32,
}

impl Qp {
    /// A queue pair in RESET of `depth` send entries completing on `cq`, taking its receives
    /// from `srq` (none without) and completing them on `receives`, with `inline` bytes of
    /// inline data or the most the device allows below it.
    pub(crate) fn create(
        pd: Arc<Pd>,
        cq: &Cq,
        receives: &Cq,
        depth: u32,
        srq: Option<&Srq>,
        inline: u32,
    ) -> Result<Qp, VerbsError> {
        let mut tried = inline;
        loop {
            let mut attr = sys::ibv_qp_init_attr {
                send_cq: cq.raw,
                recv_cq: receives.raw,
                srq: srq.map_or(std::ptr::null_mut(), |s| s.raw),
                cap: sys::ibv_qp_cap {
                    max_send_wr: depth,
                    max_recv_wr: u32::from(srq.is_none()),
                    max_send_sge: 1,
                    max_recv_sge: u32::from(srq.is_none()),
                    max_inline_data: tried,
                },
                qp_type: sys::IBV_QPT_RC,
                sq_sig_all: 0,
                ..Default::default()
            };
            // SAFETY: `pd.raw` is a live domain and `attr` names a live completion queue and,
            // where given, a live shared receive queue of the same domain; the call writes the
            // capabilities granted back into `attr`.
            let raw = unsafe { (pd.ctx.lib.create_qp)(pd.raw, &mut attr) };
            if !raw.is_null() {
                return Ok(Qp {
                    pd,
                    raw,
                    depth: attr.cap.max_send_wr,
                    max_inline: attr.cap.max_inline_data,
                });
            }
            let e = VerbsError::last(format!(
                "ibv_create_qp ({depth} send entries, {tried} bytes inline)"
            ));
            if tried == 0 {
                return Err(e);
            }
            tried /= 2;
        }
    }

    /// Its number, which the peer connects to.
    pub(crate) fn num(&self) -> u32 {
        // SAFETY: `raw` is a live queue pair.
        unsafe { (*self.raw).qp_num }
    }

    fn modify(&self, attr: &mut sys::ibv_qp_attr, mask: u32, what: &str) -> Result<(), VerbsError> {
        // SAFETY: `raw` is a live queue pair; `attr` holds every field `mask` names.
        let rc = unsafe { (self.pd.ctx.lib.modify_qp)(self.raw, attr, mask as i32) };
        if rc != 0 {
            return Err(VerbsError::new(format!("ibv_modify_qp to {what}"), rc));
        }
        Ok(())
    }

    /// RESET to INIT on `port`, the peer allowed to write, read and run atomics.
    pub(crate) fn init(&self, port: u8) -> Result<(), VerbsError> {
        let mut attr = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: port,
            qp_access_flags: REMOTE_ACCESS,
            ..Default::default()
        };
        let mask = sys::IBV_QP_STATE
            | sys::IBV_QP_PKEY_INDEX
            | sys::IBV_QP_PORT
            | sys::IBV_QP_ACCESS_FLAGS;
        self.modify(&mut attr, mask, "INIT")
    }

    /// INIT to RTR then RTS, connected to queue pair `remote_qpn` at `to`, from `port` (whose MTU
    /// is `mtu` and, with a global route, whose GID is entry `sgid`). `rd_atomic` reads and
    /// atomics in flight each way. Retries: 7 of 67 ms each (timeout 14), so a peer that is
    /// gone fails the queue pair after about half a second.
    pub(crate) fn connect(&self, c: &Connect) -> Result<(), VerbsError> {
        let mut ah = sys::ibv_ah_attr {
            dlid: c.to.lid,
            port_num: c.port,
            ..Default::default()
        };
        if let (Some(gid), Some(sgid)) = (c.to.gid, c.sgid) {
            ah.is_global = 1;
            ah.grh.dgid.raw = gid;
            ah.grh.sgid_index = sgid as u8;
            ah.grh.hop_limit = 64;
        }
        let mut rtr = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTR,
            path_mtu: mtu_of(c.to.mtu.min(c.mtu)),
            dest_qp_num: c.remote_qpn,
            rq_psn: c.remote_psn,
            max_dest_rd_atomic: c.rd_atomic,
            min_rnr_timer: 12,
            ah_attr: ah,
            ..Default::default()
        };
        let mask = sys::IBV_QP_STATE
            | sys::IBV_QP_AV
            | sys::IBV_QP_PATH_MTU
            | sys::IBV_QP_DEST_QPN
            | sys::IBV_QP_RQ_PSN
            | sys::IBV_QP_MAX_DEST_RD_ATOMIC
            | sys::IBV_QP_MIN_RNR_TIMER;
        self.modify(&mut rtr, mask, "RTR")?;
        let mut rts = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTS,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            sq_psn: c.local_psn,
            max_rd_atomic: c.rd_atomic,
            ..Default::default()
        };
        let mask = sys::IBV_QP_STATE
            | sys::IBV_QP_TIMEOUT
            | sys::IBV_QP_RETRY_CNT
            | sys::IBV_QP_RNR_RETRY
            | sys::IBV_QP_SQ_PSN
            | sys::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(&mut rts, mask, "RTS")
    }

    /// To ERR: the device stops the queue pair's work (and flushes what is left).
    pub(crate) fn fail(&self) {
        let mut attr = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_ERR,
            ..Default::default()
        };
        let _ = self.modify(&mut attr, sys::IBV_QP_STATE, "ERR");
    }

    /// Post the work requests chained from `wr`.
    #[inline]
    pub(crate) fn post(&self, wr: &mut sys::ibv_send_wr) -> Result<(), VerbsError> {
        let mut bad = std::ptr::null_mut();
        // SAFETY: `raw` is a live queue pair whose context's operation table has `post_send`
        // (what the inline `ibv_post_send` calls); the requests and the scatter-gather entries
        // they point to are valid for the call, and the memory they name is registered and kept
        // alive until their completion by the caller.
        let rc = unsafe {
            let post = (*self.pd.ctx.raw).ops.post_send.unwrap_unchecked();
            post(self.raw, wr, &mut bad)
        };
        if rc != 0 {
            return Err(VerbsError::new("ibv_post_send", rc));
        }
        Ok(())
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp and destroyed once; its domain (and through it the
        // context) outlives it through `pd`, its completion queue through the endpoint's field
        // order. It does not block: every async event read is acknowledged at once (the
        // endpoint's `events`).
        unsafe { (self.pd.ctx.lib.destroy_qp)(self.raw) };
    }
}

/// What connecting a queue pair needs.
pub(crate) struct Connect {
    pub(crate) port: u8,
    pub(crate) mtu: u32,
    pub(crate) sgid: Option<u32>,
    pub(crate) to: PortAddress,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_psn: u32,
    pub(crate) local_psn: u32,
    pub(crate) rd_atomic: u8,
}
